//! `check-then-act`: a decision read (existence, count, max, sum) and a write that depends on
//! it, with nothing protecting the predicate in between.

use std::collections::HashMap;

use super::analysis_limit::{CANDIDATES, analysis_limit_diagnostic};
use super::unique_violation_unhandled as refused;

mod claims;
mod depends;
mod guards;
mod picked;
mod race;
mod replace;
use super::{Context, at_the_call};
use crate::diagnostic::Diagnostic;
use crate::model::flow::{
    At, Flow, advisory_locks_before, constant, from_held_rows, is_var, one_row_lock_before,
    param_key, same_constant, value_key,
};
use crate::model::*;

pub use crate::registry::CHECK_THEN_ACT as RULE;
use claims::*;
use depends::*;
use guards::*;
use race::{Race, Uncovered, race};

/// What one decision read and one write (or one statement that checks and inserts) come to
/// when they race: this rule's finding, or, where a unique key fails the second insert with a
/// unique violation, [`refused`]'s (`unique-violation-unhandled`, which says whether the code
/// handles that error). One evaluation decides which of the two rules reports the race, so
/// neither can report what the other does.
pub(super) enum Outcome {
    Race(Diagnostic),
    Refused(Diagnostic),
}

/// The findings of both rules, from one pairing of decision reads with the writes that
/// depend on them (see [`Context::pairs`](super::Context)).
#[derive(Default)]
pub struct Pairs {
    pub(super) races: Vec<Diagnostic>,
    pub(super) refusals: Vec<Diagnostic>,
}

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    out.extend(cx.pairs().races.iter().cloned());
}

/// Pair every decision read with the writes that depend on it, once for both rules.
pub(super) fn search(cx: &Context) -> Pairs {
    let mut out = Pairs::default();
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
            let steps = tx
                .steps
                .iter()
                .filter(|s| !locked_before(s.seq))
                .filter(|s| !cx.program.alone(unit, [*s]));
            for s in steps {
                let (claim, unless) = (
                    one_statement_claim(tx, s),
                    insert_unless_exists(cx, unit, tx, s),
                );
                let (race, refused) = match unless {
                    Some(Outcome::Race(d)) => (claim.or(Some(d)), None),
                    Some(Outcome::Refused(d)) => (claim, Some(d)),
                    None => (claim, None),
                };
                out.races.extend(race);
                out.refusals.extend(refused);
            }
            if !cx.program.alone(unit, &tx.steps) {
                out.races
                    .extend(replace::replace_under_partial_lock(cx, tx));
                out.races.extend(replace::replace_unlocked(cx, tx));
            }
        }
        pair_reads_and_writes(cx, unit, &mut out);
    }
    out
}

