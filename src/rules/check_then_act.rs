//! `check-then-act`: a decision read (existence, count, max, sum) and a write that depends on
//! it, with nothing protecting the predicate in between.

use super::{Context, Rule};
use crate::diagnostic::{Diagnostic, Severity};
use crate::model::flow::{At, advisory_before, flows_from, is_var, tainted_vars, value_key};
use crate::model::*;

pub const RULE: Rule = Rule {
    name: "check-then-act",
    severity: Severity::Error,
    doc: include_str!("../../rules/check-then-act.md"),
    check: Some(check),
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for unit in &cx.program.units {
        let steps = unit.ordered();
        for (j, w) in steps.iter().enumerate() {
            if !matches!(
                w.step.facts.kind,
                StmtKind::Insert | StmtKind::Update | StmtKind::Delete
            ) || w.txn.scope == Scope::Unknown
            {
                continue;
            }
            let found = steps[..j]
                .iter()
                .rev()
                .find_map(|r| finding(cx, unit, &steps, r, w));
            out.extend(found);
        }
    }
}

/// What the read decides with, for messages.
fn what(r: &Step) -> String {
    let agg = &r.facts.aggregates;
    if agg.iter().any(|a| a == "exists") {
        "existence check".to_string()
    } else {
        format!("`{}`", agg.join("`, `"))
    }
}

fn finding(cx: &Context, unit: &Unit, steps: &[At], r: &At, w: &At) -> Option<Diagnostic> {
    let rf = &r.step.facts;
    if rf.kind != StmtKind::Select
        || rf.aggregates.is_empty()
        || rf.modifies
        || r.txn.scope == Scope::Unknown
    {
        return None;
    }
    let wf = &w.step.facts;
    let table = &wf.writes.first()?.name;
    let how = depends(unit, steps, r.step, w.step, table)?;
    let same_tx = r.tx == w.tx;
    // Protections: a lock on the guard rows, an advisory lock first (READ COMMITTED),
    // SERIALIZABLE, a statement that handles the duplicate, a unique key that refuses it.
    // The rows the read decides on were locked earlier in the transaction.
    let guarded = w.txn.steps.iter().any(|s| {
        s.seq < r.step.seq
            && !s.facts.row_locks.is_empty()
            && s.facts
                .reads
                .iter()
                .any(|t| rf.reads.iter().any(|x| x.name == t.name))
    });
    if same_tx
        && (guarded
            || !rf.row_locks.is_empty()
            || w.txn.isolation == Isolation::Serializable
            || (w.txn.isolation == Isolation::ReadCommitted
                && advisory_before(w.txn, r.step.seq).is_some()))
    {
        return None;
    }
    if wf.on_conflict {
        return None;
    }
    let inserted: Vec<String> = wf.inserts.iter().map(|(c, _)| c.clone()).collect();
    if wf.kind == StmtKind::Insert && cx.program.schema.unique_within(table, &inserted).is_some() {
        return None;
    }
    let line = cx.line(r.step.span);
    let mut message = format!(
        "this write depends on the {} at line {line} ({how}), but nothing stops another transaction from changing its answer in between",
        what(r.step)
    );
    if !same_tx {
        message = format!(
            "this write depends on the {} at line {line} ({how}), which runs in another transaction, so its answer can be stale by the time this runs",
            what(r.step)
        );
    }
    if wf.kind == StmtKind::Insert && !cx.program.schema.tables.contains_key(table) {
        message += &format!(
            " (no schema for `{table}` was found: a unique constraint on the inserted key would settle it)"
        );
    }
    Some(
        Diagnostic::new(&RULE, wf.writes[0].span, message)
            .note("acts on the decision")
            .in_statement(w.step.span)
            .label(r.step.span, "decided here")
            .help("do check and write in one statement (`INSERT ... ON CONFLICT`, or `INSERT ... WHERE NOT EXISTS` under `pg_advisory_xact_lock` at READ COMMITTED), add a unique constraint on the key, lock the guard rows with `SELECT ... FOR SHARE`/`FOR UPDATE` in the same transaction, or run at SERIALIZABLE and retry"),
    )
}

/// How the write depends on the read, if it does.
fn depends(unit: &Unit, steps: &[At], r: &Step, w: &Step, table: &str) -> Option<&'static str> {
    let tainted = tainted_vars(steps, r, w);
    let f = &w.facts;
    let operands = f
        .sets
        .iter()
        .map(|s| &s.value)
        .chain(f.inserts.iter().map(|(_, o)| o))
        .chain(f.filters.iter().map(|p| &p.value));
    if operands.clone().any(|o| flows_from(o, r, w, &tainted)) {
        return Some("it writes a value computed from it");
    }
    // Duplicate registration: insert the very key that was checked.
    if f.kind == StmtKind::Insert && r.facts.reads.iter().any(|t| t.name == table) {
        let same_key = r.facts.filters.iter().any(|p| {
            f.inserts.iter().any(|(c, o)| {
                *c == p.column
                    && value_key(o, w) == value_key(&p.value, r)
                    && (is_var(&o.text, w) || !o.params.is_empty())
            })
        });
        if same_key {
            return Some("it inserts the key it checked");
        }
    }
    // Host code: the write is in a branch taken on the read's result, or comes after an early
    // exit taken on it (`if taken { return ... }`).
    let on_read = |branch: &[usize]| {
        unit.conditions
            .iter()
            .any(|c| branch.contains(&c.branch) && c.from.contains(&r.seq))
    };
    if on_read(&w.branch) {
        return Some("it runs under a condition on it");
    }
    if unit
        .exits
        .iter()
        .any(|e| e.seq > r.seq && e.seq < w.seq && on_read(&e.branch))
    {
        return Some("it runs only when an early return on it was not taken");
    }
    // PL/pgSQL: a condition on the read's result between the read and the write.
    let decided = steps.iter().any(|a| {
        a.step.seq > r.seq
            && a.step.seq < w.seq
            && a.step.facts.reads.is_empty()
            && a.step.facts.writes.is_empty()
            && a.step.facts.uses.iter().any(|u| tainted.contains(u))
    });
    if decided
        && r.facts
            .reads
            .iter()
            .any(|t| t.name == table || !r.facts.filters.is_empty())
    {
        return Some("it runs under a condition on it");
    }
    None
}
