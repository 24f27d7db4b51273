//! `read-error`: a file that could not be read, or not as UTF-8.

use super::Rule;
use crate::diagnostic::{Diagnostic, Severity};
use crate::source::Span;

pub const RULE: Rule = Rule {
    name: "read-error",
    severity: Severity::Error,
    doc: include_str!("../../rules/read-error.md"),
    check: None,
};

pub fn read_error_diagnostic(span: Span, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(&RULE, span, message)
}
