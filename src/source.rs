//! Source files, byte spans and the byte -> line/column conversion.
//!
//! Everything inside txlint works on byte offsets into the host file; lines and columns are
//! computed only when a diagnostic is printed (ruff's habit).

use std::ops::Range;
use std::path::PathBuf;

/// The SQL dialect a text is written in: how it is tokenized and parsed, and whether the core
/// rules know its semantics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    #[default]
    Postgres,
    Mysql,
    Sqlite,
    Mssql,
    /// A database txlint cannot tell (sqlx `AnyPool`, `?` placeholders and nothing else).
    #[serde(skip)]
    Unknown,
}

impl Dialect {
    /// RULES.md gives the core rules' semantics for PostgreSQL and MySQL only.
    pub fn has_rules(self) -> bool {
        matches!(self, Dialect::Postgres | Dialect::Mysql)
    }

    pub fn name(self) -> &'static str {
        match self {
            Dialect::Postgres => "PostgreSQL",
            Dialect::Mysql => "MySQL",
            Dialect::Sqlite => "SQLite",
            Dialect::Mssql => "SQL Server",
            Dialect::Unknown => "an unknown database",
        }
    }
}

/// Index of a file in the run's files (`model::Program::files`).
pub type FileId = usize;

/// A byte range in one host file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub file: FileId,
    start: u32,
    end: u32,
}

impl Span {
    /// Offsets are kept in 32 bits (a run keeps many spans; no file txlint reads is 4 GiB).
    pub fn new(file: FileId, range: Range<usize>) -> Self {
        Span {
            file,
            start: narrow(range.start),
            end: narrow(range.end),
        }
    }

    pub fn start(&self) -> usize {
        self.start as usize
    }

    pub fn end(&self) -> usize {
        self.end as usize
    }

    pub fn range(&self) -> Range<usize> {
        self.start()..self.end()
    }

    /// `inner` lies within this span, in the same file.
    pub fn contains(&self, inner: Span) -> bool {
        self.file == inner.file && self.start <= inner.start && inner.end <= self.end
    }

