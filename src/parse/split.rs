//! Splitting a script into statements over byte offsets.
//!
//! sqlparser's own splitting drops every statement after the first error and loses psql
//! constructs, so statements are cut here and handed to it one at a time.

use std::ops::Range;

use super::lex::{Kind, Lexer, Token};
use crate::source::Dialect;

/// One statement of a script or body, in the coordinates of the text it was cut from.
#[derive(Clone, Debug)]
pub struct RawStatement {
    /// From the first to the last significant token (the `;` excluded).
    pub range: Range<usize>,
    /// Significant tokens (no comments, no meta-commands).
    pub tokens: Vec<Token>,
    /// The text of `range` with psql meta-commands blanked and `:var`s replaced by look-alikes
    /// of the same length, ready for sqlparser.
    pub sql: String,
    /// Statements sent in one simple-query message (psql `\;`) share this number.
    pub message: usize,
    /// Sent with `\gset`: its output columns become psql variables.
    pub gset: bool,
    /// Bytes prepended to `sql` that are not in the source (a PL/pgSQL condition is checked as
    /// `SELECT <condition>`); offset `i` of `sql` is offset `range.start + i - prefix` here.
    pub prefix: usize,
    /// A template: it has holes (`{table}`, a `format!` placeholder) that its tool fills in,
    /// so a parse failure says nothing about the SQL that runs.
    pub template: bool,
}

pub use super::holes::stand_in;

/// A split script: its statements.
#[derive(Debug, Default)]
pub struct Split {
    pub statements: Vec<RawStatement>,
}

struct Builder<'a, F> {
    src: &'a str,
    out: F,
    tokens: Vec<Token>,
    /// Meta-commands and psql variables inside the current statement, to neutralise.
    blanks: Vec<Token>,
    message: usize,
}

impl<F: FnMut(RawStatement)> Builder<'_, F> {
    fn finish(&mut self, gset: bool) {
        let tokens = std::mem::take(&mut self.tokens);
        let blanks = std::mem::take(&mut self.blanks);
        let (Some(first), Some(last)) = (tokens.first(), tokens.last()) else {
            return;
        };
        let range = first.start()..last.end();
        let mut sql = self.src[range.clone()].to_string();
        for b in blanks
            .iter()
            .filter(|b| b.start() >= range.start && b.end() <= range.end)
        {
            let (s, e) = (b.start() - range.start, b.end() - range.start);
            let text = &self.src[b.start()..b.end()];
            let replacement = match (b.kind, text.as_bytes().get(1)) {
                (Kind::PsqlVar, Some(q @ (b'\'' | b'"'))) => {
                    let q = *q as char;
                    format!("{q}{}{q}", "_".repeat(text.len().saturating_sub(2)))
                }
                (Kind::PsqlVar, _) => format!("_{}", &text[1..]),
                _ => " ".repeat(text.len()),
            };
            sql.replace_range(s..e, &replacement);
        }
        // Holes of a template (`{name}`, `%s`, ...) the code fills in before sending it.
        let template = super::holes::fill(self.src, &tokens, range.start, &mut sql);
        (self.out)(RawStatement {
            range,
            tokens,
            sql,
            message: self.message,
            gset,
            prefix: 0,
            template,
        });
    }
}

/// Split `src` into statements. `psql` enables meta-commands, `:var` and `COPY ... FROM stdin`
/// data (top level of a `.sql` file).
pub fn split(src: &str, dialect: Dialect, psql: bool) -> Split {
    let mut out = Split::default();
    split_each(src, dialect, psql, |s| out.statements.push(s));
    out
}

