//! `check-then-act`: a decision read (existence, count, max, sum) and a write that depends on
//! it, with nothing protecting the predicate in between.

use std::collections::HashMap;

use super::analysis_limit::{CANDIDATES, analysis_limit_diagnostic};
use super::unique_violation_unhandled as refused;

mod picked;
mod replace;
use super::{Context, at_the_call};
use crate::diagnostic::Diagnostic;
use crate::model::flow::{
    At, Flow, advisory_locks_before, from_held_rows, is_var, one_row_lock_before, param_key,
    value_key,
};
use crate::model::*;

pub use crate::registry::CHECK_THEN_ACT as RULE;

/// What a [`search`] reports: this rule's races, or the races a unique key settles by failing
/// the second insert, where the code lets that error through ([`refused`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Report {
    Races,
    Refusals,
}

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    search(cx, Report::Races, out);
}

/// Pair every decision read with the writes that depend on it.
pub(super) fn search(cx: &Context, report: Report, out: &mut Vec<Diagnostic>) {
    for unit in cx.program.units.iter().filter(|u| !u.runs_once()) {
        // Where advisory transaction locks are first taken (see `locked_before`), found once.
        let in_autocommit = unit
            .transactions
            .iter()
            .filter(|t| t.scope.is_autocommit())
            .filter_map(first_advisory)
            .min();
        for tx in &unit.transactions {
            let in_tx = first_advisory(tx).filter(|_| tx.isolation == Isolation::ReadCommitted);
            let locked_before =
                |seq: usize| [in_tx, in_autocommit].iter().flatten().any(|&l| l < seq);
            out.extend(
                tx.steps
                    .iter()
                    .filter(|s| !locked_before(s.seq))
                    .filter(|s| !cx.program.job_alone(unit, [*s]))
                    .filter_map(|s| match report {
                        Report::Races => one_statement_claim(tx, s)
                            .or_else(|| insert_unless_exists(cx, unit, tx, s, report)),
                        Report::Refusals => insert_unless_exists(cx, unit, tx, s, report),
                    }),
            );
            if report == Report::Races && !cx.program.job_alone(unit, &tx.steps) {
                out.extend(replace::replace_under_partial_lock(cx, tx));
                out.extend(replace::replace_unlocked(cx, tx));
            }
        }
        let flow = Flow::new(unit);
        if !flow.steps.iter().any(|r| is_decision(r) || is_presence(r)) {
            continue;
        }
        // The reads each branch arm is taken on.
        let mut arms: HashMap<usize, Vec<usize>> = HashMap::new();
        // And the other way: the arms taken on each read, and those taken on what it read
        // (not only on whether it found a row).
        let mut taken = Decided::default();
        for c in unit.conditions.iter().filter(|c| !c.failed) {
            arms.entry(c.branch).or_default().extend(&c.from);
            for &seq in &c.from {
                taken.any.entry(seq).or_default().push(c.branch);
                if !c.presence {
                    taken.on_value.entry(seq).or_default().push(c.branch);
                }
            }
        }
        let mut limited = false;
        // One decision is one race: its first write is the finding, the others are labels. A
        // decision is its place in the source: the copies of one trigger's read before each
        // statement that fires it are one decision.
        let mut found: Vec<(usize, Diagnostic)> = Vec::new();
        for j in 0..flow.steps.len() {
            let w = &flow.steps[j];
            let f = &w.step.facts;
            if !matches!(
                f.kind,
                StmtKind::Insert | StmtKind::Update | StmtKind::Delete
            ) {
                continue;
            }
            // In a transaction txlint does not know (a query file's statement, sent by code it
            // does not read), only a decision the statement makes itself is judged: a read of
            // its own `BEFORE` trigger runs in the statement, whatever transaction that is.
            let unknown = w.txn.scope == Scope::Unknown;
            // The decisions this write can depend on: reads of its table, reads whose results
            // flow into it, reads the branches around it are taken on; nearest first.
            let by_seq = w
                .step
                .host()
                .inputs
                .iter()
                .flat_map(|i| i.from.iter().copied())
                .chain(flow.var_origins(j))
                .chain(
                    w.step
                        .branch
                        .iter()
                        .flat_map(|b| arms.get(b))
                        .flatten()
                        .copied(),
                )
                .filter_map(|seq| flow.position(seq));
            let of_table = f
                .writes
                .first()
                .into_iter()
                .flat_map(|t| flow.reads_of(&t.name, j));
            let mut candidates: Vec<usize> = of_table
                .chain(by_seq)
                .filter(|&i| i < j && (is_decision(&flow.steps[i]) || is_presence(&flow.steps[i])))
                .filter(|&i| {
                    let r = &flow.steps[i];
                    (!unknown && r.txn.scope != Scope::Unknown) || r.step.run_by(w.step)
                })
                .collect();
            candidates.sort_unstable_by(|a, b| b.cmp(a));
            candidates.dedup();
            if candidates.len() > CANDIDATES {
                candidates.truncate(CANDIDATES);
                limited = true;
            }
            let Some((i, d)) = candidates
                .iter()
                .find_map(|&i| finding(cx, unit, &flow, &taken, i, j, report).map(|d| (i, d)))
            else {
                continue;
            };
            let decision = flow.steps[i].step.span;
            match found
                .iter_mut()
                .find(|(r, _)| flow.steps[*r].step.span == decision)
            {
                Some((_, first)) if report == Report::Races => {
                    first.labels.push(crate::diagnostic::Label {
                        span: f.writes.first().map_or(d.span, |t| t.span),
                        message: "also acts on this decision".into(),
                    })
                }
                _ => found.push((i, d)),
            }
        }
        out.extend(found.into_iter().map(|(_, d)| d));
        if limited && report == Report::Races {
            out.push(analysis_limit_diagnostic(
                unit.span,
                RULE.name,
                "every decision read before some of this unit's writes",
                &format!("a write has more than {CANDIDATES} candidate reads; the nearest were paired with it"),
            ));
        }
    }
}