    /// The smallest span covering both (same file assumed).
    pub fn cover(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// A file of the run: its path as shown to users and its text.
#[derive(Debug)]
pub struct SourceFile {
    /// Path as found on disk.
    pub path: PathBuf,
    /// Path shown in reports: relative to the working directory where possible, `/`-separated.
    pub display: String,
    /// See [`SourceFile::text`].
    text: String,
    /// The text read back from disk after it was let go (see [`SourceFile::dropped`]).
    back: std::sync::OnceLock<String>,
    pub lines: LineIndex,
    /// Not read yet: the front-end reads the file itself (a `.sql` file on the worker that
    /// extracts it; a Rust file in its batch), so that a large tree is never all in memory.
    pub unread: bool,
    /// The text was not kept once the file's facts existed (its length then): a report that
    /// shows the file reads it back (see [`SourceFile::text`]).
    pub dropped: Option<usize>,
}

impl SourceFile {
    pub fn new(path: PathBuf, display: String, text: String) -> Self {
        let lines = LineIndex::new(&text);
        SourceFile {
            path,
            display,
            text,
            back: std::sync::OnceLock::new(),
            lines,
            unread: false,
            dropped: None,
        }
    }

    /// A file to be read when it is needed (see [`SourceFile::unread`]).
    pub fn unread(path: PathBuf, display: String) -> Self {
        SourceFile {
            unread: true,
            ..SourceFile::new(path, display, String::new())
        }
    }

    /// Set the text of a file read late.
    pub fn set_text(&mut self, text: String) {
        self.lines = LineIndex::new(&text);
        self.text = text;
        self.unread = false;
    }

    /// Forget the text of a file nothing points into (a Rust file that sends no SQL).
    pub fn forget(&mut self) {
        self.text = String::new();
        self.lines = LineIndex::new("");
    }

    /// The file's text. A text not kept after extraction is read back from disk the first
    /// time a report asks; a file changed since (another length) gives no text, and its
    /// positions keep their lines, at column 1.
    pub fn text(&self) -> &str {
        match self.dropped {
            None => &self.text,
            Some(len) => self.back.get_or_init(|| match crate::io::read(&self.path) {
                Ok((text, _)) if text.len() == len => text,
                _ => String::new(),
            }),
        }
    }

    /// 1-based line of a byte offset (the text need not be in memory).
    pub fn line(&self, offset: usize) -> usize {
        self.lines.line_of(offset).max(1)
    }

    /// 1-based line and column (in chars) of a byte offset.
    pub fn line_col(&self, offset: usize) -> LineCol {
        self.lines.line_col(self.text(), offset)
    }

    /// The text of the 1-based line `line`, without its line break.
    pub fn line_text(&self, line: usize) -> &str {
        let text = self.text();
        let at = |l: usize| self.lines.line_start(l).unwrap_or(text.len());
        let (start, end) = (at(line), at(line + 1));
        text.get(start..end)
            .unwrap_or("")
            .trim_end_matches(['\n', '\r'])
    }
}

/// A position for people: 1-based line, 1-based column counted in Unicode scalar values, and
/// the same column counted in UTF-16 code units (what LSP clients expect by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
    pub column_utf16: usize,
}

/// Byte offsets of line starts.
#[derive(Debug, Default)]
pub struct LineIndex {
    /// In 32 bits, as spans are (a run keeps every file's lines).
    starts: Vec<u32>,
    /// The text's multi-byte characters: where each starts, and running totals through it of
    /// the bytes beyond one per character and of the characters UTF-16 writes as two units. A
    /// column is then found in the log of their number, not by walking its line (an ASCII text
    /// has none).
    wide: Vec<(u32, u32, u32)>,
}

/// See [`LineIndex::wide`].
fn wide_chars(text: &str) -> Vec<(u32, u32, u32)> {
    let (mut bytes, mut pairs) = (0, 0);
    let mut out: Vec<(u32, u32, u32)> = text
        .char_indices()
        .filter(|(_, c)| !c.is_ascii())
        .map(|(i, c)| {
            bytes += c.len_utf8() as u32 - 1;
            pairs += c.len_utf16() as u32 - 1;
            (i as u32, bytes, pairs)
        })
        .collect();
    out.shrink_to_fit();
    out
}

impl LineIndex {
    /// Lines as proc-macro2 counts them (at `\n` only), to place its line/column positions.
    pub fn at_newlines(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i as u32 + 1));
        LineIndex {
            starts,
            wide: wide_chars(text),
        }
    }

    /// Lines end at `\n`, `\r\n` or a lone `\r`.
    pub fn new(text: &str) -> Self {
        if !text.contains('\r') {
            let mut index = Self::at_newlines(text);
            index.starts.shrink_to_fit();
            return index;
        }
        let b = text.as_bytes();
        let mut starts = vec![0];
        starts.extend(
            (0..b.len())
                .filter(|&i| b[i] == b'\n' || (b[i] == b'\r' && b.get(i + 1) != Some(&b'\n')))
                .map(|i| i as u32 + 1),
        );
        starts.shrink_to_fit();
        LineIndex {
            starts,
            wide: wide_chars(text),
        }
    }

    /// The running totals of [`LineIndex::wide`] over the characters before byte `at`.
    fn wide_before(&self, at: usize) -> (usize, usize) {
        let i = self.wide.partition_point(|w| (w.0 as usize) < at);
        i.checked_sub(1).map_or((0, 0), |i| {
            (self.wide[i].1 as usize, self.wide[i].2 as usize)
        })
    }

    /// Byte offset of the 0-based character `column` of the 1-based `line` (proc-macro2's
    /// positions), at most `len`.
    pub fn offset_of_column(&self, line: usize, column: usize, len: usize) -> usize {
        let start = self.line_start(line).unwrap_or(len);
        // Each multi-byte character before the target moves it on by its extra bytes.
        let mut at = start + column;
        let mut i = self.wide.partition_point(|w| (w.0 as usize) < start);
        let mut extra = i.checked_sub(1).map_or(0, |j| self.wide[j].1);
        while let Some(&(p, total, _)) = self.wide.get(i).filter(|w| (w.0 as usize) < at) {
            debug_assert!(p as usize >= start);
            at += (total - extra) as usize;
            extra = total;
            i += 1;
        }
        at.min(len)
    }

    /// Without the text (let go and not read back), the line and column 1.
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = match text.is_empty() {
            true => offset,
            false => floor_char_boundary(text, offset.min(text.len())),
        };
        let line = self.line_of(offset).max(1);
        let line_start = self.starts.get(line - 1).map_or(0, |&s| s as usize);
        if text.is_empty() {
            return LineCol {
                line,
                column: 1,
                column_utf16: 1,
            };
        }
        let offset = offset.max(line_start);
        let ((b0, p0), (b1, p1)) = (self.wide_before(line_start), self.wide_before(offset));
        let chars = offset - line_start - (b1 - b0);
        LineCol {
            line,
            column: chars + 1,
            column_utf16: chars + (p1 - p0) + 1,
        }
    }

    /// Byte offset where the 1-based line `line` starts (the end of the text past the last line).
    pub fn line_start(&self, line: usize) -> Option<usize> {
        self.starts.get(line.checked_sub(1)?).map(|&s| s as usize)
    }

    /// 1-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s as usize <= offset)
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Maps byte offsets in an extracted snippet (a function body, the value of a Rust string
/// literal) back to byte offsets in the host file.
///
/// Stored as segment starts: within a segment, snippet and host advance together. Escapes in
/// the host (`''` in a quoted body, `\n` in a Rust literal) start a new segment.
#[derive(Clone, Debug)]
pub struct OffsetMap {
    /// (snippet offset, host offset), sorted by snippet offset, first entry at snippet offset 0.
    segments: Vec<(usize, usize)>,
}

impl OffsetMap {
    /// The snippet starts at `host_start` and is a verbatim copy of the host text.
    pub fn shifted(host_start: usize) -> Self {
        OffsetMap {
            segments: vec![(0, host_start)],
        }
    }

    /// Start a new segment: snippet offset `snippet` corresponds to host offset `host`.
    pub fn push(&mut self, snippet: usize, host: usize) {
        if let Some(last) = self.segments.last_mut()
            && last.0 == snippet
        {
            last.1 = host;
            return;
        }
        self.segments.push((snippet, host));
    }

    pub fn host(&self, snippet: usize) -> usize {
        let i = self.segments.partition_point(|&(s, _)| s <= snippet);
        let (s, h) = self.segments[i.saturating_sub(1)];
        h + snippet.saturating_sub(s)
    }

    /// Host range of a snippet range. The end maps like any offset: a range that ends with an
    /// escaped character (`''` kept as `'`) ends after the whole escape in the host.
    pub fn host_range(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let start = self.host(range.start);
        start..self.host(range.end).max(start)
    }

    /// Append `other`, a map for a snippet that continues this one at snippet offset `at`.
    pub fn extend(&mut self, at: usize, other: &OffsetMap) {
        for &(s, h) in &other.segments {
            self.push(s + at, h);
        }
    }

    /// `text` (whose bytes this map places) with `edits` applied, and the map of the result:
    /// kept bytes stay where they were; the bytes of a replacement all sit where the text it
    /// replaces started, and the text after it where that text ended. `edits` are sorted and
    /// do not overlap.
    pub fn splice(&self, text: &str, edits: &[(Range<usize>, String)]) -> (String, OffsetMap) {
        let mut out = String::with_capacity(text.len());
        let mut map = OffsetMap {
            segments: Vec::new(),
        };
        let mut at = 0;
        let keep = |out: &mut String, map: &mut OffsetMap, from: usize, to: usize| {
            map.push(out.len(), self.host(from));
            for &(s, h) in self.segments.iter().filter(|(s, _)| *s > from && *s < to) {
                map.push(out.len() + (s - from), h);
            }
            out.push_str(&text[from..to]);
        };
        for (range, with) in edits {
            keep(&mut out, &mut map, at, range.start);
            let host = self.host(range.start);
            for i in 0..with.len() {
                map.push(out.len() + i, host);
            }
            out.push_str(with);
            at = range.end;
        }
        keep(&mut out, &mut map, at, text.len());
        if map.segments.is_empty() {
            map.segments.push((0, self.host(0)));
        }
        (out, map)
    }

    /// Compose: a map for a snippet taken at `offset` inside this map's snippet.
    pub fn sub(&self, offset: usize) -> Self {
        let mut segments = vec![(0, self.host(offset))];
        segments.extend(
            self.segments
                .iter()
                .filter(|&&(s, _)| s > offset)
                .map(|&(s, h)| (s - offset, h)),
        );
        OffsetMap { segments }
    }
}

/// A Rust file, by its ending (`.rs`, in any case: `B.RS` is Rust, not SQL).
pub fn is_rust(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("rs"))
}

