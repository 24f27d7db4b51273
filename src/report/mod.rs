//! Reporters: one function per output format, all fed the same [`crate::Run`].

pub mod graph;
pub mod json;
pub mod model;
pub mod sarif;
pub mod schema;
pub mod text;

use crate::Run;
use crate::diagnostic::Severity;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Source snippets with the finding, its labels and help (miette).
    Text,
    /// One JSON document with every finding (schema in docs/output.md).
    Json,
    /// SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.
    Sarif,
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
        Format::Json => json::render(run),
        Format::Sarif => sarif::render(run),
    }
}

/// (errors, warnings) among the findings.
pub fn counts(run: &Run) -> (usize, usize) {
    let errors = run
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    (errors, run.diagnostics.len() - errors)
}