/// Where `tx` first takes an advisory transaction lock. A one-statement shape after it is
/// serialised by it: in its own transaction at READ COMMITTED (the statement's snapshot starts
/// after the wait), or, taken in autocommit, it was meant to (`xact-lock-outside-transaction`
/// reports that, and its fix settles the statement too: one race, one finding).
fn first_advisory(tx: &Transaction) -> Option<usize> {
    tx.steps
        .iter()
        .find(|s| {
            s.facts
                .extra()
                .advisory
                .iter()
                .any(AdvisoryCall::takes_xact_lock)
        })
        .map(|s| s.seq)
}

/// `UPDATE jobs SET state = 'running' WHERE id = (SELECT id FROM jobs WHERE state = 'queued'
/// LIMIT 1)`: two sessions' subqueries pick the same row; the second `UPDATE` waits for the
/// first and then re-checks only its own `WHERE` (`id = ..`) against the new row, so it claims
/// the row too. A lock in the subquery (`FOR UPDATE SKIP LOCKED`) or the test repeated outside
/// it settles it; at REPEATABLE READ or SERIALIZABLE the second fails with 40001 instead.
fn one_statement_claim(tx: &Transaction, step: &Step) -> Option<Diagnostic> {
    let f = &step.facts;
    if f.kind != StmtKind::Update
        || f.extra().claim.is_empty()
        || !f.row_locks.is_empty()
        || f.dialect != crate::source::Dialect::Postgres
        || tx.isolation >= Isolation::RepeatableRead
    {
        return None;
    }
    let set = f
        .sets
        .iter()
        .find(|s| f.extra().claim.contains(&s.column))?;
    let col = &set.column;
    let message = format!(
        "the subquery picks a row by `{col}` and the `UPDATE` changes `{col}` without testing it again: two sessions pick the same row, and the one that waited claims it after the other"
    );
    let mut d = Diagnostic::new(&RULE, step.span, message)
        .note("claims the row")
        .in_step(step)
        .help(format!(
            "lock the subquery's row (`SELECT .. FOR UPDATE SKIP LOCKED`), or test `{col}` again outside the subquery (`WHERE id = (SELECT ..) AND {col} = ..`) and check the affected row count"
        ));
    if let Some(at) = set.span {
        d = d.label(at, "changed here");
    }
    Some(d)
}

/// `INSERT INTO members (email) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM members WHERE email =
/// $1)` on a table the run declares with no unique key on those columns: two sessions both see
/// no row (neither sees the other's uncommitted insert) and both insert. Settled by a unique
/// key, `ON CONFLICT`, an advisory transaction lock taken first at READ COMMITTED (the waiting
/// statement then sees the committed row), or SERIALIZABLE.
fn insert_unless_exists(
    cx: &Context,
    unit: &Unit,
    tx: &Transaction,
    step: &Step,
    report: Report,
) -> Option<Diagnostic> {
    let f = &step.facts;
    let e = f.extra();
    if f.on_conflict && report == Report::Races {
        return conflict_key_misses_check(cx, step);
    }
    if f.kind != StmtKind::Insert
        || e.absent.is_empty()
        || !checks_one_key_per_run(e)
        || f.on_conflict
        || f.dialect != crate::source::Dialect::Postgres
        || tx.isolation == Isolation::Serializable
    {
        return None;
    }
    let table = f.writes.first()?;
    let schema = cx.program.schema(step.span.file);
    // Only where the run declares the table: a key declared elsewhere would settle it.
    if is_hole(&table.name) || !schema.declares(&table.name) {
        return None;
    }
    let absent: Vec<&str> = e.absent.iter().map(|(c, _)| c.as_str()).collect();
    let key = schema.unique_within_row(&table.name, &absent, &given(step), &[] as &[&str]);
    match (report, key) {
        (Report::Refusals, Some(key)) => return refused::one_statement(unit, step, &key),
        (Report::Refusals, None) | (Report::Races, Some(_)) => return None,
        (Report::Races, None) => {}
    }
    let cols = absent.join("`, `");
    Some(
        Diagnostic::new(
            &RULE,
            table.span,
            format!(
                "`WHERE NOT EXISTS` checks `{cols}` in the statement's snapshot, and `{}` has no unique key on it: two sessions both see no row and both insert",
                table.name
            ),
        )
        .note("inserts unless it exists")
        .in_step(step)
        .help(format!(
            "add a unique constraint on (`{cols}`) and insert with `ON CONFLICT DO NOTHING`, or take `pg_advisory_xact_lock` on the key first in the same transaction (READ COMMITTED)"
        )),
    )
}

/// A read whose answer code decides on: an existence check, `count`, `max`, ....
/// A read of no table (`FROM unnest($1)`, a trigger's transition table, which holds the firing
/// statement's own rows) decides nothing another transaction can change.
fn reads_shared(rf: &Facts) -> bool {
    !(rf.parsed && rf.reads.is_empty())
}

