//! SARIF 2.1.0, as GitHub code scanning accepts it: rules built from the rule docs, relative
//! `%SRCROOT%` URIs, full regions (end column exclusive), explicit `columnKind`, and
//! `partialFingerprints` (uploads through the API do not compute them).

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::Run;
use crate::diagnostic::Severity;
use crate::rules::{ALL, Rule};
use crate::source::Span;

const MAX_DESCRIPTION: usize = 1024;

pub fn render(run: &Run) -> String {
    let rules: Vec<Value> = ALL.iter().map(rule).collect();
    let mut seen: HashMap<(String, u64), usize> = HashMap::new();
    let results: Vec<Value> = run
        .diagnostics
        .iter()
        .map(|d| {
            let index = ALL.iter().position(|r| r.name == d.rule).unwrap_or(0);
            let related: Vec<Value> = d
                .labels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let mut loc = location(run, l.span);
                    loc["id"] = json!(i);
                    loc["message"] = json!({ "text": l.message });
                    loc
                })
                .collect();
            let mut result = json!({
                "ruleId": d.rule,
                "ruleIndex": index,
                "level": level(d.severity),
                "message": { "text": message_text(d) },
                "locations": [location(run, d.span)],
                "partialFingerprints": { "txlint/v1": fingerprint(run, d, &mut seen) },
            });
            if !related.is_empty() {
                result["relatedLocations"] = json!(related);
            }
            result
        })
        .collect();
    let sarif = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "txlint",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&sarif).unwrap_or_default() + "\n"
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn rule(r: &Rule) -> Value {
    let full = r.section("What it does").unwrap_or_default();
    json!({
        "id": r.name,
        "name": r.name,
        "shortDescription": { "text": truncate(&r.summary(), MAX_DESCRIPTION) },
        "fullDescription": { "text": truncate(&full.split_whitespace().collect::<Vec<_>>().join(" "), MAX_DESCRIPTION) },
        "help": { "text": r.body(), "markdown": r.body() },
        "defaultConfiguration": { "level": level(r.severity) },
        "properties": { "tags": ["concurrency", "sql"] },
    })
}

/// Message with the help appended: code scanning shows only the message on the alert.
fn message_text(d: &crate::diagnostic::Diagnostic) -> String {
    match &d.help {
        Some(h) => format!("{}. Fix: {h}", d.message),
        None => d.message.clone(),
    }
}

fn location(run: &Run, span: Span) -> Value {
    let file = &run.program.files[span.file];
    let start = file.line_col(span.start);
    let end = file.line_col(span.end.max(span.start));
    // SARIF regions cannot be empty at the end of a line: give them one column.
    let end_column = if (end.line, end.column) == (start.line, start.column) {
        start.column + 1
    } else {
        end.column
    };
    json!({
        "physicalLocation": {
            "artifactLocation": { "uri": uri(&file.display), "uriBaseId": "%SRCROOT%" },
            "region": {
                "startLine": start.line,
                "startColumn": start.column,
                "endLine": end.line,
                "endColumn": end_column,
            },
        },
    })
}

/// Percent-encode a relative path for a URI reference.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

/// Stable across runs and unrelated edits: the rule, the file, the text of the flagged line
/// (whitespace-folded) and the how-many-th such finding it is.
fn fingerprint(
    run: &Run,
    d: &crate::diagnostic::Diagnostic,
    seen: &mut HashMap<(String, u64), usize>,
) -> String {
    let file = &run.program.files[d.span.file];
    let line = file.line_text(file.line_col(d.span.start).line);
    let folded: String = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let key = fnv1a(format!("{}\0{}\0{}", d.rule, file.display, folded).as_bytes());
    let n = seen.entry((file.display.clone(), key)).or_insert(0);
    *n += 1;
    format!("{key:016x}:{n}")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
