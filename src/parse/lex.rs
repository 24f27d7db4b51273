//! A small SQL tokenizer over byte offsets.
//!
//! It knows just enough lexical structure to split scripts and to read the facts this tool is
//! about (locking clauses, advisory-lock calls, transaction control) without a grammar: strings
//! of every PostgreSQL and MySQL form, dollar quotes, nested block comments, psql meta-commands
//! and `:var` interpolations. It never fails: unterminated constructs run to the end of input,
//! except at the top level of a script, where the lexer notes the first one and reads on from
//! the line after its opening (see [`Lexer::unterminated`]).

use crate::source::{Dialect, OffsetMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Keyword or unquoted identifier.
    Word,
    /// `"ident"` (or MySQL's `` `ident` ``).
    QuotedIdent,
    /// Any string literal, including dollar-quoted ones.
    String,
    Number,
    /// `$1`-style parameter.
    Param,
    /// psql interpolation `:var`, `:'var'`, `:"var"`.
    PsqlVar,
    /// Operators and punctuation; `::` and `:=` are one token.
    Punct,
    Semicolon,
    Comment,
    /// psql meta-command: backslash up to the end of the line (`\;` is two bytes only).
    Meta,
}

/// Offsets are kept in 32 bits (a file is at most [`crate::io::MAX_FILE_SIZE`]): a statement's
/// tokens are held while it is read, and a generated one can have millions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    start: u32,
    end: u32,
}

impl Token {
    /// Where the token starts, in bytes.
    pub fn start(&self) -> usize {
        self.start as usize
    }

    /// Where it ends, in bytes.
    pub fn end(&self) -> usize {
        self.end as usize
    }

    pub fn text<'s>(&self, src: &'s str) -> &'s str {
        &src[self.start()..self.end()]
    }

    /// The token's bytes: tests against ASCII words need no character boundaries checked (they
    /// run for every token, many times per statement).
    fn bytes<'s>(&self, src: &'s str) -> &'s [u8] {
        src.as_bytes()
            .get(self.start()..self.end())
            .unwrap_or_default()
    }

    /// Case-insensitive keyword test for word tokens.
    pub fn is(&self, src: &str, word: &str) -> bool {
        self.kind == Kind::Word
            && self.end() - self.start() == word.len()
            && self.bytes(src).eq_ignore_ascii_case(word.as_bytes())
    }

    pub fn is_punct(&self, src: &str, p: &str) -> bool {
        self.kind == Kind::Punct
            && self.end() - self.start() == p.len()
            && self.bytes(src) == p.as_bytes()
    }
}

pub struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    /// MySQL: backslash escapes, `"..."` strings, `#` comments, no dollar quotes.
    mysql: bool,
    /// `` `name` `` quotes an identifier (MySQL, SQLite).
    backticks: bool,
    /// `[name]` quotes an identifier (SQL Server, SQLite).
    brackets: bool,
    /// Recognise psql meta-commands and variables (top level of a `.sql` script only).
    psql: bool,
    /// The top level of a `.sql` script: a quote or comment left open reads on from the next
    /// line (PostgreSQL rejects the file; the rest is still worth reading).
    script: bool,
    /// The last quoted run reached the end of the input unclosed.
    ran_out: bool,
    /// The first construct left open at the end of the input: where it opens, and what it is.
    pub unterminated: Option<(usize, &'static str)>,
}

impl<'a> Lexer<'a> {
    /// `psql`: the top level of a `.sql` script, where psql meta-commands and `:'var'` forms
    /// live. Elsewhere (routine bodies, strings in host code) a `:name` is still a template
    /// variable or a named parameter.
    pub fn new(src: &'a str, dialect: Dialect, psql: bool) -> Self {
        let mysql = dialect == Dialect::Mysql;
        Lexer {
            src,
            b: src.as_bytes(),
            pos: 0,
            mysql,
            backticks: matches!(dialect, Dialect::Mysql | Dialect::Sqlite | Dialect::Unknown),
            brackets: matches!(dialect, Dialect::Mssql | Dialect::Sqlite),
            psql: psql && dialect == Dialect::Postgres,
            script: psql,
            ran_out: false,
            unterminated: None,
        }
    }

