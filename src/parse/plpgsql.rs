//! PL/pgSQL bodies (functions, procedures, triggers, `DO` blocks) -> the SQL they run.
//!
//! A light reader, not a PL/pgSQL grammar: it cuts the body at `;`, strips the block and
//! control-flow syntax in front of each piece (`DECLARE`, `BEGIN`, `IF ... THEN`, `LOOP`,
//! `EXCEPTION WHEN ... THEN`, `END IF`, ...) and keeps what reaches the database: SQL
//! statements, `PERFORM` (sent as `SELECT`), conditions and assignments (evaluated as
//! `SELECT <expression>`), the queries of `FOR ... IN <query> LOOP` and `RETURN QUERY`.
//! `SELECT ... INTO v` targets are recorded and blanked so sqlparser sees plain SQL.

use super::lex::{Kind, Lexer, Token};
use super::split::RawStatement;
use crate::config::Dialect;

/// A statement of a body and the variables it assigns.
#[derive(Debug)]
pub struct PlStatement {
    pub raw: RawStatement,
    pub assigns: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Body {
    pub statements: Vec<PlStatement>,
    /// Variables declared in `DECLARE` sections.
    pub declared: Vec<String>,
}

struct Reader<'a> {
    src: &'a str,
    t: Vec<Token>,
    out: Body,
}

