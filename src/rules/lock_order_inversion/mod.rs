//! `lock-order-inversion`: transactions that take the same locks in opposite orders, a
//! transaction that locks two rows of one table in argument order, row sets locked in no
//! particular order, and code that waits on another connection for a row its own open
//! transaction holds.

mod advisory_set;
mod cascade;
mod keys;
mod own_session;
mod swapped;
mod unordered_loop;
mod upsert;

use super::Context;
use super::analysis_limit::analysis_limit_diagnostic;
use crate::diagnostic::{Diagnostic, Race};
use crate::model::flow::{self, from_held_rows, value_key};
use crate::model::lockgraph::{self, LockGraph, Resource};
use crate::model::*;
use crate::source::Span;
use swapped::self_inversion;
use unordered_loop::unordered_loop;

pub use crate::registry::LOCK_ORDER_INVERSION as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let g = lockgraph::build(cx.program);
    for cycle in g
        .cycles
        .iter()
        .filter(|c| !one_guard(&g, c) && !one_job(&g, c))
    {
        out.push(cycle_diagnostic(cx, &g, cycle));
    }
    for &span in &g.limited {
        out.push(analysis_limit_diagnostic(
            span,
            RULE.name,
            "the order of every lock in this transaction",
            &format!(
                "a transaction holds more than {} distinct resources (or the run's lock graph reached {} edges); later locks add no edges",
                lockgraph::HELD,
                lockgraph::EDGES
            ),
        ));
    }
    // The checks below pair a transaction with another run of itself, which a background job
    // does not have (see `Unit::job`).
    for t in g
        .txs
        .iter()
        .filter(|t| t.tx.guard().is_none() && t.unit.job.is_none())
    {
        self_inversion(cx, &g, t, out);
    }
    // One run is enough to wait for itself.
    for unit in &cx.program.units {
        own_session::waits_for_itself(unit, out);
    }
    let units = cx.program.units.iter();
    for unit in units.filter(|u| !u.runs_once() && u.job.is_none()) {
        for tx in unit.transactions.iter().filter(|t| t.guard().is_none()) {
            for (i, step) in tx.steps.iter().enumerate() {
                upsert::unordered(cx, tx, &tx.steps[..i], step, out);
                advisory_set::per_row(cx, &tx.steps[..i], step, out);
                cascade::related_rows(&tx.steps[..i], step, out);
            }
        }
        unordered_loop(cx, unit, out);
    }
}

/// A lock taken earlier in the transaction, on every path to `step`, that every run of this
/// code which could conflict with another at `step` takes first on the same key: a
/// transaction-scoped advisory lock, `LOCK TABLE`, or an exclusive row lock (`FOR UPDATE`, an
/// `UPDATE`, an upsert by its conflict key) of a row named by constants or by values `step` uses
/// too (the parent of the rows it locks; by a unique key of its table, whatever else its `WHERE`
/// tests), a row of the table
/// `step`'s table refers to by a foreign key, or the rows themselves locked first in key order.
/// Whatever the statements after it lock, two such runs cannot interleave there. A `DELETE` is
/// no guard: with no row to delete it locks nothing.
fn guarded(schema: &schema::Schema, before: &[Step], step: &Step) -> bool {
    let used: Vec<String> = step
        .host()
        .inputs
        .iter()
        .map(|i| format!("host:{}", i.text))
        .chain(step.facts.filters.iter().map(|p| value_key(&p.value, step)))
        .chain(
            step.facts
                .extra()
                .uses
                .iter()
                .map(|u| u.to_ascii_lowercase().to_string()),
        )
        .collect();
    // The tables whose rows `step` writes or locks.
    let touched: Vec<&TableRef> = step.facts.writes.iter().chain(&step.facts.reads).collect();
    before.iter().any(|g| {
        let f = &g.facts;
        if !step.branch.starts_with(&g.branch) {
            return false;
        }
        let exclusive =
            f.row_locks.iter().any(RowLock::waits_exclusive) || f.kind == StmtKind::Update;
        let keyed = !f.filters.is_empty()
            && f.filters
                .iter()
                .all(|p| p.value.is_literal() || used.contains(&value_key(&p.value, g)));
        // The table of the one row it locks: an `UPDATE`'s, or a locking read's only table.
        let t = match (&f.reads[..], f.kind) {
            (_, StmtKind::Update) => f.writes.first(),
            ([t], _) => Some(t),
            _ => None,
        };
        // The row is named by a unique key whose values `step` uses (`WHERE id = $1 AND
        // deleted_at IS NULL`): other conditions only decide whether it is locked at all.
        let pinned = || {
            t.is_some_and(|t| {
                let named: Vec<&str> = f
                    .filters
                    .iter()
                    .filter(|p| used.contains(&value_key(&p.value, g)))
                    .map(|p| p.column.as_str())
                    .collect();
                schema.unique_within(&t.name, &named).is_some()
            })
        };
        // One parent row written by its key, and `step`'s rows are of a table that refers to
        // the parent's (assumed: the rows are that parent's children). Two runs with a common
        // child have the same parent and wait at its row first.
        let parent_of_rows = || {
            f.kind == StmtKind::Update
                && t.is_some_and(|t| {
                    let columns: Vec<&str> = f.filters.iter().map(|p| p.column.as_str()).collect();
                    schema.unique_within(&t.name, &columns).is_some()
                        && touched.iter().any(|c| {
                            c.name != t.name && schema.foreign_key(&c.name, &t.name).is_some()
                        })
                })
        };
        // An upsert takes its row by the conflict target's values whether it inserts or
        // updates, also when its `DO UPDATE .. WHERE` fails (the row is locked before the
        // condition is tested): the parent row written first by a key `step` uses.
        let upserted = || {
            let on = &f.extra().conflict_on;
            f.kind == StmtKind::Insert
                && f.upsert
                && !on.is_empty()
                && on.iter().all(|c| {
                    f.inserts
                        .iter()
                        .any(|(n, o)| n == c && !o.is_literal() && used.contains(&value_key(o, g)))
                })
        };
        // The rows themselves locked up front in key order (`.. ORDER BY id FOR UPDATE`).
        let up_front = f.row_locks.iter().any(|l| l.ordered)
            && touched
                .iter()
                .any(|t| f.reads.iter().any(|r| r.name == t.name));
        f.extra().advisory.iter().any(AdvisoryCall::takes_xact_lock)
            || f.extra().table_lock.is_some()
            || (exclusive && (keyed || pinned() || parent_of_rows()))
            || upserted()
            || up_front
    })
}