    /// After a quoted run or comment opened at `start`: if it ran to the end of the input, note
    /// it, and in a script read on from the line after its opening.
    fn closed_or_note(&mut self, start: usize, what: &'static str) {
        if !std::mem::take(&mut self.ran_out) {
            return;
        }
        self.unterminated.get_or_insert((start, what));
        if self.script {
            self.pos = self.src[start..]
                .find('\n')
                .map_or(self.b.len(), |i| start + i);
        }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Skip `COPY ... FROM stdin` data: from the next line up to and including a line `\.`.
    /// Returns the byte range of the skipped data.
    pub fn skip_copy_data(&mut self) -> std::ops::Range<usize> {
        let start = match self.src[self.pos..].find('\n') {
            Some(i) => self.pos + i + 1,
            None => self.b.len(),
        };
        let mut line = start;
        while line < self.b.len() {
            let end = self.src[line..]
                .find('\n')
                .map_or(self.b.len(), |i| line + i);
            if self.src[line..end].trim_end_matches('\r') == "\\." {
                self.pos = (end + 1).min(self.b.len());
                return start..line;
            }
            line = end + 1;
        }
        self.pos = self.b.len();
        start..self.b.len()
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.b.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn tok(&mut self, kind: Kind, start: usize) -> Option<Token> {
        // Offsets beyond 32 bits cannot come from a file txlint reads; saturate rather than wrap.
        let at = |p: usize| u32::try_from(p).unwrap_or(u32::MAX);
        Some(Token {
            kind,
            start: at(start),
            end: at(self.pos),
        })
    }

    /// Skip a quoted run starting at the opening quote; `backslash` enables `\x` escapes.
    fn quoted(&mut self, q: u8, backslash: bool) {
        self.pos += 1;
        while self.pos < self.b.len() {
            let c = self.b[self.pos];
            if backslash && c == b'\\' {
                self.pos += 2;
            } else if c == q {
                if self.peek(1) == q {
                    self.pos += 2;
                } else {
                    self.pos += 1;
                    return;
                }
            } else {
                self.pos += 1;
            }
        }
        self.pos = self.b.len();
        self.ran_out = true;
    }

    /// `$tag$` at the current position, if any: returns the tag length including both `$`.
    fn dollar_tag(&self) -> Option<usize> {
        let rest = &self.b[self.pos + 1..];
        if rest.first().is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
        let n = rest
            .iter()
            .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80)
            .count();
        (rest.get(n) == Some(&b'$')).then_some(n + 2)
    }

    /// To the end of the line: `\n`, or a lone `\r` (old Mac line endings).
    fn skip_line(&mut self) {
        self.pos = self.src[self.pos..]
            .find(['\n', '\r'])
            .map_or(self.b.len(), |i| self.pos + i);
    }
}

pub(crate) fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

pub(crate) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

impl Lexer<'_> {
    /// `/* .. */`, nested as PostgreSQL nests them (MySQL ends at the first `*/`).
    fn block_comment(&mut self, start: usize) -> Option<Token> {
        let mut depth = 0usize;
        self.ran_out = true;
        while self.pos < self.b.len() {
            if self.b[self.pos] == b'/' && self.peek(1) == b'*' {
                depth += 1;
                self.pos += 2;
            } else if self.b[self.pos] == b'*' && self.peek(1) == b'/' {
                depth -= 1;
                self.pos += 2;
                if depth == 0 || self.mysql {
                    self.ran_out = false;
                    break;
                }
            } else {
                self.pos += 1;
            }
        }
        self.pos = self.pos.min(self.b.len());
        self.closed_or_note(start, "block comment");
        self.tok(Kind::Comment, start)
    }

    /// A string after a prefix of `skip` bytes (`E'..'`, `B'..'`, `U&'..'`).
    fn prefixed_string(&mut self, start: usize, skip: usize, backslashes: bool) -> Option<Token> {
        self.pos += skip;
        self.quoted(b'\'', backslashes);
        self.closed_or_note(start, "string");
        self.tok(Kind::String, start)
    }

