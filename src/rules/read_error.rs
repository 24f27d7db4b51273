//! `read-error`: a file that could not be read, or not as UTF-8.

use crate::diagnostic::Diagnostic;
use crate::source::Span;

pub use crate::registry::READ_ERROR as RULE;

pub fn read_error_diagnostic(span: Span, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(&RULE, span, message)
}
