//! sqlparser's tokens, made from txlint's own lexer for a PostgreSQL statement whose every token
//! has one plain form. sqlparser's tokenizer reads a character at a time, emits one token per
//! whitespace character and finds every word in its keyword list by binary search: on the
//! PostgreSQL regression corpus it was a fifth of a run's instructions, for tokens txlint's lexer
//! has already found. A statement with any other token (a comment, a string with a prefix, a
//! backslash or a dollar quote, a word outside ASCII, an operator sqlparser may read as a custom
//! one, a number other than `123` or `1.5`, ...) gets `None`, and sqlparser's tokenizer reads it.
//!
//! The tokens must be the ones sqlparser's tokenizer gives, spans included (the rules place
//! identifiers by them): the tests below compare the two on every statement of the PostgreSQL
//! regression corpus and on statements made at random from troublesome pieces. Whitespace between
//! two tokens is one token, a newline if it has one: all the parser asks of whitespace is whether
//! there is some, and whether it holds a newline.

use std::collections::HashMap;
use std::sync::OnceLock;

use sqlparser::keywords::{ALL_KEYWORDS, ALL_KEYWORDS_INDEX, Keyword};
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Whitespace, Word};

use super::lex::{Kind, Lexer, is_ident};
use crate::source::Dialect;

/// sqlparser's tokens for `sql` (PostgreSQL), or `None` if a token is not one this module makes.
pub fn tokens(sql: &str) -> Option<Vec<TokenWithSpan>> {
    let b = sql.as_bytes();
    let mut out = Vec::with_capacity(sql.len() / 3);
    let mut at = Cursor::default();
    let mut lexer = Lexer::new(sql, Dialect::Postgres, false);
    let mut prev_end = 0;
    while let Some(t) = lexer.next() {
        let text = t.text(sql);
        let (token, end) = match t.kind {
            // A word right before a quote can be a prefix to sqlparser (`B"x"`).
            Kind::Word if text.is_ascii() && !matches!(b.get(t.end()), Some(b'\'' | b'"')) => {
                (word(text), t.end())
            }
            Kind::QuotedIdent => (quoted_ident(text)?, t.end()),
            Kind::String => (Token::SingleQuotedString(string(text)?), t.end()),
            // sqlparser reads on into letters, `$`, `_` and `.` where txlint's lexer stops.
            Kind::Number if number(text) && !continues(b, t.end()) => {
                (Token::Number(text.to_string(), false), t.end())
            }
            Kind::Param if !continues(b, t.end()) => {
                (Token::Placeholder(text.to_string()), t.end())
            }
            Kind::Semicolon => (Token::SemiColon, t.end()),
            Kind::Punct => {
                let (token, end) = punct(b, t.start())?;
                // An operator of two characters is two tokens of txlint's lexer.
                while end > t.end() && lexer.pos() < end {
                    lexer.next();
                }
                (token, end)
            }
            _ => return None,
        };
        if t.start() > prev_end {
            let gap = &b[prev_end..t.start()];
            if !gap.iter().all(blank) {
                return None;
            }
            let space = if gap.iter().any(|c| matches!(c, b'\n' | b'\r')) {
                Whitespace::Newline
            } else {
                Whitespace::Space
            };
            let from = at.to(sql, prev_end);
            let to = at.to(sql, t.start());
            out.push(TokenWithSpan::new(
                Token::Whitespace(space),
                Span::new(from, to),
            ));
        }
        let from = at.to(sql, t.start());
        let to = at.to(sql, end);
        out.push(TokenWithSpan::new(token, Span::new(from, to)));
        prev_end = end;
    }
    if !b[prev_end..].iter().all(blank) {
        return None;
    }
    Some(out)
}

/// Whitespace both tokenizers skip (a form feed, say, is an error to sqlparser).
fn blank(c: &u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Line and column (1-based, columns in characters) of a byte offset, moving forward only.
struct Cursor {
    pos: usize,
    line: u64,
    column: u64,
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor {
            pos: 0,
            line: 1,
            column: 1,
        }
    }
}

impl Cursor {
    fn to(&mut self, sql: &str, offset: usize) -> Location {
        for &c in &sql.as_bytes()[self.pos..offset] {
            if c == b'\n' {
                self.line += 1;
                self.column = 1;
            } else if c & 0xC0 != 0x80 {
                // One column per character: UTF-8 continuation bytes add none.
                self.column += 1;
            }
        }
        self.pos = offset;
        Location::new(self.line, self.column)
    }
}

fn word(text: &str) -> Token {
    Token::Word(Word {
        value: text.to_string(),
        quote_style: None,
        keyword: keyword(text),
    })
}

