//! `unused-suppression`: a `txlint: ignore` comment that suppresses nothing.

use crate::diagnostic::Diagnostic;
use crate::source::Span;

pub use crate::registry::UNUSED_SUPPRESSION as RULE;

pub fn unused_suppression_diagnostic(span: Span, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(&RULE, span, message)
        .help("remove the comment, or the rule names in it that no longer apply")
}
