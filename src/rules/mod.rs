//! The checks over the model, one module per rule; each rule's name, severity and page are in
//! [`crate::registry`].

use crate::diagnostic::Diagnostic;
use crate::model::{Program, Step};
use crate::registry::Rule;
use crate::source::Span;

pub mod analysis_limit;
pub mod check_then_act;
pub mod lock_order_inversion;
pub mod lost_update;
pub mod read_error;
pub mod row_lock_predicate_gap;
pub mod session_lock_on_pool;
pub mod syntax_error;
pub mod unique_violation_unhandled;
pub mod unused_suppression;
pub mod xact_lock_outside_transaction;

/// What a check sees: the model, and the options rules read.
pub struct Context<'a> {
    pub program: &'a Program,
    pub options: &'a Options,
    /// The pairing of decision reads with writes, made once for the two rules that report
    /// from it (see [`check_then_act::Outcome`]).
    pairs: std::cell::OnceCell<check_then_act::Pairs>,
}

/// What the rules read of the configuration, and nothing else of it.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `pool_mode`: with PgBouncer transaction pooling every session lock is a finding.
    pub pool_mode: crate::registry::PoolMode,
    /// The configuration's folder, where `[[overrides]]` globs apply: a help that suggests one
    /// writes the file's path from there.
    pub root: std::path::PathBuf,
}

impl Options {
    /// `path` as an `[[overrides]]` glob would match it.
    pub fn relative(&self, path: &std::path::Path) -> std::path::PathBuf {
        crate::io::relative_to(&self.root, path)
    }
}

impl<'a> Context<'a> {
    pub fn new(program: &'a Program, options: &'a Options) -> Self {
        Context {
            program,
            options,
            pairs: std::cell::OnceCell::new(),
        }
    }

    /// Decision reads paired with the writes that depend on them, searched on first use.
    fn pairs(&self) -> &check_then_act::Pairs {
        self.pairs.get_or_init(|| check_then_act::search(self))
    }

    /// 1-based line of a span's start, for messages that point at another statement.
    pub fn line(&self, span: crate::source::Span) -> usize {
        self.program.files[span.file].line(span.start())
    }

    /// Where `span` starts, for a message about `from`: `line N` in the same file, else
    /// `path:N`.
    pub fn place(&self, span: crate::source::Span, from: crate::source::Span) -> String {
        if span.file == from.file {
            format!("line {}", self.line(span))
        } else {
            self.at(span)
        }
    }

    /// `path:line` of a span's start.
    pub fn at(&self, span: crate::source::Span) -> String {
        format!(
            "{}:{}",
            self.program.files[span.file].display,
            self.line(span)
        )
    }
}

/// Why a race between `r` and `w`, under a lock (an application lease, an in-process lock),
/// is reported all the same: a write of their tables that does not take the lock (see
/// `Program::alone`). The clause for the message, and that write with its label.
fn unguarded(
    cx: &Context,
    unit: &crate::model::Unit,
    (r, w): (&crate::model::flow::At, &crate::model::flow::At),
) -> Option<(String, crate::source::Span, String)> {
    let lock = w.txn.guard()?;
    let other = cx.program.unguarded_write(unit, &[r.step, w.step])?;
    Some((
        format!(
            "both run under `{lock}`, which the write at {} does not take",
            cx.place(other.span, w.step.span)
        ),
        other.span,
        format!("written without `{lock}`"),
    ))
}

/// A check over the model: it reads the model and pushes its findings.
pub type Check = fn(&Context, &mut Vec<Diagnostic>);

/// The checks over the model, each with its rule, in the registry's order.
pub const CHECKS: &[(&Rule, Check)] = &[
    (&check_then_act::RULE, check_then_act::check),
    (&lock_order_inversion::RULE, lock_order_inversion::check),
    (&lost_update::RULE, lost_update::check),
    (&row_lock_predicate_gap::RULE, row_lock_predicate_gap::check),
    (&session_lock_on_pool::RULE, session_lock_on_pool::check),
    (
        &unique_violation_unhandled::RULE,
        unique_violation_unhandled::check,
    ),
    (
        &xact_lock_outside_transaction::RULE,
        xact_lock_outside_transaction::check,
    ),
];

/// Re-anchor `d`, a finding about `step` reached through calls, at the call where the race is
/// composed: the function that reaches both `step` and `other` (the read and the write, the
/// lock and the unlock). When `step` is in a helper that function calls (`task.mark_done(tx)`
/// after the function's own read), the finding goes to that call, with its old place as a
/// label, and `other`'s call there, if it is one, labelled `their_label`; when `step` is in
/// that function itself, `d` stays where it is.
fn at_the_call(
    d: Diagnostic,
    (step, other): (&Step, &Step),
    [note, label, their_label]: [&str; 3],
) -> Diagnostic {
    let calls = &step.host().calls;
    let theirs = &other.host().calls;
    let shared = shared_calls(step, other);
    match calls.get(shared) {
        Some(&call) => {
            let inner = d.span;
            let mut d = d.in_statement(step.span).note(note).label(inner, label);
            if let Some(&c) = theirs.get(shared) {
                d = d.label(c, their_label);
            }
            d.span = call;
            d.calls = calls[..shared].to_vec();
            d
        }
        None => d.in_step(step),
    }
}

/// Where [`at_the_call`] puts a finding about `step` (or `at`, where it is in `step`'s own
/// function): for the places its message names relative to it.
fn composed_place(step: &Step, other: &Step, at: Span) -> Span {
    let shared = shared_calls(step, other);
    step.host().calls.get(shared).copied().unwrap_or(at)
}

/// How many calls, from the unit's own, `step` and `other` are reached through in common.
fn shared_calls(step: &Step, other: &Step) -> usize {
    step.host()
        .calls
        .iter()
        .zip(other.host().calls.iter())
        .take_while(|(a, b)| a == b)
        .count()
}
