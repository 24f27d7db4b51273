//! `syntax-error`: a statement sqlparser could not parse.

use crate::diagnostic::Diagnostic;
use crate::model::ParseFailure;

pub use crate::registry::SYNTAX_ERROR as RULE;

pub fn syntax_error_diagnostic(failure: &ParseFailure) -> Diagnostic {
    if failure.host {
        return Diagnostic::new(
            &RULE,
            failure.span,
            format!(
                "this file is not valid Rust to syn ({}), so its SQL strings were read without knowing which connection or transaction they run on",
                failure.message
            ),
        )
        .note("parsed up to here")
        .help("fix the Rust syntax error; until then txlint reports only what needs no executor");
    }
    let message = failure.message.trim_end_matches('.');
    let message = message
        .strip_prefix("sql parser error: ")
        .unwrap_or(message)
        .replace("Expected: ", "expected ")
        .replace(", found: EOF", ", found the end of the statement")
        .replace(", found: ", ", found ");
    Diagnostic::new(&RULE, failure.span, format!("statement could not be parsed: {}", lower_first(&message)))
        .note("parsed up to here")
        .help("if PostgreSQL accepts this statement, txlint still read its locks and transaction control from its tokens; other facts of it are not analysed")
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}