/// An offset in 32 bits: files are at most [`crate::io::MAX_FILE_SIZE`]; a larger document (an
/// editor's buffer) keeps its positions up to 4 GiB.
fn narrow(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as a `.sql` worker leaves it: lines kept, text let go, length noted.
    fn let_go(path: &std::path::Path, text: &str) -> SourceFile {
        let mut f = SourceFile::new(path.to_path_buf(), "f.sql".into(), String::new());
        f.lines = LineIndex::new(text);
        f.dropped = Some(text.len());
        f
    }

    #[test]
    fn a_text_let_go_is_read_back_for_positions() {
        let dir = std::env::temp_dir().join(format!("txlint-back-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.sql");
        let text = "select 1;\n  select é, 2;\n";
        std::fs::write(&path, text).unwrap();
        let f = let_go(&path, text);
        let at = text.find('2').unwrap();
        assert_eq!(f.line(at), 2, "the line needs no text");
        let lc = f.line_col(at);
        assert_eq!((lc.line, lc.column), (2, 13), "read back from disk");
        assert_eq!(f.line_text(2), "  select é, 2;");
        // Changed on disk since: no text, the lines still right, column 1.
        let g = let_go(&path, "select 1;\n  select é, 2; -- longer\n");
        std::fs::write(&path, "select 1;\n").unwrap();
        assert_eq!(g.text(), "");
        let lc = g.line_col(at);
        assert_eq!((lc.line, lc.column), (2, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn line_col_counts_chars_and_utf16() {
        let text = "ab\nçé𝄞x\n";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 0).line, 1);
        let x = text.find('x').unwrap();
        let lc = idx.line_col(text, x);
        assert_eq!((lc.line, lc.column, lc.column_utf16), (2, 4, 5));
    }

    #[test]
    fn columns_become_offsets_past_multibyte_characters() {
        let text = "ab\nçé𝄞x é\n";
        let idx = LineIndex::at_newlines(text);
        let x = text.find('x').unwrap();
        assert_eq!(idx.offset_of_column(2, 3, text.len()), x);
        assert_eq!(idx.offset_of_column(2, 0, text.len()), 3);
        assert_eq!(idx.offset_of_column(1, 1, text.len()), 1);
        assert_eq!(
            idx.offset_of_column(2, 5, text.len()),
            text.rfind('é').unwrap()
        );
        let lc = idx.line_col(text, text.rfind('é').unwrap());
        assert_eq!((lc.line, lc.column, lc.column_utf16), (2, 6, 7));
    }

    #[test]
    fn splice_places_replacements_on_what_they_replace() {
        // `SELECT * FROM {} WHERE id = $1` at host offset 100, `{}` filled with `jobs`.
        let text = "SELECT * FROM {} WHERE id = $1";
        let m = OffsetMap::shifted(100);
        let (out, map) = m.splice(text, &[(14..16, "jobs".to_string())]);
        assert_eq!(out, "SELECT * FROM jobs WHERE id = $1");
        assert_eq!(map.host(0), 100);
        assert_eq!(map.host(14), 114);
        assert_eq!(
            map.host(17),
            114,
            "inside the replacement: the placeholder's start"
        );
        let w = out.find("WHERE").unwrap();
        assert_eq!(map.host(w), 100 + text.find("WHERE").unwrap());
        assert_eq!(
            map.host_range(14..18),
            114..116,
            "the table spans the placeholder"
        );
    }

    #[test]
    fn offset_map_segments() {
        let mut m = OffsetMap::shifted(10);
        m.push(5, 16); // one escaped char dropped at snippet offset 5
        assert_eq!(m.host(0), 10);
        assert_eq!(m.host(4), 14);
        assert_eq!(m.host(5), 16);
        assert_eq!(m.sub(3).host(0), 13);
        assert_eq!(m.sub(3).host(3), 17);
    }
}