/// [`split`], handing each statement to `each` as soon as it is cut: a large file's tokens are
/// never all held at once.
///
/// Returns the first quote or comment left open at the end of `src` (where it opens, and what
/// it is). At the top level of a script (`psql`) the text is read on from the line after it.
pub fn split_each(
    src: &str,
    dialect: Dialect,
    psql: bool,
    each: impl FnMut(RawStatement),
) -> Option<(usize, &'static str)> {
    let mut lx = Lexer::new(src, dialect, psql);
    let mut b = Builder {
        src,
        out: each,
        tokens: Vec::new(),
        blanks: Vec::new(),
        message: 0,
    };
    // Depth inside a `BEGIN ATOMIC ... END` routine body, where `;` does not end the statement.
    let mut atomic = 0usize;
    // Parenthesis depth: like psql, a `;` inside parentheses (`CREATE RULE ... DO (a; b)`)
    // does not end the statement.
    let mut parens = 0usize;
    while let Some(t) = lx.next() {
        // A quote or comment left open ends its statement where its line does: what follows is
        // read as statements of its own.
        if psql && lx.unterminated.is_some_and(|(at, _)| at == t.start()) {
            if t.kind != Kind::Comment {
                b.tokens.push(t);
            }
            b.finish(false);
            b.message += 1;
            (atomic, parens) = (0, 0);
            continue;
        }
        match t.kind {
            // goose sends what a `StatementBegin` .. `StatementEnd` pair encloses as one
            // statement, `;` or not, and its `Up`/`Down` sections apart.
            Kind::Comment if psql && atomic == 0 && is_goose_boundary(t.text(src)) => {
                b.finish(false);
                b.message += 1;
            }
            Kind::Comment => {}
            Kind::Semicolon if atomic == 0 && parens == 0 => {
                let copy_in = psql && is_copy_from_stdin(src, &b.tokens);
                b.finish(false);
                b.message += 1;
                if copy_in {
                    lx.skip_copy_data();
                }
            }
            Kind::Meta => {
                let text = t.text(src);
                let cmd = text[1..].split_whitespace().next().unwrap_or("");
                if text == "\\;" {
                    b.finish(false);
                } else if matches!(
                    cmd,
                    "g" | "gx" | "gset" | "gexec" | "gdesc" | "crosstabview" | "watch"
                ) {
                    b.finish(cmd == "gset");
                    b.message += 1;
                } else {
                    b.blanks.push(t);
                }
            }
            _ => {
                if t.kind == Kind::PsqlVar {
                    b.blanks.push(t);
                } else if t.is_punct(src, "(") {
                    parens += 1;
                } else if t.is_punct(src, ")") {
                    parens = parens.saturating_sub(1);
                }
                if atomic > 0 {
                    if t.is(src, "case") {
                        atomic += 1;
                    } else if t.is(src, "end") {
                        atomic -= 1;
                    }
                } else if t.is(src, "atomic")
                    && b.tokens.last().is_some_and(|p| p.is(src, "begin"))
                    && b.tokens.first().is_some_and(|p| p.is(src, "create"))
                {
                    atomic = 1;
                }
                b.tokens.push(t);
            }
        }
    }
    b.finish(false);
    lx.unterminated
}

/// `-- +goose StatementEnd`, `-- +goose Up`, `-- +goose Down`: where goose ends a statement.
fn is_goose_boundary(comment: &str) -> bool {
    let Some(rest) = comment
        .strip_prefix("--")
        .map(str::trim_start)
        .and_then(|c| c.strip_prefix("+goose"))
    else {
        return false;
    };
    let what = rest.trim();
    ["statementend", "up", "down"]
        .iter()
        .any(|w| what.eq_ignore_ascii_case(w))
}

fn is_copy_from_stdin(src: &str, tokens: &[Token]) -> bool {
    tokens.first().is_some_and(|t| t.is(src, "copy"))
        && tokens
            .windows(2)
            .any(|w| w[0].is(src, "from") && w[1].is(src, "stdin"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<String> {
        split(src, Dialect::Postgres, true)
            .statements
            .iter()
            .map(|s| s.sql.clone())
            .collect()
    }

    #[test]
    fn goose_annotations_end_statements() {
        assert_eq!(
            texts(
                "-- +goose Up\n-- +goose StatementBegin\nALTER TABLE t ADD c int\n-- +goose StatementEnd\n\n-- +goose Down\nALTER TABLE t DROP c;\n"
            ),
            vec!["ALTER TABLE t ADD c int", "ALTER TABLE t DROP c"]
        );
        // Other comments are comments.
        assert_eq!(
            texts("select 1 -- +goose-ish\n+ 2;"),
            vec!["select 1 -- +goose-ish\n+ 2"]
        );
    }

    #[test]
    fn splits_on_semicolons_outside_quotes() {
        assert_eq!(
            texts("select ';'; select $$;$$ ;\n-- x;\nselect 1"),
            vec!["select ';'", "select $$;$$", "select 1"]
        );
    }

    #[test]
    fn semicolons_in_parentheses_do_not_split() {
        assert_eq!(
            texts(
                "create rule r as on insert to t do instead (delete from a; delete from b); select 1;"
            ),
            vec![
                "create rule r as on insert to t do instead (delete from a; delete from b)",
                "select 1"
            ]
        );
    }

    #[test]
    fn copy_data_is_skipped() {
        let src = "copy t from stdin;\n1\t'x;\n\\.\nselect 2;";
        assert_eq!(texts(src), vec!["copy t from stdin", "select 2"]);
    }

    #[test]
    fn psql_meta_and_vars() {
        let src = "select 1 \\gset\n\\set x 5\nselect :x, :'y' \\; select 3;\nselect 4 \\g\n";
        let s = split(src, Dialect::Postgres, true);
        let t: Vec<_> = s
            .statements
            .iter()
            .map(|s| (s.sql.as_str(), s.message, s.gset))
            .collect();
        assert_eq!(
            t,
            vec![
                ("select 1", 0, true),
                ("select _x, '__'", 1, false),
                ("select 3", 1, false),
                ("select 4", 2, false)
            ]
        );
        // offsets are kept
        let second = &s.statements[1];
        assert_eq!(&src[second.range.clone()], "select :x, :'y'");
    }

    #[test]
    fn begin_atomic_body_is_one_statement() {
        let src = "create function f() returns int language sql begin atomic select 1; select case when true then 2 end; end; select 5;";
        let t = texts(src);
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!(t[1], "select 5");
    }
}