impl Reader<'_> {
    fn is(&self, i: usize, w: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is(self.src, w))
    }
    fn punct(&self, i: usize, p: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is_punct(self.src, p))
    }
    fn word(&self, i: usize) -> Option<String> {
        let t = self.t.get(i)?;
        (t.kind == Kind::Word).then(|| t.text(self.src).to_ascii_lowercase())
    }

    /// First index in `from..to` at parenthesis depth 0 holding one of `words`.
    fn find(&self, from: usize, to: usize, words: &[&str]) -> Option<usize> {
        let mut depth = 0i32;
        for i in from..to {
            if self.punct(i, "(") || self.punct(i, "[") {
                depth += 1;
            } else if self.punct(i, ")") || self.punct(i, "]") {
                depth -= 1;
            } else if depth == 0 && words.iter().any(|w| self.is(i, w)) {
                return Some(i);
            }
        }
        None
    }

    /// First `p` in `from..to` outside parentheses.
    fn find_punct(&self, from: usize, to: usize, p: &str) -> Option<usize> {
        let mut depth = 0i32;
        (from..to).find(|&i| {
            if self.punct(i, "(") {
                depth += 1;
            } else if self.punct(i, ")") {
                depth -= 1;
            }
            depth == 0 && self.punct(i, p)
        })
    }

    /// Emit tokens `from..to` as a statement; `prefix` is prepended to the text, `blank` ranges
    /// (token indices) are replaced by spaces, `perform` turns `PERFORM` into `SELECT`.
    fn emit(
        &mut self,
        from: usize,
        to: usize,
        prefix: &str,
        blank: Option<(usize, usize)>,
        assigns: Vec<String>,
    ) {
        if from >= to {
            return;
        }
        let range = self.t[from].start..self.t[to - 1].end;
        let mut sql = self.src[range.clone()].to_string();
        if let Some((a, b)) = blank {
            let (s, e) = (self.t[a].start - range.start, self.t[b].end - range.start);
            sql.replace_range(s..e, &" ".repeat(e - s));
        }
        if self.is(from, "perform") {
            sql.replace_range(0..7, "SELECT ");
        }
        let raw = RawStatement {
            range,
            tokens: self.t[from..to].to_vec(),
            sql: format!("{prefix}{sql}"),
            message: self.out.statements.len(),
            gset: false,
            prefix: prefix.len(),
        };
        self.out.statements.push(PlStatement { raw, assigns });
    }

    /// One `;`-terminated piece of the body.
    fn piece(&mut self, mut i: usize, end: usize, in_declare: &mut bool) {
        // Strip block and control-flow syntax in front of the statement.
        while i < end {
            if self.punct(i, "<") && self.punct(i + 1, "<") {
                i = (i + 2..end)
                    .find(|&j| self.punct(j, ">") && self.punct(j + 1, ">"))
                    .map_or(end, |j| j + 2);
            } else if self.is(i, "declare") {
                *in_declare = true;
                i += 1;
            } else if self.is(i, "begin") {
                *in_declare = false;
                i += 1;
            } else if *in_declare {
                if let Some(name) = self.word(i) {
                    self.out.declared.push(name);
                }
                return;
            } else if self.is(i, "exception") || self.is(i, "else") || self.is(i, "loop") {
                i += 1;
            } else if self.is(i, "when") {
                i = self.find(i + 1, end, &["then"]).map_or(end, |j| j + 1);
            } else if self.is(i, "end") {
                i += 1;
                if self.is(i, "if") || self.is(i, "loop") || self.is(i, "case") {
                    i += 1;
                }
                // `END label;`, `END LOOP label;`
                if i + 1 == end && self.word(i).is_some() {
                    i += 1;
                }
            } else if self.is(i, "if")
                || self.is(i, "elsif")
                || self.is(i, "elseif")
                || self.is(i, "while")
            {
                let stop = self.find(i + 1, end, &["then", "loop"]).unwrap_or(end);
                self.emit(i + 1, stop, "SELECT ", None, Vec::new());
                i = stop + 1;
            } else if self.is(i, "case") {
                i = if self.is(i + 1, "when") {
                    i + 1
                } else {
                    self.find(i + 1, end, &["when"]).unwrap_or(end)
                };
            } else if self.is(i, "for") || self.is(i, "foreach") {
                let stop = self.find(i + 1, end, &["loop"]).unwrap_or(end);
                if let Some(inn) = self.find(i + 1, stop, &["in"]) {
                    let q = if self.is(inn + 1, "reverse") {
                        inn + 2
                    } else {
                        inn + 1
                    };
                    if self.is(q, "select") || self.is(q, "with") {
                        self.emit(q, stop, "", None, Vec::new());
                    }
                }
                i = stop + 1;
            } else {
                break;
            }
        }
        if i >= end {
            return;
        }
        match self.word(i).as_deref() {
            Some("return") => {
                if self.is(i + 1, "query") {
                    if !self.is(i + 2, "execute") {
                        self.emit(i + 2, end, "", None, Vec::new());
                    }
                } else if !self.is(i + 1, "next") {
                    self.emit(i + 1, end, "SELECT ", None, Vec::new());
                }
            }
            Some(
                "raise" | "get" | "null" | "exit" | "continue" | "open" | "fetch" | "move"
                | "close" | "assert" | "execute",
            ) => {}
            _ => {
                if let Some(op) = self.assignment(i, end) {
                    let target = self.word(i).unwrap_or_default();
                    self.emit(op + 1, end, "SELECT ", None, vec![target]);
                } else {
                    self.statement(i, end);
                }
            }
        }
    }

    /// `target := expr` / `target = expr` (target possibly `a.b` or `a[i:j]`).
    fn assignment(&self, i: usize, end: usize) -> Option<usize> {
        if self.t.get(i)?.kind != Kind::Word || self.is(i, "select") || self.is(i, "with") {
            return None;
        }
        // `:=` outside parentheses is always an assignment (inside, a named argument).
        if let Some(op) = self.find_punct(i + 1, end, ":=") {
            return Some(op);
        }
        let mut j = i + 1;
        while j < end
            && (self.punct(j, ".")
                || self.punct(j, "[")
                || self.punct(j, "]")
                || self.t[j].kind == Kind::Word && self.punct(j - 1, ".")
                || self.t[j].kind == Kind::Number)
        {
            j += 1;
        }
        (self.punct(j, ":=") || self.punct(j, "=")).then_some(j)
    }

    /// A SQL statement, with its `INTO [STRICT] targets` recorded and blanked.
    fn statement(&mut self, i: usize, end: usize) {
        let mut depth = 0i32;
        let into = (i..end).find(|&j| {
            if self.punct(j, "(") {
                depth += 1;
            } else if self.punct(j, ")") {
                depth -= 1;
            }
            depth == 0
                && self.is(j, "into")
                && !(j > i
                    && (self.is(j - 1, "insert")
                        || self.is(j - 1, "merge")
                        || self.is(j - 1, "replace")))
        });
        let Some(into) = into else {
            self.emit(i, end, "", None, Vec::new());
            return;
        };
        let mut j = into + 1;
        if self.is(j, "strict") {
            j += 1;
        }
        let mut targets = Vec::new();
        while let Some(name) = self.word(j) {
            j += 1;
            let mut full = name;
            while self.punct(j, ".") && self.word(j + 1).is_some() {
                full = self.word(j + 1).unwrap_or_default();
                j += 2;
            }
            targets.push(full);
            if self.punct(j, ",") {
                j += 1;
            } else {
                break;
            }
        }
        self.emit(
            i,
            end,
            "",
            Some((into, j.saturating_sub(1).max(into))),
            targets,
        );
    }
}

