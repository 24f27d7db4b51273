//! Collections whose order is known from how they are built, so that statements bound to them
//! lock rows in one order in every run:
//! - a list of the successive values of something that only grows at its end
//!   (`current.push_str(segment); prefixes.push(current.clone())`, the ancestors of a path from
//!   the root down): each element is a prefix of the next, so the list is ascending;
//! - such a list returned by a function of the run (`let prefixes = path_prefixes(p)?`);
//! - what an iterator chain that keeps order (`iter`, `map`, `filter`, `collect`) makes of a
//!   sorted collection.

use std::collections::HashSet;

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::Visit;

use super::Walker;

/// Methods that add at the end of a value: each value it had is a prefix of the next.
const GROWS: &[&str] = &["push", "push_str", "extend", "extend_from_slice"];

/// Methods that read a value and leave it as it was.
const READS: &[&str] = &[
    "as_bytes",
    "as_path",
    "as_ref",
    "as_str",
    "borrow",
    "chars",
    "clone",
    "display",
    "ends_with",
    "is_empty",
    "iter",
    "len",
    "starts_with",
    "to_owned",
    "to_str",
    "to_string",
    "to_string_lossy",
];

/// Iterator and conversion steps that keep the order of what they visit (`fold` and `unzip`
/// build their collections in the order they visit the items).
pub(super) const KEEPS_ORDER: &[&str] = &[
    "as_slice",
    "cloned",
    "collect",
    "copied",
    "dedup",
    "filter",
    "filter_map",
    "fold",
    "into",
    "into_iter",
    "iter",
    "map",
    "map_while",
    "skip",
    "skip_while",
    "take",
    "take_while",
    "to_vec",
    "unzip",
];

/// How a block uses its local names.
#[derive(Default)]
struct Uses {
    /// Every name a pattern of the block binds (`let`, `for`, closure parameters, arms).
    bound: HashSet<String>,
    /// `let mut` names.
    mutable: HashSet<String>,
    /// Names changed other than by adding at the end: assigned, passed on as `&mut`, or
    /// given to a method that is neither [`GROWS`] nor [`READS`].
    changed: HashSet<String>,
    /// `v.push(e)`: `v`, and the names `e` mentions.
    pushes: Vec<(String, HashSet<String>)>,
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        let name = p.ident.to_string();
        if p.mutability.is_some() {
            self.mutable.insert(name.clone());
        }
        self.bound.insert(name);
        syn::visit::visit_pat_ident(self, p);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if let Some(name) = local(&m.receiver) {
            let method = m.method.to_string();
            if method == "push" {
                let mut names = HashSet::new();
                m.args
                    .iter()
                    .for_each(|a| idents(a.to_token_stream(), &mut names));
                self.pushes.push((name, names));
            } else if !GROWS.contains(&method.as_str()) && !READS.contains(&method.as_str()) {
                self.changed.insert(name);
            }
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        self.changed.extend(local(&a.left));
        syn::visit::visit_expr_assign(self, a);
    }

    fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
        // `s += ".."` adds at the end; `n -= 1`, `n *= 2` do not.
        let assigns = matches!(
            b.op,
            syn::BinOp::SubAssign(_)
                | syn::BinOp::MulAssign(_)
                | syn::BinOp::DivAssign(_)
                | syn::BinOp::RemAssign(_)
                | syn::BinOp::BitXorAssign(_)
                | syn::BinOp::BitAndAssign(_)
                | syn::BinOp::BitOrAssign(_)
                | syn::BinOp::ShlAssign(_)
                | syn::BinOp::ShrAssign(_)
        );
        if assigns {
            self.changed.extend(local(&b.left));
        }
        syn::visit::visit_expr_binary(self, b);
    }

    fn visit_expr_reference(&mut self, r: &'ast syn::ExprReference) {
        if r.mutability.is_some() {
            self.changed.extend(local(&r.expr));
        }
        syn::visit::visit_expr_reference(self, r);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Macros read what they name (`format!("{at}")`), except a `&mut x` they pass on.
        let tokens: Vec<TokenTree> = m.tokens.clone().into_iter().collect();
        for pair in tokens.windows(2) {
            if let [TokenTree::Ident(a), TokenTree::Ident(b)] = pair
                && a == "mut"
            {
                self.changed.insert(b.to_string());
            }
        }
    }
}

