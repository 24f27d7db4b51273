//! What a statement's `WHERE` says: `col = value` conjuncts, the other tests, the rows a
//! subquery on the written table picks.

use sqlparser::ast::{BinaryOperator, Expr, InTarget, Query, SetExpr, TableFactor, TableWithJoins};

use super::{column_name, last, operand, table_name};
use crate::model::Pred;

/// `WHERE id = (SELECT id FROM t WHERE state = 'queued' .. LIMIT 1)` or `id IN (SELECT ..)`
/// on the updated table `t`: the columns the subquery picks its row by (`col = constant or
/// parameter`), less those the outer `WHERE` tests itself.
pub(super) fn claim(w: &Expr, table: &str) -> Vec<String> {
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    let mut picked = Vec::new();
    let mut outer = Vec::new();
    for part in parts {
        match part {
            Expr::BinaryOp {
                op: BinaryOperator::Eq,
                right,
                ..
            } if matches!(right.as_ref(), Expr::Subquery(_)) => {
                if let Expr::Subquery(q) = right.as_ref() {
                    picked.extend(picks(q, table));
                }
            }
            Expr::In {
                target: InTarget::Subquery(q),
                negated: false,
                ..
            } => picked.extend(picks(q, table)),
            other => outer.extend(operand(other, &mut 0).idents.iter().map(|i| last(i))),
        }
    }
    picked.retain(|c| !outer.contains(c));
    picked
}

/// `UPDATE t SET .. FROM (SELECT id FROM t WHERE run_at <= now() LIMIT 10) s WHERE t.id = s.id`:
/// the rows come from a subquery in `FROM` (also one reached through its joins, `LATERAL`
/// included) that reads `t` alone; the columns it picks them by, as [`claim`] finds them, less
/// those the outer `WHERE` tests itself. Only when the outer `WHERE` names the subquery.
pub(super) fn claim_from(from: &[TableWithJoins], w: &Expr, table: &str) -> Vec<String> {
    fn derived(factor: &TableFactor, table: &str, out: &mut Vec<String>, depth: usize) {
        let TableFactor::Derived { subquery, .. } = factor else {
            return;
        };
        out.extend(picks(subquery, table));
        if let (SetExpr::Select(select), true) = (subquery.body.as_ref(), depth < 4) {
            for t in &select.from {
                for f in std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)) {
                    derived(f, table, out, depth + 1);
                }
            }
        }
    }
    let idents = operand(w, &mut 0).idents;
    let outer: Vec<String> = idents.iter().map(|i| last(i)).collect();
    let qualifiers: Vec<String> = idents
        .iter()
        .filter_map(|i| i.rsplit_once('.').map(|(q, _)| q.to_ascii_lowercase()))
        .collect();
    let mut picked = Vec::new();
    for t in from {
        if let TableFactor::Derived {
            alias: Some(alias), ..
        } = &t.relation
            && qualifiers.contains(&alias.name.value.to_ascii_lowercase())
        {
            derived(&t.relation, table, &mut picked, 0);
        }
    }
    picked.retain(|c| !outer.contains(c));
    picked
}

/// A conjunct other than `col = value` with no parameter, as [`Structure::tests`] keeps it.
fn test_text(part: &Expr) -> Option<String> {
    let mut none = Vec::new();
    if conjunct(part, &mut none, &mut 0) || !operand(part, &mut 0).params.is_empty() {
        return None;
    }
    Some(part.to_string().to_ascii_lowercase())
}

/// The tests of a decision read's `WHERE`: all its conditions other than `col = value`, or
/// none when one of them cannot be kept.
pub(super) fn all_tests(w: &Expr) -> Vec<String> {
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    let mut none = Vec::new();
    let others = parts
        .into_iter()
        .filter(|p| !conjunct(p, &mut none, &mut 0));
    others
        .map(test_text)
        .collect::<Option<_>>()
        .unwrap_or_default()
}

/// The tests a write's `WHERE` makes on the rows it changes: its own, and those of a subquery
/// on its own table (`id = (SELECT ..)`, `id IN (SELECT ..)`, `id = any(array(SELECT ..))`).
pub(super) fn tests_again(w: &Expr, table: &str) -> Vec<String> {
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    let mut out = Vec::new();
    for part in parts {
        let picked = match part {
            Expr::BinaryOp { right, .. } => picking_query(right),
            Expr::In {
                target: InTarget::Subquery(q),
                negated: false,
                ..
            } => Some(q.as_ref()),
            Expr::AnyOp { right, .. } => picking_query(right),
            _ => None,
        };
        match picked {
            Some(q) => out.extend(own_tests(q, table)),
            None => out.extend(test_text(part)),
        }
    }
    out
}

/// The query of `(SELECT ..)` or `array(SELECT ..)`.
fn picking_query(e: &Expr) -> Option<&Query> {
    match e {
        Expr::Subquery(q) => Some(q),
        Expr::Nested(inner) => picking_query(inner),
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("array") => match &f.args {
            sqlparser::ast::FunctionArguments::Subquery(q) => Some(q),
            _ => None,
        },
        _ => None,
    }
}

