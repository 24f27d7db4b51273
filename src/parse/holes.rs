//! Template holes: the places a tool fills in before the SQL reaches the database (`{table}`,
//! `{{ .Schema }}`, `%s`, `%(name)s`, `%order%`). Each is replaced by a stand-in of the same
//! length (offsets stay true) so that the statement still parses, and the statement is marked
//! as a template: its parse failures say nothing about the SQL that runs.

use std::ops::Range;

use super::lex::{Kind, Token};

/// What stands in for a template hole of `len` bytes so that the statement still parses: a
/// number where a value goes (after an operator, `LIMIT`, `OFFSET`), else an identifier of
/// underscores, a name txlint does not know (see `model::is_hole`).
pub fn stand_in(before: &str, len: usize) -> String {
    let prev = before.trim_end();
    let word = prev
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let value = prev.ends_with(['=', '<', '>', '+', '-', '*', '/', '%'])
        || (prev.len() > word.len() || prev == word) && matches!(word.as_str(), "limit" | "offset");
    if value {
        "0".repeat(len)
    } else {
        "_".repeat(len)
    }
}

/// Go's `{{ ... }}` template actions (sqlx-style and pop/fizz migrations, `text/template`
/// query files): they may hold quotes (`{{ index .Options "Namespace" }}`), so they are blanked
/// in the text before it is tokenized. Each becomes underscores, byte for byte; the ranges
/// blanked are returned. `None` when the text has none.
pub fn blank_actions(text: &str) -> Option<(String, Vec<Range<usize>>)> {
    let b = text.as_bytes();
    let mut holes = Vec::new();
    let mut i = 0;
    while let Some(at) = text[i..].find("{{").map(|k| k + i) {
        // One line, a few hundred bytes, no other action opening inside.
        let window = &b[at + 2..b.len().min(at + 2 + 400)];
        let end = window.windows(2).position(|w| w == b"}}").filter(|&k| {
            !window[..k]
                .iter()
                .any(|&c| matches!(c, b'\n' | b'{' | b'}'))
        });
        match end {
            Some(k) => {
                holes.push(at..at + 2 + k + 2);
                i = at + 2 + k + 2;
            }
            None => i = at + 2,
        }
    }
    if holes.is_empty() {
        return None;
    }
    let mut out = text.as_bytes().to_vec();
    for h in &holes {
        out[h.clone()].fill(b'_');
    }
    // Only ASCII bytes replaced whole characters' bytes: still UTF-8.
    String::from_utf8(out).ok().map(|s| (s, holes))
}

/// Words after which a value or a name starts: a `%` there begins a hole, not a modulo.
const BEFORE_OPERAND: &[&str] = &[
    "and",
    "as",
    "by",
    "else",
    "exists",
    "from",
    "having",
    "in",
    "into",
    "is",
    "join",
    "like",
    "limit",
    "not",
    "offset",
    "on",
    "or",
    "returning",
    "select",
    "set",
    "table",
    "then",
    "update",
    "using",
    "values",
    "when",
    "where",
];

/// Fill the holes among `tokens` (of `src`) in `sql`, the text of `src` from `base` on: `{name}`,
/// `{0}`, `{}` (format strings), `%s`, `%d`, `%v`, `%(name)s` (printf and psycopg), `%name%`
/// (string replacement). A `%` right after an operand is a modulo and stays. Whether any was.
pub fn fill(src: &str, tokens: &[Token], base: usize, sql: &mut String) -> bool {
    let mut template = false;
    let mut i = 0;
    while i < tokens.len() {
        let Some(close) = hole_at(src, tokens, i) else {
            i += 1;
            continue;
        };
        let (s, e) = (tokens[i].start() - base, tokens[close].end() - base);
        if e <= sql.len() && sql.is_char_boundary(s) && sql.is_char_boundary(e) {
            let with = stand_in(&sql[..s], e - s);
            sql.replace_range(s..e, &with);
            template = true;
        }
        i = close + 1;
    }
    template
}

