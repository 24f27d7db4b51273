//! `unique-violation-unhandled`: a check-then-insert race that a unique key settles by failing
//! the second insert with 23505, in code that lets that error through.
//!
//! The races are `check-then-act`'s (one search pairs reads and writes for both rules, see
//! [`Outcome`](super::check_then_act::Outcome)); that rule stays silent where a unique key
//! refuses the duplicate, and this one reports what the loser gets.

use super::Context;
use crate::diagnostic::{Diagnostic, Label, Race};
use crate::model::*;

pub use crate::registry::UNIQUE_VIOLATION_UNHANDLED as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    out.extend(cx.pairs().refusals.iter().cloned());
    for unit in cx
        .program
        .units
        .iter()
        .filter(|u| u.kind == UnitKind::Routine)
    {
        for tx in &unit.transactions {
            out.extend(created_if_missing(unit, tx));
        }
    }
}

/// A routine that creates an object when it is missing (`CREATE TABLE IF NOT EXISTS`, a
/// queue's table on first use), before anything makes its runs wait for each other: the
/// catalog is checked and the object created in two steps, so two calls at once can both find
/// it missing, and the second fails on the catalog's unique index (23505). One finding per
/// transaction, at the first such statement; the others are labels.
fn created_if_missing(unit: &Unit, tx: &Transaction) -> Option<Diagnostic> {
    let mut found: Option<Diagnostic> = None;
    for step in &tx.steps {
        let f = &step.facts;
        let Some(name) = f.extra().creates_if_missing.as_ref() else {
            // A lock, a write or other DDL before it: a second run waits there, and then
            // finds the object created.
            if f.modifies
                || !f.row_locks.is_empty()
                || !f.extra().advisory.is_empty()
                || f.extra().table_lock.is_some()
                || f.kind == StmtKind::Ddl
            {
                break;
            }
            continue;
        };
        let Some(why) = unhandled(unit, step) else {
            continue;
        };
        match &mut found {
            Some(d) => d.labels.push(Label {
                span: step.span,
                message: "also created here when missing".into(),
            }),
            None => {
                let what = match is_hole(name) {
                    true => "the object named at run time".to_string(),
                    false => format!("`{}`", shown(name)),
                };
                let message = format!(
                    "`IF NOT EXISTS` checks the catalog and creates {what} in two steps: two runs at once can both find it missing, and the second fails with a unique violation (23505) in the catalog; {why}"
                );
                let d = Diagnostic::new(&RULE, step.span, message)
                    .note("creates it when missing")
                    .in_step(step)
                    .help("take a transaction-scoped advisory lock on the object's name first (`PERFORM pg_advisory_xact_lock(hashtext(name))`), so a second run waits and then finds it; or catch the unique violation (SQLSTATE 23505)");
                found = Some(d);
            }
        }
    }
    found
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

/// A name as messages show it: a part dynamic SQL fills in at run time (a hole, `__`) as `…`
/// (`'q_' || queue` gives `q_…`).
fn shown(name: &str) -> String {
    let mut out = String::new();
    let mut run = 0;
    for c in name.chars().chain(['\0']) {
        if c == '_' {
            run += 1;
            continue;
        }
        out.push_str(&"_".repeat(if run >= 2 { run - 2 } else { run }));
        if run >= 2 {
            out.push('…');
        }
        run = 0;
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn holes_in_names_are_shown_as_an_ellipsis() {
        assert_eq!(shown("q___"), "q_…");
        assert_eq!(shown("event_log"), "event_log");
        assert_eq!(shown("__"), "…");
        assert_eq!(shown("q_____idx"), "q___…idx");
    }
}
