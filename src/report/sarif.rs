//! SARIF 2.1.0, as GitHub code scanning accepts it: rules built from the rule docs, relative
//! `%SRCROOT%` URIs, full regions (end column exclusive), explicit `columnKind`, and
//! `partialFingerprints` (uploads through the API do not compute them).

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::diagnostic::Severity;
use crate::registry::{ALL, Rule};
use crate::run::Run;
use crate::source::Span;

const MAX_DESCRIPTION: usize = 1024;

/// Results GitHub code scanning accepts in one run; past it the most severe are kept.
pub const MAX_RESULTS: usize = 25_000;

pub fn render(run: &Run) -> String {
    let rules: Vec<Value> = ALL.iter().map(rule).collect();
    let root = Root::of(run);
    let prints = fingerprints(run, &root);
    // The most severe first when some must go; reported in file order.
    let mut kept: Vec<usize> = (0..run.diagnostics.len()).collect();
    let dropped = kept.len().saturating_sub(MAX_RESULTS);
    if dropped > 0 {
        kept.sort_by_key(|&i| std::cmp::Reverse(run.diagnostics[i].severity));
        kept.truncate(MAX_RESULTS);
        kept.sort_unstable();
    }
    let results: Vec<Value> = kept
        .into_iter()
        .map(|i| {
            let d = &run.diagnostics[i];
            let index = ALL.iter().position(|r| r.name == d.rule).unwrap_or(0);
            let related: Vec<Value> = d
                .labels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let mut loc = location(run, &root, l.span);
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
                "locations": [location(run, &root, d.span)],
                "partialFingerprints": { "txlint/v1": prints[i] },
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
                "informationUri": crate::registry::HOME,
                "rules": rules,
            }},
            "originalUriBaseIds": { "%SRCROOT%": { "uri": root.uri } },
            "columnKind": "unicodeCodePoints",
            "results": results,
            "invocations": [invocation(dropped)],
        }],
    });
    serde_json::to_string_pretty(&sarif).unwrap_or_default() + "\n"
}

/// The run went through; how many results the cap left out, if any.
fn invocation(dropped: usize) -> Value {
    let mut inv = json!({ "executionSuccessful": true });
    if dropped > 0 {
        inv["toolExecutionNotifications"] = json!([{
            "level": "warning",
            "message": { "text": format!(
                "{dropped} results were left out: code scanning accepts at most {MAX_RESULTS} per run, and the most severe were kept"
            ) },
        }]);
    }
    inv
}

/// The folder every URI is relative to (`%SRCROOT%`; the GitHub and GitLab formats name files
/// relative to it too): the git repository's top folder above
/// the working folder (so paths match the checkout wherever txlint runs), else the working
/// folder; widened to a common ancestor when a file lies outside it.
pub struct Root {
    path: std::path::PathBuf,
    uri: String,
}

impl Root {
    pub fn of(run: &Run) -> Root {
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut path = cwd
            .ancestors()
            .find(|d| d.join(".git").exists())
            .unwrap_or(&cwd)
            .to_path_buf();
        for f in &run.program.files {
            let abs = crate::io::absolute(&f.path);
            while !abs.starts_with(&path) {
                match path.parent() {
                    Some(p) => path = p.to_path_buf(),
                    None => break,
                }
            }
        }
        let mut uri = format!(
            "file://{}",
            encode(&path.to_string_lossy().replace('\\', "/"))
        );
        if !uri.ends_with('/') {
            uri.push('/');
        }
        Root { path, uri }
    }

    /// `path` relative to the root, as a URI reference.
    fn relative(&self, path: &std::path::Path) -> String {
        encode(&self.display(path))
    }

    /// `path` relative to the root, with `/` between folders (GitHub annotations and GitLab
    /// reports name files so).
    pub(crate) fn display(&self, path: &std::path::Path) -> String {
        let abs = crate::io::absolute(path);
        let rel = abs.strip_prefix(&self.path).unwrap_or(&abs);
        rel.to_string_lossy().replace('\\', "/")
    }
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
    let help = r.published();
    json!({
        "id": r.name,
        "name": pascal(r.name),
        "shortDescription": { "text": truncate(&r.summary(), MAX_DESCRIPTION) },
        "fullDescription": { "text": truncate(&full.split_whitespace().collect::<Vec<_>>().join(" "), MAX_DESCRIPTION) },
        "help": { "text": help, "markdown": help },
        "helpUri": r.url(),
        "defaultConfiguration": { "level": level(r.severity) },
        "properties": { "tags": ["concurrency", "sql"] },
    })
}

/// `lost-update` as SARIF wants a rule's name, distinct from its id: `LostUpdate`.
fn pascal(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Message with the help appended: code scanning shows only the message on the alert.
fn message_text(d: &crate::diagnostic::Diagnostic) -> String {
    match &d.help {
        Some(h) => format!("{}. Fix: {h}", d.message),
        None => d.message.clone(),
    }
}

fn location(run: &Run, root: &Root, span: Span) -> Value {
    let file = &run.program.files[span.file];
    let start = file.line_col(span.start());
    let end = file.line_col(span.end().max(span.start()));
    // SARIF regions cannot be empty at the end of a line: give them one column.
    let end_column = if (end.line, end.column) == (start.line, start.column) {
        start.column + 1
    } else {
        end.column
    };
    json!({
        "physicalLocation": {
            "artifactLocation": { "uri": root.relative(&file.path), "uriBaseId": "%SRCROOT%" },
            "region": {
                "startLine": start.line,
                "startColumn": start.column,
                "endLine": end.line,
                "endColumn": end_column,
            },
        },
    })
}

/// Percent-encode a path for a URI.
pub(crate) fn encode(path: &str) -> String {
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

/// Stable across runs and unrelated edits: the rule, the file (relative to the [`Root`]), the
/// text of the flagged line (whitespace-folded) and the how-many-th such finding it is. Also
/// the key of `--baseline` files.
pub fn fingerprints(run: &Run, root: &Root) -> Vec<String> {
    let mut seen: HashMap<(String, u64), usize> = HashMap::new();
    // Once per rule and line: findings on one long line share it.
    let mut keys: HashMap<(&str, usize, usize), u64> = HashMap::new();
    run.diagnostics
        .iter()
        .map(|d| {
            let file = &run.program.files[d.span.file];
            let path = root.display(&file.path);
            let n = file.line_col(d.span.start()).line;
            let key = *keys.entry((d.rule, d.span.file, n)).or_insert_with(|| {
                let line = file.line_text(n);
                let folded = line.split_whitespace().collect::<Vec<_>>().join(" ");
                fnv1a(format!("{}\0{path}\0{folded}", d.rule).as_bytes())
            });
            let n = seen.entry((path, key)).or_insert(0);
            *n += 1;
            format!("{key:016x}:{n}")
        })
        .collect()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
