//! GitLab code quality: a JSON array of issues (`artifacts: reports: codequality`), shown on
//! merge requests.

use serde_json::{Value, json};

use crate::diagnostic::Severity;
use crate::run::Run;

pub fn render(run: &Run) -> String {
    let root = super::sarif::Root::of(run);
    let prints = super::sarif::fingerprints(run, &root);
    let issues: Vec<Value> = run
        .diagnostics
        .iter()
        .zip(prints)
        .map(|(d, fingerprint)| {
            let file = &run.program.files[d.span.file];
            let start = file.line_col(d.span.start());
            let end = file.line_col(d.span.end().max(d.span.start()));
            let description = match &d.help {
                Some(h) => format!("{} (fix: {h})", d.message),
                None => d.message.clone(),
            };
            json!({
                "description": description,
                "check_name": d.rule,
                "fingerprint": fingerprint,
                "severity": match d.severity {
                    Severity::Error => "critical",
                    Severity::Warning => "major",
                    Severity::Info => "info",
                },
                "location": {
                    "path": root.display(&file.path),
                    "lines": { "begin": start.line, "end": end.line },
                },
            })
        })
        .collect();
    serde_json::to_string_pretty(&issues).unwrap_or_default() + "\n"
}