/// sqlparser's keyword for an ASCII word, by hash instead of its binary search.
fn keyword(text: &str) -> Keyword {
    static KEYWORDS: OnceLock<(HashMap<&'static str, Keyword>, usize)> = OnceLock::new();
    let (map, longest) = KEYWORDS.get_or_init(|| {
        let map: HashMap<_, _> = ALL_KEYWORDS
            .iter()
            .copied()
            .zip(ALL_KEYWORDS_INDEX.iter().copied())
            .collect();
        let longest = ALL_KEYWORDS.iter().map(|k| k.len()).max().unwrap_or(0);
        (map, longest)
    });
    let mut upper = [0u8; 64];
    if text.len() > *longest || text.len() > upper.len() {
        return Keyword::NoKeyword;
    }
    for (u, c) in upper.iter_mut().zip(text.bytes()) {
        *u = c.to_ascii_uppercase();
    }
    std::str::from_utf8(&upper[..text.len()])
        .ok()
        .and_then(|u| map.get(u).copied())
        .unwrap_or(Keyword::NoKeyword)
}

/// `"name"`, with no `""` inside.
fn quoted_ident(text: &str) -> Option<Token> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('"') {
        return None;
    }
    Some(Token::Word(Word {
        value: inner.to_string(),
        quote_style: Some('"'),
        keyword: Keyword::NoKeyword,
    }))
}

/// The value of a plain `'...'` string (`''` stands for `'`), without backslashes.
fn string(text: &str) -> Option<String> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    if inner.contains('\\') {
        return None;
    }
    let mut value = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(i) = rest.find('\'') {
        // Inside, every quote is one of a doubled pair.
        if rest.as_bytes().get(i + 1) != Some(&b'\'') {
            return None;
        }
        value.push_str(&rest[..=i]);
        rest = &rest[i + 2..];
    }
    value.push_str(rest);
    Some(value)
}

/// Whether the byte at `end` could continue a number or parameter for sqlparser.
fn continues(b: &[u8], end: usize) -> bool {
    b.get(end).is_some_and(|&c| is_ident(c) || c == b'.')
}

/// `123` or `1.5`.
fn number(text: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    match text.split_once('.') {
        Some((a, b)) => digits(a) && digits(b),
        None => digits(text),
    }
}

/// Characters PostgreSQL (and sqlparser) reads as one operator when they stand together.
fn operator_char(c: u8) -> bool {
    b"+-*/<>=~!@#%^&|`?".contains(&c)
}

