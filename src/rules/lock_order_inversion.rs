//! `lock-order-inversion`: transactions that take the same locks in opposite orders, a
//! transaction that locks two rows of one table in argument order, and row sets locked in no
//! particular order.

use super::{Context, Rule};
use crate::diagnostic::{Diagnostic, Severity};
use crate::model::lockgraph::{self, LockGraph, Resource};
use crate::model::*;

pub const RULE: Rule = Rule {
    name: "lock-order-inversion",
    severity: Severity::Error,
    doc: include_str!("../../rules/lock-order-inversion.md"),
    check: Some(check),
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let g = lockgraph::build(cx.program);
    for cycle in &g.cycles {
        out.push(cycle_diagnostic(cx, &g, cycle));
    }
    for t in &g.txs {
        self_inversion(cx, &g, t, out);
    }
    for step in cx
        .program
        .units
        .iter()
        .flat_map(|u| &u.transactions)
        .flat_map(|t| &t.steps)
    {
        unordered_set(step, out);
    }
    for unit in &cx.program.units {
        unordered_loop(unit, out);
    }
}

/// `for id in ids { UPDATE ... WHERE id = $1 }` inside a transaction, `ids` not sorted: each
/// transaction locks the rows in its own order.
fn unordered_loop(unit: &Unit, out: &mut Vec<Diagnostic>) {
    let held = unit
        .transactions
        .iter()
        .filter(|t| matches!(t.scope, Scope::Explicit | Scope::File | Scope::Caller));
    for step in held.flat_map(|t| &t.steps) {
        let Some(lp) = unit
            .loops
            .iter()
            .find(|l| !l.sorted && step.branch.contains(&l.branch))
        else {
            continue;
        };
        let keyed = step.inputs.iter().any(|i| {
            let t = i.text.trim_start_matches(['&', '*']);
            lp.vars
                .iter()
                .any(|v| t == v || t.starts_with(&format!("{v}.")))
        });
        let acquired = lockgraph::acquisitions(step)
            .into_iter()
            .find(|(r, _)| matches!(r, Resource::Table(_)));
        let (Some((resource, span)), true) = (acquired, keyed) else {
            continue;
        };
        out.push(
            Diagnostic::new(
                &RULE,
                span,
                format!(
                    "rows of {} are locked one at a time in the order of a collection that is not sorted: two transactions with overlapping keys can each hold some rows and wait for the others (deadlock)",
                    resource.label()
                ),
            )
            .note("locked once per key, in collection order")
            .in_statement(step.span)
            .label(lp.span, "iterated in no particular order")
            .help("sort the keys before the loop (`ids.sort()`, or a `BTreeSet`), or lock them all first in one statement (`SELECT ... WHERE id = ANY($1) ORDER BY id FOR UPDATE`)"),
        );
    }
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
        .min_by_key(|&e| g.edges[e].requested)
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
                cx.at(x.requested)
            )
        })
        .collect();
    let mut d = Diagnostic::new(
        &RULE,
        e.requested,
        format!(
            "{} then {} here, {}: run concurrently, each can hold one lock and wait for the other (deadlock)",
            name(e.from),
            name(e.to),
            others.join(", ")
        ),
    )
    .note(format!("{} requested while {} is held", name(e.to), name(e.from)))
    .label(e.held, format!("{} taken here", name(e.from)));
    for &o in cycle.iter().filter(|&&o| o != first) {
        let x = &g.edges[o];
        d = d
            .label(
                x.held,
                format!("{} taken here in {}", name(x.from), unit_name(g, x.tx)),
            )
            .label(x.requested, format!("then {} requested here", name(x.to)));
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

/// Two rows of one table locked by keys that are inputs, in input order: the same code called
/// with the inputs swapped locks them in the other order (`transfer(from, to)`).
fn self_inversion(cx: &Context, g: &LockGraph, t: &lockgraph::TxLocks, out: &mut Vec<Diagnostic>) {
    let acqs = &t.acquisitions;
    for (j, b) in acqs.iter().enumerate() {
        let Some((col, b_key)) = input_key(b.step) else {
            continue;
        };
        for a in &acqs[..j] {
            if a.resource != b.resource || std::ptr::eq(a.step, b.step) {
                continue;
            }
            // Locked up front as one ordered set: later statements touch rows already held.
            if a.step.facts.ordered && a.step.facts.key_set {
                break;
            }
            let Some((a_col, a_key)) = input_key(a.step) else {
                continue;
            };
            if a_col != col || a_key == b_key {
                continue;
            }
            let line = cx.line(a.span);
            let table = g.resources[b.resource].label();
            out.push(
                Diagnostic::new(
                    &RULE,
                    b.span,
                    format!(
                        "{table} row `{col} = {b_key}` is locked after row `{col} = {a_key}` (line {line}): the same code run with the two swapped locks them in the other order (deadlock)"
                    ),
                )
                .note("second row locked here")
                .in_statement(b.step.span)
                .label(a.span, "first row locked here")
                .help(format!(
                    "lock both rows in key order first (`SELECT ... WHERE {col} IN (..) ORDER BY {col} FOR UPDATE`), or order the keys (`LEAST`/`GREATEST`, or sort them) before locking"
                )),
            );
            return;
        }
    }
}

/// The key column and the input (parameter or variable) a statement locks its row by.
fn input_key(step: &Step) -> Option<(String, String)> {
    step.facts.filters.iter().find_map(|p| {
        let text = p.value.text.to_ascii_lowercase();
        if text.contains("least(") || text.contains("greatest(") {
            return None;
        }
        let key = if let Some(&n) = p.value.params.first() {
            step.inputs
                .iter()
                .find(|i| i.param == n)
                .map_or_else(|| format!("${n}"), |i| i.text.clone())
        } else if p.value.idents.len() == 1
            && step.facts.uses.iter().any(|u| *u == p.value.idents[0])
        {
            p.value.idents[0].clone()
        } else {
            return None;
        };
        Some((p.column.clone(), key))
    })
}

/// `SELECT ... WHERE id = ANY($1) FOR UPDATE` without `ORDER BY`, and upserts of a key set: rows
/// locked in whatever order the plan visits them.
fn unordered_set(step: &Step, out: &mut Vec<Diagnostic>) {
    let f = &step.facts;
    if !f.key_set || f.ordered {
        return;
    }
    let waiting = f.row_locks.iter().find(|l| l.wait == LockWait::Block);
    let (span, what) = match (waiting, f.upsert) {
        (Some(l), _) => (l.span, format!("`{}`", l.clause)),
        (None, true) => match f.writes.first() {
            Some(t) => (t.span, "this upsert".to_string()),
            None => return,
        },
        _ => return,
    };
    out.push(
        Diagnostic::new(
            &RULE,
            span,
            format!("{what} locks a set of rows in no particular order: two transactions with overlapping sets can each hold some rows and wait for the others (deadlock)"),
        )
        .note("rows locked in plan order")
        .in_statement(step.span)
        .help("add `ORDER BY` on the key so every transaction locks the rows in the same order (for an upsert, insert from a sorted `SELECT ... ORDER BY key`)"),
    );
}
