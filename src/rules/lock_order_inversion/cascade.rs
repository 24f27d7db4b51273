//! `lock-order-inversion`: a row trigger that writes other rows of its own table, found
//! through another table from the row that fired it (`UPDATE work .. FROM work_relation WHERE
//! work.id = work_relation.relator AND work_relation.related = NEW.id`).
//!
//! The write that fires it holds its own row while the trigger locks the related rows. Two
//! writes of two rows related to each other (a link table holding both directions, as a
//! symmetric relation does) each hold their own row and wait for the other's: a deadlock,
//! whatever order the code takes them in (checked on PostgreSQL 15, see the rule page). Rows
//! found from the firing row's own columns (its parent, `WHERE id = NEW.parent_id`; its
//! children) point one way and are not reported.

use super::RULE;
use crate::diagnostic::Diagnostic;
use crate::model::*;

/// `step` is a copy of a trigger statement that `firing` (a write of one table's rows) runs, and
/// it writes other rows of that table through another table.
pub(super) fn related_rows(before: &[Step], step: &Step, out: &mut Vec<Diagnostic>) {
    let f = &step.facts;
    if !matches!(f.kind, StmtKind::Update | StmtKind::Delete) {
        return;
    }
    let Some(table) = f.writes.first() else {
        return;
    };
    // The write that fired it: an `UPDATE` or `DELETE` holds the row it fired for (an inserted
    // row is no other transaction's to wait for).
    let Some(firing) = before.iter().rev().find(|w| {
        step.run_by(w)
            && matches!(w.facts.kind, StmtKind::Update | StmtKind::Delete)
            && w.facts.writes.first().is_some_and(|t| t.name == table.name)
    }) else {
        return;
    };
    if !through_another_table(step, firing, &table.name) {
        return;
    }
    let via = f
        .reads
        .iter()
        .find(|r| r.name != table.name)
        .map_or(String::new(), |r| format!(" through `{}`", r.name));
    out.push(
        Diagnostic::new(
            &RULE,
            step.span,
            format!(
                "a trigger on `{t}` writes the `{t}` rows related to the row that fired it{via}, while the firing write holds that row: two writes of two rows related both ways each hold their own row and wait for the other's (deadlock)",
                t = table.name
            ),
        )
        .label(firing.span, "fires the trigger, holding this row")
        .note("rows related both ways locked from either end")
        .in_step(step)
        .help("lock the firing row and its related rows together in key order before writing either (`SELECT .. WHERE id IN (..) ORDER BY id FOR UPDATE`), or update the related rows later, outside the transaction that writes the row"),
    );
}

/// The statement picks its rows of `table` by another table's columns (`FROM` another table,
/// its column the written rows' key: `work.id = rel.relator`) and that table's rows by the
/// firing row (`rel.related = NEW.id`, which the copy reads as the firing write's own value),
/// and never names the firing row itself (`WHERE id = NEW.id`).
fn through_another_table(step: &Step, firing: &Step, table: &str) -> bool {
    let f = &step.facts;
    let fired = &firing.facts.filters;
    let of_firing_row = |p: &Pred| {
        fired.iter().any(|q| q.value.text == p.value.text)
            || p.value.idents.iter().any(|i| row_column(i).is_some())
    };
    let names_itself = f.filters.iter().any(|p| {
        fired
            .iter()
            .any(|q| q.column == p.column && q.value.text == p.value.text)
            || p.value
                .idents
                .iter()
                .any(|i| row_column(i).is_some_and(|c| c.eq_ignore_ascii_case(&p.column)))
    });
    let other = f.reads.iter().any(|r| r.name != table && !is_hole(&r.name));
    let joined = f.filters.iter().any(|p| {
        !of_firing_row(p)
            && p.value.idents.iter().any(|i| {
                i.split_once('.')
                    .is_some_and(|(t, _)| !t.eq_ignore_ascii_case(table))
            })
    });
    other && joined && !names_itself && f.filters.iter().any(of_firing_row)
}

/// The column of the trigger's row a name reads (`NEW.id`, `old.parent_id`).
fn row_column(ident: &str) -> Option<&str> {
    let (row, column) = ident.split_once('.')?;
    (row.eq_ignore_ascii_case("new") || row.eq_ignore_ascii_case("old")).then_some(column)
}
