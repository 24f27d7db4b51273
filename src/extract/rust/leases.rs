//! Application leases: a type of the run that its constructor makes by claiming what only one
//! holder can have at a time, a row by a compare-and-set `UPDATE` (`SET locked_by = $1 WHERE id
//! = $2 AND (expires_at IS NULL OR expires_at <= $3)`) or a session advisory lock, and whose
//! `Drop` gives it back (an `UPDATE` or `DELETE` of the claimed table, an advisory unlock). A
//! function that holds such a value (a parameter, an actix or axum extractor; a `let` at the
//! top of its body) runs what follows under the lease: two holders never overlap, as under an
//! in-process lock (see [`Transaction::guard`]), named by the type.
//!
//! A transaction wrapper whose `Drop` rolls back claims nothing, and a value that registers a
//! row and removes it on `Drop` (a fresh key each time) excludes no one: neither is a lease.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::Walker;
use super::index::Index;
use super::types;
use crate::model::*;

/// A value of a type with an `impl Drop` that a function holds from the step `from` on
/// (until `until`, an explicit `drop(..)`).
#[derive(Clone, Debug)]
pub(super) struct Held {
    name: String,
    ty: Rc<str>,
    from: usize,
    until: Option<usize>,
}

impl Walker<'_, '_> {
    /// The parameters of the function walked that hold a value of a type with an `impl Drop`
    /// (owned or borrowed: a borrowed one is held by the caller all along).
    pub(super) fn note_held_params(&mut self, sig: &syn::Signature) {
        for input in &sig.inputs {
            let syn::FnArg::Typed(t) = input else {
                continue;
            };
            if let Some(ty) = self.drop_type(&t.ty) {
                let name = match &*t.pat {
                    syn::Pat::Ident(p) => p.ident.to_string(),
                    _ => String::new(),
                };
                self.held.push(Held {
                    name,
                    ty,
                    from: 0,
                    until: None,
                });
            }
        }
    }

    /// A statement of the function's own body (not of a block in it): `let permit =
    /// Permit::acquire(..)?` holds the value until the function returns, `drop(permit)` ends
    /// that. `let _ = ..` drops it at once.
    pub(super) fn note_held(&mut self, stmt: &syn::Stmt) {
        match stmt {
            syn::Stmt::Local(local) => {
                let pat = match &local.pat {
                    syn::Pat::Type(t) => &*t.pat,
                    p => p,
                };
                let syn::Pat::Ident(p) = pat else {
                    return;
                };
                let name = p.ident.to_string();
                // An annotation or a struct literal (`Walker::note_type` has read them), else
                // the type whose associated function makes the value.
                let ty = self
                    .types
                    .get(&name)
                    .cloned()
                    .or_else(|| constructed(local.init.as_ref()?.expr.as_ref()))
                    .filter(|t| self.ix.drops.contains(&**t));
                if let Some(ty) = ty {
                    self.held.push(Held {
                        name,
                        ty,
                        from: self.seq,
                        until: None,
                    });
                }
            }
            syn::Stmt::Expr(syn::Expr::Call(c), _) if matches!(&*c.func, syn::Expr::Path(f) if f.path.is_ident("drop")) =>
            {
                let Some(syn::Expr::Path(arg)) = c.args.first() else {
                    return;
                };
                let Some(arg) = arg.path.get_ident() else {
                    return;
                };
                let seq = self.seq;
                for h in self.held.iter_mut().filter(|h| *arg == h.name) {
                    h.until.get_or_insert(seq);
                }
            }
            _ => {}
        }
    }

    fn drop_type(&self, ty: &syn::Type) -> Option<Rc<str>> {
        types::type_name(ty)
            .filter(|t| self.ix.drops.contains(t))
            .map(Rc::from)
    }
}

/// `Permit::acquire(&pool).await?`, `Lease::new(..).map_err(..)?`: the type whose associated
/// function makes the value.
fn constructed(e: &syn::Expr) -> Option<Rc<str>> {
    match e {
        syn::Expr::Try(t) => constructed(&t.expr),
        syn::Expr::Await(a) => constructed(&a.base),
        syn::Expr::Paren(p) => constructed(&p.expr),
        syn::Expr::MethodCall(m)
            if matches!(
                m.method.to_string().as_str(),
                "map_err" | "context" | "with_context" | "unwrap" | "expect"
            ) =>
        {
            constructed(&m.receiver)
        }
        syn::Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                return None;
            };
            let n = p.path.segments.len();
            (n >= 2).then(|| Rc::from(p.path.segments[n - 2].ident.to_string()))
        }
        _ => None,
    }
}