/// A plain local name (`x`, not `self.x` or `x[0]`).
fn local(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Paren(p) => local(&p.expr),
        _ => None,
    }
}

/// The identifiers in tokens, also those a format string names (`"{current}/x"`).
fn idents(tokens: TokenStream, out: &mut HashSet<String>) {
    for t in tokens {
        match t {
            TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            TokenTree::Group(g) => idents(g.stream(), out),
            TokenTree::Literal(l) => {
                let text = l.to_string();
                for hole in text.split('{').skip(1) {
                    let name: String = hole
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            }
            TokenTree::Punct(_) => {}
        }
    }
}

/// The lists a block builds in ascending order: every element pushed is computed from one
/// local that only grows at its end (and from nothing else the block binds), and the list is
/// changed in no other way.
pub(super) fn prefix_lists(block: &syn::Block) -> Vec<String> {
    let mut uses = Uses::default();
    uses.visit_block(block);
    let grows = |n: &String| uses.mutable.contains(n) && !uses.changed.contains(n);
    let mut lists: Vec<String> = uses.pushes.iter().map(|(v, _)| v.clone()).collect();
    lists.sort();
    lists.dedup();
    lists.retain(|v| {
        let pushed: Vec<&HashSet<String>> = uses
            .pushes
            .iter()
            .filter(|(w, _)| w == v)
            .map(|(_, names)| names)
            .collect();
        let from: Vec<HashSet<&String>> = pushed
            .iter()
            .map(|names| names.iter().filter(|n| uses.bound.contains(*n)).collect())
            .collect();
        grows(v)
            && from.first().is_some_and(|first| {
                first.len() == 1
                    && first.iter().all(|acc| *acc != v && grows(acc))
                    && from.iter().all(|f| f == first)
            })
    });
    lists
}

/// A function's body returns, on every path that gives a value, one of the lists it builds in
/// ascending order (`Ok(prefixes)`).
pub(super) fn returns_prefix_list(sig: &syn::Signature, block: &syn::Block) -> bool {
    let returns_list = matches!(&sig.output, syn::ReturnType::Type(_, t)
        if t.to_token_stream().into_iter().any(|t| matches!(t, TokenTree::Ident(i) if i == "Vec")));
    if !returns_list {
        return false;
    }
    let lists = prefix_lists(block);
    let Some(syn::Stmt::Expr(tail, None)) = block.stmts.last() else {
        return false;
    };
    let mut returns = Returns::default();
    returns.visit_block(block);
    let is_list = |e: &syn::Expr| local(unwrap_ok(e)).is_some_and(|n| lists.contains(&n));
    is_list(tail) && returns.values.iter().all(|e| is_list(e) || is_failure(e))
}

/// The `return` expressions of a body (not of its closures).
#[derive(Default)]
struct Returns<'ast> {
    values: Vec<&'ast syn::Expr>,
}

impl<'ast> Visit<'ast> for Returns<'ast> {
    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        if let Some(e) = &r.expr {
            self.values.push(e);
        }
        syn::visit::visit_expr_return(self, r);
    }

    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
}

/// A body that sorts a list of its own and returns it, or an order-keeping chain over it
/// (`pairs.sort_unstable_by(..); pairs.into_iter().unzip()`), with nothing between the sort
/// and the return that names the list.
pub(super) fn returns_sorted(block: &syn::Block) -> bool {
    let Some((syn::Stmt::Expr(tail, None), body)) = block.stmts.split_last() else {
        return false;
    };
    let mut at = strip(unwrap_ok(tail));
    while let syn::Expr::MethodCall(m) = at {
        if !KEEPS_ORDER.contains(&m.method.to_string().as_str()) {
            return false;
        }
        at = strip(&m.receiver);
    }
    let Some(list) = local(at) else {
        return false;
    };
    let sorts = |s: &syn::Stmt| {
        matches!(s, syn::Stmt::Expr(syn::Expr::MethodCall(m), _)
            if m.method.to_string().starts_with("sort")
                && local(&m.receiver).is_some_and(|r| r == list))
    };
    let Some(sorted) = body.iter().rposition(sorts) else {
        return false;
    };
    let mut after = HashSet::new();
    for s in &body[sorted + 1..] {
        idents(s.to_token_stream(), &mut after);
    }
    !after.contains(&list)
}

