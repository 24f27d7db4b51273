//! GitHub Actions workflow commands: one `::error`/`::warning`/`::notice` line per finding,
//! which the Actions runner turns into annotations on the pull request's diff.

use crate::diagnostic::Severity;
use crate::run::Run;

pub fn render(run: &Run) -> String {
    let root = super::sarif::Root::of(run);
    let mut out = String::new();
    for d in &run.diagnostics {
        let file = &run.program.files[d.span.file];
        let start = file.line_col(d.span.start());
        let end = file.line_col(d.span.end().max(d.span.start()));
        let command = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let message = match &d.help {
            Some(h) => format!("{}\nhelp: {h}", d.message),
            None => d.message.clone(),
        };
        out += &format!(
            "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
            property(&root.display(&file.path)),
            start.line,
            start.column,
            end.line,
            end.column,
            property(d.rule),
            data(&message),
        );
    }
    out
}

/// A command's message: `%`, CR and LF escaped.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command's property value: also `:` and `,`.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}
