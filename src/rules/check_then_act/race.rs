//! The finding for a race of a decision read and a write: where it is reported, what it
//! says, and how to fix it.

use super::depends::what;
use super::guards::Transition;
use super::{At, Context, RULE, at_the_call};
use crate::diagnostic::Diagnostic;
use crate::model::*;

/// An advisory lock taken first that does not pin what the read checks, and the statement
/// that takes it.
pub(super) type Uncovered<'s> = Option<(&'s AdvisoryCall, &'s Step)>;

/// What makes a race of a decision read and a write this rule's finding, beside the two.
pub(super) struct Race<'s> {
    /// How the write depends on the decision (see [`super::depends::Dependence::describe`]).
    pub(super) how: &'s str,
    /// The state column a transition is decided on, if the decision is one.
    pub(super) status: Option<Transition<'s>>,
    /// An advisory lock taken first that does not pin what the read checks.
    pub(super) uncovered: Uncovered<'s>,
    /// The read and the write are in one transaction.
    pub(super) same_tx: bool,
}

/// The finding for a race of the read `r` and the write `w` on `table`.
pub(super) fn race(
    cx: &Context,
    unit: &Unit,
    (r, w): (&At, &At),
    table: &str,
    facts: Race,
) -> Diagnostic {
    let wf = &w.step.facts;
    let fired = r.step.run_by(w.step);
    // Where the finding will be: the write, or the call that sends it (see below).
    let at = match w.step.host().via {
        Some(_) if !fired => super::super::composed_place(w.step, r.step, wf.writes[0].span),
        _ => w.step.span,
    };
    let mut message = message(cx, (r, w), table, at, fired, &facts);
    let Race {
        status, uncovered, ..
    } = facts;
    let unguarded = super::super::unguarded(cx, unit, (r, w));
    if let Some((clause, _, _)) = &unguarded {
        message += &format!(" ({clause})");
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
    d = d.about(
        crate::diagnostic::Race::CheckThenWrite,
        &[(unit, r.step), (unit, w.step)],
    );
    if let Some((lock, _)) = uncovered {
        d = d.label(lock.span, "locks a key the check is not confined to");
    }
    if let Some((_, at, label)) = unguarded {
        d = d.label(at, label);
    }
    match status {
        Some(Transition { column: c, .. }) => d.help(format!("test the state in the write itself (`UPDATE ... WHERE <key> AND {c} = <the value read>`, then check the rows it changed), or read the row with `SELECT ... FOR UPDATE` in the same transaction")),
        None => d.help("do check and write in one statement (`INSERT ... ON CONFLICT`, or `INSERT ... WHERE NOT EXISTS` under `pg_advisory_xact_lock` at READ COMMITTED), add a unique constraint on the key, lock the guard rows with `SELECT ... FOR SHARE`/`FOR UPDATE` in the same transaction, or run at SERIALIZABLE and retry"),
    }
}

/// The finding's sentence: the decision, how the write depends on it, and what is known
/// about the state it tests, the table's schema and an advisory lock taken first.
fn message(
    cx: &Context,
    (r, w): (&At, &At),
    table: &str,
    at: crate::source::Span,
    fired: bool,
    &Race {
        how,
        ref status,
        uncovered,
        same_tx,
    }: &Race,
) -> String {
    let place = cx.place(r.step.span, at);
    let decision = match status {
        Some(t) => format!("`{}` read", t.column),
        None => what(r.step),
    };
    // The decision is made by a trigger (or routine) the write runs: every statement that
    // fires it acts on it, and the fix goes where it is read. One finding there, each firing
    // statement a label.
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
    match *status {
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
    if w.step.facts.kind == StmtKind::Insert && !cx.program.schema(w.step.span.file).declares(table)
    {
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
    message
}