/// `Ok(x)` or `Some(x)`: `x`.
fn unwrap_ok(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Call(c) if c.args.len() == 1 && is_path(&c.func, &["Ok", "Some"]) => &c.args[0],
        _ => e,
    }
}

/// `Err(..)` or `None`.
fn is_failure(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Call(c) => is_path(&c.func, &["Err"]),
        _ => is_path(e, &["None"]),
    }
}

fn is_path(e: &syn::Expr, names: &[&str]) -> bool {
    matches!(e, syn::Expr::Path(p) if p.path.segments.last().is_some_and(|s| names.iter().any(|n| s.ident == n)))
}

/// `e?`, `e.await`, `(e)`, `&e`, `e.unwrap()`, `e.expect(..)`: `e`.
pub(super) fn strip(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Try(t) => strip(&t.expr),
        syn::Expr::Await(a) => strip(&a.base),
        syn::Expr::Paren(p) => strip(&p.expr),
        syn::Expr::Reference(r) => strip(&r.expr),
        syn::Expr::MethodCall(m)
            if matches!(
                m.method.to_string().as_str(),
                "unwrap" | "expect" | "map_err"
            ) =>
        {
            strip(&m.receiver)
        }
        _ => e,
    }
}

impl Walker<'_, '_> {
    /// Lists this body builds in ascending order join the sorted collections.
    pub(super) fn note_prefix_lists(&mut self, block: &syn::Block) {
        self.sorted.extend(prefix_lists(block));
    }

    /// A binding's value is a sorted collection: a list a function of the run builds in
    /// ascending order (`path_prefixes(p)?`), or an order-keeping iterator chain over a sorted
    /// collection (`prefixes.iter().map(..).collect()`).
    pub(super) fn sorted_value(&self, e: &syn::Expr) -> bool {
        let e = strip(e);
        let called = match e {
            syn::Expr::Call(c) => match &*c.func {
                syn::Expr::Path(p) => self.ix.called_path(&p.path, self.file),
                _ => None,
            },
            syn::Expr::MethodCall(m) if local(&m.receiver).is_some_and(|r| r == "self") => {
                self.ix.function(&m.method.to_string(), self.file)
            }
            _ => None,
        };
        if let Some(i) = called {
            let f = &self.ix.fns[i];
            return returns_prefix_list(f.sig, f.block) || returns_sorted(f.block);
        }
        let mut at = e;
        while let syn::Expr::MethodCall(m) = at {
            if !KEEPS_ORDER.contains(&m.method.to_string().as_str()) {
                return false;
            }
            at = strip(&m.receiver);
        }
        !std::ptr::eq(at, e)
            && (local(at).is_some_and(|base| self.sorted.contains(&base)) || self.sorted_field(at))
    }

