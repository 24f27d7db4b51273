//! Conditions on whether an `UPDATE` changed columns of a row, as trigger functions and
//! `CREATE TRIGGER .. WHEN (..)` write them: which statements a trigger runs for which `UPDATE`.

use super::lex::{Kind, Token};

/// A condition on whether the firing `UPDATE` changed columns of the row (see [`column_test`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnTest {
    /// Holds only when one of these columns changed.
    Changed(Vec<String>),
    /// Holds only when none of them changed.
    Unchanged(Vec<String>),
}

/// `NEW.a IS DISTINCT FROM OLD.a [OR NEW.b <> OLD.b ..]` holds only when one of the columns
/// changed; `NEW.a IS NOT DISTINCT FROM OLD.a [AND NEW.b = OLD.b ..]` only when none did (either
/// side first, parentheses ignored). Anything else in the condition: no such test.
pub fn column_test(src: &str, t: &[Token]) -> Option<ColumnTest> {
    let t: Vec<&Token> = t
        .iter()
        .filter(|w| !w.is_punct(src, "(") && !w.is_punct(src, ")"))
        .collect();
    let joins: Vec<&&Token> = t
        .iter()
        .filter(|w| w.is(src, "and") || w.is(src, "or"))
        .collect();
    let mut cols = Vec::new();
    let mut changed = None;
    for part in t.split(|w| w.is(src, "and") || w.is(src, "or")) {
        let (col, change) = change_test(src, part)?;
        if *changed.get_or_insert(change) != change {
            return None;
        }
        cols.push(col);
    }
    let changed = changed?;
    // Any of them changed: joined by `OR`; none changed: by `AND`.
    let join = if changed { "or" } else { "and" };
    if !joins.iter().all(|w| w.is(src, join)) {
        return None;
    }
    Some(match changed {
        true => ColumnTest::Changed(cols),
        false => ColumnTest::Unchanged(cols),
    })
}

/// One comparison of a column of `NEW` with the same of `OLD`: the column, and whether the
/// comparison holds when it changed.
fn change_test(src: &str, p: &[&Token]) -> Option<(String, bool)> {
    let column = |a: &Token, dot: &Token, c: &Token| {
        let row = if a.is(src, "new") {
            Some(true)
        } else if a.is(src, "old") {
            Some(false)
        } else {
            None
        };
        let name = match c.kind {
            Kind::QuotedIdent => c.text(src).trim_matches('"').to_string(),
            Kind::Word => c.text(src).to_ascii_lowercase(),
            _ => return None,
        };
        dot.is_punct(src, ".").then_some((row?, name))
    };
    let (left, right, changed) = match p {
        [a, d, c, is, distinct, from, b, e, f]
            if is.is(src, "is") && distinct.is(src, "distinct") && from.is(src, "from") =>
        {
            (column(a, d, c)?, column(b, e, f)?, true)
        }
        [a, d, c, is, not, distinct, from, b, e, f]
            if is.is(src, "is")
                && not.is(src, "not")
                && distinct.is(src, "distinct")
                && from.is(src, "from") =>
        {
            (column(a, d, c)?, column(b, e, f)?, false)
        }
        [a, d, c, eq, b, e, f] if eq.is_punct(src, "=") => {
            (column(a, d, c)?, column(b, e, f)?, false)
        }
        // `<>` and `!=` are two punctuation tokens.
        [a, d, c, o1, o2, b, e, f]
            if (o1.is_punct(src, "<") && o2.is_punct(src, ">"))
                || (o1.is_punct(src, "!") && o2.is_punct(src, "=")) =>
        {
            (column(a, d, c)?, column(b, e, f)?, true)
        }
        _ => return None,
    };
    (left.0 != right.0 && left.1 == right.1).then_some((left.1, changed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::lex::Lexer;
    use crate::source::Dialect;

    fn test(sql: &str) -> Option<ColumnTest> {
        let tokens: Vec<Token> = Lexer::new(sql, Dialect::Postgres, false).collect();
        column_test(sql, &tokens)
    }

    #[test]
    fn reads_changed_and_unchanged_columns() {
        let cols = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            test("NEW.a IS DISTINCT FROM OLD.a OR (OLD.\"B\" <> NEW.\"B\") OR NEW.c != OLD.c"),
            Some(ColumnTest::Changed(cols(&["a", "B", "c"])))
        );
        assert_eq!(
            test("(NEW.a IS NOT DISTINCT FROM OLD.a AND OLD.B = NEW.b)"),
            Some(ColumnTest::Unchanged(cols(&["a", "b"])))
        );
        for other in [
            // Both changed, or one unchanged: no test of any one column.
            "NEW.a <> OLD.a AND NEW.b <> OLD.b",
            "NEW.a = OLD.a OR NEW.b = OLD.b",
            "NEW.a <> OLD.a OR NEW.b = OLD.b",
            // Another column, another row, the whole row, a value.
            "NEW.a <> OLD.b",
            "NEW.a <> NEW.a",
            "NEW IS DISTINCT FROM OLD",
            "NEW.a <> 'x'",
            "",
        ] {
            assert_eq!(test(other), None, "{other}");
        }
    }
}