fn is_decision(r: &At) -> bool {
    let rf = &r.step.facts;
    rf.kind == StmtKind::Select
        && reads_shared(rf)
        && !rf.extra().aggregates.is_empty()
        && !rf.modifies
}

/// A read of rows by key whose presence code may decide on (`fetch_optional` then `None =>`,
/// PL/pgSQL `IF NOT FOUND`). Only get-or-create counts (see [`finding`]).
fn is_presence(r: &At) -> bool {
    let rf = &r.step.facts;
    rf.kind == StmtKind::Select
        && reads_shared(rf)
        && rf.extra().aggregates.is_empty()
        && !rf.modifies
        && rf.row_locks.is_empty()
        && !rf.filters.is_empty()
}

/// What the read decides with, for messages.
fn what(r: &Step) -> String {
    let agg = &r.facts.extra().aggregates;
    if agg.is_empty() {
        "lookup (whether a row exists)".to_string()
    } else if agg.iter().any(|a| a == "exists") {
        "existence check".to_string()
    } else {
        format!("`{}`", agg.join("`, `"))
    }
}

fn finding(
    cx: &Context,
    unit: &Unit,
    flow: &Flow,
    decided: &Decided,
    ri: usize,
    wi: usize,
    report: Report,
) -> Option<Diagnostic> {
    let taken = &decided.any;
    let (r, w) = (&flow.steps[ri], &flow.steps[wi]);
    let rf = &r.step.facts;
    let wf = &w.step.facts;
    let table = &wf.writes.first()?.name;
    if is_hole(table)
        || unit.exclusive(&r.step.branch, &w.step.branch)
        || flow.created.private(r.tx, r.step.seq, table)
        || cx.program.job_alone(unit, [r.step, w.step])
    {
        return None;
    }
    let dependence = depends(unit, flow, taken, r.step, wi, table)?;
    // A decision that only gates the write (an authorization check, a parent's existence, a
    // state that never comes back) races with nothing the write does, unless the write changes
    // what was decided on or adds to a count: then two runs that both pass both act.
    if matches!(dependence, Dependence::Branch | Dependence::Return)
        && !changes_premise(r.step, w.step)
        && !accumulates(w.step)
    {
        return None;
    }
    let mut how = dependence.describe();
    let decided_on =
        taken_on(taken, r.step, &w.step.branch) || returned_on(unit, taken, r.step, w.step);
    // A status read decides a transition of that status (see [`transition`]), when the arm
    // is taken on what it read: one taken on whether it found a row (`IF FOUND THEN UPDATE
    // .. ELSE INSERT ..`) decides on the row's presence, not on its state.
    let on_value = taken_on(&decided.on_value, r.step, &w.step.branch)
        || returned_on(unit, &decided.on_value, r.step, w.step);
    let mut status = if decided_on && on_value {
        transition(flow, r.step, wi, table)
    } else {
        None
    };
    if status.is_none() {
        status = picked::picked_by_state(flow, r.step, wi, table);
        if status.is_some() {
            how = "it changes a row the read picked by that state";
        }
    }
    // A row's presence decides only get-or-create: an insert of the very key the read looked
    // up, in an arm taken on the read or after an early return taken on it (`if let Some(t)
    // = found { return .. }`), into a table the run declares (a unique key declared
    // elsewhere would settle it).
    if rf.extra().aggregates.is_empty()
        && status.is_none()
        && (wf.kind != StmtKind::Insert
            || !inserts_checked_key(r.step, w.step, table)
            || !decided_on
            || !cx.program.schema(w.step.span.file).declares(table))
    {
        return None;
    }
    if status.is_none() && rechecks(r.step, w.step) {
        return None;
    }
    let same_tx = r.tx == w.tx;
    // A session lock held from before the read until the write (a caller's `pg_try_advisory_lock`
    // on its own connection around helpers that use the pool) serialises them.
    if flow
        .session_locks_held(r.step.seq, w.step.seq)
        .any(|(l, s)| covers(l, s, r.step))
    {
        return None;
    }
    // An advisory lock taken first whose key does not pin what the read checks.
    let mut uncovered = None;
    if same_tx && w.txn.isolation == Isolation::ReadCommitted {
        let locks: Vec<_> = advisory_locks_before(w.txn, r.step.seq).collect();
        if locks.iter().any(|(l, s)| covers(l, s, r.step)) {
            return None;
        }
        uncovered = locks.first().copied();
    }
    // Protections: a lock on the guard rows, SERIALIZABLE, a statement that handles the
    // duplicate, a unique key that refuses it.
    if same_tx
        && (w
            .txn
            .steps
            .iter()
            .any(|g| g.seq < r.step.seq && guards(g, r.step))
            || keyed_by_held_row(w.txn, r.step)
            || keyed_by_held_var(flow, ri, w.txn)
            || !rf.row_locks.is_empty()
            || w.txn.isolation == Isolation::Serializable)
    {
        return None;
    }
    // A count over a set behind a lock on one row: row-lock-predicate-gap's finding.
    if wf.on_conflict || (same_tx && one_row_lock_before(w.txn, r.step).is_some()) {
        return None;
    }
    // A unique key refuses the second insert only if both inserts give it the same values:
    // columns that take the checked key, or a value computed from the read (`max + 1`). A
    // count that caps a set (`count(*) .. WHERE team_id = $1`, then insert `(team_id,
    // user_id)`) inserts another key each time, and the cap is exceeded.
    // An `UPDATE` that sets a unique column to the value checked (`SET namespace = $1` after
    // checking no row has namespace `$1`) is refused the same way.
    let sets = wf
        .sets
        .iter()
        .filter(|_| wf.kind == StmtKind::Update)
        .map(|s| (&s.column, &s.value));
    let decided: Vec<&str> = wf
        .inserts
        .iter()
        .map(|(c, o)| (c, o))
        .chain(sets)
        .filter(|(c, o)| {
            rf.filters
                .iter()
                .any(|p| p.column == **c && value_key(&p.value, r.step) == value_key(o, w.step))
                || flow.flows_from(o, r.step, wi)
        })
        .map(|(c, _)| c.as_str())
        .collect();
    if let Some(key) = cx.program.schema(w.step.span.file).unique_within_row(
        table,
        &decided,
        &given(w.step),
        &rf.extra().tests,
    ) {
        return match (report, wf.kind) {
            // The code answers "it exists" with an error already: the loser's unique
            // violation is the same answer.
            (Report::Refusals, StmtKind::Insert)
                if fails_when_found(unit, taken, r.step, w.step) =>
            {
                None
            }
            (Report::Refusals, StmtKind::Insert) => {
                refused::decided(cx, unit, r.step, w.step, &what(r.step), &key)
            }
            _ => None,
        };
    }
    if report == Report::Refusals || refused_before(cx, unit, r, w) {
        return None;
    }
    let place = cx.place(r.step.span, w.step.span);
    let decision = match status {
        Some(t) => format!("`{}` read", t.column),
        None => what(r.step),
    };
    // The decision is made by a trigger (or routine) the write runs: every statement that
    // fires it acts on it, and the fix goes where it is read. One finding there, each firing
    // statement a label.
    let fired = r.step.run_by(w.step);
    let mut message = format!(
        "this write depends on the {decision} at {place} ({how}), but nothing stops another transaction from changing its answer in between"
    );
    if fired {
        let place = cx.place(w.step.span, r.step.span);
        message = format!(
            "the write at {place} runs this {decision} and acts on it ({how}), but nothing stops another transaction from changing its answer in between"
        );
    } else if !same_tx {
        message = format!(
            "this write depends on the {decision} at {place} ({how}), which runs in another transaction, so its answer can be stale by the time this runs"
        );
    }
    match status {
        Some(Transition {
            column: c,
            weaker: false,
        }) => {
            message += &format!(
                " (two runs can both see the old `{c}` and both make this change, as its `WHERE` does not test `{c}`)"
            )
        }
        Some(Transition {
            column: c,
            weaker: true,
        }) => {
            message += &format!(
                " (its `WHERE` tests `{c}` only with a range that values other than the one read also pass, so a row whose `{c}` moved on in between is still overwritten)"
            )
        }
        None => {}
    }
    if wf.kind == StmtKind::Insert && !cx.program.schema(w.step.span.file).declares(table) {
        message += &format!(
            " (no schema for `{table}` was found: a unique constraint on the inserted key would settle it)"
        );
    }
    if let Some((lock, _)) = uncovered {
        message += &format!(
            " (the advisory lock on `{}` does not pin the rows it checks: two runs with different keys both pass)",
            lock.key
        );
    }
    let mut d = match fired {
        true => Diagnostic::new(&RULE, r.step.span, message)
            .note("decided here")
            .in_step(r.step)
            .label(
                wf.writes[0].span,
                "runs the check, and acts on the decision",
            ),
        false => {
            let d = Diagnostic::new(&RULE, wf.writes[0].span, message).note("acts on the decision");
            // A write a host helper sends after its caller's read: the caller composes the
            // race. (A routine or trigger a statement runs is no choice of the caller's: at
            // the write.)
            let d = match w.step.host().via {
                Some(_) => at_the_call(
                    d,
                    (w.step, r.step),
                    [
                        "acts on the decision through this call",
                        "the write it sends",
                        "decides through this call",
                    ],
                ),
                None => d.in_step(w.step),
            };
            d.label(r.step.span, "decided here")
        }
    };
    if let Some((lock, _)) = uncovered {
        d = d.label(lock.span, "locks a key the check is not confined to");
    }
    Some(match status {
        Some(Transition { column: c, .. }) => d.help(format!("test the state in the write itself (`UPDATE ... WHERE <key> AND {c} = <the value read>`, then check the rows it changed), or read the row with `SELECT ... FOR UPDATE` in the same transaction")),
        None => d.help("do check and write in one statement (`INSERT ... ON CONFLICT`, or `INSERT ... WHERE NOT EXISTS` under `pg_advisory_xact_lock` at READ COMMITTED), add a unique constraint on the key, lock the guard rows with `SELECT ... FOR SHARE`/`FOR UPDATE` in the same transaction, or run at SERIALIZABLE and retry"),
    })
}