/// Every transaction of the cycle is opened under one exclusive in-process lock (see
/// [`Transaction::guard`]): they run one at a time, and no two can hold and wait for each other.
fn one_guard(g: &LockGraph, cycle: &[usize]) -> bool {
    let guard = |e: &usize| g.txs[g.edges[*e].tx].tx.guard();
    let first = cycle.first().and_then(guard);
    first.is_some() && cycle.iter().all(|e| guard(e) == first)
}

/// Every transaction of the cycle is one background job's (see [`Unit::job`]; the units its
/// timer loop runs): the cycle needs two runs of the job at once.
fn one_job(g: &LockGraph, cycle: &[usize]) -> bool {
    let unit = |e: &usize| g.txs[g.edges[*e].tx].unit;
    cycle
        .first()
        .map(unit)
        .is_some_and(|first| cycle.iter().all(|e| first.same_job(unit(e))))
}

fn unit_name(g: &LockGraph, tx: usize) -> String {
    match &g.txs[tx].unit.name {
        Some(n) => format!("`{n}`"),
        None => "another transaction".to_string(),
    }
}

fn cycle_diagnostic(cx: &Context, g: &LockGraph, cycle: &[usize]) -> Diagnostic {
    // Report on the earliest requesting site, so the finding does not move between runs.
    let first = cycle
        .iter()
        .copied()
        .min_by_key(|&e| g.requested(&g.edges[e]))
        .unwrap_or(cycle[0]);
    let e = &g.edges[first];
    let name = |r: usize| g.resources[r].label();
    let others: Vec<String> = cycle
        .iter()
        .filter(|&&o| o != first)
        .map(|&o| {
            let x = &g.edges[o];
            format!(
                "{} then {} in {} at {}",
                name(x.from),
                name(x.to),
                unit_name(g, x.tx),
                cx.at(g.requested(x))
            )
        })
        .collect();
    let mut d = Diagnostic::new(
        &RULE,
        g.requested(e),
        format!(
            "{} then {} here, {}: run concurrently, each can hold one lock and wait for the other (deadlock)",
            name(e.from),
            name(e.to),
            others.join(", ")
        ),
    )
    .note(format!("{} requested while {} is held", name(e.to), name(e.from)))
    .label(g.held(e), format!("{} taken here", name(e.from)));
    for &o in cycle.iter().filter(|&&o| o != first) {
        let x = &g.edges[o];
        d = d
            .label(
                g.held(x),
                format!("{} taken here in {}", name(x.from), unit_name(g, x.tx)),
            )
            .label(
                g.requested(x),
                format!("then {} requested here", name(x.to)),
            );
    }
    // Two transactions, two statements each: what a witness replays.
    if let [a, b] = cycle {
        let (a, b) = match *a == first {
            true => (*a, *b),
            false => (*b, *a),
        };
        let [a1, a2] = g.steps(&g.edges[a]);
        let [b1, b2] = g.steps(&g.edges[b]);
        d = d.about(Race::Deadlock, &[a1, a2, b1, b2]);
    }
    let mut order: Vec<&Resource> = cycle
        .iter()
        .map(|&o| &g.resources[g.edges[o].from])
        .collect();
    order.sort();
    let order: Vec<String> = order.iter().map(|r| r.label()).collect();
    d.help(format!(
        "take the locks in one global order everywhere (for example {}), or lock them all up front in one statement",
        order.join(" before ")
    ))
}