/// The punctuation token at `start` and where it ends.
fn punct(b: &[u8], start: usize) -> Option<(Token, usize)> {
    let single = |c: u8| {
        Some(match c {
            b'(' => Token::LParen,
            b')' => Token::RParen,
            b',' => Token::Comma,
            b'[' => Token::LBracket,
            b']' => Token::RBracket,
            b'.' => Token::Period,
            _ => return None,
        })
    };
    let c = *b.get(start)?;
    if c == b':' {
        return match b.get(start + 1) {
            Some(b':') => Some((Token::DoubleColon, start + 2)),
            Some(b'=') => Some((Token::Assignment, start + 2)),
            _ => Some((Token::Colon, start + 1)),
        };
    }
    if c == b'.' && b.get(start + 1) == Some(&b'_') {
        // sqlparser reads `._` by what comes before it.
        return None;
    }
    if !operator_char(c) {
        return single(c).map(|t| (t, start + 1));
    }
    let end = start + b[start..].iter().take_while(|&&c| operator_char(c)).count();
    let token = match &b[start..end] {
        b"=" => Token::Eq,
        b"<" => Token::Lt,
        b">" => Token::Gt,
        b"+" => Token::Plus,
        b"-" => Token::Minus,
        b"*" => Token::Mul,
        b"/" => Token::Div,
        b"%" => Token::Mod,
        b"<=" => Token::LtEq,
        b">=" => Token::GtEq,
        b"<>" | b"!=" => Token::Neq,
        b"||" => Token::StringConcat,
        _ => return None,
    };
    Some((token, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::tokenizer::Tokenizer;

    /// sqlparser's own tokens, whitespace runs made one token as [`tokens`] makes them.
    fn theirs(sql: &str) -> Option<Vec<TokenWithSpan>> {
        let raw = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize_with_location()
            .ok()?;
        Some(merge_whitespace(raw))
    }

    fn merge_whitespace(raw: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
        let mut out: Vec<TokenWithSpan> = Vec::with_capacity(raw.len());
        for t in raw {
            if let Token::Whitespace(w) = &t.token {
                let newline = matches!(w, Whitespace::Newline);
                if let Some(last) = out.last_mut()
                    && let Token::Whitespace(prev) = &mut last.token
                {
                    if newline {
                        *prev = Whitespace::Newline;
                    }
                    last.span.end = t.span.end;
                    continue;
                }
                let space = if newline {
                    Whitespace::Newline
                } else if matches!(w, Whitespace::Space | Whitespace::Tab) {
                    Whitespace::Space
                } else {
                    w.clone()
                };
                out.push(TokenWithSpan::new(Token::Whitespace(space), t.span));
                continue;
            }
            out.push(t);
        }
        // Trailing whitespace: [`tokens`] does not emit it.
        if out
            .last()
            .is_some_and(|t| matches!(t.token, Token::Whitespace(_)))
        {
            out.pop();
        }
        out
    }

    #[test]
    fn plain_statements_are_tokenized_as_sqlparser_does() {
        for sql in [
            "SELECT a, b FROM t WHERE id = $1 AND n <= 1.5",
            "UPDATE \"Accounts\" SET balance = balance - 10\n  WHERE id <> 'it''s'",
            "select x::int, y || 'é' from t where a != b and c >= 2 and d < 3 * 4 / 5 % 6",
            "INSERT INTO t (a) VALUES (1), (2) ;",
            "SELECT é FROM t",
        ] {
            let ours = tokens(sql);
            if sql.contains('é') && !sql.contains("'é'") {
                assert_eq!(ours, None, "{sql}");
                continue;
            }
            assert_eq!(ours, theirs(sql), "{sql}");
            assert!(ours.is_some(), "{sql}");
        }
    }

    #[test]
    fn other_tokens_fall_back_to_sqlparser() {
        for sql in [
            "SELECT 1 -- comment",
            "SELECT E'a\\nb'",
            "SELECT 'a\\'",
            "SELECT $$body$$",
            "SELECT a <-> b",
            "SELECT a @> b",
            "SELECT 1e5",
            "SELECT 1_000",
            "SELECT .5",
            "SELECT 'open",
            "SELECT \"a\"\"b\"",
            "SELECT x'1F'",
            "SELECT a =- 1",
        ] {
            assert_eq!(tokens(sql), None, "{sql}");
        }
    }

    /// Every statement of PostgreSQL's regression corpus that [`tokens`] accepts is tokenized as
    /// sqlparser does, and more than four in five are accepted (nine in ten when this was written).
    #[test]
    fn the_corpus_is_tokenized_as_sqlparser_does() {
        let root = std::path::Path::new("../shared/corpus/postgres-regress");
        let mut files: Vec<_> = ["regression_suite", "plpgsql"]
            .iter()
            .flat_map(|d| {
                std::fs::read_dir(root.join(d))
                    .expect("the corpus ships in ../shared beside the repository")
            })
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        let (mut all, mut accepted) = (0usize, 0usize);
        for path in files {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for s in crate::parse::split::split(&text, Dialect::Postgres, true).statements {
                all += 1;
                if let Some(ours) = tokens(&s.sql) {
                    accepted += 1;
                    assert_eq!(Some(ours), theirs(&s.sql), "{}: {}", path.display(), s.sql);
                }
            }
        }
        assert!(all > 40_000, "{all} statements");
        assert!(
            accepted * 10 > all * 8,
            "{accepted} of {all} statements took the fast path"
        );
    }

    /// Statements made at random from pieces that sit at the edges of what [`tokens`] accepts:
    /// whenever it gives tokens, they are sqlparser's.
    #[test]
    fn random_statements_agree_with_sqlparser() {
        const PIECES: &[&str] = &[
            "a", "Select", "from", "t1", "$1", "$", "1", "12", "1.5", ".", "..", "5.", "'x'", "''",
            "'it''s'", "'a\\b'", "\"Q\"", "\"\"", "é", "'é'", " ", "  ", "\n", "\t", "\r\n", "(",
            ")", ",", ";", "[", "]", ":", "::", ":=", "=", "<", ">", "!", "|", "-", "+", "*", "/",
            "%", "~", "@", "#", "^", "&", "?", "`", "<=", ">=", "<>", "!=", "||", "=>", "->",
            "--c\n", "/*c*/", "E'x'", "b'1'", "U&'x'", "$$d$$", "_", "a$b", "\\", "{", "}", "e",
            "1e", "0x1F", "1_0", "FROM", "t.a", "'a'\n'b'", "1.", "0", "$1a", "N", "B", "u&",
            "\x0C", "x", ".5", "*)",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut accepted = 0;
        for _ in 0..200_000 {
            let len = 1 + next(10);
            let sql: String = (0..len).map(|_| PIECES[next(PIECES.len())]).collect();
            if let Some(ours) = tokens(&sql) {
                accepted += 1;
                assert_eq!(Some(ours), theirs(&sql), "{sql:?}");
            }
        }
        assert!(
            accepted > 10_000,
            "only {accepted} statements took the fast path"
        );
    }
}
