//! Questions a walk asks of syn trees alone: which backend a test names, which arm a pattern
//! takes, whether an expression orders, diverges or fails.

use super::*;

/// The database a sea-orm backend value names (`DbBackend::Sqlite`, `DatabaseBackend::MySql`).
pub(super) fn backend_name(text: &str) -> Option<Dialect> {
    match text.rsplit("::").next()?.trim() {
        "Sqlite" => Some(Dialect::Sqlite),
        "MySql" => Some(Dialect::Mysql),
        "Postgres" => Some(Dialect::Postgres),
        _ => None,
    }
}

/// `e` without the borrows around it (`&[&a]` → `[&a]`).
pub(super) fn peel_ref(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Reference(r) => peel_ref(&r.expr),
        e => e,
    }
}

/// The name a value goes by: a variable's (`connection`), a field's (`self.connection`).
pub(super) fn last_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(n) => Some(n.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        syn::Expr::Reference(r) => last_name(&r.expr),
        syn::Expr::Paren(p) => last_name(&p.expr),
        e => path_name(e),
    }
}

pub(super) fn path_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Reference(r) => path_name(&r.expr),
        syn::Expr::Paren(p) => path_name(&p.expr),
        _ => None,
    }
}

/// `x == DbBackend::Sqlite` (either way round): the variable and the database.
pub(super) fn backend_test(cond: &syn::Expr) -> Option<(String, Dialect)> {
    let syn::Expr::Binary(b) = cond else {
        return None;
    };
    if !matches!(b.op, syn::BinOp::Eq(_)) {
        return None;
    }
    let variant = |e: &syn::Expr| match e {
        syn::Expr::Path(p) => path_backend(&p.path),
        _ => None,
    };
    match (
        path_name(&b.left),
        variant(&b.right),
        path_name(&b.right),
        variant(&b.left),
    ) {
        (Some(v), Some(d), ..) | (.., Some(v), Some(d)) => Some((v, d)),
        _ => None,
    }
}

/// A `match` arm's `DbBackend::Sqlite` pattern.
pub(super) fn backend_variant(pat: &syn::Pat) -> Option<Dialect> {
    match pat {
        syn::Pat::Path(p) => path_backend(&p.path),
        _ => None,
    }
}

/// The database a qualified path names (`DbBackend::Sqlite`); none for a bare name.
fn path_backend(path: &syn::Path) -> Option<Dialect> {
    if path.segments.len() < 2 {
        return None;
    }
    let text: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    backend_name(&text.join("::"))
}

/// What a branch arm is taken on, of the steps its condition is computed from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum On {
    /// What they read.
    Value,
    /// Their failure: an `Err` arm, the else of `if let Ok(..)`.
    Failed,
    /// Only whether they found a row: `if let Some(row)`, `match found { Some(_) => .., None
    /// => .. }`, `row.is_none()`, `rows.is_empty()`, `.ok_or(NotFound)?`.
    Presence,
}

impl On {
    /// The arm of pattern `pat`, taken when its steps failed if `pat` is `failed_on`.
    pub(super) fn of_pattern(pat: &syn::Pat, failed_on: &str) -> On {
        if pattern_is(pat, failed_on) {
            On::Failed
        } else if presence_pattern(pat) {
            On::Presence
        } else {
            On::Value
        }
    }
}

/// `Some(row)`, `Some(_)` or `None`: whether a value is there, not what it is.
pub(super) fn presence_pattern(pat: &syn::Pat) -> bool {
    let bare = |p: &syn::Pat| match p {
        syn::Pat::Wild(_) => true,
        syn::Pat::Ident(i) => i.subpat.is_none(),
        _ => false,
    };
    match pat {
        syn::Pat::TupleStruct(t) => {
            t.path.segments.last().is_some_and(|s| s.ident == "Some") && t.elems.iter().all(bare)
        }
        syn::Pat::Path(p) => p.path.is_ident("None"),
        syn::Pat::Ident(i) => i.ident == "None" && i.subpat.is_none(),
        _ => false,
    }
}

/// A condition that asks only whether something was found: `x.is_some()`, `x.is_none()`,
/// `rows.is_empty()`, negated or not.
pub(super) fn presence_test(cond: &syn::Expr) -> bool {
    match cond {
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => presence_test(&u.expr),
        syn::Expr::Paren(p) => presence_test(&p.expr),
        syn::Expr::MethodCall(m) => {
            m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "is_some" | "is_none" | "is_empty"
                )
        }
        _ => false,
    }
}

/// The pattern is `Name(..)` (`Err(e)`, `Ok(_)`, `Some(row)`), possibly qualified.
pub(super) fn pattern_is(pat: &syn::Pat, name: &str) -> bool {
    match pat {
        syn::Pat::TupleStruct(t) => t.path.segments.last().is_some_and(|s| s.ident == name),
        syn::Pat::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == name),
        syn::Pat::Ident(p) => p.subpat.as_ref().is_some_and(|(_, s)| pattern_is(s, name)),
        _ => false,
    }
}

