//! A replace (`DELETE` the rows new ones supersede, then `INSERT` them) that nothing serialises:
//! a range replaced with no lock taken first, or a replace under an advisory lock whose key
//! pins only some of the values the `DELETE` picks rows by.

use super::{RULE, operand_inputs, text_inputs};
use crate::diagnostic::Diagnostic;
use crate::model::flow::advisory_locks_before;
use crate::model::*;

/// `lock(k(id)); DELETE FROM t WHERE id = $1 OR token = $2; INSERT INTO t (id, token) ..`:
/// two runs with different ids and one token take different locks; neither deletes the row
/// the other inserts (it is not committed yet), and both insert it: a duplicate token, or a
/// unique violation. At READ COMMITTED only: a lock on every key makes the second run's
/// `DELETE` wait and then see the first one's row.
pub(super) fn replace_under_partial_lock(cx: &super::Context, tx: &Transaction) -> Vec<Diagnostic> {
    if tx.isolation != Isolation::ReadCommitted || tx.scope.is_autocommit() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, d) in tx.steps.iter().enumerate() {
        let f = &d.facts;
        if f.kind != StmtKind::Delete {
            continue;
        }
        let (Some(condition), Some(table)) = (f.extra().condition.as_deref(), f.writes.first())
        else {
            continue;
        };
        let locks: Vec<_> = advisory_locks_before(tx, d.seq).collect();
        let Some(&(lock, _)) = locks.first() else {
            continue;
        };
        // A lock keyed by none of the values the `DELETE` picks by is about something txlint
        // cannot see; one keyed by all of them serialises the replace.
        let keys: Vec<String> = locks
            .iter()
            .flat_map(|(l, s)| text_inputs(&l.key, s))
            .collect();
        let picked = operand_inputs(condition, d);
        let loose: Vec<&String> = picked.iter().filter(|k| !keys.contains(k)).collect();
        if loose.is_empty() || loose.len() == picked.len() {
            continue;
        }
        let Some(insert) = tx.steps[i + 1..].iter().find(|w| {
            w.facts.kind == StmtKind::Insert
                && !w.facts.on_conflict
                && w.facts.writes.iter().any(|t| t.name == table.name)
        }) else {
            continue;
        };
        let loose: Vec<String> = loose
            .iter()
            .map(|k| format!("`{}`", k.strip_prefix("host:").unwrap_or(k)))
            .collect();
        out.push(
            Diagnostic::new(
                &RULE,
                table.span,
                format!(
                    "the rows this `DELETE` replaces are picked by `{}`, but the advisory lock at {} is keyed by `{}` alone: two runs with different keys and the same {} take different locks, neither deletes the row the other inserts, and both insert",
                    condition.text,
                    cx.place(lock.span, table.span),
                    lock.key,
                    loose.join(" or ")
                ),
            )
            .note("replaced under a lock on part of its key")
            .in_step(d)
            .label(lock.span, "pins only part of what the `DELETE` picks by")
            .label(insert.span, "inserts the replacement")
            .help("take the advisory lock on every value the `DELETE` picks rows by (one `pg_advisory_xact_lock` per key, in a fixed order), or make the insert settle it with a unique key and `ON CONFLICT`"),
        );
    }
    out
}

/// `DELETE FROM t WHERE block >= $1; INSERT INTO t (block, ..) ..` in one READ COMMITTED
/// transaction with nothing locked before the `DELETE`: a range of rows replaced. A second run
/// does not see the rows the first is inserting (not committed yet) and waits for none of
/// them, so both insert: duplicates, or a unique violation for the second. A `DELETE` keyed by
/// equality alone (a parent's children replaced) is left alone: its rows are usually the
/// parent's, written by one request at a time.
pub(super) fn replace_unlocked(cx: &super::Context, tx: &Transaction) -> Vec<Diagnostic> {
    if tx.isolation != Isolation::ReadCommitted
        || tx.scope.is_autocommit()
        || tx.scope == Scope::Unknown
        || tx.executor == Executor::Unknown
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, d) in tx.steps.iter().enumerate() {
        let f = &d.facts;
        let Some(table) = f.writes.first().filter(|_| f.kind == StmtKind::Delete) else {
            continue;
        };
        let ranged: Vec<&Name> = f.extra().compared.iter().flatten().collect();
        // Anything that could serialise the runs first: a lock, a locking read, a write (of a
        // guard row), a table lock.
        let guarded = tx.steps[..i].iter().any(|s| {
            let g = &s.facts;
            g.modifies
                || !g.row_locks.is_empty()
                || !g.extra().advisory.is_empty()
                || g.extra().table_lock.is_some()
        });
        if ranged.is_empty() || guarded || is_hole(&table.name) {
            continue;
        }
        let Some((insert, column)) = tx.steps[i + 1..].iter().find_map(|w| {
            let wf = &w.facts;
            let into = wf.kind == StmtKind::Insert
                && !wf.on_conflict
                && wf.writes.first().is_some_and(|t| t.name == table.name);
            let column = wf.inserts.iter().find(|(c, _)| ranged.contains(&c))?;
            into.then_some((w, &column.0))
        }) else {
            continue;
        };
        out.push(
            Diagnostic::new(
                &RULE,
                table.span,
                format!(
                    "this `DELETE` clears a range of `{}` and the `INSERT` at {} fills it again, with nothing locked first: a concurrent run's `DELETE` does not see the rows this one inserts (not committed yet) and waits for none of them, so both insert",
                    column,
                    cx.place(insert.span, table.span),
                ),
            )
            .note("a range replaced without a lock")
            .in_step(d)
            .label(insert.span, "inserts the replacement")
            .help("serialise the runs first (`pg_advisory_xact_lock` on what owns the range, or `SELECT .. FOR UPDATE` on a parent row), or make the insert settle it with a unique key and `ON CONFLICT`"),
        );
    }
    out
}