/// Between the read and the write, on every path to the write, an insert of the checked key
/// that a unique key refuses and whose error leaves: the second run fails there (23505) and
/// never reaches the write (`INSERT INTO likes ..; UPDATE posts SET likes = likes + 1`).
/// `unique-violation-unhandled` says whether that failure is handled.
fn refused_before(cx: &Context, unit: &Unit, r: &At, w: &At) -> bool {
    w.txn.steps.iter().any(|i| {
        let f = &i.facts;
        let Some(table) = f.writes.first().map(|t| t.name.as_str()) else {
            return false;
        };
        let leaves = match i.host.as_deref() {
            Some(h) => h.propagated,
            None => !unit.handlers.iter().any(|h| h.covers(i.seq)),
        };
        let key: Vec<&str> = f
            .inserts
            .iter()
            .filter(|(c, o)| {
                r.step
                    .facts
                    .filters
                    .iter()
                    .any(|p| p.column == *c && value_key(&p.value, r.step) == value_key(o, i))
            })
            .map(|(c, _)| c.as_str())
            .collect();
        (r.step.seq + 1..w.step.seq).contains(&i.seq)
            && f.kind == StmtKind::Insert
            && !f.on_conflict
            && leaves
            && w.step.branch.starts_with(&i.branch)
            && cx
                .program
                .schema(w.step.span.file)
                .unique_within(table, &key)
                .is_some()
    })
}

