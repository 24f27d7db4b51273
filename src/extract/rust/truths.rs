//! Path conditions on booleans bound once: `let trial = plan.is_trial(); let prorate = !trial
//! && due != 0; if prorate { .. } .. if trial { .. }`. The two arms need opposite values of one
//! binding, so no run takes both (see [`crate::model::Unit::exclusive`]). Only names bound
//! without `mut` count (Rust assigns those once), each binding a value of its own (a later `let
//! trial` is another one).

use std::collections::HashMap;

use syn::{BinOp, Expr, UnOp};

use super::Walker;
use super::syntax::collect_idents;

/// A binding (`trial#3`, by its name and the number of the `let` that made it) and the value
/// an arm needs it to have.
pub(super) type Literal = (String, bool);

#[derive(Default)]
pub(super) struct Truths {
    /// Names bound without `mut`, per frame (`frame:name`), with their binding's number.
    bound: HashMap<String, u32>,
    next: u32,
    /// What a boolean binding implies when true and when false (`let p = !t && x`: true, `t`
    /// is false).
    implied: HashMap<Literal, Vec<Literal>>,
    /// What the next arm needs (see [`Truths::arm`]).
    pub(super) pending: Option<Vec<Literal>>,
    /// Each arm that needs something, in arm order.
    arms: Vec<(usize, Vec<Literal>)>,
}

impl Truths {
    /// `name` bound in `frame` (a `let` or a parameter), to `value` if known. Its implications
    /// are read before the binding replaces an older one of the name (`let t = !t`).
    pub(super) fn bind(&mut self, frame: &str, name: &str, mutable: bool, value: Option<&Expr>) {
        let key = format!("{frame}:{name}");
        if mutable {
            self.bound.remove(&key);
            return;
        }
        let implied = value.map(|e| (self.holds(frame, e, true), self.holds(frame, e, false)));
        self.next += 1;
        self.bound.insert(key, self.next);
        let atom = format!("{name}#{}", self.next);
        if let Some((when_true, when_false)) = implied {
            for (v, lits) in [(true, when_true), (false, when_false)] {
                if !lits.is_empty() {
                    self.implied.insert((atom.clone(), v), lits);
                }
            }
        }
    }

    /// The bindings of `frame`, to restore after an arm (names bound in it do not outlive it).
    pub(super) fn save(&self) -> HashMap<String, u32> {
        self.bound.clone()
    }

    pub(super) fn restore(&mut self, bound: HashMap<String, u32>) {
        self.bound = bound;
    }

    /// What holds where `e` evaluates to `value`: the bindings it tests and what they imply.
    pub(super) fn holds(&self, frame: &str, e: &Expr, value: bool) -> Vec<Literal> {
        let mut out = Vec::new();
        self.collect(frame, e, value, &mut out);
        out
    }

    fn collect(&self, frame: &str, e: &Expr, value: bool, out: &mut Vec<Literal>) {
        match e {
            Expr::Paren(p) => self.collect(frame, &p.expr, value, out),
            Expr::Group(g) => self.collect(frame, &g.expr, value, out),
            Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => {
                self.collect(frame, &u.expr, !value, out)
            }
            Expr::Binary(b)
                if value && matches!(b.op, BinOp::And(_))
                    || !value && matches!(b.op, BinOp::Or(_)) =>
            {
                self.collect(frame, &b.left, value, out);
                self.collect(frame, &b.right, value, out);
            }
            Expr::Path(p) if p.qself.is_none() => {
                let Some(name) = p.path.get_ident().map(|i| i.to_string()) else {
                    return;
                };
                let Some(n) = self.bound.get(&format!("{frame}:{name}")) else {
                    return;
                };
                let lit = (format!("{name}#{n}"), value);
                if let Some(more) = self.implied.get(&lit) {
                    out.extend(more.iter().cloned());
                }
                out.push(lit);
            }
            _ => {}
        }
    }

    /// What each arm needs, for [`crate::model::Unit::requires`].
    pub(super) fn requires(self) -> Vec<(usize, Vec<(crate::model::Name, bool)>)> {
        let lits = |l: Vec<Literal>| l.into_iter().map(|(b, v)| (b.into(), v)).collect();
        self.arms
            .into_iter()
            .map(|(arm, l)| (arm, lits(l)))
            .collect()
    }

    /// Record what `arm` needs, if the walker said so just before making it.
    pub(super) fn arm(&mut self, arm: usize) {
        if let Some(lits) = self.pending.take().filter(|l| !l.is_empty()) {
            self.arms.push((arm, lits));
        }
    }
}

impl Walker<'_, '_> {
    /// The names a `let` binds, for [`Truths`]: one bound without `mut` to a value is a
    /// boolean an arm can test; any other name of the pattern is no longer the one before.
    pub(super) fn note_truth(&mut self, pat: &syn::Pat, value: Option<&syn::Expr>) {
        let frame = self.frame();
        match pat {
            syn::Pat::Ident(p) if p.subpat.is_none() => {
                let mutable = p.mutability.is_some() || p.by_ref.is_some();
                self.truths
                    .bind(&frame, &p.ident.to_string(), mutable, value)
            }
            syn::Pat::Type(t) => self.note_truth(&t.pat, value),
            pat => {
                let mut names = Vec::new();
                collect_idents(pat, &mut names);
                for n in names {
                    self.truths.bind(&frame, &n, true, None);
                }
            }
        }
    }

    /// The helper or `async` block being walked, as [`Truths`] names a frame.
    pub(super) fn frame(&self) -> String {
        format!("{}{:?}", self.frames, self.calls.last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(s: &str) -> Expr {
        syn::parse_str(s).expect("test expression")
    }

    #[test]
    fn a_binding_and_its_negation_are_opposite_literals() {
        let mut t = Truths::default();
        t.bind("f", "trial", false, Some(&expr("plan.is_trial()")));
        t.bind("f", "prorate", false, Some(&expr("!trial && due != 0")));
        let then = t.holds("f", &expr("prorate"), true);
        let other = t.holds("f", &expr("trial"), true);
        assert!(then.contains(&("trial#1".into(), false)));
        assert!(other.contains(&("trial#1".into(), true)));
        // The else of `if prorate` says nothing of `trial` (`trial || due == 0`).
        assert_eq!(
            t.holds("f", &expr("prorate"), false),
            vec![("prorate#2".into(), false)]
        );
    }

    #[test]
    fn mutable_names_are_no_bindings_and_shadowed_ones_are_new() {
        let mut t = Truths::default();
        t.bind("f", "done", true, None);
        assert!(t.holds("f", &expr("done"), true).is_empty());
        t.bind("f", "t", false, None);
        let first = t.holds("f", &expr("t"), true);
        t.bind("f", "t", false, None);
        assert_ne!(first, t.holds("f", &expr("t"), true));
        // Another frame's name is another binding.
        assert!(t.holds("g", &expr("t"), true).is_empty());
    }
}
