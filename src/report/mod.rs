//! Reporters: one function per output format, all fed the same [`crate::run::Run`].

pub mod concise;
pub mod github;
pub mod gitlab;
pub mod graph;
pub mod json;
pub mod model;
pub mod sarif;
pub mod schema;
pub mod text;

use crate::diagnostic::Severity;
use crate::run::Run;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Source snippets with the finding, its labels and help (miette).
    Text,
    /// One line per finding: `path:line:column: severity[rule] message`.
    Concise,
    /// One JSON document with every finding (schema in docs/output.md).
    Json,
    /// SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=..,line=..::message`): annotations on
    /// the pull request without code scanning.
    Github,
    /// GitLab code quality report (JSON), for `artifacts: reports: codequality`.
    Gitlab,
}

/// How the text report is drawn.
#[derive(Clone, Copy, Debug)]
pub struct TextStyle {
    pub color: bool,
    pub width: usize,
}

pub fn render(run: &Run, format: Format, style: TextStyle) -> String {
    match format {
        Format::Text => text::render(run, style),
        Format::Concise => concise::render(run),
        Format::Json => json::render(run),
        Format::Sarif => sarif::render(run),
        Format::Github => github::render(run),
        Format::Gitlab => gitlab::render(run),
    }
}

/// How many findings of each severity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
}

pub fn counts(run: &Run) -> Counts {
    let mut c = Counts::default();
    for d in &run.diagnostics {
        match d.severity {
            Severity::Error => c.errors += 1,
            Severity::Warning => c.warnings += 1,
            Severity::Info => c.infos += 1,
        }
    }
    c
}
