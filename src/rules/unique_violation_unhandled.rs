//! `unique-violation-unhandled`: a check-then-insert race that a unique key settles by failing
//! the second insert with 23505, in code that lets that error through.
//!
//! The races are `check-then-act`'s (one search pairs reads and writes for both rules, see
//! [`Outcome`](super::check_then_act::Outcome)); that rule stays silent where a unique key
//! refuses the duplicate, and this one reports what the loser gets.

use super::Context;
use crate::diagnostic::{Diagnostic, Race};
use crate::model::*;

pub use crate::registry::UNIQUE_VIOLATION_UNHANDLED as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    out.extend(cx.pairs().refusals.iter().cloned());
}

/// The error of `step` leaves the code that sent it: Rust passes it on (with `?` or as the
/// function's value), a routine or `DO` block has no handler around it that catches a unique
/// violation. A `.sql` script's errors go to whatever runs it, which is not known.
fn unhandled(unit: &Unit, step: &Step) -> Option<&'static str> {
    match unit.kind {
        UnitKind::RustFn => step
            .host()
            .propagated
            .then_some("this code passes the error on to its caller"),
        UnitKind::Routine | UnitKind::DoBlock => {
            (!unit.handlers.iter().any(|h| h.unique && h.covers(step.seq)))
                .then_some("no `EXCEPTION` handler here catches it")
        }
        UnitKind::Script | UnitKind::QueryFile => None,
    }
}

const HELP: &str = "insert with `ON CONFLICT DO NOTHING` and read the row that won when nothing was inserted (or `ON CONFLICT DO UPDATE`), or catch the unique violation (SQLSTATE 23505) and read the row that won";

/// `insert` was decided on `read` (a lookup that found nothing, `max + 1`) and `key`, a unique
/// key of its table, takes the decided values: the second of two concurrent runs fails there.
pub(super) fn decided(
    cx: &Context,
    unit: &Unit,
    read: &Step,
    insert: &Step,
    decision: &str,
    key: &[String],
) -> Option<Diagnostic> {
    let why = unhandled(unit, insert)?;
    let table = &insert.facts.writes.first()?.name;
    let message = format!(
        "two runs can both decide on the {decision} at {} and both insert; `{table}`'s unique key ({}) makes the second fail with a unique violation (23505), and {why}",
        cx.place(read.span, insert.facts.writes[0].span),
        key.join(", "),
    );
    let mut d = Diagnostic::new(&RULE, insert.facts.writes[0].span, message)
        .note("inserts the decided key")
        .in_step(insert)
        .about(Race::UniqueViolation, &[(unit, read), (unit, insert)])
        .label(read.span, "decided here");
    // The insert is in a helper: the call that passes its error on is where it is handled.
    if let Some(&call) = insert.host().calls.first() {
        d = d.label(call, "the insert's error leaves through this call");
    }
    Some(d.help(HELP))
}

/// `INSERT .. SELECT .. WHERE NOT EXISTS (..)` whose checked columns hold a unique key: both
/// statements see no row, and the second insert fails.
pub(super) fn one_statement(unit: &Unit, step: &Step, key: &[String]) -> Option<Diagnostic> {
    let why = unhandled(unit, step)?;
    let table = &step.facts.writes.first()?.name;
    let message = format!(
        "`WHERE NOT EXISTS` checks in the statement's snapshot, so two runs both see no row and both insert; `{table}`'s unique key ({}) makes the second fail with a unique violation (23505), and {why}",
        key.join(", "),
    );
    Some(
        Diagnostic::new(&RULE, step.facts.writes[0].span, message)
            .note("inserts unless it exists")
            .in_step(step)
            .about(Race::UniqueViolation, &[(unit, step)])
            .help(HELP),
    )
}
