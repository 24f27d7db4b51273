//! `unused-suppression`: a `txlint: ignore` comment that suppresses nothing.

use super::Rule;
use crate::diagnostic::{Diagnostic, Severity};
use crate::source::Span;

pub const RULE: Rule = Rule {
    name: "unused-suppression",
    severity: Severity::Warning,
    doc: include_str!("../../rules/unused-suppression.md"),
    check: None,
};

pub fn unused_suppression_diagnostic(span: Span, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(&RULE, span, message)
        .help("remove the comment, or the rule names in it that no longer apply")
}
