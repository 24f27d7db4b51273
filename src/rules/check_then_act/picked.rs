//! Rows picked by their state, then changed one by one by key without testing that state
//! again: `SELECT id FROM task WHERE state = 'pending'`, then for each row `UPDATE task SET
//! state = 'cancelled' WHERE id = $1` (or `.. AND state < 'succeeded'`). A row another
//! transaction moved on in between (a worker took it) is changed all the same.

use super::{Transition, same_key};
use crate::model::flow::{At, Flow, field_of_read, is_var};
use crate::model::*;

/// The state column the read picked rows by and the write sets on one of them, keyed by a
/// field of the read's rows (`task.id`); none when the write tests the state for equality
/// again, sets it to a value computed from the read (`lost-update`'s case), has other
/// conditions than an ordering of the state, or a lock of the row comes in between.
pub(super) fn picked_by_state<'s>(
    flow: &Flow,
    r: &'s Step,
    wi: usize,
    table: &str,
) -> Option<Transition<'s>> {
    let At { txn, step: w, .. } = flow.steps[wi];
    let (rf, wf) = (&r.facts, &w.facts);
    if wf.kind != StmtKind::Update
        || !rf.extra().aggregates.is_empty()
        || rf.reads.len() != 1
        || !rf.reads.iter().any(|t| t.name == table)
        || !keyed_by_its_rows(r, w)
    {
        return None;
    }
    let (c, set) = wf.sets.iter().find_map(|s| {
        let p = rf.filters.iter().find(|p| p.column == s.column)?;
        Some((&p.column, s))
    })?;
    // The write also replaces a column it finds the row by (`SET token = $new WHERE token =
    // $old`): a second run finds nothing, like a compare-and-swap.
    let rotates = wf
        .filters
        .iter()
        .any(|p| wf.sets.iter().any(|s| s.column == p.column));
    if rotates
        || wf.filters.iter().any(|p| p.column == *c)
        || !set.value.idents.iter().all(|i| is_var(i, w))
        || flow.flows_from(&set.value, r, wi)
    {
        return None;
    }
    let compared = &wf.extra().compared;
    if wf.other_conditions
        && (compared.is_empty() || compared.iter().any(|o| o.as_ref() != Some(c)))
    {
        return None;
    }
    let relocked = txn.steps.iter().any(|g| {
        (r.seq + 1..w.seq).contains(&g.seq)
            && g.facts.row_locks.iter().any(RowLock::exclusive)
            && g.facts.reads.iter().any(|t| t.name == table)
            && same_key(g, w)
    });
    (!relocked).then_some(Transition {
        column: c.as_str(),
        weaker: wf.other_conditions,
    })
}

/// Some key of the write is that column of a row the read returned.
fn keyed_by_its_rows(r: &Step, w: &Step) -> bool {
    w.facts.filters.iter().any(|p| field_of_read(p, w, r))
}