/// A state transition decided on a read of the state: the read (no aggregate: those decide
/// as counts) names its columns and looks one row up by key (`SELECT status FROM orders WHERE
/// id = $1`), and the write, in an arm taken on what it read, sets one of those columns on the
/// same row without testing it (`UPDATE orders SET status = 'paid' WHERE id = $1`). Two runs
/// both see the old state and both act. The column; none when the write tests it
/// (optimistic), takes a value computed from the read (`lost-update`'s finding), the read
/// reads `*` (what was decided on is not known), or the row is locked again before the write
/// (`SELECT .. FOR UPDATE` of the same key in its transaction: the write acts on what that
/// read found).
fn transition<'s>(flow: &Flow, r: &'s Step, wi: usize, table: &str) -> Option<Transition<'s>> {
    let At { txn, step: w, .. } = flow.steps[wi];
    let (rf, wf) = (&r.facts, &w.facts);
    if wf.kind != StmtKind::Update
        || !rf.extra().aggregates.is_empty()
        || !rf.reads.iter().any(|t| t.name == table)
        || rf.columns.iter().any(|c| c.as_str() == "*")
        || !same_key(r, w)
    {
        return None;
    }
    let computed = wf
        .sets
        .iter()
        .map(|s| &s.value)
        .chain(wf.filters.iter().map(|p| &p.value))
        .any(|o| flow.flows_from(o, r, wi));
    let relocked = txn.steps.iter().any(|g| {
        (r.seq + 1..w.seq).contains(&g.seq)
            && g.facts.row_locks.iter().any(RowLock::exclusive)
            && g.facts.reads.iter().any(|t| t.name == table)
            && same_key(g, w)
    });
    if computed || relocked {
        return None;
    }
    let c = wf.sets.iter().find_map(|s| {
        rf.columns
            .iter()
            .find(|c| **c == s.column && !rf.filters.iter().any(|p| p.column == s.column))
    })?;
    if wf.filters.iter().any(|p| p.column == *c) {
        return None;
    }
    // Other conditions in the write: an ordering of the state itself (`state < 'succeeded'`)
    // lets more than the value read through, when the state is set to a value of its own (not
    // `available = available - $1 .. AND available >= $1`, whose test is the decision).
    // `state <> 'done'` is often the very test the decision made, and is left alone.
    let compared = &wf.extra().compared;
    let set_to_value = wf
        .sets
        .iter()
        .any(|s| s.column == *c && s.value.idents.iter().all(|i| is_var(i, w)));
    if wf.other_conditions
        && (compared.is_empty() || compared.iter().any(|o| o.as_ref() != Some(c)) || !set_to_value)
    {
        return None;
    }
    Some(Transition {
        column: c.as_str(),
        weaker: wf.other_conditions,
    })
}

/// See [`transition`].
#[derive(Clone, Copy)]
struct Transition<'s> {
    /// The state column.
    column: &'s str,
    /// The write tests it, but with a comparison that more states than the one read pass.
    weaker: bool,
}

/// Some `WHERE` condition of `a` and one of `b` test the same column against the same value:
/// the two are about the same row (or rows).
fn same_key(a: &Step, b: &Step) -> bool {
    a.facts.filters.iter().any(|p| {
        b.facts
            .filters
            .iter()
            .any(|q| q.column == p.column && value_key(&q.value, b) == value_key(&p.value, a))
    })
}

/// `g`, earlier in the write's transaction, serialises every run of this code before the read:
/// it locks the rows the read decides on, or takes an exclusive row lock (a `FOR UPDATE`, an
/// `UPDATE`) on a guard row whose key is a constant or one the read's predicate is about, so two
/// runs that could disagree wait for each other.
fn guards(g: &Step, r: &Step) -> bool {
    let gf = &g.facts;
    let same_rows = !gf.row_locks.is_empty()
        && gf
            .reads
            .iter()
            .any(|t| r.facts.reads.iter().any(|x| x.name == t.name));
    let exclusive = gf.row_locks.iter().any(RowLock::waits_exclusive)
        || matches!(gf.kind, StmtKind::Update | StmtKind::Delete);
    let checked: Vec<String> = r
        .facts
        .filters
        .iter()
        .map(|p| value_key(&p.value, r))
        .collect();
    let keyed = !gf.filters.is_empty()
        && gf.filters.iter().all(|p| {
            (p.value.params.is_empty() && !p.value.idents.iter().any(|i| is_var(i, g)))
                || checked.contains(&value_key(&p.value, g))
        });
    same_rows || (exclusive && keyed)
}

