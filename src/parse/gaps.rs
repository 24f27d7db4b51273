//! Valid PostgreSQL that sqlparser does not read, rewritten in the text handed to it into an
//! equivalent it reads, offsets kept: nothing txlint reads from the tree changes. What is left
//! of sqlparser's gaps is a `syntax-error` note or, where txlint needs nothing from the tree,
//! silence (`facts::unsupported_postgres`).

use super::lex::{Kind, Token};

/// Rewrite, in `sql` (the statement text from `base` on, after `prefix` bytes of its own),
/// the constructs below:
/// - `(composite).*` becomes `(composite)  `: the row's columns expanded, read as the value;
/// - `OPERATOR(pg_catalog.=)` becomes `=` and spaces;
/// - `CONSTRAINT name NOT NULL column` (PostgreSQL 18, also in `pg_dump` output) becomes
///   `CHECK(TRUE)` and spaces: a not-null constraint declares no key;
/// - MySQL's `BINARY` attribute after a character type (`VARCHAR(255) BINARY`, `TEXT BINARY`,
///   a binary collation) becomes spaces: it changes how values compare, not what is declared.
pub fn rewrite(src: &str, t: &[Token], base: usize, prefix: usize, mysql: bool, sql: &mut String) {
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let punct = |k: usize, p: &str| t.get(k).is_some_and(|x| x.is_punct(src, p));
    let word = |k: usize, w: &str| t.get(k).is_some_and(|x| x.is(src, w));
    let touching = |k: usize| {
        t.get(k)
            .zip(t.get(k + 1))
            .is_some_and(|(a, b)| a.end() == b.start())
    };
    let mut i = 0;
    while i < t.len() {
        if !mysql
            && punct(i, ")")
            && punct(i + 1, ".")
            && punct(i + 2, "*")
            && touching(i)
            && touching(i + 1)
        {
            edits.push((t[i + 1].start(), t[i + 2].end(), String::new()));
            i += 3;
            continue;
        }
        // `'a'` newline `'b'`: one string to PostgreSQL, two to sqlparser. The quotes between
        // go, and the string holds the whitespace (txlint reads no string's content).
        if let (Some(a), Some(b)) = (t.get(i), t.get(i + 1))
            && !mysql
            && plain_string(src, a)
            && plain_string(src, b)
            && src[a.end()..b.start()].contains('\n')
            && src[a.end()..b.start()].chars().all(char::is_whitespace)
        {
            edits.push((a.end() - 1, a.end(), " ".to_string()));
            edits.push((b.start(), b.start() + 1, " ".to_string()));
            i += 1;
            continue;
        }
        if !mysql && word(i, "operator") && punct(i + 1, "(") {
            // `OPERATOR(schema.op)`: the operator's characters up to `)`.
            let close = (i + 2..t.len().min(i + 8)).find(|&k| punct(k, ")"));
            let dot = (i + 2..close.unwrap_or(i)).find(|&k| punct(k, "."));
            if let (Some(close), Some(dot)) = (close, dot)
                && (dot + 1..close).all(|k| t[k].kind == Kind::Punct)
                && dot + 1 < close
            {
                let op: String = (dot + 1..close).map(|k| t[k].text(src)).collect();
                edits.push((t[i].start(), t[close].end(), op));
                i = close + 1;
                continue;
            }
        }
        let text_type = |k: usize| {
            [
                "char",
                "varchar",
                "text",
                "tinytext",
                "mediumtext",
                "longtext",
            ]
            .iter()
            .any(|w| word(k, w))
        };
        if mysql
            && word(i, "binary")
            && i >= 1
            && (text_type(i - 1)
                || (i >= 4
                    && punct(i - 1, ")")
                    && t[i - 2].kind == Kind::Number
                    && punct(i - 3, "(")
                    && text_type(i - 4)))
        {
            edits.push((t[i].start(), t[i].end(), String::new()));
            i += 1;
            continue;
        }
        if !mysql
            && word(i, "constraint")
            && word(i + 2, "not")
            && word(i + 3, "null")
            && t.get(i + 4)
                .is_some_and(|x| matches!(x.kind, Kind::Word | Kind::QuotedIdent))
        {
            edits.push((t[i].start(), t[i + 4].end(), "CHECK(TRUE)".to_string()));
            i += 5;
            continue;
        }
        i += 1;
    }
    for (start, end, with) in edits {
        let (s, e) = (start - base + prefix, end - base + prefix);
        if e > sql.len()
            || !sql.is_char_boundary(s)
            || !sql.is_char_boundary(e)
            || with.len() > e - s
        {
            continue;
        }
        let padded = format!("{with}{}", " ".repeat(e - s - with.len()));
        sql.replace_range(s..e, &padded);
    }
}

/// `'...'` with no prefix (`E'..'`, `B'..'`, `$$..$$` are other forms).
fn plain_string(src: &str, t: &Token) -> bool {
    t.kind == Kind::String && src[t.start()..t.end()].starts_with('\'') && t.end() - t.start() >= 2
}