/// Read a PL/pgSQL body (the text between the quotes).
pub fn read_body(body: &str, dialect: Dialect) -> Body {
    let t: Vec<Token> = Lexer::new(body, dialect, false)
        .filter(|t| t.kind != Kind::Comment)
        .collect();
    let mut r = Reader {
        src: body,
        t,
        out: Body::default(),
    };
    let mut in_declare = false;
    let mut start = 0;
    for i in 0..r.t.len() {
        if r.t[i].kind == Kind::Semicolon {
            r.piece(start, i, &mut in_declare);
            start = i + 1;
        }
    }
    let n = r.t.len();
    r.piece(start, n, &mut in_declare);
    r.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(body: &str) -> Vec<String> {
        read_body(body, Dialect::Postgres)
            .statements
            .iter()
            .map(|s| s.raw.sql.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    #[test]
    fn strips_control_flow() {
        let body = "
        <<outer>>
        DECLARE
            v int := 0;
            r record;
        BEGIN
            SELECT balance INTO STRICT v FROM accounts WHERE id = 1;
            IF v > 10 THEN
                UPDATE accounts SET balance = v - 10 WHERE id = 1;
            ELSIF EXISTS (SELECT 1 FROM t) THEN
                PERFORM pg_advisory_xact_lock(1);
            ELSE
                v := (SELECT count(*) FROM t);
            END IF;
            FOR r IN SELECT * FROM t FOR UPDATE LOOP
                DELETE FROM t WHERE id = r.id;
            END LOOP outer;
            a[2:3] := 5;
            BEGIN
                INSERT INTO t VALUES (1) RETURNING id INTO v;
            EXCEPTION WHEN unique_violation THEN
                RAISE NOTICE 'dup';
            END;
            RETURN v;
        END outer;";
        assert_eq!(
            sql(body),
            vec![
                "SELECT balance FROM accounts WHERE id = 1",
                "SELECT v > 10",
                "UPDATE accounts SET balance = v - 10 WHERE id = 1",
                "SELECT EXISTS (SELECT 1 FROM t)",
                "SELECT pg_advisory_xact_lock(1)",
                "SELECT (SELECT count(*) FROM t)",
                "SELECT * FROM t FOR UPDATE",
                "DELETE FROM t WHERE id = r.id",
                "SELECT 5",
                "INSERT INTO t VALUES (1) RETURNING id",
                "SELECT v",
            ]
        );
        let b = read_body(body, Dialect::Postgres);
        assert_eq!(b.declared, vec!["v", "r"]);
        assert_eq!(b.statements[0].assigns, vec!["v"]);
        assert_eq!(b.statements[5].assigns, vec!["v"]);
    }

    #[test]
    fn positions_point_into_the_body() {
        let body = "BEGIN\n  PERFORM f();\nEND";
        let b = read_body(body, Dialect::Postgres);
        let s = &b.statements[0].raw;
        assert_eq!(&body[s.range.clone()], "PERFORM f()");
    }
}