/// The read's keys were all read through a row the transaction holds already (the crate row
/// it updated, then the count of that crate's versions by the id the update returned): two
/// runs on one parent wait there, and the second reads after the first committed.
fn keyed_by_held_row(tx: &Transaction, r: &Step) -> bool {
    let f = &r.facts;
    // Constants pin nothing that varies; a variable is not followed.
    if f.filters
        .iter()
        .any(|p| p.value.idents.iter().any(|i| is_var(i, r)))
    {
        return false;
    }
    let params: Vec<usize> = f
        .filters
        .iter()
        .flat_map(|p| p.value.params.clone())
        .collect();
    let keys: Vec<&Input> = r
        .host()
        .inputs
        .iter()
        .filter(|i| params.contains(&i.param))
        .collect();
    !params.is_empty()
        && params.iter().all(|p| keys.iter().any(|i| i.param == *p))
        && from_held_rows(&tx.steps, r.seq, &keys)
}

/// PL/pgSQL's form of [`keyed_by_held_row`]: the read is keyed by a variable (`WHERE
/// consumer_id = v_consumer`) whose value comes only from rows the transaction holds
/// exclusively (`SELECT id INTO v_consumer .. FOR UPDATE`, `UPDATE .. RETURNING id INTO ..`).
/// Two runs that could disagree test the same value, so they meet at that row first. One such
/// conjunct is enough: every row the read decides on has that value.
fn keyed_by_held_var(flow: &Flow, ri: usize, tx: &Transaction) -> bool {
    let r = flow.steps[ri].step;
    let holds = |seq: &usize| {
        tx.steps.iter().any(|s| {
            s.seq == *seq
                && s.seq < r.seq
                && (matches!(s.facts.kind, StmtKind::Update | StmtKind::Insert)
                    || s.facts.row_locks.iter().any(RowLock::waits_exclusive))
        })
    };
    r.facts.filters.iter().any(|p| {
        let v = &p.value;
        let [var] = v.idents.as_slice() else {
            return false;
        };
        let origins = flow.origins_of(ri, var.split('.').next().unwrap_or(var));
        v.params.is_empty() && is_var(var, r) && !origins.is_empty() && origins.iter().all(holds)
    })
}

/// The `NOT EXISTS` of an insert compares with parameters, literals or the unit's variables:
/// one key per run. A column of another query (`WHERE name = s.name` over a set) is not.
fn checks_one_key_per_run(e: &crate::model::Extra) -> bool {
    e.absent
        .iter()
        .flat_map(|(_, by)| by)
        .all(|b| e.uses.contains(b))
}

/// `INSERT .. SELECT .. WHERE NOT EXISTS (SELECT 1 FROM t WHERE path >= $2 AND path < $3) ON
/// CONFLICT (path) DO NOTHING`: the check is about rows the conflict key does not identify (a
/// range, another column), so two runs inserting different keys both see none and both insert;
/// the conflict settles only a duplicate of its own key. Not when the check tests every column
/// of the conflict target for equality (or, with no target, of a unique key).
fn conflict_key_misses_check(cx: &Context, step: &Step) -> Option<Diagnostic> {
    let f = &step.facts;
    let e = f.extra();
    let table = f.writes.first()?;
    if f.kind != StmtKind::Insert
        || (e.absent.is_empty() && e.absent_tests.is_empty())
        || !checks_one_key_per_run(e)
        || f.dialect != crate::source::Dialect::Postgres
        || is_hole(&table.name)
    {
        return None;
    }
    let checked: Vec<&str> = e.absent.iter().map(|(c, _)| c.as_str()).collect();
    let schema = cx.program.schema(step.span.file);
    // Every row the check can find then has the inserted key: a run that would make it fail
    // inserts that key too, and one of the two meets the conflict.
    // With no target, only the run's schema tells which unique keys there are.
    let settled = match e.conflict_on.is_empty() {
        true => {
            !schema.declares(&table.name)
                || schema
                    .unique_within_row(&table.name, &checked, &given(step), &[] as &[&str])
                    .is_some()
        }
        false => e.conflict_on.iter().all(|c| checked.contains(&c.as_str())),
    };
    if settled {
        return None;
    }
    let mut what: Vec<String> = e
        .absent_tests
        .iter()
        .map(|c| format!("`{c}` by a range or condition"))
        .collect();
    what.extend(
        checked
            .iter()
            .filter(|c| !e.conflict_on.iter().any(|k| k == *c))
            .map(|c| format!("`{c}`")),
    );
    what.dedup();
    let message = match e.conflict_on.is_empty() {
        true => format!(
            "`WHERE NOT EXISTS` tests {}, and no unique key of `{}` among the checked columns makes `ON CONFLICT` refuse a second such row: two sessions both see none in their snapshots and both insert",
            what.join(", "),
            table.name
        ),
        false => format!(
            "`WHERE NOT EXISTS` looks for rows other than the inserted key's (it tests {}), which `ON CONFLICT ({})` does not settle: two sessions inserting different keys both see no such row in their snapshots and both insert",
            what.join(", "),
            e.conflict_on.join(", ")
        ),
    };
    Some(
        Diagnostic::new(
            &RULE,
            table.span,
            message,
        )
        .note("inserts unless a row it does not lock exists")
        .in_step(step)
        .help("take `pg_advisory_xact_lock` on what the check is about (the range's prefix, the other column's value) before the insert, in the same transaction at READ COMMITTED, or run at SERIALIZABLE and retry"),
    )
}

