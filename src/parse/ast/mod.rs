//! Facts that need the statement's structure, read from sqlparser's AST: the columns a query
//! reads and its aggregates, the `SET` items of an `UPDATE`, the values of an `INSERT`, the
//! `col = value` conjuncts of a `WHERE`, and the keys DDL declares.
//!
//! Everything positional comes from identifier spans (reliable in sqlparser 0.64, unlike
//! statement spans); a missing span falls back to the statement.

use std::ops::ControlFlow;

use sqlparser::ast::{
    AlterTableOperation, AssignmentTarget, ColumnOption, ConflictTarget, DoUpdate, Expr, FromTable,
    Ident, ObjectName, OnConflict, OnConflictAction, OnInsert, SelectItem, SetExpr, Statement,
    TableConstraint, TableFactor, UpdateTableFromKind, Value, visit_expressions,
};

use crate::model::{ForeignKey, Operand, Pred, SetItem, TableDdl};

mod ddl;
mod predicates;
use ddl::ddl;
use predicates::{
    all_tests, and_parts, by_tests, claim, claim_from, compared, conjuncts, picked_by, tests_again,
};

/// Where an identifier of the statement text is: a byte offset into the text sqlparser saw.
pub trait Locate {
    fn ident(&self, ident: &Ident) -> Option<std::ops::Range<usize>>;
}

/// What the AST adds to a statement's facts.
#[derive(Debug, Default)]
pub struct Structure {
    /// Columns a query reads (`*` for a wildcard), lower case.
    pub columns: Vec<String>,
    /// Output names of a query's select list (aliases, else column names).
    pub outputs: Vec<String>,
    /// `SET` items of an `UPDATE`, with the byte range of the column in the text.
    pub sets: Vec<(SetItem, Option<std::ops::Range<usize>>)>,
    /// `col = value` conjuncts of the `WHERE` (of the top-level query or `UPDATE`).
    pub filters: Vec<Pred>,
    /// The `WHERE` has conditions besides those `col = value` conjuncts.
    pub other_conditions: bool,
    pub aggregates: Vec<String>,
    pub inserts: Vec<(String, Operand)>,
    pub ddl: Option<TableDdl>,
    /// `UPDATE t .. WHERE id = (SELECT id FROM t WHERE state = 'queued' ..)`: the columns the
    /// subquery picks its row by that the outer `WHERE` does not test again.
    pub claim: Vec<String>,
    /// An `UPDATE`'s `WHERE` conjuncts other than `col = value`: for each, the column it
    /// orders against a value with `<`, `<=`, `>` or `>=` (`state < 'done'`), none for any
    /// other condition.
    pub compared: Vec<Option<String>>,
    /// `INSERT INTO t .. SELECT .. WHERE NOT EXISTS (SELECT .. FROM t WHERE a = .. AND b = ..)`:
    /// the columns the insert checks are absent first, with the names they are compared with
    /// (none for a parameter or a literal; variables in a routine).
    pub absent: Vec<(String, Vec<String>)>,
    /// Calls of functions that are not built-in aggregates (`f(a, $1)`, `CALL p(..)`), with
    /// their positional arguments: a routine the run defines runs its statements here.
    pub calls: Vec<(String, Vec<Operand>)>,
    /// A decision read's, an `UPDATE`'s or a `DELETE`'s whole `WHERE`, when it has more than
    /// `col = value` conjuncts (`id = $1 OR token = $2`): what it depends on, for the keys of the locks that
    /// should cover it.
    pub condition: Option<Operand>,
    /// The `WHERE` conjuncts other than `col = value` that hold no parameter (`payload IS NOT
    /// NULL`, `expires <= now()`), as sqlparser prints them, lower case. A decision read's are
    /// all of them or none (one with a parameter cannot be compared); an `UPDATE`'s or
    /// `DELETE`'s include those of a subquery on its own table that picks its rows (`id IN
    /// (SELECT id FROM t WHERE ..)`): what the write tests again on the rows it changes.
    pub tests: Vec<String>,
    /// `INSERT .. ON CONFLICT .. DO UPDATE SET c = v` with no `WHERE`: its `SET` items.
    pub conflict_sets: Vec<(String, Operand)>,
    /// The columns that `NOT EXISTS` (see `absent`) tests otherwise than by `col = value`
    /// (`path >= $1 AND path < $2`, `state <> 'done'`).
    pub absent_tests: Vec<String>,
    /// `ON CONFLICT (a, b)`: the conflict target's columns.
    pub conflict_on: Vec<String>,
}

