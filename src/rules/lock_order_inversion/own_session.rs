//! One task, two sessions: a statement sent on another connection while the task's own open
//! transaction holds the row it needs.

use super::*;
use crate::model::flow::At;

/// `tx` holds a row (it updated or deleted it by its key, or locked it `FOR UPDATE`), and before
/// it ends the same code sends a statement on another session (the pool, another connection)
/// that updates, deletes or locks that row by the same key: the statement waits for `tx`, and
/// `tx` cannot go on until the code that waits gets its answer. PostgreSQL sees one session
/// waiting for another that sits idle in its transaction, no cycle it could break: the request
/// hangs until a timeout, holding both connections. One finding per waiting statement.
pub(super) fn waits_for_itself(unit: &Unit, out: &mut Vec<Diagnostic>) {
    let steps = unit.ordered();
    let mut found: Vec<Span> = Vec::new();
    for (i, a) in steps.iter().enumerate() {
        if a.txn.scope != Scope::Explicit || a.step.session.is_none() {
            continue;
        }
        let Some((table, key)) = held_row(a.step) else {
            continue;
        };
        for (j, b) in steps.iter().enumerate().skip(i + 1) {
            let other_session = b.tx != a.tx
                && b.txn.executor != Executor::Unknown
                && b.txn.scope != Scope::Unknown
                && b.step.session != a.step.session;
            if !other_session
                || found.contains(&b.step.span)
                || unit.exclusive(&a.step.branch, &b.step.branch)
                || !waits_for(b.step, table, &key)
            {
                continue;
            }
            // `tx` is still open when `b` runs: a statement of it comes after, on the same path.
            let Some(later) = steps[j + 1..]
                .iter()
                .find(|c| c.tx == a.tx && !unit.exclusive(&c.step.branch, &b.step.branch))
            else {
                continue;
            };
            found.push(b.step.span);
            out.push(diagnostic(a, b, later, table));
        }
    }
}

/// The table and key (column, value key) of the one row `step` holds once it ran: an `UPDATE`
/// or `DELETE` by `col = value` conditions, or a locking read `FOR UPDATE`/`FOR NO KEY UPDATE`
/// of one table.
fn held_row(step: &Step) -> Option<(&Name, Vec<(&Name, String)>)> {
    let f = &step.facts;
    // An insert's new row is no key lookup another statement's conditions could name.
    let table = keys::locked_table(step).filter(|_| f.kind != StmtKind::Insert)?;
    let key: Vec<(&Name, String)> = f
        .filters
        .iter()
        .filter(|p| !p.value.is_literal())
        .map(|p| (&p.column, value_key(&p.value, step)))
        .collect();
    (!key.is_empty()).then_some((table, key))
}

/// `step` updates, deletes or locks (and waits for) the row of `table` that `key` names: its
/// own `col = value` conditions give every column of the key the same value.
fn waits_for(step: &Step, table: &Name, key: &[(&Name, String)]) -> bool {
    let f = &step.facts;
    let locks = match f.kind {
        StmtKind::Update | StmtKind::Delete => f.writes.iter().any(|t| t.name == *table),
        StmtKind::Select => {
            f.reads.iter().any(|t| t.name == *table)
                && f.row_locks
                    .iter()
                    .any(|l| l.wait == LockWait::Block && l.strength != RowLockStrength::KeyShare)
        }
        _ => false,
    };
    locks
        && key.iter().all(|(column, value)| {
            f.filters
                .iter()
                .any(|p| p.column == **column && value_key(&p.value, step) == *value)
        })
}

fn diagnostic(a: &At, b: &At, later: &At, table: &Name) -> Diagnostic {
    Diagnostic::new(
        &RULE,
        b.step.span,
        format!(
            "this statement runs on another connection while this code's own transaction holds the `{table}` row it needs: it waits for that transaction, which cannot commit until this returns (a hang PostgreSQL does not detect as a deadlock)"
        ),
    )
    .in_step(b.step)
    .label(a.step.span, "the transaction locks the row here")
    .label(later.step.span, "and is still open here")
    .help("send the statement on the transaction (`&mut *tx`), or commit the transaction before it")
}
