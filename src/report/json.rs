//! The JSON report. Its schema is documented in `docs/output.md` and versioned by `version`:
//! fields are only ever added within a version.

use serde::Serialize;

use super::counts;
use crate::run::Run;
use crate::source::Span;

#[derive(Serialize)]
struct Output<'a> {
    version: u32,
    tool: Tool,
    diagnostics: Vec<Finding<'a>>,
    summary: Summary,
}

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct Finding<'a> {
    rule: &'a str,
    severity: &'a str,
    message: &'a str,
    path: &'a str,
    start: Position,
    end: Position,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    labels: Vec<Location<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    help: Option<&'a str>,
    /// `check --witness`: the two-session script that shows the race, or what is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    witness: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct Location<'a> {
    message: &'a str,
    path: &'a str,
    start: Position,
    end: Position,
}

/// 1-based line, 1-based column in Unicode code points, 0-based byte offset.
#[derive(Serialize)]
pub struct Position {
    line: usize,
    column: usize,
    offset: usize,
}

#[derive(Serialize)]
struct Summary {
    /// Files reported on (named, or found in the folders named).
    files: usize,
    /// Files read only as context for them (see `check --no-context`).
    context: usize,
    /// Findings left out because the `--baseline` file has them.
    baselined: usize,
    /// Rust files the pre-scan found no SQL or handle in: not parsed.
    skipped: usize,
    statements: usize,
    parsed: usize,
    fallback: usize,
    errors: usize,
    warnings: usize,
    infos: usize,
}

fn position(run: &Run, file: usize, offset: usize) -> Position {
    let lc = run.program.files[file].line_col(offset);
    Position {
        line: lc.line,
        column: lc.column,
        offset,
    }
}

fn range(run: &Run, span: Span) -> (&str, Position, Position) {
    (
        &run.program.files[span.file].display,
        position(run, span.file, span.start()),
        position(run, span.file, span.end()),
    )
}

pub fn render(run: &Run) -> String {
    let c = counts(run);
    let diagnostics = run
        .diagnostics
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (path, start, end) = range(run, d.span);
            Finding {
                rule: d.rule,
                severity: d.severity.as_str(),
                message: &d.message,
                path,
                start,
                end,
                note: d.note.as_deref(),
                labels: d
                    .labels
                    .iter()
                    .map(|l| {
                        let (path, start, end) = range(run, l.span);
                        Location {
                            message: &l.message,
                            path,
                            start,
                            end,
                        }
                    })
                    .collect(),
                help: d.help.as_deref(),
                witness: run
                    .witnesses
                    .get(i)
                    .and_then(Option::as_ref)
                    .map(|w| match w {
                        Ok(w) => serde_json::to_value(w).unwrap_or_default(),
                        Err(why) => serde_json::json!({ "missing": why }),
                    }),
            }
        })
        .collect();
    let output = Output {
        version: 1,
        tool: Tool {
            name: "txlint",
            version: env!("CARGO_PKG_VERSION"),
        },
        diagnostics,
        summary: Summary {
            files: run.program.files.len() - run.context,
            context: run.context,
            baselined: run.baselined,
            skipped: run.stats.rust_skipped,
            statements: run.stats.statements,
            parsed: run.stats.parsed,
            fallback: run.stats.fallback,
            errors: c.errors,
            warnings: c.warnings,
            infos: c.infos,
        },
    };
    serde_json::to_string_pretty(&output).unwrap_or_default() + "\n"
}