/// The `SELECT` of a scalar subquery, bare, as `COALESCE`'s first argument, or compared
/// (`IF (SELECT count(*) ..) >= 10 THEN`).
fn scalar_subquery(e: &Expr) -> Option<&sqlparser::ast::Select> {
    let q = match e {
        Expr::Subquery(q) => q,
        Expr::Nested(inner) => return scalar_subquery(inner),
        Expr::BinaryOp { left, right, .. } => {
            return scalar_subquery(left).or_else(|| scalar_subquery(right));
        }
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("coalesce") => {
            let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
                return None;
            };
            match list.args.first()? {
                sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => {
                    return scalar_subquery(e);
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    match q.body.as_ref() {
        SetExpr::Select(select) => Some(select),
        _ => None,
    }
}

/// The expression of a projection item (`e`, `e AS a`); none for `*`.
fn item_expr(item: &SelectItem) -> Option<&Expr> {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    }
}

/// The name of the aggregate `e` calls (`count(*)`: `count`), lower case.
fn aggregate(e: &Expr) -> Option<String> {
    let Expr::Function(f) = e else {
        return None;
    };
    let fname = f.name.to_string().to_ascii_lowercase();
    AGGREGATES.contains(&fname.as_str()).then_some(fname)
}

/// A decision's subquery (`EXISTS (..)`, a scalar `(SELECT count(*) ..)`): its `WHERE` is the
/// read's key.
fn subquery_key(s: &mut Structure, inner: &sqlparser::ast::Select, positional: &mut usize) {
    if let Some(w) = &inner.selection {
        s.other_conditions |= !conjuncts(w, &mut s.filters, positional);
        s.tests = all_tests(w);
    }
}

const AGGREGATES: &[&str] = &[
    "count", "max", "min", "sum", "avg", "bool_and", "bool_or", "every",
];

fn table_name(n: &ObjectName) -> String {
    n.0.last()
        .and_then(|p| p.as_ident())
        .map(name)
        .unwrap_or_default()
}

/// The schema a name is qualified with (`underway` of `underway.task`); none for `public`.
fn qualifier(n: &ObjectName) -> Option<String> {
    let parts = &n.0;
    let q = parts
        .len()
        .checked_sub(2)
        .and_then(|i| parts[i].as_ident())
        .map(name)?;
    (q != "public").then_some(q)
}

fn ident_list(ids: &[Ident]) -> Vec<String> {
    ids.iter().map(name).collect()
}

pub fn structure(
    stmt: &Statement,
    at: &dyn Locate,
    routines: Option<&std::collections::HashSet<String>>,
) -> Structure {
    let mut s = Structure {
        ddl: ddl(stmt),
        ..Structure::default()
    };
    if let Some(routines) = routines {
        s.calls = calls(stmt, routines);
    }
    let mut positional = 0;
    match stmt {
        Statement::Query(q) => {
            if let SetExpr::Select(select) = q.body.as_ref() {
                select_structure(&mut s, select, &mut positional);
            }
        }
        Statement::Insert(ins) => insert_structure(&mut s, ins, &mut positional),
        Statement::Update(u) => update_structure(&mut s, u, at, &mut positional),
        // `DELETE .. WHERE k = v`: the rows it removes (and locks), by key.
        Statement::Delete(d) => delete_structure(&mut s, d, &mut positional),
        _ => {}
    }
    s
}

/// A `SELECT`'s decisions (aggregates, `EXISTS`), outputs and filters.
fn select_structure(s: &mut Structure, select: &sqlparser::ast::Select, positional: &mut usize) {
    for item in &select.projection {
        select_item(s, select, item, positional);
    }
    if let Some(w) = &select.selection {
        s.other_conditions |= !conjuncts(w, &mut s.filters, positional);
        if s.other_conditions && !s.aggregates.is_empty() {
            s.condition = Some(operand(w, &mut 0));
        }
        s.tests = all_tests(w);
    }
}

/// One item of a `SELECT` list: an aggregate or existence test it decides with, the columns
/// it reads and the name it gives.
fn select_item(
    s: &mut Structure,
    select: &sqlparser::ast::Select,
    item: &SelectItem,
    positional: &mut usize,
) {
    // `NOT EXISTS (...)` decides as much as `EXISTS (...)`.
    let expr = match item_expr(item) {
        Some(Expr::UnaryOp { expr: inner, .. }) => Some(inner.as_ref()),
        e => e,
    };
    // `v := (SELECT count(*) FROM t WHERE k = v)` (PL/pgSQL evaluates it as
    // `SELECT (..)`), also in `COALESCE((..), 0)` or an `IF` comparing it: the
    // scalar subquery is the read.
    if select.from.is_empty()
        && let Some(inner) = expr.and_then(scalar_subquery)
    {
        let inner_items = inner.projection.iter().filter_map(item_expr);
        s.aggregates.extend(inner_items.filter_map(aggregate));
        subquery_key(s, inner, positional);
    }
    match expr {
        Some(e @ Expr::Function(_)) => s.aggregates.extend(aggregate(e)),
        Some(Expr::Exists { subquery, .. }) => {
            s.aggregates.push("exists".to_string());
            // `SELECT EXISTS (SELECT ... WHERE k = v)`: the subquery's key.
            if let SetExpr::Select(inner) = subquery.body.as_ref() {
                subquery_key(s, inner, positional);
            }
        }
        Some(Expr::Value(_)) if select.from.len() == 1 => s.aggregates.push("exists".to_string()),
        _ => {}
    }
    match item {
        SelectItem::UnnamedExpr(e) => {
            s.columns
                .extend(operand(e, positional).idents.iter().map(|i| last(i)));
            if let Some(name) = column_name(e) {
                s.outputs.push(name);
            }
        }
        SelectItem::ExprWithAlias { expr, alias } => {
            s.columns
                .extend(operand(expr, positional).idents.iter().map(|i| last(i)));
            s.outputs.push(name(alias));
        }
        _ => s.columns.push("*".to_string()),
    }
}

fn insert_structure(s: &mut Structure, ins: &sqlparser::ast::Insert, positional: &mut usize) {
    let columns: Vec<String> = ins
        .columns
        .iter()
        .filter_map(|c| c.0.last().and_then(|p| p.as_ident()).map(name))
        .collect();
    if let Some(src) = &ins.source
        && let SetExpr::Values(v) = src.body.as_ref()
        && let Some(row) = v.rows.first()
    {
        for (c, e) in columns.iter().zip(&row.content) {
            s.inserts.push((c.clone(), operand(e, positional)));
        }
    }
    if let Some(OnInsert::OnConflict(OnConflict {
        conflict_target: Some(ConflictTarget::Columns {
            columns: target, ..
        }),
        ..
    })) = &ins.on
    {
        s.conflict_on = target.iter().map(name).collect();
    }
    if let Some(OnInsert::OnConflict(OnConflict {
        action:
            OnConflictAction::DoUpdate(DoUpdate {
                assignments,
                selection: None,
            }),
        ..
    })) = &ins.on
    {
        for a in assignments {
            if let AssignmentTarget::ColumnName(n) = &a.target
                && let Some(ident) = n.0.last().and_then(|p| p.as_ident())
            {
                let value = operand(&a.value, positional);
                s.conflict_sets.push((name(ident), value));
            }
        }
    }
    // `INSERT INTO t (..) SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM t WHERE ..)`.
    if let Some(src) = &ins.source
        && let SetExpr::Select(select) = src.body.as_ref()
        && let sqlparser::ast::TableObject::TableName(table) = &ins.table
    {
        for (c, item) in columns.iter().zip(&select.projection) {
            if let Some(e) = item_expr(item) {
                s.inserts.push((c.clone(), operand(e, positional)));
            }
        }
        if let Some(w) = &select.selection {
            let mut parts = Vec::new();
            and_parts(w, &mut parts);
            for part in parts {
                if let Expr::Exists {
                    subquery,
                    negated: true,
                } = part
                {
                    s.absent.extend(picked_by(subquery, &table_name(table)));
                    s.absent_tests
                        .extend(by_tests(subquery, &table_name(table)));
                }
            }
        }
    }
}

fn update_structure(
    s: &mut Structure,
    u: &sqlparser::ast::Update,
    at: &dyn Locate,
    positional: &mut usize,
) {
    for a in &u.assignments {
        let value = operand(&a.value, positional);
        let targets: Vec<&sqlparser::ast::ObjectName> = match &a.target {
            AssignmentTarget::ColumnName(n) => vec![n],
            AssignmentTarget::Tuple(ns) => ns.iter().collect(),
        };
        for t in targets {
            let Some(ident) = t.0.last().and_then(|p| p.as_ident()) else {
                continue;
            };
            s.sets.push((
                SetItem {
                    column: name(ident).into(),
                    value: value.clone(),
                    span: None,
                },
                at.ident(ident),
            ));
        }
    }
    if let Some(w) = &u.selection {
        s.other_conditions |= !conjuncts(w, &mut s.filters, positional);
        if s.other_conditions {
            s.condition = Some(operand(w, &mut 0));
            s.compared = compared(w);
        }
        if let TableFactor::Table { name, .. } = &u.table.relation {
            s.claim = claim(w, &table_name(name));
            if let Some(UpdateTableFromKind::AfterSet(from)) = &u.from {
                s.claim.extend(claim_from(from, w, &table_name(name)));
            }
            s.tests = tests_again(w, &table_name(name));
        }
    }
}

fn delete_structure(s: &mut Structure, d: &sqlparser::ast::Delete, positional: &mut usize) {
    if let Some(w) = &d.selection {
        s.other_conditions |= !conjuncts(w, &mut s.filters, positional);
        if s.other_conditions {
            s.condition = Some(operand(w, &mut 0));
            s.compared = compared(w);
        }
        let tables = match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
        };
        if let [t] = tables.as_slice()
            && let TableFactor::Table { name, .. } = &t.relation
        {
            s.tests = tests_again(w, &table_name(name));
        }
    }
}

fn name(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

fn last(dotted: &str) -> String {
    dotted.rsplit('.').next().unwrap_or(dotted).to_string()
}

fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(name(i)),
        Expr::CompoundIdentifier(parts) => parts.last().map(name),
        _ => None,
    }
}