/// The tests of `SELECT .. FROM <table> WHERE ..` (that one table, no join).
fn own_tests(q: &Query, table: &str) -> Vec<String> {
    let Some(w) = own_where(q, table) else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    parts.into_iter().filter_map(test_text).collect()
}

/// The parts of `a AND (b AND c)`, in order, parentheses looked through.
pub(super) fn and_parts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            and_parts(left, out);
            and_parts(right, out);
        }
        Expr::Nested(inner) => and_parts(inner, out),
        other => out.push(other),
    }
}

/// The `WHERE` of `SELECT .. FROM <table> WHERE ..` that reads that one table, no join.
fn own_where<'q>(q: &'q Query, table: &str) -> Option<&'q Expr> {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let own = matches!(select.from.as_slice(), [t] if t.joins.is_empty()
        && matches!(&t.relation, TableFactor::Table { name, .. } if table_name(name) == table));
    select.selection.as_ref().filter(|_| own)
}

/// The columns a subquery reading `table` alone picks its rows by: compared with constants or
/// parameters, or tested otherwise ([`by_tests`]).
fn picks(q: &Query, table: &str) -> impl Iterator<Item = String> {
    by_constants(q, table).chain(by_tests(q, table))
}

/// The columns `SELECT .. FROM <table> WHERE ..` (that one table) tests otherwise than by
/// `col = value`: `worker IS NULL`, `run_at <= now()`, `attempts < 5`, `state <> 'done'`.
pub(super) fn by_tests(q: &Query, table: &str) -> Vec<String> {
    let Some(w) = own_where(q, table) else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    let ordering = |op: &BinaryOperator| {
        use BinaryOperator::*;
        matches!(op, Lt | LtEq | Gt | GtEq | NotEq)
    };
    parts
        .into_iter()
        .filter_map(|p| match p {
            Expr::IsNull(e) | Expr::IsNotNull(e) => column_name(e),
            Expr::BinaryOp { left, op, right } if ordering(op) => {
                column_name(left).or_else(|| column_name(right))
            }
            _ => None,
        })
        .collect()
}

/// The columns of [`picked_by`] compared with constants or parameters.
fn by_constants(q: &Query, table: &str) -> impl Iterator<Item = String> {
    picked_by(q, table)
        .into_iter()
        .filter(|(_, by)| by.is_empty())
        .map(|(c, _)| c)
}

/// The `col = value` conjuncts of `SELECT .. FROM <table> WHERE ..` (one table, no join),
/// with the names in each value.
pub(super) fn picked_by(q: &Query, table: &str) -> Vec<(String, Vec<String>)> {
    let Some(w) = own_where(q, table) else {
        return Vec::new();
    };
    let mut preds = Vec::new();
    conjuncts(w, &mut preds, &mut 0);
    // A qualified name is the outer query's (a correlation, not one key); a plain one may be a
    // routine's variable, which the caller tells apart.
    preds
        .into_iter()
        .filter(|p| p.value.idents.iter().all(|i| !i.contains('.')))
        .map(|p| {
            let idents = p.value.idents.iter().map(|i| i.to_string()).collect();
            (p.column.to_string(), idents)
        })
        .collect()
}

/// See [`Structure::compared`].
pub(super) fn compared(w: &Expr) -> Vec<Option<String>> {
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    let is_value = |e: &Expr| matches!(e, Expr::Value(_) | Expr::Cast { .. });
    parts
        .into_iter()
        .filter_map(|part| match part {
            Expr::BinaryOp { left, op, right } => {
                let (l, r) = (column_name(left), column_name(right));
                // `col = value` (either way round) is a filter (see `conjunct`).
                if *op == BinaryOperator::Eq && (l.is_some() || r.is_some()) {
                    return None;
                }
                let (col, other) = match (l, r) {
                    (Some(c), None) => (Some(c), right),
                    (None, Some(c)) => (Some(c), left),
                    _ => (None, left),
                };
                match op {
                    BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
                        if is_value(other) =>
                    {
                        Some(col)
                    }
                    _ => Some(None),
                }
            }
            _ => Some(None),
        })
        .collect()
}

/// `a = x AND b = y AND ...`: the `col = value` conjuncts; false when there are other
/// conditions too.
pub(super) fn conjuncts(e: &Expr, out: &mut Vec<Pred>, positional: &mut usize) -> bool {
    let mut parts = Vec::new();
    and_parts(e, &mut parts);
    // Every part is read (in order: placeholders are numbered as they come).
    let mut only = true;
    for part in parts {
        only &= conjunct(part, out, positional);
    }
    only
}

/// One part of a conjunction: a `col = value` is pushed to `out`; false for anything else.
fn conjunct(e: &Expr, out: &mut Vec<Pred>, positional: &mut usize) -> bool {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (col, value) = match (column_name(left), column_name(right)) {
                (Some(c), _) => (c, right),
                (None, Some(c)) => (c, left),
                _ => {
                    operand(e, positional);
                    return false;
                }
            };
            let value = operand(value, positional);
            out.push(Pred {
                column: col.into(),
                value,
            });
            true
        }
        other => {
            // Count its placeholders so later `?` keep their numbers.
            operand(other, positional);
            false
        }
    }
}
