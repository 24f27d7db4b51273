//! The human report: miette's graphical rendering of each finding, then a summary line.

use std::collections::HashMap;
use std::fmt;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};

use super::concise::escaped;
use super::{TextStyle, counts};
use crate::diagnostic::{Diagnostic, Severity};
use crate::run::Run;
use crate::source::{SourceFile, Span};

/// A source file as miette reads it, named by its display path, without copying its text
/// (but see [`Shown`]).
struct Source<'a>(&'a SourceFile, &'a str);

/// The texts of files shown that hold control characters (an escape sequence in a comment),
/// with each replaced by `?` (or `¿` for a two-byte one): every offset stays where it was, and
/// nothing from a source file reaches the terminal as a command.
#[derive(Default)]
struct Shown(HashMap<usize, String>);

impl Shown {
    fn of(run: &Run) -> Self {
        let mut shown = Shown::default();
        let spans = run
            .diagnostics
            .iter()
            .flat_map(|d| std::iter::once(d.span.file).chain(d.labels.iter().map(|l| l.span.file)));
        // Each file once: a file of many findings is scanned once, not once per finding.
        let mut seen = std::collections::HashSet::new();
        for id in spans.filter(|&id| seen.insert(id)) {
            let text = run.program.files[id].text();
            let unsafe_char = |c: char| c.is_control() && !matches!(c, '\n' | '\r' | '\t');
            if text.chars().any(unsafe_char) {
                let clean = text
                    .chars()
                    .map(|c| match (unsafe_char(c), c.len_utf8()) {
                        (false, _) => c,
                        (true, 1) => '?',
                        (true, _) => '¿',
                    })
                    .collect();
                shown.0.insert(id, clean);
            }
        }
        shown
    }

    fn source<'a>(&'a self, run: &'a Run, id: usize) -> Source<'a> {
        let file = &run.program.files[id];
        Source(file, self.0.get(&id).map_or(file.text(), String::as_str))
    }
}

impl SourceCode for Source<'_> {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        // miette finds the context by scanning the text from its start, which made a report of
        // many findings in one large file quadratic: it scans only the lines around the span
        // (with a line to spare on each side; line breaks are counted alike), and the result is
        // moved back into the whole text.
        let text = self.1;
        let lines = &self.0.lines;
        let end = span.offset() + span.len();
        let first = lines
            .line_of(span.offset())
            .saturating_sub(before + 1)
            .max(1);
        let last = lines.line_of(end) + after + 2;
        let from = lines.line_start(first).unwrap_or(0);
        let to = lines.line_start(last).unwrap_or(text.len());
        let (window, from, skipped) = match text.get(from..to) {
            // A very long line (minified SQL, a generated file): the snippet is a window of
            // it around the span, not the whole line for every finding on it.
            Some(_) if from <= span.offset() && end <= to && to - from > LONG_WINDOW => {
                let mut lo = span.offset().saturating_sub(AROUND).max(from);
                while !text.is_char_boundary(lo) {
                    lo -= 1;
                }
                let mut hi = (end + AROUND).min(to);
                while !text.is_char_boundary(hi) {
                    hi += 1;
                }
                (&text[lo..hi], lo, lines.line_of(lo).max(1) - 1)
            }
            Some(window) if from <= span.offset() && end <= to => (window, from, first - 1),
            _ => (text, 0, 0),
        };
        let local = SourceSpan::new((span.offset() - from).into(), span.len());
        let inner = window.read_span(&local, before, after)?;
        let at = SourceSpan::new((inner.span().offset() + from).into(), inner.span().len());
        // miette counts columns in bytes; txlint reports code points everywhere.
        let column = self.0.line_col(at.offset()).column - 1;
        Ok(Box::new(MietteSpanContents::new_named(
            self.0.display.clone(),
            inner.data(),
            at,
            inner.line() + skipped,
            column,
            // miette's own count runs from the start of the text (it merges the snippets of
            // two labels on it); kept so, the report is the same.
            inner.line_count() + skipped,
        )))
    }
}

/// One finding (or a label in another file, as a related item) as a miette diagnostic.
struct Report<'a> {
    code: Option<&'a str>,
    severity: miette::Severity,
    message: &'a str,
    help: Option<&'a str>,
    source: Source<'a>,
    labels: Vec<LabeledSpan>,
    related: Vec<Report<'a>>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.code.map(|c| Box::new(c) as Box<dyn fmt::Display>)
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }
    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.help.map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn miette::Diagnostic> + 'b>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(
            self.related.iter().map(|r| r as &dyn miette::Diagnostic),
        ))
    }
}

fn source_span(span: Span) -> SourceSpan {
    (span.start(), span.end() - span.start()).into()
}

fn report<'a>(run: &'a Run, shown: &'a Shown, d: &'a Diagnostic) -> Report<'a> {
    let mut labels = vec![LabeledSpan::new_primary_with_span(
        d.note.clone(),
        source_span(d.span),
    )];
    let mut related = Vec::new();
    for l in &d.labels {
        if l.span.file == d.span.file {
            labels.push(LabeledSpan::new_with_span(
                Some(l.message.clone()),
                source_span(l.span),
            ));
        } else {
            related.push(Report {
                code: None,
                severity: miette::Severity::Advice,
                message: &l.message,
                help: None,
                source: shown.source(run, l.span.file),
                labels: vec![LabeledSpan::new_primary_with_span(
                    None,
                    source_span(l.span),
                )],
                related: Vec::new(),
            });
        }
    }
    Report {
        code: Some(d.rule),
        severity: match d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
            Severity::Info => miette::Severity::Advice,
        },
        message: &d.message,
        help: d.help.as_deref(),
        source: shown.source(run, d.span.file),
        labels,
        related,
    }
}