/// [`search`] over one unit's decision reads and the writes after them. Each write is paired
/// with its nearest candidate read that races with it, separately for each rule: its race
/// and its refusal may come from different reads.
fn pair_reads_and_writes(cx: &Context, unit: &Unit, out: &mut Pairs) {
    let flow = Flow::new(unit);
    if !flow.steps.iter().any(|r| is_decision(r) || is_presence(r)) {
        return;
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
    let mut races: Vec<(usize, Diagnostic)> = Vec::new();
    for j in 0..flow.steps.len() {
        let w = &flow.steps[j];
        let f = &w.step.facts;
        if !matches!(
            f.kind,
            StmtKind::Insert | StmtKind::Update | StmtKind::Delete
        ) {
            continue;
        }
        let mut candidates = candidates(&flow, &arms, j);
        if candidates.len() > CANDIDATES {
            candidates.truncate(CANDIDATES);
            limited = true;
        }
        let (mut race, mut refused) = (None, None);
        for &i in &candidates {
            match finding(cx, unit, &flow, &taken, i, j) {
                Some(Outcome::Race(d)) if race.is_none() => race = Some((i, d)),
                Some(Outcome::Refused(d)) if refused.is_none() => refused = Some(d),
                _ => {}
            }
            if race.is_some() && refused.is_some() {
                break;
            }
        }
        out.refusals.extend(refused);
        let Some((i, d)) = race else {
            continue;
        };
        let decision = flow.steps[i].step.span;
        match races
            .iter_mut()
            .find(|(r, _)| flow.steps[*r].step.span == decision)
        {
            Some((_, first)) => first.labels.push(crate::diagnostic::Label {
                span: f.writes.first().map_or(d.span, |t| t.span),
                message: "also acts on this decision".into(),
            }),
            None => races.push((i, d)),
        }
    }
    out.races.extend(races.into_iter().map(|(_, d)| d));
    if limited {
        out.races.push(analysis_limit_diagnostic(
            unit.span,
            RULE.name,
            "every decision read before some of this unit's writes",
            &format!("a write has more than {CANDIDATES} candidate reads; the nearest were paired with it"),
        ));
    }
}

/// The decisions write `j` can depend on, nearest first: reads of its table, reads whose
/// results flow into it, reads the branches around it are taken on.
fn candidates(flow: &Flow, arms: &HashMap<usize, Vec<usize>>, j: usize) -> Vec<usize> {
    let w = &flow.steps[j];
    let f = &w.step.facts;
    // In a transaction txlint does not know (a query file's statement, sent by code it
    // does not read), only a decision the statement makes itself is judged: a read of
    // its own `BEFORE` trigger runs in the statement, whatever transaction that is.
    let unknown = w.txn.scope == Scope::Unknown;
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
    candidates
}

fn finding(
    cx: &Context,
    unit: &Unit,
    flow: &Flow,
    decided: &Decided,
    ri: usize,
    wi: usize,
) -> Option<Outcome> {
    let taken = &decided.any;
    let (r, w) = (&flow.steps[ri], &flow.steps[wi]);
    let rf = &r.step.facts;
    let wf = &w.step.facts;
    let table = &wf.writes.first()?.name;
    if is_hole(table)
        || unit.exclusive(&r.step.branch, &w.step.branch)
        || flow.created.private(r.tx, r.step.seq, table)
        || cx.program.alone(unit, [r.step, w.step])
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
    let (how, status, decided_on) = decision(unit, flow, decided, (r, wi), table, &dependence);
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
    let uncovered = unprotected(flow, (r, w), ri, same_tx)?;
    // A count over a set behind a lock on one row: row-lock-predicate-gap's finding.
    if wf.on_conflict || (same_tx && one_row_lock_before(w.txn, r.step).is_some()) {
        return None;
    }
    if let Some(settled) = settled_by_key(cx, unit, flow, taken, (r, w), wi, table) {
        return settled;
    }
    if refused_before(cx, unit, r, w) {
        return None;
    }
    Some(Outcome::Race(race(
        cx,
        unit,
        (r, w),
        table,
        Race {
            how,
            status,
            uncovered,
            same_tx,
        },
    )))
}

/// Whether nothing serialises the read and the write: `None` when something does (a
/// session lock held across both, an advisory lock that pins what the read checks, a lock on
/// the guard rows, a row lock on the read, SERIALIZABLE); else the advisory lock taken first
/// whose key does not pin what the read checks, if there is one.
fn unprotected<'s>(
    flow: &'s Flow,
    (r, w): (&'s At, &'s At),
    ri: usize,
    same_tx: bool,
) -> Option<Uncovered<'s>> {
    // A session lock held from before the read until the write (a caller's
    // `pg_try_advisory_lock` on its own connection around helpers that use the pool)
    // serialises them.
    if flow
        .session_locks_held(r.step.seq, w.step.seq)
        .any(|(l, s)| covers(l, s, r.step))
    {
        return None;
    }
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
            || !r.step.facts.row_locks.is_empty()
            || w.txn.isolation == Isolation::Serializable)
    {
        return None;
    }
    Some(uncovered)
}

/// How the write depends on the read, the state transition it is decided on (if any), and
/// whether an arm taken on the read leads to it.
fn decision<'s>(
    unit: &'s Unit,
    flow: &'s Flow,
    decided: &'s Decided,
    (r, wi): (&'s At, usize),
    table: &'s Name,
    dependence: &Dependence,
) -> (&'static str, Option<Transition<'s>>, bool) {
    let w = &flow.steps[wi];
    let taken = &decided.any;
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
    (how, status, decided_on)
}

/// A unique key refuses the second write, if both give it the same values: columns that take
/// the checked key, or a value computed from the read (`max + 1`). A count that caps a set
/// (`count(*) .. WHERE team_id = $1`, then insert `(team_id, user_id)`) inserts another key
/// each time, and the cap is exceeded. An `UPDATE` that sets a unique column to the value
/// checked (`SET namespace = $1` after checking no row has namespace `$1`) is refused the same
/// way. `Some` with the outcome when a key settles it.
fn settled_by_key(
    cx: &Context,
    unit: &Unit,
    flow: &Flow,
    taken: &Taken,
    (r, w): (&At, &At),
    wi: usize,
    table: &Name,
) -> Option<Option<Outcome>> {
    let (rf, wf) = (&r.step.facts, &w.step.facts);
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
                // The same in every run (`kind = 'invite'`, `Platform::Thoth`).
                || constant(o, w.step).is_some_and(|v| v != "null")
        })
        .map(|(c, _)| c.as_str())
        .collect();
    let key = cx.program.schema(w.step.span.file).unique_within_row(
        table,
        &decided,
        &given(w.step),
        &rf.extra().tests,
        &|test| passes(test, w.step),
    )?;
    Some(match wf.kind {
        // The code answers "it exists" with an error already: the loser's unique violation is
        // the same answer.
        StmtKind::Insert if fails_when_found(unit, taken, r.step, w.step) => None,
        StmtKind::Insert => {
            refused::decided(cx, unit, r.step, w.step, &what(r.step), &key).map(Outcome::Refused)
        }
        _ => None,
    })
}

/// The branch arms taken on a condition on each read's value, by the read's sequence number.
type Taken = HashMap<usize, Vec<usize>>;