    /// `$tag$ .. $tag$`.
    fn dollar_quoted(&mut self, start: usize) -> Option<Token> {
        let n = self.dollar_tag().unwrap_or(1);
        let tag = &self.src[start..start + n];
        self.pos = match self.src[start + n..].find(tag) {
            Some(i) => start + n + i + n,
            None => {
                self.ran_out = true;
                self.b.len()
            }
        };
        self.closed_or_note(start, "dollar-quoted string");
        self.tok(Kind::String, start)
    }

    /// `:name`, `:'name'`, `:"name"` (psql variables), or a lone `:`.
    fn psql_var(&mut self, start: usize, next: u8) -> Option<Token> {
        if self.psql && (next == b'\'' || next == b'"') {
            self.pos += 1;
            self.quoted(next, false);
            self.closed_or_note(start, "psql variable");
            return self.tok(Kind::PsqlVar, start);
        }
        if is_ident_start(next) {
            self.pos += 1;
            while is_ident(self.peek(0)) {
                self.pos += 1;
            }
            return self.tok(Kind::PsqlVar, start);
        }
        self.pos += 1;
        self.tok(Kind::Punct, start)
    }

    /// A number: digits, a fraction, an exponent with its sign, `_` separators.
    fn number(&mut self, start: usize) -> Option<Token> {
        while self.pos < self.b.len() {
            let d = self.b[self.pos];
            let exp_sign = (d == b'+' || d == b'-')
                && matches!(self.b[self.pos - 1], b'e' | b'E')
                && self.b[start..self.pos]
                    .iter()
                    .all(|c| !c.is_ascii_alphabetic() || *c == b'e' || *c == b'E');
            if d.is_ascii_alphanumeric() || d == b'.' || d == b'_' || exp_sign {
                // `1..2` (ranges) stops before the second dot.
                if d == b'.' && self.peek(1) == b'.' {
                    break;
                }
                self.pos += 1;
            } else {
                break;
            }
        }
        self.tok(Kind::Number, start)
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let c = *self.b.get(self.pos)?;
        let next = self.peek(1);
        match c {
            b'-' if next == b'-' => {
                self.skip_line();
                self.tok(Kind::Comment, start)
            }
            b'#' if self.mysql => {
                self.skip_line();
                self.tok(Kind::Comment, start)
            }
            b'/' if next == b'*' => self.block_comment(start),
            b'\'' => {
                self.quoted(b'\'', self.mysql);
                self.closed_or_note(start, "string");
                self.tok(Kind::String, start)
            }
            b'"' => {
                self.quoted(b'"', self.mysql);
                let kind = if self.mysql {
                    Kind::String
                } else {
                    Kind::QuotedIdent
                };
                self.closed_or_note(start, "quoted name");
                self.tok(kind, start)
            }
            b'`' if self.backticks => {
                self.quoted(b'`', false);
                self.closed_or_note(start, "quoted name");
                self.tok(Kind::QuotedIdent, start)
            }
            b'[' if self.brackets && is_ident_start(next) => {
                self.quoted(b']', false);
                self.closed_or_note(start, "quoted name");
                self.tok(Kind::QuotedIdent, start)
            }
            b'e' | b'E' if next == b'\'' => self.prefixed_string(start, 1, true),
            b'b' | b'B' | b'x' | b'X' | b'n' | b'N' if next == b'\'' => {
                self.prefixed_string(start, 1, self.mysql)
            }
            b'u' | b'U' if next == b'&' && self.peek(2) == b'\'' => {
                self.prefixed_string(start, 2, false)
            }
            b'$' if next.is_ascii_digit() => {
                self.pos += 1;
                while self.peek(0).is_ascii_digit() {
                    self.pos += 1;
                }
                self.tok(Kind::Param, start)
            }
            b'$' if !self.mysql && self.dollar_tag().is_some() => self.dollar_quoted(start),
            b'\\' if self.psql => {
                if next == b';' {
                    self.pos += 2;
                } else {
                    self.skip_line();
                }
                self.tok(Kind::Meta, start)
            }
            b':' if next == b':' || next == b'=' => {
                self.pos += 2;
                self.tok(Kind::Punct, start)
            }
            b':' if psql_var_context(self.b, start) && (self.psql || is_ident_start(next)) => {
                self.psql_var(start, next)
            }
            b';' => {
                self.pos += 1;
                self.tok(Kind::Semicolon, start)
            }
            c if c.is_ascii_digit() || (c == b'.' && next.is_ascii_digit()) => self.number(start),
            c if is_ident_start(c) => {
                while self.pos < self.b.len() && is_ident(self.b[self.pos]) {
                    self.pos += 1;
                }
                self.tok(Kind::Word, start)
            }
            _ => {
                // One character of punctuation (whole UTF-8 sequence for non-ASCII).
                self.pos += self.src[start..].chars().next().map_or(1, char::len_utf8);
                self.tok(Kind::Punct, start)
            }
        }
    }
}