/// The index of the last token of a hole starting at token `i`, if one does.
fn hole_at(src: &str, t: &[Token], i: usize) -> Option<usize> {
    let punct = |k: usize, p: &str| t.get(k).is_some_and(|x| x.is_punct(src, p));
    let touching = |k: usize| {
        t.get(k)
            .zip(t.get(k + 1))
            .is_some_and(|(a, b)| a.end() == b.start())
    };
    let word = |k: usize| t.get(k).is_some_and(|x| x.kind == Kind::Word);
    if punct(i, "{") {
        return (i + 1..t.len().min(i + 4)).find(|&j| punct(j, "}"));
    }
    if !punct(i, "%") || !touching(i) || after_operand(src, t, i) {
        return None;
    }
    // `%(name)s`
    if punct(i + 1, "(") && word(i + 2) && punct(i + 3, ")") && touching(i + 3) && word(i + 4) {
        return Some(i + 4);
    }
    if !word(i + 1) {
        return None;
    }
    // `%order%`
    if touching(i + 1) && punct(i + 2, "%") {
        return Some(i + 2);
    }
    // `%s`, `%d`, `%v`, `%i`, `%q`: printf verbs.
    let verb = t[i + 1].text(src);
    (verb.len() == 1 && "sdvifqt".contains(verb)).then_some(i + 1)
}

/// Token `i` follows something with a value: a name, a literal, a closing bracket.
fn after_operand(src: &str, t: &[Token], i: usize) -> bool {
    let Some(p) = i.checked_sub(1).and_then(|k| t.get(k)) else {
        return false;
    };
    match p.kind {
        Kind::Word => {
            let w = p.text(src).to_ascii_lowercase();
            !BEFORE_OPERAND.contains(&w.as_str())
        }
        Kind::Number | Kind::String | Kind::QuotedIdent | Kind::Param => true,
        Kind::Punct => p.is_punct(src, ")") || p.is_punct(src, "]"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::lex::Lexer;
    use crate::source::Dialect;

    fn filled(sql: &str) -> (String, bool) {
        let tokens: Vec<Token> = Lexer::new(sql, Dialect::Postgres, false)
            .filter(|t| t.kind != Kind::Comment)
            .collect();
        let mut out = sql.to_string();
        let t = fill(sql, &tokens, 0, &mut out);
        (out, t)
    }

    #[test]
    fn holes_of_format_strings_printf_and_psycopg() {
        assert_eq!(
            filled("INSERT INTO {schema}.t (a) VALUES ({})"),
            ("INSERT INTO ________.t (a) VALUES (__)".to_string(), true)
        );
        assert_eq!(
            filled("SELECT * FROM %s WHERE id = %(id)s ORDER BY %order% LIMIT %d"),
            (
                "SELECT * FROM __ WHERE id = 000000 ORDER BY _______ LIMIT 00".to_string(),
                true
            )
        );
    }

    #[test]
    fn a_modulo_is_not_a_hole() {
        for sql in [
            "SELECT a %s FROM t",
            "SELECT 7 %d",
            "SELECT (a) %v FROM t",
            "SELECT a % s FROM t",
        ] {
            assert_eq!(filled(sql), (sql.to_string(), false), "{sql}");
        }
        // A string's `%` is the string's.
        let like = "SELECT * FROM t WHERE a LIKE '%s%'";
        assert_eq!(filled(like), (like.to_string(), false));
    }

    #[test]
    fn go_template_actions_are_blanked_before_tokens() {
        let text = "ALTER TABLE \"{{ index .Options \"Namespace\" }}\".\"users\" ADD c int;";
        let (out, holes) = blank_actions(text).unwrap();
        assert_eq!(out.len(), text.len());
        assert_eq!(holes.len(), 1);
        assert!(out.starts_with("ALTER TABLE \"_______"));
        assert!(out.ends_with("\".\"users\" ADD c int;"));
        // A 2-D array literal is no action.
        assert!(blank_actions("SELECT '{{1,2},{3,4}}'::int[][]").is_none());
        assert!(blank_actions("SELECT 1").is_none());
    }
}