/// `INSERT .. SELECT <values> ON CONFLICT ..`: with no `FROM`, sqlparser takes `ON` for the
/// last value's alias and stops at `CONFLICT`. The range of the `ON CONFLICT` clause (up to a
/// top-level `RETURNING` or the end), to blank for a second try: txlint reads the clause from
/// its tokens.
pub fn conflict_clause(src: &str, t: &[Token]) -> Option<std::ops::Range<usize>> {
    let mut depth = 0usize;
    let mut start = None;
    let mut end = t.last()?.end();
    for (i, tok) in t.iter().enumerate() {
        if tok.is_punct(src, "(") {
            depth += 1;
        } else if tok.is_punct(src, ")") {
            depth = depth.saturating_sub(1);
        } else if depth == 0
            && tok.is(src, "on")
            && t.get(i + 1).is_some_and(|n| n.is(src, "conflict"))
        {
            start = Some(tok.start());
        } else if depth == 0 && start.is_some() && tok.is(src, "returning") {
            end = t[i - 1].end();
            break;
        }
    }
    start.map(|s| s..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::lex::Lexer;
    use crate::source::Dialect;

    fn rewritten(sql: &str) -> String {
        rewritten_for(sql, Dialect::Postgres)
    }

    fn rewritten_for(sql: &str, dialect: Dialect) -> String {
        let tokens: Vec<Token> = Lexer::new(sql, dialect, false).collect();
        let mut out = sql.to_string();
        rewrite(sql, &tokens, 0, 0, dialect == Dialect::Mysql, &mut out);
        assert_eq!(out.len(), sql.len(), "offsets kept");
        out
    }

    #[test]
    fn constructs_sqlparser_lacks_become_ones_it_reads() {
        assert_eq!(
            rewritten("SELECT (p).* FROM f() p"),
            "SELECT (p)   FROM f() p"
        );
        assert_eq!(
            rewritten("SELECT a OPERATOR(pg_catalog.<>) b FROM t"),
            "SELECT a <>                      b FROM t"
        );
        // 34 bytes of constraint, 11 of `CHECK(TRUE)`: 23 spaces.
        assert_eq!(
            rewritten("ALTER TABLE t ADD CONSTRAINT t_a_not_null NOT NULL a"),
            format!("ALTER TABLE t ADD CHECK(TRUE){}", " ".repeat(23))
        );
        assert_eq!(
            rewritten_for(
                "ALTER TABLE t MODIFY COLUMN a VARCHAR(255) BINARY NOT NULL",
                Dialect::Mysql
            ),
            "ALTER TABLE t MODIFY COLUMN a VARCHAR(255)        NOT NULL"
        );
        assert_eq!(
            rewritten_for("SELECT CAST(a AS BINARY) FROM t", Dialect::Mysql),
            "SELECT CAST(a AS BINARY) FROM t"
        );
        // Nothing else is touched.
        for sql in [
            "SELECT (p).a FROM t",
            "SELECT p.* FROM t p",
            "ALTER TABLE t ADD CONSTRAINT k UNIQUE (a)",
            "SELECT CAST(a AS BINARY) FROM t",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn every_rewrite_parses() {
        use sqlparser::dialect::PostgreSqlDialect;
        use sqlparser::parser::Parser;
        for sql in [
            "SELECT (p).* FROM f() p",
            "SELECT (OPERATOR(pg_catalog.-) 2) FROM t",
            "CREATE TABLE t (a int, CONSTRAINT t_a_nn NOT NULL a, PRIMARY KEY (a))",
            "SELECT ('{'\n  '\"a\": 1'\n  '}')::jsonb FROM t",
        ] {
            assert!(
                Parser::parse_sql(&PostgreSqlDialect {}, sql).is_err(),
                "sqlparser reads {sql} now: drop its rewrite"
            );
            let out = rewritten(sql);
            assert!(
                Parser::parse_sql(&PostgreSqlDialect {}, &out).is_ok(),
                "{out}"
            );
        }
    }

    #[test]
    fn every_mysql_rewrite_parses() {
        use sqlparser::dialect::MySqlDialect;
        use sqlparser::parser::Parser;
        let sql = "ALTER TABLE t MODIFY COLUMN a VARCHAR(255) BINARY";
        assert!(
            Parser::parse_sql(&MySqlDialect {}, sql).is_err(),
            "sqlparser reads {sql} now: drop its rewrite"
        );
        let out = rewritten_for(sql, Dialect::Mysql);
        assert!(Parser::parse_sql(&MySqlDialect {}, &out).is_ok(), "{out}");
    }

    #[test]
    fn the_conflict_clause_of_an_insert() {
        let sql = "INSERT INTO t (a) SELECT $1 ON CONFLICT (a) DO UPDATE SET b = (1) RETURNING a";
        let tokens: Vec<Token> = Lexer::new(sql, Dialect::Postgres, false).collect();
        let r = conflict_clause(sql, &tokens).unwrap();
        assert_eq!(&sql[r], "ON CONFLICT (a) DO UPDATE SET b = (1)");
        let plain = "INSERT INTO t (a) VALUES (1)";
        let tokens: Vec<Token> = Lexer::new(plain, Dialect::Postgres, false).collect();
        assert_eq!(conflict_clause(plain, &tokens), None);
    }
}
