//! `lock-order-inversion`: an upsert of a key set that locks its rows in the order of its input.

use super::{RULE, guarded};
use crate::diagnostic::Diagnostic;
use crate::model::flow::{bare_input, from_held_rows};
use crate::model::*;
use crate::rules::Context;

/// An upsert of a key set (`INSERT ... SELECT ... FROM unnest($1) ON CONFLICT DO UPDATE`, or
/// `VALUES` rows pushed from a collection in Rust), or an `UPDATE`/`DELETE` joining a key list
/// (`UPDATE t .. FROM unnest($1) k WHERE t.id = k.id`), without `ORDER BY` or a sorted
/// collection: it locks the rows in the order of its input, so two runs with overlapping keys
/// in different orders deadlock (checked on PostgreSQL 15, see the rule page).
///
/// A locking read of a key set (`WHERE id = ANY($1) FOR UPDATE`) is not reported: PostgreSQL
/// locks its rows in index or heap order, never in the order of the array, so two runs of one
/// statement with one plan take them in the same order (same experiment).
pub(super) fn unordered(
    cx: &Context,
    tx: &Transaction,
    before: &[Step],
    step: &Step,
    out: &mut Vec<Diagnostic>,
) {
    let f = &step.facts;
    let joined = matches!(f.kind, StmtKind::Update | StmtKind::Delete) && f.joins_key_list;
    // Unknown executor: the caller may hold a guard that serialises the rows first.
    // A `FOR UPDATE` in key order inside the statement (`WITH locked AS (SELECT .. ORDER BY id
    // FOR UPDATE) UPDATE ..`) takes the rows first, sorted.
    if !(f.upsert || joined)
        || !f.key_set
        || f.ordered
        || (joined && f.row_locks.iter().any(|l| l.ordered))
        || matches!(tx.scope, Scope::Unknown)
        || tx.executor == Executor::Unknown
        || guarded(cx.program.schema(step.span.file), before, step)
        || shares_held_value(tx, step)
        || (!step.host().inputs.is_empty() && step.host().inputs.iter().all(|i| i.ordered))
    {
        return;
    }
    let Some(t) = f.writes.first() else {
        return;
    };
    if is_hole(&t.name) {
        return;
    }
    let what = match joined {
        true => {
            "this statement joins a list of keys that is not sorted and locks its rows in the list's order (a plan that looks each key up in turn)"
        }
        false => "this upsert locks its rows in the order of its input, which is not sorted",
    };
    let mut d = Diagnostic::new(
        &RULE,
        t.span,
        format!(
            "{what}: two transactions with overlapping keys in different orders can each hold some rows and wait for the others (deadlock)"
        ),
    );
    if let Some(rows) = step.host().rows {
        d = d.label(rows, "rows pushed in this collection's order");
    }
    out.push(
        d.note("rows locked in input order")
        .in_step(step)
        .help("sort the keys first (`ORDER BY` on the key in the `SELECT` that feeds the upsert; in the code, sort the arrays or the rows pushed, or keep them in a `BTreeMap`), or take a transaction-scoped advisory lock on the set first"),
    );
}

/// Every row of the upsert takes one value in some column (`INSERT .. SELECT $1, $2, u.* FROM
/// unnest($3, $4) u`: the parent's id in `$2`), and that value was read from a row the
/// transaction holds (created, updated or locked: `INSERT INTO views .. RETURNING id`). Two
/// runs whose rows overlap share the value, so the second waits at the held row before it
/// locks any of them.
fn shares_held_value(tx: &Transaction, step: &Step) -> bool {
    if step.host().rows.is_some() {
        return false;
    }
    step.facts.inserts.iter().any(|(_, o)| {
        bare_input(step, o).is_some_and(|i| from_held_rows(&tx.steps, step.seq, &[i]))
    })
}