/// Mark the transactions that run under a lease with the lease's type (see the module's
/// comment). `walked` holds each function walked (by its index in `ix.fns`), its unit and the
/// values it holds.
pub(super) fn mark(ix: &Index, walked: &mut [(usize, Unit, Vec<Held>)]) {
    let leases = leases(ix, walked);
    if leases.is_empty() {
        return;
    }
    for (_, unit, held) in walked.iter_mut() {
        for h in held.iter().filter(|h| leases.contains(&h.ty)) {
            let under = |seq: usize| seq >= h.from && h.until.is_none_or(|u| seq < u);
            for tx in &mut unit.transactions {
                if tx.guard().is_none() && tx.steps.iter().all(|s| under(s.seq)) {
                    tx.set_guard(Name::from(&*h.ty));
                }
            }
        }
    }
}

/// The types whose constructor claims and whose `drop` releases the same thing.
fn leases(ix: &Index, walked: &[(usize, Unit, Vec<Held>)]) -> HashSet<Rc<str>> {
    let mut claims: HashMap<String, Vec<Claimed>> = HashMap::new();
    let mut releases: HashMap<String, Vec<Claimed>> = HashMap::new();
    for (i, unit, _) in walked {
        let f = &ix.fns[*i];
        let Some(ty) = f.owner.and_then(types::type_name) else {
            continue;
        };
        if !ix.drops.contains(&ty) {
            continue;
        }
        let steps = unit.transactions.iter().flat_map(|t| &t.steps);
        if f.name == "drop" {
            releases
                .entry(ty)
                .or_default()
                .extend(steps.filter_map(released));
        } else if returns_self(&f.sig.output, &ty) {
            claims
                .entry(ty)
                .or_default()
                .extend(steps.filter_map(claimed));
        }
    }
    walked
        .iter()
        .flat_map(|(_, _, held)| held.iter().map(|h| h.ty.clone()))
        .filter(|ty| {
            let (Some(c), Some(r)) = (claims.get(&**ty), releases.get(&**ty)) else {
                return false;
            };
            c.iter().any(|c| r.contains(c))
        })
        .collect()
}

/// What a lease holds: rows of a table, or a session advisory lock.
#[derive(Debug, PartialEq, Eq)]
enum Claimed {
    Row(Name),
    Advisory,
}

/// A compare-and-set `UPDATE`: its `WHERE` tests a column it sets, so of two runs the second
/// finds nothing to update (`WHERE locked_by IS NULL`, `AND (expires_at IS NULL OR expires_at
/// <= $3)`, `AND state = 'free'`). Or a session advisory lock taken.
fn claimed(s: &Step) -> Option<Claimed> {
    let f = &s.facts;
    if f.extra().advisory.iter().any(|a| {
        a.scope == LockScope::Session && matches!(a.op, AdvisoryOp::Lock | AdvisoryOp::TryLock)
    }) {
        return Some(Claimed::Advisory);
    }
    let sets = |c: &Name| f.sets.iter().any(|s| s.column == *c);
    let column = |i: &Name| Name::from(i.rsplit('.').next().unwrap_or(i));
    let tests_a_set = f.filters.iter().any(|p| sets(&p.column))
        || f.extra()
            .condition
            .as_ref()
            .is_some_and(|c| c.idents.iter().any(|i| sets(&column(i))));
    let table = f
        .writes
        .first()
        .filter(|_| f.kind == StmtKind::Update && tests_a_set)?;
    Some(Claimed::Row(table.name.clone()))
}

/// An `UPDATE` or `DELETE` of a table, or an advisory unlock.
fn released(s: &Step) -> Option<Claimed> {
    let f = &s.facts;
    if f.extra()
        .advisory
        .iter()
        .any(|a| matches!(a.op, AdvisoryOp::Unlock | AdvisoryOp::UnlockAll))
    {
        return Some(Claimed::Advisory);
    }
    let table = f
        .writes
        .first()
        .filter(|_| matches!(f.kind, StmtKind::Update | StmtKind::Delete))?;
    Some(Claimed::Row(table.name.clone()))
}

/// `-> Self`, `-> Result<Self, E>`, `-> Ready<Result<Permit, E>>`: a constructor of `ty`.
fn returns_self(output: &syn::ReturnType, ty: &str) -> bool {
    fn mentions(t: &syn::Type, ty: &str) -> bool {
        let syn::Type::Path(p) = t else {
            return false;
        };
        p.path.segments.iter().any(|s| {
            s.ident == "Self"
                || s.ident == ty
                || matches!(&s.arguments, syn::PathArguments::AngleBracketed(a)
                    if a.args.iter().any(|g| matches!(g, syn::GenericArgument::Type(t) if mentions(t, ty))))
        })
    }
    matches!(output, syn::ReturnType::Type(_, t) if mentions(t, ty))
}
