//! `analysis-limit`: a rule stopped analysing part of a unit because it exceeded a budget.
//! Reported by the rules themselves, once per unit and rule, so that no input can make a run
//! slow without saying so.

use crate::diagnostic::Diagnostic;
use crate::source::Span;

pub use crate::registry::ANALYSIS_LIMIT as RULE;

/// Candidate statements a pairing rule looks at per write (the nearest first).
pub const CANDIDATES: usize = 1_000;

/// What to do about a budget on the size of a file or a transaction.
pub const SPLIT: &str =
    "split the file or the transaction; the rest of the run was analysed in full";

/// `rule` skipped `what` in the unit at `span`, because `why`.
pub fn analysis_limit_diagnostic(span: Span, rule: &str, what: &str, why: &str) -> Diagnostic {
    limit_diagnostic(span, rule, what, why, SPLIT)
}

/// As [`analysis_limit_diagnostic`], with what to do about it.
pub fn limit_diagnostic(span: Span, rule: &str, what: &str, why: &str, fix: &str) -> Diagnostic {
    Diagnostic::new(&RULE, span, format!("{rule} did not analyse {what}: {why}")).help(fix)
}
