//! What sqlparser is not given: statements too deep or too long for it, constructs it does
//! not support; and where its errors point.

use super::*;

/// Parentheses nested in one statement that sqlparser is given (its own limit is lower).
pub(super) const NESTING: usize = 1_000;

/// Operators between two commas of one parenthesis level: each makes the expression tree
/// one level deeper, and walking or dropping that tree recurses (within [`crate::io::STACK`]).
pub(super) const CHAIN: usize = 10_000;

/// Statements longer than this are read from their tokens only: sqlparser's tokens and tree for
/// a multi-megabyte bulk `INSERT` cost a hundred times its size, and txlint needs neither.
pub(super) const LARGEST: usize = 1024 * 1024;

/// Why a statement is too deep (or too large) for the parser, if it is.
pub(super) fn too_deep(src: &str, tokens: &[Token]) -> Option<String> {
    if let (Some(a), Some(b)) = (tokens.first(), tokens.last())
        && b.end() - a.start() > LARGEST
    {
        return Some(format!(
            "{} KiB, larger than the {} KiB txlint parses",
            (b.end() - a.start()) / 1024,
            LARGEST / 1024
        ));
    }
    let mut chains = vec![0usize];
    for t in tokens {
        let operator = match t.kind {
            Kind::Punct => {
                let p = t.text(src);
                match p {
                    "(" | "[" => {
                        chains.push(0);
                        if chains.len() > NESTING {
                            return Some(format!("parentheses nested more than {NESTING} deep"));
                        }
                        continue;
                    }
                    ")" | "]" => {
                        if chains.len() > 1 {
                            chains.pop();
                        }
                        continue;
                    }
                    "," => {
                        if let Some(c) = chains.last_mut() {
                            *c = 0;
                        }
                        continue;
                    }
                    _ => !p.is_empty() && p != "." && p != "::",
                }
            }
            Kind::Word => ["and", "or", "not", "is", "like", "ilike", "in"]
                .iter()
                .any(|w| t.is(src, w)),
            _ => false,
        };
        if operator && let Some(c) = chains.last_mut() {
            *c += 1;
            if *c > CHAIN {
                return Some(format!("more than {CHAIN} operators in one expression"));
            }
        }
    }
    None
}

/// Places AST identifiers in the snippet the statement was cut from.
pub(super) struct Locator<'a> {
    pub(super) sql: &'a str,
    pub(super) base: usize,
    pub(super) prefix: usize,
}

impl crate::parse::ast::Locate for Locator<'_> {
    fn ident(&self, ident: &sqlparser::ast::Ident) -> Option<Range<usize>> {
        let (s, e) = (ident.span.start, ident.span.end);
        if s.line == 0 {
            return None;
        }
        let start = line_col_offset(self.sql, s.line as usize, s.column as usize)?;
        let end = line_col_offset(self.sql, e.line as usize, e.column as usize)?;
        let to_snippet = |o: usize| self.base + o.saturating_sub(self.prefix);
        Some(to_snippet(start)..to_snippet(end.max(start)))
    }
}

/// Byte offset in `sql` of sqlparser's "L, Column: C".
pub(super) fn sql_offset(sql: &str, pos: &str) -> Option<usize> {
    let (line, col) = pos.split_once(", Column: ")?;
    line_col_offset(sql, line.trim().parse().ok()?, col.trim().parse().ok()?)
}

/// Byte offset of a 1-based line and 1-based column counted in chars.
pub(super) fn line_col_offset(sql: &str, line: usize, col: usize) -> Option<usize> {
    let line_start: usize = sql
        .split_inclusive('\n')
        .take(line.checked_sub(1)?)
        .map(str::len)
        .sum();
    let rest = sql.get(line_start..)?;
    let in_line: usize = rest
        .chars()
        .take(col.checked_sub(1)?)
        .map(char::len_utf8)
        .sum();
    Some(line_start + in_line)
}

/// PostgreSQL syntax sqlparser 0.64 rejects: `LIKE t INCLUDING ALL`, a recursive CTE's
/// `CYCLE`/`SEARCH` clause, `SET SCHEMA`, `SET STATISTICS`, `ROWS FROM (..)`, `ALTER
/// CONSTRAINT .. DEFERRABLE`, `ON CONFLICT ((expr))`, `ALTER COLUMN .. TYPE .. COLLATE`.
pub(super) fn unsupported_postgres(c: &Cursor) -> bool {
    (0..c.t.len()).any(|i| {
        (c.is(i, "like")
            && c.name(i + 1)
                .is_some_and(|(_, n)| c.is(n, "including") || c.is(n, "excluding")))
            || (c.punct(i, ")") && (c.is(i + 1, "cycle") || c.is(i + 1, "search")))
            || (c.is(i, "set") && (c.is(i + 1, "schema") || c.is(i + 1, "statistics")))
            || (c.is(i, "rows") && c.is(i + 1, "from") && c.punct(i + 2, "("))
            || (c.is(i, "alter") && c.is(i + 1, "constraint"))
            || (c.is(i, "restart")
                && (c.is(i + 1, "with") || c.t.get(i + 1).is_some_and(|t| t.kind == Kind::Number)))
            || (c.is(i, "conflict") && c.punct(i + 1, "(") && c.punct(i + 2, "("))
            || (c.is(i, "type") && (i + 1..c.t.len().min(i + 6)).any(|j| c.is(j, "collate")))
    })
}

/// Valid MySQL `ALTER TABLE` forms sqlparser does not know: `DROP KEY k`, `DROP INDEX k`,
/// `ADD [COLUMN] (a int, b int)`. They declare no key, and their tokens tell the rest.
pub(super) fn unsupported_mysql(c: &Cursor) -> bool {
    c.is(0, "alter")
        && (0..c.t.len()).any(|i| {
            (c.is(i, "drop") && (c.is(i + 1, "key") || c.is(i + 1, "index")))
                || (c.is(i, "add")
                    && (c.punct(i + 1, "(") || c.is(i + 1, "column") && c.punct(i + 2, "(")))
        })
}

#[cfg(test)]
mod tests {
    use super::super::facts_of;

    #[test]
    fn statements_too_deep_for_sqlparser_are_read_from_tokens() {
        let deep = format!(
            "SELECT {}1{} FROM t FOR UPDATE",
            "(".repeat(1_001),
            ")".repeat(1_001)
        );
        let (f, failure) = facts_of(&deep);
        assert!(!f.parsed);
        assert!(failure.is_some(), "a syntax-error note says why");
        // The token facts still reach the rules.
        assert_eq!(f.row_locks.len(), 1);
        let (f, failure) = facts_of("SELECT ((1)) FROM t");
        assert!(f.parsed && failure.is_none());
    }
}
