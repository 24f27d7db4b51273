//! Baselines: the findings a codebase already had when it adopted txlint, so that a run
//! reports only new ones. A finding is known by its fingerprint (the SARIF one: rule, file,
//! the whitespace-folded text of its line, and the how-many-th such finding it is), which
//! survives lines moving and unrelated edits.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::report::sarif::{Root, fingerprints};
use crate::run::Run;

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    findings: Vec<Known>,
}

/// A finding as the baseline keeps it: the fingerprint decides; the rest is for readers.
#[derive(Serialize, Deserialize)]
struct Known {
    fingerprint: String,
    rule: String,
    path: String,
    line: usize,
    message: String,
}

/// The baseline of a run's findings, as JSON.
pub fn write(run: &Run) -> String {
    let findings = run
        .diagnostics
        .iter()
        .zip(fingerprints(run, &Root::of(run)))
        .map(|(d, fingerprint)| {
            let file = &run.program.files[d.span.file];
            Known {
                fingerprint,
                rule: d.rule.to_string(),
                path: file.display.clone(),
                line: file.line_col(d.span.start()).line,
                message: d.message.clone(),
            }
        })
        .collect();
    let file = File {
        version: 1,
        findings,
    };
    serde_json::to_string_pretty(&file).unwrap_or_default() + "\n"
}

/// The fingerprints a baseline file holds.
pub fn parse(text: &str) -> Result<HashSet<String>, String> {
    let file: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if file.version != 1 {
        return Err(format!(
            "version {} (this txlint reads version 1)",
            file.version
        ));
    }
    Ok(file.findings.into_iter().map(|k| k.fingerprint).collect())
}

/// Leave out the findings the baseline knows; `run.baselined` counts them.
pub fn apply(run: &mut Run, known: &HashSet<String>) {
    let prints = fingerprints(run, &Root::of(run));
    let before = run.diagnostics.len();
    let mut prints = prints.into_iter();
    run.diagnostics
        .retain(|_| prints.next().is_some_and(|p| !known.contains(&p)));
    run.baselined = before - run.diagnostics.len();
}