/// Most calls a statement is read for (a statement is rarely more than a few).
const MAX_CALLS: usize = 8;

/// The calls in `stmt` of functions named in `routines`, with positional arguments only;
/// unqualified names, lower case.
fn calls(
    stmt: &Statement,
    routines: &std::collections::HashSet<String>,
) -> Vec<(String, Vec<Operand>)> {
    let mut out = Vec::new();
    let mut positional = 0;
    let mut call = |f: &sqlparser::ast::Function, out: &mut Vec<(String, Vec<Operand>)>| {
        use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
        let name = table_name(&f.name);
        let FunctionArguments::List(list) = &f.args else {
            return;
        };
        if !routines.contains(&name) {
            return;
        }
        let mut args = Vec::new();
        for a in &list.args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                    args.push(operand(e, &mut positional))
                }
                // Named arguments and wildcards: which parameter gets what is not read.
                _ => return,
            }
        }
        if out.len() < MAX_CALLS && !AGGREGATES.contains(&name.as_str()) {
            out.push((name, args));
        }
    };
    if let Statement::Call(f) = stmt {
        call(f, &mut out);
    }
    let _ = visit_expressions(stmt, |e| {
        if let Expr::Function(f) = e {
            call(f, &mut out);
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// What an expression is made of: parameters, identifiers (columns or variables, dotted),
/// constants.
fn operand(e: &Expr, positional: &mut usize) -> Operand {
    let mut o = Operand {
        text: e.to_string().into(),
        ..Operand::default()
    };
    let _ = visit_expressions(e, |x| {
        match x {
            Expr::Identifier(i) => o.idents.push(name(i).into()),
            Expr::CompoundIdentifier(parts) => {
                o.idents
                    .push(parts.iter().map(name).collect::<Vec<_>>().join(".").into());
            }
            Expr::Value(v) => match &v.value {
                Value::Placeholder(p) if p == "?" => {
                    *positional += 1;
                    o.params.push(*positional);
                }
                Value::Placeholder(p) => {
                    if let Ok(n) = p.trim_start_matches('$').parse() {
                        o.params.push(n);
                    }
                }
                _ => {}
            },
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ddl_of(sql: &str) -> TableDdl {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let stmt = sqlparser::parser::Parser::parse_sql(&dialect, sql).expect("parses");
        ddl(&stmt[0]).expect("a table's keys")
    }

    #[test]
    fn unique_indexes_on_expressions_or_partial_are_keys_only_where_they_say_so() {
        let full = ddl_of("CREATE UNIQUE INDEX u ON users (org_id, email)");
        assert_eq!(
            full.unique,
            [vec!["org_id".to_string(), "email".to_string()]]
        );
        // `lower(email)` is no key on `email`, nor is `org_id` alone.
        let expr = ddl_of("CREATE UNIQUE INDEX u ON users (org_id, lower(email))");
        assert!(expr.unique.is_empty() && expr.partial.is_empty());
        let soft = ddl_of("CREATE UNIQUE INDEX u ON users (email) WHERE deleted_at IS NULL");
        assert!(soft.unique.is_empty());
        assert_eq!(
            soft.partial,
            [(vec!["email".to_string()], vec!["deleted_at".to_string()])]
        );
        // Another predicate is kept as the tests it makes, each printed as a check prints it.
        let flag =
            ddl_of("CREATE UNIQUE INDEX u ON users (email) WHERE (verified IS TRUE) AND active");
        assert!(flag.unique.is_empty() && flag.partial.is_empty());
        assert_eq!(
            flag.predicated,
            [(
                vec!["email".to_string()],
                vec!["verified is true".to_string(), "active".to_string()]
            )]
        );
        // A constant comparison is a filter, not a test: such a predicate is not followed.
        let other = ddl_of("CREATE UNIQUE INDEX u ON users (email) WHERE kind = 'admin'");
        assert!(other.unique.is_empty() && other.partial.is_empty());
        assert!(other.predicated.is_empty());
    }
}
