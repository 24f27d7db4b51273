//! A replace (`DELETE` the rows a new one supersedes, then `INSERT` it) serialised by an
//! advisory lock whose key pins only some of the values the `DELETE` picks rows by.

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
                    "the rows this `DELETE` replaces are picked by `{}`, but the advisory lock at line {} is keyed by `{}` alone: two runs with different keys and the same {} take different locks, neither deletes the row the other inserts, and both insert",
                    condition.text,
                    cx.line(lock.span),
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
