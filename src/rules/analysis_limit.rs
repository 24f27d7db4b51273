//! `analysis-limit`: a rule stopped analysing part of a unit because it exceeded a budget.
//! Reported by the rules themselves, once per unit and rule, so that no input can make a run
//! slow without saying so.

use crate::diagnostic::Diagnostic;
use crate::source::Span;

pub use crate::registry::ANALYSIS_LIMIT as RULE;

/// Candidate statements a pairing rule looks at per write (the nearest first).
pub const CANDIDATES: usize = 1_000;

/// `rule` skipped `what` in the unit at `span`, because `why`.
pub fn analysis_limit_diagnostic(span: Span, rule: &str, what: &str, why: &str) -> Diagnostic {
    Diagnostic::new(&RULE, span, format!("{rule} did not analyse {what}: {why}"))
        .help("split the file or the transaction; the rest of the run was analysed in full")
}