/// `:name` is a psql variable unless it continues a word (`a[lo:hi]`, `x:y`).
fn psql_var_context(b: &[u8], colon: usize) -> bool {
    colon == 0 || {
        let p = b[colon - 1];
        !(is_ident(p) || p == b']' || p == b')' || p == b'\'' || p == b'"')
    }
}

/// The text of a string token (`'it''s'` is `it's`, `$q$..$q$` its content) and where each of
/// its bytes is in the source; `None` for escape strings (`E'..'`), whose backslashes are not
/// read.
pub fn string_body(src: &str, tok: &Token) -> Option<(String, OffsetMap)> {
    let text = tok.text(src);
    if let Some(after) = text.strip_prefix('$') {
        let n = after.find('$')? + 2;
        let tag = &text[..n];
        let inner_end = if text.len() >= 2 * n && text.ends_with(tag) {
            text.len() - n
        } else {
            text.len()
        };
        return Some((
            text[n..inner_end].to_string(),
            OffsetMap::shifted(tok.start() + n),
        ));
    }
    if !text.starts_with('\'') {
        return None; // E'' bodies with backslash escapes are not read
    }
    let inner = text[1..].strip_suffix('\'').unwrap_or(&text[1..]);
    let mut body = String::with_capacity(inner.len());
    let mut map = OffsetMap::shifted(tok.start() + 1);
    let mut rest = inner;
    let mut host = tok.start() + 1;
    while let Some(i) = rest.find("''") {
        body.push_str(&rest[..=i]);
        host += i + 2;
        map.push(body.len(), host);
        rest = &rest[i + 2..];
    }
    body.push_str(rest);
    Some((body, map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Kind, &str)> {
        Lexer::new(src, Dialect::Postgres, true)
            .map(|t| (t.kind, t.text(src)))
            .collect()
    }

    #[test]
    fn strings_and_comments() {
        let src = "select E'a\\'b', 'it''s', $f$ ; $f$, $$x$$, /* a /* b */ c */ x -- c\n;";
        let k = kinds(src);
        assert_eq!(k[1], (Kind::String, "E'a\\'b'"));
        assert_eq!(k[3], (Kind::String, "'it''s'"));
        assert_eq!(k[5], (Kind::String, "$f$ ; $f$"));
        assert_eq!(k[7], (Kind::String, "$$x$$"));
        assert_eq!(k[9], (Kind::Comment, "/* a /* b */ c */"));
        assert_eq!(k[10], (Kind::Word, "x"));
        assert_eq!(k[11].0, Kind::Comment);
        assert_eq!(k[12].0, Kind::Semicolon);
    }

    #[test]
    fn psql_constructs() {
        let src = "select :'v', :w, a[lo:hi], x::int, $1 \\gset\n";
        let k = kinds(src);
        assert_eq!(k[1], (Kind::PsqlVar, ":'v'"));
        assert_eq!(k[3], (Kind::PsqlVar, ":w"));
        assert!(k.iter().all(|t| t.1 != ":hi"));
        assert!(k.contains(&(Kind::Punct, "::")));
        assert!(k.contains(&(Kind::Param, "$1")));
        assert_eq!(k.last(), Some(&(Kind::Meta, "\\gset")));
    }

    #[test]
    fn unterminated_runs_to_end() {
        assert_eq!(kinds("'abc"), vec![(Kind::String, "'abc")]);
        assert_eq!(kinds("$x$ abc"), vec![(Kind::String, "$x$ abc")]);
        assert_eq!(kinds("/* abc"), vec![(Kind::Comment, "/* abc")]);
    }
}