/// The insert writes the key the read checked (`WHERE email = $1`, then `INSERT .. (email)
/// VALUES ($1)`): duplicate registration.
fn inserts_checked_key(r: &Step, w: &Step, table: &str) -> bool {
    let f = &w.facts;
    f.kind == StmtKind::Insert
        && r.facts.reads.iter().any(|t| t.name == table)
        && r.facts.filters.iter().any(|p| {
            f.inserts.iter().any(|(c, o)| {
                *c == p.column
                    && value_key(o, w) == value_key(&p.value, r)
                    && (is_var(&o.text, w) || !o.params.is_empty())
            })
        })
}

/// The branch arms taken on a condition on each read's value, by the read's sequence number.
type Taken = HashMap<usize, Vec<usize>>;

/// The arms taken on each read: on any condition on it, and on one that tests what it read
/// (not only whether it found a row: PL/pgSQL `IF FOUND`, see [`Condition::presence`]).
#[derive(Default)]
struct Decided {
    any: Taken,
    on_value: Taken,
}

/// Code in these branch arms (a step's or an exit's) runs only on a condition on the read's
/// value.
fn taken_on(taken: &Taken, r: &Step, branch: &[usize]) -> bool {
    taken
        .get(&r.seq)
        .is_some_and(|arms| arms.iter().any(|a| branch.contains(a)))
}

/// How a write depends on a decision read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dependence {
    /// It writes a value computed from the read.
    Data,
    /// It inserts the very key the read checked (duplicate registration).
    Key,
    /// It runs in a branch arm taken on the read's value.
    Branch,
    /// It runs after a return taken on the read's value was not.
    Return,
}

impl Dependence {
    fn describe(self) -> &'static str {
        match self {
            Dependence::Data => "it writes a value computed from it",
            Dependence::Key => "it inserts the key it checked",
            Dependence::Branch => "it runs under a condition on it",
            Dependence::Return => "it runs only when an early return on it was not taken",
        }
    }
}

/// How the write depends on the read, if it does. A decision is a branch on the value that
/// was read, never on whether the call succeeded: a `?` decides nothing.
fn depends(
    unit: &Unit,
    flow: &Flow,
    taken: &Taken,
    r: &Step,
    wi: usize,
    table: &str,
) -> Option<Dependence> {
    let w = flow.steps[wi].step;
    let f = &w.facts;
    if f.operands().any(|o| flow.flows_from(o, r, wi)) {
        return Some(Dependence::Data);
    }
    // Duplicate registration: insert the very key that was checked.
    if inserts_checked_key(r, w, table) {
        return Some(Dependence::Key);
    }
    // The write is in a branch taken on the read's value, or comes after an exit taken on it
    // (`if taken { return ... }`, `IF n >= cap THEN RAISE ...`) and is about what it checked.
    if taken_on(taken, r, &w.branch) {
        return Some(Dependence::Branch);
    }
    if about(r, w, table) && returned_on(unit, taken, r, w) {
        return Some(Dependence::Return);
    }
    None
}

/// The write changes what the read decided on: it inserts into or deletes from a table the
/// read looked at, or sets a column the read's condition or answer is made of. Two runs that
/// both pass the check then each change its premise (duplicate registration, a cap exceeded,
/// write skew).
fn changes_premise(r: &Step, w: &Step) -> bool {
    let rf = &r.facts;
    let wf = &w.facts;
    let read_table = |t: &TableRef| rf.reads.iter().any(|x| x.name == t.name);
    if !wf.writes.iter().any(read_table) {
        return false;
    }
    match wf.kind {
        StmtKind::Insert | StmtKind::Delete | StmtKind::Merge => true,
        StmtKind::Update => {
            let condition = rf.extra().condition.as_deref();
            let last = |i: &Name| i.rsplit('.').next().unwrap_or(i).to_ascii_lowercase();
            let columns: Vec<String> = rf
                .filters
                .iter()
                .map(|p| p.column.to_string())
                .chain(rf.columns.iter().map(|c| c.to_string()))
                .chain(
                    condition
                        .into_iter()
                        .flat_map(|c| c.idents.iter().map(last)),
                )
                .collect();
            columns.iter().any(|c| c == "*")
                || wf
                    .sets
                    .iter()
                    .any(|s| columns.iter().any(|c| *c == s.column))
        }
        _ => false,
    }
}

/// `SET n = n + 1`, `SET total = total - $1`: the write accumulates, so two runs that both act
/// on one decision count twice. The column is named bare or by its table (`f.n` in a routine
/// `f` is its parameter `n`).
fn accumulates(w: &Step) -> bool {
    let table = w.facts.writes.first().map_or("", |t| t.name.as_str());
    w.facts.sets.iter().any(|s| {
        s.value.idents.iter().any(|i| {
            let (qualifier, column) = match i.rsplit_once('.') {
                Some((q, c)) => (Some(q.rsplit('.').next().unwrap_or(q)), c),
                None => (None, i.as_str()),
            };
            column.eq_ignore_ascii_case(&s.column)
                && qualifier.is_none_or(|q| q.eq_ignore_ascii_case(table))
                && !is_var(i, w)
        })
    })
}

