//! `--format concise`: one line per finding, `path:line:column: severity[rule] message`, the way
//! compilers, ruff and squawk print them for `grep`, editors' quickfix lists and logs.

use std::fmt::Write;

use crate::run::Run;

pub fn render(run: &Run) -> String {
    let mut out = String::new();
    for d in &run.diagnostics {
        let file = &run.program.files[d.span.file];
        let at = file.line_col(d.span.start());
        let _ = writeln!(
            out,
            "{}:{}:{}: {}[{}] {}",
            escaped(&file.display),
            at.line,
            at.column,
            d.severity.as_str(),
            d.rule,
            escaped(&d.message)
        );
    }
    out
}

/// Control characters escaped (`\n`, `\u{1b}`): one finding stays one line, and nothing from a
/// source file reaches the terminal as a command.
pub(super) fn escaped(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            super::escaped("a\u{1b}]0;x\u{7}\nb"),
            "a\\u{1b}]0;x\\u{7}\\nb"
        );
        assert_eq!(super::escaped("plain é"), "plain é");
    }
}