/// Every finding, rendered; no summary (the fixture snapshots use this).
pub fn render_findings(run: &Run, style: TextStyle) -> String {
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false);
    let mut out = String::new();
    let shown = Shown::of(run);
    for d in &run.diagnostics {
        let r = report(run, &shown, d);
        if !drawable(run, d) || handler.render_report(&mut out, &r).is_err() {
            // Never lose a finding to a rendering problem: fall back to one line.
            let lc = run.program.files[d.span.file].line_col(d.span.start());
            out += &format!(
                "{}:{}:{}: {}: {}\n",
                escaped(&run.program.files[d.span.file].display),
                lc.line,
                lc.column,
                d.rule,
                escaped(&d.message)
            );
        }
        out.push('\n');
    }
    out
}

/// Lines around a span longer than this in all are cut to [`AROUND`] bytes each side of it.
const LONG_WINDOW: usize = 8 * 1024;
const AROUND: usize = 160;

/// Spans longer than this are not drawn as a snippet: miette pads a label to its width (and to
/// its column in the snippet), which a format width cannot do past 65,535 (it panics), and no
/// terminal would show it.
const WIDEST: usize = 10_000;

/// Every place of the finding is short enough to draw, and on a line that is, or that the
/// snippet cuts to a window (see [`LONG_WINDOW`]).
fn drawable(run: &Run, d: &Diagnostic) -> bool {
    std::iter::once(d.span)
        .chain(d.labels.iter().map(|l| l.span))
        .all(|span| {
            let file = &run.program.files[span.file];
            let cut = file.line_text(file.line_col(span.start()).line).len() > LONG_WINDOW;
            span.end() - span.start() <= WIDEST
                && (cut
                    || [span.start(), span.end()]
                        .iter()
                        .all(|&at| file.line_col(at).column <= WIDEST))
        })
}

pub fn render(run: &Run, style: TextStyle) -> String {
    let mut out = render_findings(run, style);
    out += &summary(run);
    out.push('\n');
    out
}

/// `checked 3 files, 40 statements (38 parsed, 2 read from tokens only) in 0.01s: 1 error, 2 warnings`
pub fn summary(run: &Run) -> String {
    let c = counts(run);
    let files = run.program.files.len();
    let s = run.stats;
    let mut findings = match (c.errors, c.warnings) {
        (0, 0) if c.infos == 0 => "no findings".to_string(),
        (0, 0) => "no errors or warnings".to_string(),
        _ => format!(
            "{}, {}",
            plural(c.errors, "error"),
            plural(c.warnings, "warning")
        ),
    };
    if c.infos > 0 {
        findings += &format!(" ({})", plural(c.infos, "info note"));
    }
    let mut aside = Vec::new();
    if run.context > 0 {
        aside.push(format!("{} more read as context", run.context));
    }
    if run.baselined > 0 {
        aside.push(format!(
            "{} in the baseline, not shown",
            plural(run.baselined, "finding")
        ));
    }
    let unread = run.program.unread_sql.len();
    if unread > 0 {
        aside.push(format!(
            "{} with SQL txlint could not read, listed by `txlint model`",
            plural(unread, "query call")
        ));
    }
    if let Some(f) = run.program.cockroach.and_then(|f| run.program.files.get(f)) {
        aside.push(format!(
            "transactions at SERIALIZABLE unless they set a level: {} is CockroachDB's",
            f.display
        ));
    }
    if s.rust_skipped > 0 {
        aside.push(format!(
            "{} with no SQL or handle, not parsed",
            plural(s.rust_skipped, "Rust file")
        ));
    }
    let aside = match aside.is_empty() {
        true => String::new(),
        false => format!(" ({})", aside.join("; ")),
    };
    format!(
        "checked {}{aside}, {} ({} parsed, {} read from tokens only) in {:.2}s: {findings}",
        plural(files - run.context, "file"),
        plural(s.statements, "statement"),
        s.parsed,
        s.fallback,
        run.elapsed.as_secs_f64(),
    )
}

pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading only the lines around a span gives what miette's scan of the whole text gives.
    #[test]
    fn context_read_from_the_lines_around_a_span_is_the_whole_texts() {
        let mut text = String::new();
        for i in 0..60 {
            let end = ["\n", "\r\n", "\r"][i % 3];
            text.push_str(&format!("line {i} é{end}"));
            if i % 7 == 0 {
                text.push_str(end);
            }
        }
        text.push_str("last line without a break");
        let file = SourceFile::new("t.sql".into(), "t.sql".into(), text.clone());
        let source = Source(&file, file.text());
        let spans = (0..text.len())
            .step_by(5)
            .filter(|&o| text.is_char_boundary(o))
            .flat_map(|o| [(o, 0), (o, 1), (o, 40), (o, 400)])
            .filter(|&(o, l)| o + l <= text.len() && text.is_char_boundary(o + l));
        for (offset, len) in spans {
            for context in [0, 1, 2, 5] {
                let span = SourceSpan::new(offset.into(), len);
                let whole = text
                    .read_span(&span, context, context)
                    .expect("in the text");
                let ours = source
                    .read_span(&span, context, context)
                    .expect("in the text");
                let at = (offset, len, context);
                assert_eq!(ours.data(), whole.data(), "{at:?}");
                assert_eq!(ours.span(), whole.span(), "{at:?}");
                assert_eq!(ours.line(), whole.line(), "{at:?}");
                assert_eq!(ours.line_count(), whole.line_count(), "{at:?}");
            }
        }
    }
}
