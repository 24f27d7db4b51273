//! Inline suppressions: `-- txlint: ignore <rule>[, <rule>] [-- reason]` on the line above a
//! finding (or above its statement) or at the end of the finding's own line, `-- txlint:
//! ignore-file <rule>` anywhere in the file; `//` instead of `--` in Rust, `/* .. */` in both.

use crate::diagnostic::Diagnostic;
use crate::rules::{self, unused_suppression::unused_suppression_diagnostic};
use crate::source::{FileId, SourceFile, Span};

#[derive(Debug)]
pub struct Suppression {
    pub span: Span,
    /// 1-based line of the comment.
    pub line: usize,
    pub whole_file: bool,
    /// After code on its line: it applies to that line, not the next.
    pub trailing: bool,
    pub rules: Vec<String>,
    used: Vec<bool>,
}

/// Find the suppression comments of a file (comment markers outside comments are rare enough in
/// SQL and Rust that a line scan is the right tool: it also sees comments inside routine bodies
/// and Rust string literals).
pub fn scan(file: FileId, text: &str) -> Vec<Suppression> {
    let mut out = Vec::new();
    // Most files have no marker at all: one search over the text spares them the line scan.
    if !text.contains("txlint:") {
        return out;
    }
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        // `TXLINT: IGNORE` is the same comment: case is a slip, not another meaning.
        let lower = line.to_ascii_lowercase();
        let Some(at) = lower.find("txlint:") else {
            continue;
        };
        let before = lower[..at].trim_end();
        let Some(opener) = ["--", "//", "/*"].into_iter().find(|m| before.ends_with(m)) else {
            continue;
        };
        let marker = before.len() - 2;
        // Code before the comment: it is about the findings of this line, not the next.
        let trailing = !lower[..marker].trim().is_empty();
        let rest = lower[at + "txlint:".len()..].trim_start();
        let (whole_file, rest) = if let Some(r) = rest.strip_prefix("ignore-file") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("ignore") {
            (false, r)
        } else {
            continue;
        };
        // A block comment ends at `*/`; ` --` starts the reason.
        let rest = match opener {
            "/*" => rest.split("*/").next().unwrap_or(""),
            _ => rest,
        };
        let list = rest
            .split(" --")
            .next()
            .unwrap_or("")
            .trim_end_matches(['\r', '\n']);
        let names: Vec<String> = list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let end = start + line.trim_end_matches(['\r', '\n']).len();
        out.push(Suppression {
            span: Span::new(file, start + marker..end),
            line: n + 1,
            whole_file,
            trailing,
            used: vec![false; names.len()],
            rules: names,
        });
    }
    out
}

/// Drop suppressed diagnostics; add `unused-suppression` for comments that suppressed nothing.
/// `enabled` says whether a rule ran (a suppression of a rule turned off is not unused).
pub fn apply(
    files: &[SourceFile],
    suppressions: &mut [Suppression],
    diagnostics: Vec<Diagnostic>,
    enabled: &dyn Fn(&str) -> bool,
) -> Vec<Diagnostic> {
    let mut kept: Vec<Diagnostic> = diagnostics
        .into_iter()
        .filter(|d| !suppress(files, suppressions, d))
        .collect();
    if !enabled(rules::unused_suppression::RULE.name) {
        return kept;
    }
    let mut unused = Vec::new();
    for s in suppressions.iter() {
        if s.rules.is_empty() {
            unused.push(unused_suppression_diagnostic(
                s.span,
                "suppression names no rule",
            ));
        }
        for (rule, used) in s.rules.iter().zip(&s.used) {
            if crate::registry::find(rule).is_none() {
                unused.push(unused_suppression_diagnostic(
                    s.span,
                    format!("suppression names unknown rule `{rule}`"),
                ));
            } else if !used && enabled(rule) {
                unused.push(unused_suppression_diagnostic(
                    s.span,
                    format!("suppression of `{rule}` matches no finding"),
                ));
            }
        }
    }
    // `ignore-file unused-suppression` still works.
    unused.retain(|d| !suppress(files, suppressions, d));
    kept.extend(unused);
    kept
}

fn suppress(files: &[SourceFile], suppressions: &mut [Suppression], d: &Diagnostic) -> bool {
    let lines = &files[d.span.file].lines;
    let targets = [Some(d.span), d.statement].map(|s| s.map(|s| lines.line_of(s.start())));
    for s in suppressions
        .iter_mut()
        .filter(|s| s.span.file == d.span.file)
    {
        let line = if s.trailing { s.line } else { s.line + 1 };
        let applies = s.whole_file || targets.iter().flatten().any(|&l| l == line);
        if !applies || s.span == d.span {
            continue;
        }
        if let Some(i) = s.rules.iter().position(|r| r == d.rule) {
            s.used[i] = true;
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments() {
        let s = scan(
            0,
            "select 1;\n  -- txlint: ignore a-b, c -- because\n// txlint: ignore-file d\n-- txlint:nothing\n",
        );
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].line, s[0].whole_file), (2, false));
        assert_eq!(s[0].rules, vec!["a-b", "c"]);
        assert_eq!((s[1].line, s[1].whole_file), (3, true));
        assert_eq!(s[1].rules, vec!["d"]);
        assert!(!s[0].trailing && !s[1].trailing);
    }

    #[test]
    fn trailing_block_and_upper_case_forms() {
        let s = scan(
            0,
            "select 1; -- txlint: ignore a -- why\nselect 2; /* TXLINT: Ignore B, c */\n  /* txlint: ignore d */\n",
        );
        let seen: Vec<_> = s
            .iter()
            .map(|s| (s.line, s.trailing, s.rules.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                (1, true, vec!["a".to_string()]),
                (2, true, vec!["b".to_string(), "c".to_string()]),
                (3, false, vec!["d".to_string()]),
            ]
        );
    }
}