    /// `usage.changes`, a field the run declares a `BTreeMap` or `BTreeSet` in the struct the
    /// variable is of (every struct of that name that has the field): iterated in key order.
    pub(super) fn sorted_field(&self, e: &syn::Expr) -> bool {
        let syn::Expr::Field(f) = strip(e) else {
            return false;
        };
        let (syn::Member::Named(field), Some(owner)) = (&f.member, self.local_type(&f.base)) else {
            return false;
        };
        let declared = self.ix.structs.get(&*owner).into_iter().flatten();
        let mut types = declared
            .flat_map(|(_, s)| &s.fields)
            .filter(|x| x.ident.as_ref() == Some(field))
            .map(|x| super::types::type_name(&x.ty))
            .peekable();
        types.peek().is_some()
            && types.all(|t| matches!(t.as_deref(), Some("BTreeMap" | "BTreeSet")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(body: &str) -> Vec<String> {
        let block: syn::Block = syn::parse_str(body).expect("test body parses");
        prefix_lists(&block)
    }

    #[test]
    fn a_list_sorted_and_then_returned_is_sorted() {
        let sorted = |body: &str| returns_sorted(&syn::parse_str(body).expect("test body parses"));
        assert!(sorted(
            "{ let mut p: Vec<_> = m.into_iter().collect(); p.sort(); p.into_iter().unzip() }"
        ));
        assert!(sorted(
            "{ let mut p = v.clone(); p.sort_by_key(|x| x.0); Ok(p) }"
        ));
        assert!(!sorted("{ let mut p = v.clone(); p.sort(); p.push(x); p }"));
        assert!(!sorted("{ let mut p = v.clone(); p.sort(); q }"));
        assert!(!sorted(
            "{ let mut p = v.clone(); p.sort(); p.into_iter().rev().collect() }"
        ));
    }

    #[test]
    fn the_prefixes_of_a_growing_path_are_ascending() {
        let body = r#"{
            let mut prefixes = Vec::new();
            let mut current = String::new();
            for segment in path.split('/') {
                if segment.is_empty() { continue; }
                current.push('/');
                current.push_str(segment);
                prefixes.push(Path::new(current.clone())?);
            }
            prefixes
        }"#;
        assert_eq!(lists(body), ["prefixes"]);
        let with_format = r#"{
            let mut out = vec![];
            let mut at = String::new();
            for s in parts { at += s; out.push(format!("{at}/")); }
            out
        }"#;
        assert_eq!(lists(with_format), ["out"]);
    }

    #[test]
    fn a_list_of_other_values_or_of_a_value_that_shrinks_is_not() {
        // Each element also takes the loop's item: not a prefix of the next.
        let mixed = r#"{
            let mut out = Vec::new();
            let mut at = String::new();
            for s in parts { at.push_str(s); out.push((at.clone(), s)); }
            out
        }"#;
        assert!(lists(mixed).is_empty());
        // The accumulator is cleared between elements.
        let cleared = r#"{
            let mut out = Vec::new();
            let mut at = String::new();
            for s in parts { at.clear(); at.push_str(s); out.push(at.clone()); }
            out
        }"#;
        assert!(lists(cleared).is_empty());
        // Reassigned, or reordered afterwards.
        let assigned = r#"{
            let mut out = Vec::new();
            let mut at = String::new();
            for s in parts { at = s.to_string(); out.push(at.clone()); }
            out
        }"#;
        assert!(lists(assigned).is_empty());
        let reversed = r#"{
            let mut out = Vec::new();
            let mut at = String::new();
            for s in parts { at.push_str(s); out.push(at.clone()); }
            out.reverse();
            out
        }"#;
        assert!(lists(reversed).is_empty());
        // Items pushed as they come: the input's order, whatever it is.
        let items = r#"{
            let mut out = Vec::new();
            for s in parts { out.push(s.clone()); }
            out
        }"#;
        assert!(lists(items).is_empty());
    }

    #[test]
    fn a_function_returning_its_prefix_list_on_every_path() {
        let f: syn::ItemFn = syn::parse_str(
            r#"fn prefixes(p: &str) -> Result<Vec<String>, E> {
                if p.is_empty() { return Err(E::Empty); }
                let mut out = Vec::new();
                let mut at = String::new();
                for s in p.split('/') { at.push_str(s); out.push(at.clone()); }
                Ok(out)
            }"#,
        )
        .expect("test fn parses");
        assert!(returns_prefix_list(&f.sig, &f.block));
        let other: syn::ItemFn = syn::parse_str(
            r#"fn prefixes(p: &str) -> Result<Vec<String>, E> {
                let mut out = Vec::new();
                let mut at = String::new();
                for s in p.split('/') { at.push_str(s); out.push(at.clone()); }
                if out.len() > 3 { return Ok(p.split('/').map(String::from).collect()); }
                Ok(out)
            }"#,
        )
        .expect("test fn parses");
        assert!(!returns_prefix_list(&other.sig, &other.block));
    }
}