/// Between the read and the write, a return in an arm taken on the read's value.
fn returned_on(unit: &Unit, taken: &Taken, r: &Step, w: &Step) -> bool {
    unit.exits_between(r.seq, w.seq)
        .any(|e| e.kind == ExitKind::Return && taken_on(taken, r, &e.branch))
}

/// Every early return taken on `r` between it and `w` leaves with an error (`if found {
/// return Err(AlreadyExists) }`, `RAISE EXCEPTION`), and `w` is not in an arm taken on `r`.
fn fails_when_found(unit: &Unit, taken: &Taken, r: &Step, w: &Step) -> bool {
    let mut exits = unit
        .exits_between(r.seq, w.seq)
        .filter(|e| e.kind == ExitKind::Return && taken_on(taken, r, &e.branch))
        .peekable();
    !taken_on(taken, r, &w.branch) && exits.peek().is_some() && exits.all(|e| e.fails)
}

/// The columns a write gives a value that is not a literal NULL (the inserted row's, or those
/// an `UPDATE` sets): what decides whether a partial unique key covers the row.
fn given(w: &Step) -> Vec<&str> {
    let f = &w.facts;
    let inserts = f.inserts.iter().map(|(c, o)| (c.as_str(), o));
    let sets = f.sets.iter().map(|s| (s.column.as_str(), &s.value));
    inserts
        .chain(sets)
        .filter(|(_, o)| !o.text.eq_ignore_ascii_case("null"))
        .map(|(c, _)| c)
        .collect()
}

/// An existence check followed by an `UPDATE`/`DELETE` whose `WHERE` repeats every condition the
/// check tested: the write re-evaluates the predicate on the rows it touches (under READ
/// COMMITTED, against the latest version), so a stale answer makes it touch nothing rather than
/// the wrong rows. Counts and sums are not re-checked this way: their write skew stays.
fn rechecks(r: &Step, w: &Step) -> bool {
    let rf = &r.facts;
    let wf = &w.facts;
    let tests = &rf.extra().tests;
    rf.extra().aggregates.iter().all(|a| a == "exists")
        && matches!(wf.kind, StmtKind::Update | StmtKind::Delete)
        && rf.parsed
        && !(rf.filters.is_empty() && tests.is_empty())
        && (!rf.other_conditions || !tests.is_empty())
        && tests.iter().all(|t| wf.extra().tests.contains(t))
        && rf.filters.iter().all(|p| {
            wf.filters
                .iter()
                .any(|q| q.column == p.column && value_key(&q.value, w) == value_key(&p.value, r))
        })
}

/// The write changes what the read's predicate is about: a row of the table it counted with
/// the key it checked, or the column it filtered on.
fn about(r: &Step, w: &Step, table: &str) -> bool {
    if !r.facts.reads.iter().any(|t| t.name == table) {
        return false;
    }
    let checked = &r.facts.filters;
    if checked.is_empty() {
        return true;
    }
    let f = &w.facts;
    match f.kind {
        StmtKind::Insert => f
            .inserts
            .iter()
            .any(|(c, _)| checked.iter().any(|p| p.column == *c)),
        StmtKind::Update => {
            f.sets
                .iter()
                .any(|s| checked.iter().any(|p| p.column == s.column))
                || same_key(r, w)
        }
        _ => same_key(r, w),
    }
}

/// An advisory lock serialises a check when two runs whose checks can see each other's rows
/// take the same key: a constant key (one lock for every run), or a key made only of values
/// the read's `WHERE` pins by equality (`pg_advisory_xact_lock(hashtext($1))` before `WHERE
/// email = $1`). A key on `id` does not cover `WHERE id = $1 OR token = $2`: two runs with
/// different ids and one token both pass. A key made of values the read does not use at all
/// is about something txlint cannot see, and is taken to cover it (nothing is guessed).
fn covers(lock: &AdvisoryCall, lock_step: &Step, read: &Step) -> bool {
    let key = text_inputs(&lock.key, lock_step);
    if key.is_empty() {
        return true;
    }
    let pinned: Vec<String> = read
        .facts
        .filters
        .iter()
        .flat_map(|p| operand_inputs(&p.value, read))
        .collect();
    if key.iter().all(|k| pinned.contains(k)) {
        return true;
    }
    let mut used = pinned;
    if let Some(c) = &read.facts.extra().condition {
        used.extend(operand_inputs(c, read));
    }
    !key.iter().any(|k| used.contains(k))
}

/// What makes a value differ between runs, comparable across statements: each `$n` as the host
/// value bound to it, each variable by name.
fn operand_inputs(o: &Operand, step: &Step) -> Vec<String> {
    let params = o.params.iter().map(|&p| param_key(p, step));
    let vars = o
        .idents
        .iter()
        .filter(|i| is_var(i, step))
        .map(|i| i.to_ascii_lowercase().to_string());
    params.chain(vars).collect()
}

/// [`operand_inputs`] of an expression's text (an advisory lock's key arguments).
fn text_inputs(text: &str, step: &Step) -> Vec<String> {
    let mut out = Vec::new();
    for w in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.')) {
        if let Some(n) = w.strip_prefix('$').and_then(|n| n.parse().ok()) {
            out.push(param_key(n, step));
        } else if !w.is_empty() && is_var(w, step) {
            out.push(w.to_ascii_lowercase());
        }
    }
    out
}