/// The expression puts keys in order: `a.min(b)`, `cmp::max(a, b)`, or a pair swapped on a
/// comparison (`if a < b { (a, b) } else { (b, a) }`).
pub(super) fn orders(e: &syn::Expr) -> bool {
    struct Finds(bool);
    impl<'a> Visit<'a> for Finds {
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            self.0 |= matches!(m.method.to_string().as_str(), "min" | "max" | "minmax");
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func {
                self.0 |= p
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "min" || s.ident == "max");
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let swapped = match e {
        syn::Expr::If(i) => {
            let compares = matches!(&*i.cond, syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::Lt(_) | syn::BinOp::Le(_) | syn::BinOp::Gt(_) | syn::BinOp::Ge(_)));
            let tail = |b: &syn::Block| match b.stmts.last() {
                Some(syn::Stmt::Expr(syn::Expr::Tuple(t), None)) if t.elems.len() == 2 => {
                    Some(t.elems.iter().map(quote_path).collect::<Vec<_>>())
                }
                _ => None,
            };
            let other = match &i.else_branch {
                Some((_, e)) => match &**e {
                    syn::Expr::Block(b) => tail(&b.block),
                    _ => None,
                },
                None => None,
            };
            match (tail(&i.then_branch), other) {
                (Some(a), Some(b)) => compares && a.len() == 2 && a[0] == b[1] && a[1] == b[0],
                _ => false,
            }
        }
        _ => false,
    };
    let mut f = Finds(false);
    f.visit_expr(e);
    swapped || f.0
}

/// `Ok(..)` or `Some(..)`: a value returned as success.
/// An arm body that gives no value: it leaves (`return`, `continue`, `break`, `bail!(..)`,
/// `panic!(..)`, `unreachable!()`), directly or as a block's last statement.
pub(super) fn diverges(e: &syn::Expr) -> bool {
    let leaves = |m: &syn::Macro| {
        m.path.segments.last().is_some_and(|s| {
            matches!(
                s.ident.to_string().as_str(),
                "bail" | "panic" | "unreachable" | "todo" | "unimplemented"
            )
        })
    };
    match e {
        syn::Expr::Return(_) | syn::Expr::Continue(_) | syn::Expr::Break(_) => true,
        syn::Expr::Macro(m) => leaves(&m.mac),
        syn::Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(e, _)) => diverges(e),
            Some(syn::Stmt::Macro(m)) => leaves(&m.mac),
            _ => false,
        },
        _ => false,
    }
}

/// `Err(..)`, `Err(..).into()`, `Err(e.into())`: a value that is an error.
pub(super) fn is_err_value(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Call(c) => matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("Err")),
        syn::Expr::Paren(p) => is_err_value(&p.expr),
        syn::Expr::MethodCall(m) if m.method == "into" => is_err_value(&m.receiver),
        _ => false,
    }
}

/// `None`, `Ok(None)`, an error (also as a block's value): a value that holds no row.
pub(super) fn gives_no_row(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Path(p) => p.path.is_ident("None"),
        syn::Expr::Call(c) if c.args.len() == 1 && is_ok_value(e) => gives_no_row(&c.args[0]),
        syn::Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => gives_no_row(e),
            _ => false,
        },
        e => is_err_value(e),
    }
}

pub(super) fn is_ok_value(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Call(c) => {
            matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("Ok") || p.path.is_ident("Some"))
        }
        syn::Expr::Paren(p) => is_ok_value(&p.expr),
        _ => false,
    }
}

/// The plain names an expression uses (`a`, `b` in `if a < b { (a, b) } else { (b, a) }`).
pub(super) fn used_names(e: &syn::Expr) -> Vec<String> {
    struct Names(Vec<String>);
    impl<'a> Visit<'a> for Names {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                let n = id.to_string();
                if !self.0.contains(&n) {
                    self.0.push(n);
                }
            }
        }
    }
    let mut n = Names(Vec::new());
    n.visit_expr(e);
    n.0
}

/// A path expression's name (`a`, `x.id`), for comparing the elements of swapped pairs.
pub(super) fn quote_path(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(n) => Some(format!("{}.{n}", quote_path(&f.base)?)),
            syn::Member::Unnamed(i) => Some(format!("{}.{}", quote_path(&f.base)?, i.index)),
        },
        syn::Expr::Reference(r) => quote_path(&r.expr),
        _ => None,
    }
}

/// Names bound by a pattern.
pub(super) fn collect_idents(pat: &syn::Pat, out: &mut Vec<String>) {
    struct Idents<'o>(&'o mut Vec<String>);
    impl<'a> Visit<'a> for Idents<'_> {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.to_string());
        }
    }
    Idents(out).visit_pat(pat);
}

/// The expressions whose value `e` takes: `e` itself, or the tail of every arm of an `if` (with
/// its `else`) or `match`, through blocks. False when an arm has no tail value.
pub(super) fn arm_tails<'e>(e: &'e syn::Expr, out: &mut Vec<&'e syn::Expr>) -> bool {
    match e {
        syn::Expr::If(i) => match &i.else_branch {
            Some((_, other)) => block_tail(&i.then_branch, out) && arm_tails(other, out),
            None => false,
        },
        syn::Expr::Match(m) => !m.arms.is_empty() && m.arms.iter().all(|a| arm_tails(&a.body, out)),
        syn::Expr::Block(b) if b.label.is_none() => block_tail(&b.block, out),
        syn::Expr::Paren(p) => arm_tails(&p.expr, out),
        // An arm that leaves gives the binding no value.
        syn::Expr::Return(_) | syn::Expr::Break(_) | syn::Expr::Continue(_) => true,
        _ => {
            out.push(e);
            true
        }
    }
}

pub(super) fn block_tail<'e>(b: &'e syn::Block, out: &mut Vec<&'e syn::Expr>) -> bool {
    match b.stmts.last() {
        Some(syn::Stmt::Expr(tail, None)) => arm_tails(tail, out),
        _ => false,
    }
}
