//! PL/pgSQL bodies (functions, procedures, triggers, `DO` blocks) -> the SQL they run.
//!
//! A light reader, not a PL/pgSQL grammar: it cuts the body at `;`, reads the block and
//! control-flow syntax in front of each piece (`DECLARE`, `BEGIN`, `IF ... THEN`, `LOOP`,
//! `EXCEPTION WHEN ... THEN`, `END IF`, ...) and keeps what reaches the database: SQL
//! statements, `PERFORM` (sent as `SELECT`), conditions and assignments (evaluated as
//! `SELECT <expression>`), the queries of `FOR ... IN <query> LOOP` and `RETURN QUERY`.
//! `SELECT ... INTO v` targets are recorded and blanked so sqlparser sees plain SQL.
//!
//! The control flow is kept as branch arms (the arms of one `IF`/`ELSIF`/`ELSE` or `CASE`
//! are alternatives; a loop body is an arm of its own), the conditions they are taken on, and
//! the exits (`RETURN`, `RAISE EXCEPTION`), in one program order with the statements.

use super::changes::{ColumnTest, column_test};
use super::lex::{Kind, Lexer, Token};
use super::split::RawStatement;
use crate::source::Dialect;

/// A statement of a body and the variables it assigns.
#[derive(Debug)]
pub struct PlStatement {
    pub raw: RawStatement,
    pub assigns: Vec<String>,
    /// Position in program order (statements and exits share the numbering).
    pub seq: usize,
    /// Branch arms enclosing it, outermost first.
    pub branch: Vec<usize>,
}

/// `RETURN` or `RAISE EXCEPTION`: the rest of the body does not run.
#[derive(Debug)]
pub struct PlExit {
    pub seq: usize,
    pub branch: Vec<usize>,
    /// Byte range of the keyword in the body.
    pub range: std::ops::Range<usize>,
    /// `RAISE`: it leaves with an error.
    pub fails: bool,
}

/// `BEGIN .. EXCEPTION WHEN .. THEN .. END`: a block that catches errors runs as a savepoint.
/// When a handler runs, what the block's body did, its locks included, was rolled back.
#[derive(Debug)]
pub struct PlHandler {
    /// The body is what runs after position `after` up to `upto` (see [`PlStatement::seq`]).
    pub after: usize,
    pub upto: usize,
    /// The handlers' branch arms (one per `WHEN`).
    pub arms: Vec<usize>,
    /// Byte range of the `EXCEPTION` keyword in the body.
    pub range: std::ops::Range<usize>,
    /// One of its `WHEN`s catches a unique violation (`unique_violation`, `SQLSTATE '23505'`, its
    /// class, `OTHERS`).
    pub unique: bool,
}

/// `FOR target IN <query> LOOP`: the body runs once per row, in the query's order.
#[derive(Debug)]
pub struct PlLoop {
    /// The body's branch arm.
    pub arm: usize,
    pub vars: Vec<String>,
    /// The query's position (see [`PlStatement::seq`]).
    pub query: usize,
}

/// A branch arm and the statements its condition is computed from (by [`PlStatement::seq`]).
#[derive(Debug)]
pub struct PlCondition {
    pub arm: usize,
    pub from: Vec<usize>,
}

#[derive(Debug, Default)]
pub struct Body {
    pub statements: Vec<PlStatement>,
    /// Variables declared in `DECLARE` sections.
    pub declared: Vec<String>,
    pub exits: Vec<PlExit>,
    pub conditions: Vec<PlCondition>,
    /// Groups of arms of which one run takes at most one.
    pub choices: Vec<Vec<usize>>,
    pub handlers: Vec<PlHandler>,
    pub loops: Vec<PlLoop>,
    /// The arms that are loop bodies (`LOOP`, `WHILE`, `FOR`).
    pub loop_arms: Vec<usize>,
    /// Arms of a trigger function that run only for some events (`IF TG_OP = 'INSERT' THEN`,
    /// and the `ELSE` after it), with the events as [`TG_INSERT`] | [`TG_UPDATE`] | ... bits.
    pub events: Vec<(usize, u8)>,
    /// Arms of a trigger function that run only when the firing `UPDATE` changes one of these
    /// columns (`IF NEW.a IS DISTINCT FROM OLD.a THEN`, the `ELSE` of `IF NEW.a = OLD.a THEN`).
    pub change_arms: Vec<(usize, Vec<String>)>,
    /// `IF NEW.a IS NOT DISTINCT FROM OLD.a [AND ..] THEN RETURN ..; END IF;` at the top of the
    /// body: what runs after that exit (by position) runs only when one of the columns changed.
    pub changed_after: Option<(usize, Vec<String>)>,
    /// Where a statement sits in more than [`MAX_NESTING`] open structures (body offset): the
    /// arms deeper than that are read as the one enclosing them.
    pub too_deep: Option<usize>,
}

/// Control structures nested deeper than this (in bodies nobody writes by hand) are read as the
/// arm that encloses them at this depth.
pub const MAX_NESTING: usize = 64;

pub const TG_INSERT: u8 = 1;
pub const TG_UPDATE: u8 = 2;
pub const TG_DELETE: u8 = 4;
pub const TG_TRUNCATE: u8 = 8;
const TG_ALL: u8 = TG_INSERT | TG_UPDATE | TG_DELETE | TG_TRUNCATE;

/// An open control structure.
#[derive(Debug)]
enum Frame {
    /// `IF`: its choice group, the condition statements of the chain so far, and the trigger
    /// events the conditions so far that test only `TG_OP` claimed.
    If {
        group: usize,
        conds: Vec<usize>,
        claimed: u8,
        /// The chain's first condition holds only when none of these columns changed: the arms
        /// after the first run only when one did.
        unchanged: Option<Vec<String>>,
    },
    /// `CASE`: its choice group, the selector statement, whether a `WHEN` started.
    Case {
        group: usize,
        conds: Vec<usize>,
    },
    Loop,
    /// `BEGIN ... [EXCEPTION ...] END`: the position before its body; once `EXCEPTION` is
    /// seen, the handlers' choice group and their [`PlHandler`].
    Block {
        after: usize,
        handlers: Option<(usize, usize)>,
    },
}

struct Reader<'a> {
    src: &'a str,
    t: Vec<Token>,
    out: Body,
    /// Open structures with their current arm.
    frames: Vec<(Frame, Option<usize>)>,
    next_arm: usize,
    seq: usize,
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

    /// A name: a word (lower case) or a quoted identifier (as written).
    fn name(&self, i: usize) -> Option<String> {
        let t = self.t.get(i)?;
        match t.kind {
            Kind::QuotedIdent => Some(t.text(self.src).trim_matches('"').to_string()),
            _ => self.word(i),
        }
    }

    /// The trigger events a condition in `from..to` holds for, when all it tests is `TG_OP`:
    /// `TG_OP = 'INSERT'`, `TG_OP IN ('INSERT', 'UPDATE')`, joined by `OR`, in parentheses.
    fn tg_op_events(&self, from: usize, to: usize) -> Option<u8> {
        let event = |i: usize| {
            let t = self.t.get(i).filter(|t| t.kind == Kind::String)?;
            match t
                .text(self.src)
                .trim_matches('\'')
                .to_ascii_uppercase()
                .as_str()
            {
                "INSERT" => Some(TG_INSERT),
                "UPDATE" => Some(TG_UPDATE),
                "DELETE" => Some(TG_DELETE),
                "TRUNCATE" => Some(TG_TRUNCATE),
                _ => None,
            }
        };
        let toks: Vec<usize> = (from..to.min(self.t.len()))
            .filter(|&i| !self.punct(i, "(") && !self.punct(i, ")"))
            .collect();
        let mut out = 0;
        for test in toks.split(|&i| self.is(i, "or")) {
            let [op, rel, values @ ..] = test else {
                return None;
            };
            if !self.is(*op, "tg_op") {
                return None;
            }
            if self.punct(*rel, "=") && values.len() == 1 {
                out |= event(values[0])?;
            } else if self.is(*rel, "in") {
                for (k, &v) in values.iter().enumerate() {
                    if k % 2 == 1 {
                        if !self.punct(v, ",") {
                            return None;
                        }
                    } else {
                        out |= event(v)?;
                    }
                }
            } else {
                return None;
            }
        }
        (out != 0).then_some(out)
    }

    /// The conditions of a `WHEN` in `from..to` include a unique violation.
    fn catches_unique(&self, from: usize, to: usize) -> bool {
        (from..to).any(|i| {
            [
                "unique_violation",
                "integrity_constraint_violation",
                "others",
            ]
            .iter()
            .any(|w| self.is(i, w))
                || self.is(i, "sqlstate")
                    && self.t.get(i + 1).is_some_and(|t| {
                        let code = t.text(self.src).trim_matches('\'');
                        code == "23505" || code == "23000"
                    })
        })
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
        // A `:name` in a body is a tool's template variable (psql itself does not substitute
        // inside quotes): an identifier of the same length stands in for it.
        for t in self.t[from..to].iter().filter(|t| t.kind == Kind::PsqlVar) {
            let (s, e) = (t.start - range.start, t.end - range.start);
            sql.replace_range(s..s + 1, "_");
            debug_assert!(e > s);
        }
        if self.is(from, "perform") {
            sql.replace_range(0..7, "SELECT ");
        }
        // A body of a template file has holes too (`INSERT INTO {schema}.log ..`).
        let template = super::holes::fill(self.src, &self.t[from..to], range.start, &mut sql);
        let raw = RawStatement {
            range,
            tokens: self.t[from..to].to_vec(),
            sql: format!("{prefix}{sql}"),
            message: self.out.statements.len(),
            gset: false,
            prefix: prefix.len(),
            template,
        };
        self.seq += 1;
        let (seq, branch) = (self.seq, self.branch(raw.range.start));
        self.out.statements.push(PlStatement {
            raw,
            assigns,
            seq,
            branch,
        });
    }

    /// Sequence number of the statement emitted last, if it was emitted from `from`.
    fn emitted(&self, from: usize) -> Option<usize> {
        self.out
            .statements
            .last()
            .filter(|s| {
                self.t
                    .get(from)
                    .is_some_and(|t| t.start == s.raw.range.start)
            })
            .map(|s| s.seq)
    }

    /// The arms a statement at body offset `at` runs in, outermost first: those of the outer
    /// [`MAX_NESTING`] structures (each statement keeps its path; deeper paths would cost
    /// memory quadratic in the depth).
    fn branch(&mut self, at: usize) -> Vec<usize> {
        if self.frames.len() > MAX_NESTING {
            self.out.too_deep.get_or_insert(at);
        }
        let outer = self.frames.iter().take(MAX_NESTING);
        outer.filter_map(|(_, arm)| *arm).collect()
    }

    /// Open a new arm in the innermost structure (closing the one it had), in choice `group`
    /// if the arms are alternatives, taken on the condition statements `conds`.
    fn arm(&mut self, group: Option<usize>, conds: &[usize]) {
        self.next_arm += 1;
        let arm = self.next_arm;
        if let Some(g) = group {
            self.out.choices[g].push(arm);
        }
        if !conds.is_empty() {
            self.out.conditions.push(PlCondition {
                arm,
                from: conds.to_vec(),
            });
        }
        if let Some(top) = self.frames.last_mut() {
            top.1 = Some(arm);
        }
    }

    /// A loop's body: a new arm, recorded as a loop's.
    fn loop_arm(&mut self, conds: &[usize]) {
        self.frames.push((Frame::Loop, None));
        self.arm(None, conds);
        self.out.loop_arms.push(self.next_arm);
    }

    fn choice(&mut self) -> usize {
        self.out.choices.push(Vec::new());
        self.out.choices.len() - 1
    }

    fn exit(&mut self, at: usize, fails: bool) {
        self.seq += 1;
        let range = self.t[at].start..self.t[at].end;
        let branch = self.branch(range.start);
        // `RETURN` in the first arm of an `IF` on unchanged columns, in the body's own block:
        // the rest of the body runs only when one of them changed.
        if let [
            (Frame::Block { .. }, None),
            (Frame::If { unchanged, .. }, Some(arm)),
        ] = self.frames.as_slice()
            && let Some(cols) = unchanged
            && !fails
            && self.out.changed_after.is_none()
            && self.out.choices.iter().any(|g| g.first() == Some(arm))
        {
            self.out.changed_after = Some((self.seq, cols.clone()));
        }
        self.out.exits.push(PlExit {
            seq: self.seq,
            branch,
            range,
            fails,
        });
    }

    /// Close the innermost structure of the kind `END <word>` names (`END IF`, `END LOOP`,
    /// `END CASE`, or a block's plain `END`).
    fn end(&mut self, what: Option<&str>) {
        let matches = |f: &Frame| match what {
            Some("if") => matches!(f, Frame::If { .. }),
            Some("loop") => matches!(f, Frame::Loop),
            Some("case") => matches!(f, Frame::Case { .. }),
            _ => matches!(f, Frame::Block { .. }),
        };
        if let Some(p) = self.frames.iter().rposition(|(f, _)| matches(f)) {
            self.frames.truncate(p);
        }
    }

    /// One `;`-terminated piece of the body.
    fn piece(&mut self, mut i: usize, end: usize, in_declare: &mut bool) {
        // Read block and control-flow syntax in front of the statement.
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
                let after = self.seq;
                self.frames.push((
                    Frame::Block {
                        after,
                        handlers: None,
                    },
                    None,
                ));
                i += 1;
            } else if *in_declare {
                if let Some(name) = self.word(i) {
                    self.out.declared.push(name);
                }
                // `n int := (SELECT count(*) FROM t)`: an initializer that queries is a read;
                // one that calls a function or names a variable (`id uuid := gen_random_uuid()`,
                // `db text := id`) is an assignment, as in the body.
                let init = self
                    .find_punct(i + 1, end, ":=")
                    .or_else(|| self.find(i + 1, end, &["default"]));
                if let Some(op) = init
                    && (op + 1..end).any(|j| {
                        self.is(j, "select")
                            || (self.t[j].kind == Kind::Word
                                && !["null", "true", "false"].iter().any(|w| self.is(j, w)))
                    })
                {
                    let target = self.word(i).unwrap_or_default();
                    self.emit(op + 1, end, "SELECT ", None, vec![target]);
                }
                return;
            } else if self.is(i, "exception") {
                let group = self.choice();
                let handler = self.out.handlers.len();
                if let Some((Frame::Block { after, handlers }, _)) = self.frames.last_mut() {
                    *handlers = Some((group, handler));
                    let after = *after;
                    self.out.handlers.push(PlHandler {
                        after,
                        upto: self.seq,
                        arms: Vec::new(),
                        range: self.t[i].start..self.t[i].end,
                        unique: false,
                    });
                }
                i += 1;
            } else if self.is(i, "else") {
                let top = match self.frames.last() {
                    Some((
                        Frame::If {
                            group,
                            conds,
                            claimed,
                            unchanged,
                        },
                        _,
                    )) => Some((*group, conds.clone(), *claimed, unchanged.clone())),
                    Some((Frame::Case { group, conds }, _)) => {
                        Some((*group, conds.clone(), 0, None))
                    }
                    _ => None,
                };
                if let Some((g, c, claimed, unchanged)) = top {
                    self.arm(Some(g), &c);
                    if claimed != 0 {
                        self.out.events.push((self.next_arm, TG_ALL & !claimed));
                    }
                    if let Some(cols) = unchanged {
                        self.out.change_arms.push((self.next_arm, cols));
                    }
                }
                i += 1;
            } else if self.is(i, "loop") {
                self.loop_arm(&[]);
                i += 1;
            } else if self.is(i, "when") {
                let then = self.find(i + 1, end, &["then"]).unwrap_or(end);
                match self.frames.last() {
                    Some((Frame::Case { group, conds }, _)) => {
                        let (g, mut c) = (*group, conds.clone());
                        self.emit(i + 1, then, "SELECT ", None, Vec::new());
                        c.extend(self.emitted(i + 1));
                        if let Some((Frame::Case { conds, .. }, _)) = self.frames.last_mut() {
                            conds.clone_from(&c);
                        }
                        self.arm(Some(g), &c);
                    }
                    Some((
                        Frame::Block {
                            handlers: Some((g, h)),
                            ..
                        },
                        _,
                    )) => {
                        let (g, h) = (*g, *h);
                        self.arm(Some(g), &[]);
                        self.out.handlers[h].arms.push(self.next_arm);
                        self.out.handlers[h].unique |= self.catches_unique(i + 1, then);
                    }
                    _ => {}
                }
                i = then + 1;
            } else if self.is(i, "end") {
                i += 1;
                let what = ["if", "loop", "case"].into_iter().find(|w| self.is(i, w));
                if what.is_some() {
                    i += 1;
                }
                self.end(what);
                // `END label;`, `END LOOP label;`
                if i + 1 == end && self.word(i).is_some() {
                    i += 1;
                }
            } else if self.is(i, "if") || self.is(i, "elsif") || self.is(i, "elseif") {
                let stop = self.find(i + 1, end, &["then"]).unwrap_or(end);
                let opens = self.is(i, "if");
                self.emit(i + 1, stop, "SELECT ", None, Vec::new());
                let cond = self.emitted(i + 1);
                let tests = self.tg_op_events(i + 1, stop);
                let columns = column_test(self.src, &self.t[i + 1..stop]);
                if opens {
                    let group = self.choice();
                    let unchanged = match &columns {
                        Some(ColumnTest::Unchanged(cols)) => Some(cols.clone()),
                        _ => None,
                    };
                    self.frames.push((
                        Frame::If {
                            group,
                            conds: Vec::new(),
                            claimed: 0,
                            unchanged,
                        },
                        None,
                    ));
                }
                if let Some((
                    Frame::If {
                        group,
                        conds,
                        claimed,
                        unchanged,
                    },
                    _,
                )) = self.frames.last_mut()
                {
                    conds.extend(cond);
                    // An `ELSIF` runs only for the events the tests before it did not claim.
                    let events = tests.unwrap_or(TG_ALL) & !*claimed;
                    *claimed |= tests.unwrap_or(0);
                    // Only when a column changed: this arm's test says so, or the chain's
                    // first said none did and this is a later arm.
                    let changed = match (columns, opens) {
                        (Some(ColumnTest::Changed(cols)), _) => Some(cols),
                        (_, false) => unchanged.clone(),
                        _ => None,
                    };
                    let (g, c) = (*group, conds.clone());
                    self.arm(Some(g), &c);
                    if events != TG_ALL {
                        self.out.events.push((self.next_arm, events));
                    }
                    if let Some(cols) = changed {
                        self.out.change_arms.push((self.next_arm, cols));
                    }
                }
                i = stop + 1;
            } else if self.is(i, "while") {
                let stop = self.find(i + 1, end, &["loop"]).unwrap_or(end);
                self.emit(i + 1, stop, "SELECT ", None, Vec::new());
                let cond: Vec<usize> = self.emitted(i + 1).into_iter().collect();
                self.loop_arm(&cond);
                i = stop + 1;
            } else if self.is(i, "case") {
                let when = self.find(i + 1, end, &["when"]).unwrap_or(end);
                // `CASE selector WHEN ...`: the selector is evaluated once.
                self.emit(i + 1, when, "SELECT ", None, Vec::new());
                let conds: Vec<usize> = self.emitted(i + 1).into_iter().collect();
                let group = self.choice();
                self.frames.push((Frame::Case { group, conds }, None));
                i = when;
            } else if self.is(i, "for") || self.is(i, "foreach") {
                let stop = self.find(i + 1, end, &["loop"]).unwrap_or(end);
                let mut conds = Vec::new();
                let mut vars = Vec::new();
                if let Some(inn) = self.find(i + 1, stop, &["in"]) {
                    let q = if self.is(inn + 1, "reverse") {
                        inn + 2
                    } else {
                        inn + 1
                    };
                    if self.is(q, "select") || self.is(q, "with") {
                        self.emit(q, stop, "", None, Vec::new());
                        conds.extend(self.emitted(q));
                        if self.is(i, "for") {
                            vars = (i + 1..inn).filter_map(|j| self.word(j)).collect();
                        }
                    }
                }
                self.loop_arm(&conds);
                if !vars.is_empty()
                    && let Some(&query) = conds.first()
                {
                    let arm = self.next_arm;
                    self.out.loops.push(PlLoop { arm, vars, query });
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
                    self.exit(i, false);
                }
            }
            Some("raise") => {
                // `RAISE NOTICE ...` goes on; `RAISE EXCEPTION`, `RAISE 'msg'`, `RAISE SQLSTATE`
                // and a bare re-raise leave the block.
                let level = self.word(i + 1).unwrap_or_default();
                if !matches!(
                    level.as_str(),
                    "notice" | "warning" | "info" | "log" | "debug"
                ) {
                    self.exit(i, true);
                }
            }
            Some(
                "get" | "null" | "exit" | "continue" | "open" | "fetch" | "move" | "close"
                | "assert",
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
        while let Some(name) = self.name(j) {
            j += 1;
            let mut full = name;
            while self.punct(j, ".") && self.name(j + 1).is_some() {
                full = self.name(j + 1).unwrap_or_default();
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
        frames: Vec::new(),
        next_arm: 0,
        seq: 0,
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
    fn trigger_arms_know_the_columns_they_need_changed() {
        let body = "
        BEGIN
            IF NEW.total <> OLD.total OR (OLD.\"Owner\" IS DISTINCT FROM NEW.\"Owner\") THEN
                UPDATE totals SET n = n + 1;
            END IF;
            IF NEW.a = OLD.a AND NEW.b IS NOT DISTINCT FROM OLD.b THEN
                INSERT INTO same VALUES (1);
            ELSIF NEW.c > 0 THEN
                INSERT INTO grew VALUES (1);
            ELSE
                INSERT INTO moved VALUES (1);
            END IF;
            IF NEW.a <> OLD.a AND NEW.b <> OLD.b THEN
                INSERT INTO both VALUES (1);
            END IF;
            RETURN NEW;
        END;";
        let b = read_body(body, Dialect::Postgres);
        let cols = |text: &str| {
            let st = b
                .statements
                .iter()
                .find(|s| s.raw.sql.contains(text))
                .expect("statement");
            let mut out: Vec<String> = b
                .change_arms
                .iter()
                .filter(|(arm, _)| st.branch.contains(arm))
                .flat_map(|(_, c)| c.clone())
                .collect();
            out.sort();
            out
        };
        assert_eq!(cols("totals"), vec!["Owner", "total"]);
        assert_eq!(cols("same"), Vec::<String>::new());
        assert_eq!(cols("grew"), vec!["a", "b"]);
        assert_eq!(cols("moved"), vec!["a", "b"]);
        // `AND` of changes needs both: not a test of any one column.
        assert_eq!(cols("both"), Vec::<String>::new());
        assert_eq!(b.changed_after, None);
    }

    #[test]
    fn an_early_return_on_unchanged_columns_guards_the_rest_of_the_body() {
        let body = "
        BEGIN
            IF NEW.path IS NOT DISTINCT FROM OLD.path AND NEW.parent = OLD.parent THEN
                RETURN NEW;
            END IF;
            UPDATE realms SET full_path = '' WHERE parent = NEW.id;
            RETURN NULL;
        END;";
        let b = read_body(body, Dialect::Postgres);
        let (after, cols) = b.changed_after.clone().expect("a guard");
        assert_eq!(cols, vec!["path", "parent"]);
        assert!(
            b.statements
                .iter()
                .any(|s| s.seq > after && s.raw.sql.contains("realms"))
        );
        // Nested in another structure, or refusing with an error, it guards nothing after it.
        for body in [
            "BEGIN IF x THEN IF NEW.a = OLD.a THEN RETURN NEW; END IF; END IF; RETURN NULL; END;",
            "BEGIN IF NEW.a = OLD.a THEN RAISE EXCEPTION 'same'; END IF; RETURN NULL; END;",
            "BEGIN IF NEW.a = OLD.a THEN NULL; ELSE RETURN NEW; END IF; RETURN NULL; END;",
        ] {
            assert_eq!(
                read_body(body, Dialect::Postgres).changed_after,
                None,
                "{body}"
            );
        }
    }

    #[test]
    fn trigger_arms_know_the_events_they_run_for() {
        let body = "
        BEGIN
            IF (TG_OP = 'INSERT') THEN
                INSERT INTO counts (k, n) VALUES (NEW.k, 1);
            ELSIF TG_OP IN ('UPDATE', 'DELETE') AND OLD.k > 0 THEN
                UPDATE counts SET n = n - 1 WHERE k = OLD.k;
            ELSE
                DELETE FROM counts WHERE k = OLD.k;
            END IF;
            IF tg_op = 'DELETE' OR TG_OP = 'UPDATE' THEN
                DELETE FROM audit WHERE k = OLD.k;
            END IF;
            IF NEW.k > 0 THEN
                UPDATE totals SET n = n + 1;
            ELSE
                UPDATE totals SET n = n - 1;
            END IF;
            RETURN NULL;
        END;";
        let b = read_body(body, Dialect::Postgres);
        let events = |text: &str| {
            let st = b
                .statements
                .iter()
                .find(|st| st.raw.sql.contains(text))
                .unwrap();
            let arm = *st.branch.last().unwrap();
            b.events.iter().find(|e| e.0 == arm).map(|e| e.1)
        };
        assert_eq!(events("INSERT INTO counts"), Some(TG_INSERT));
        // Not a test of `TG_OP` alone: any event the first arm did not claim.
        assert_eq!(
            events("UPDATE counts"),
            Some(TG_UPDATE | TG_DELETE | TG_TRUNCATE)
        );
        assert_eq!(
            events("DELETE FROM counts"),
            Some(TG_UPDATE | TG_DELETE | TG_TRUNCATE)
        );
        assert_eq!(events("DELETE FROM audit"), Some(TG_DELETE | TG_UPDATE));
        assert_eq!(events("totals SET n = n + 1"), None);
        assert_eq!(events("totals SET n = n - 1"), None);
    }

    #[test]
    fn arms_deeper_than_the_limit_are_read_as_the_one_enclosing_them() {
        let depth = MAX_NESTING + 10;
        let body = format!(
            "BEGIN {} UPDATE t SET a = 1; {} END",
            "IF x THEN ".repeat(depth),
            "END IF; ".repeat(depth)
        );
        let b = read_body(&body, Dialect::Postgres);
        let update = b
            .statements
            .iter()
            .find(|s| s.raw.sql.starts_with("UPDATE"));
        let update = update.expect("the update is read");
        // The block's frame has no arm: the outer IFs' arms fill the rest of the path.
        assert_eq!(update.branch.len(), MAX_NESTING - 1);
        // First past the limit: the condition of the IF that opens with the block and
        // MAX_NESTING IFs around it (`BEGIN ` then ten bytes per `IF x THEN `).
        assert_eq!(b.too_deep, Some(6 + 10 * MAX_NESTING + 3));
        let shallow = read_body(
            "BEGIN IF x THEN UPDATE t SET a = 1; END IF; END",
            Dialect::Postgres,
        );
        assert_eq!(shallow.too_deep, None);
    }

    #[test]
    fn control_flow_arms_conditions_and_exits() {
        let body = "
        DECLARE
            n int := (SELECT count(*) FROM seats);
        BEGIN
            SELECT count(*) INTO n FROM bookings WHERE slot = s;
            IF n >= 10 THEN
                RAISE EXCEPTION 'full';
            ELSIF n > 5 THEN
                UPDATE slots SET busy = true WHERE id = s;
            ELSE
                RAISE NOTICE 'plenty';
            END IF;
            CASE kind
                WHEN 'a' THEN DELETE FROM a WHERE id = s;
                ELSE DELETE FROM b WHERE id = s;
            END CASE;
            LOOP
                EXIT WHEN n > 3;
                n := n + 1;
            END LOOP;
            INSERT INTO bookings (slot) VALUES (s);
            RETURN NULL;
        END;";
        let b = read_body(body, Dialect::Postgres);
        let at = |text: &str| {
            b.statements
                .iter()
                .find(|st| st.raw.sql.contains(text))
                .unwrap_or_else(|| panic!("no statement with {text}"))
        };
        // The initializer is a read, assigning `n`.
        assert_eq!(at("count(*) FROM seats").assigns, vec!["n"]);
        let read = at("FROM bookings");
        let first_cond = at("n >= 10");
        let update = at("UPDATE slots");
        assert!(read.branch.is_empty() && first_cond.branch.is_empty());
        // IF / ELSIF / ELSE are one choice; the UPDATE is in the ELSIF arm, taken on both
        // conditions of the chain.
        assert_eq!(update.branch.len(), 1);
        let arm = update.branch[0];
        assert!(b.choices.iter().any(|c| c.len() == 3 && c.contains(&arm)));
        let cond = b.conditions.iter().find(|c| c.arm == arm).unwrap();
        assert_eq!(cond.from, vec![first_cond.seq, at("n > 5").seq]);
        // RAISE EXCEPTION leaves (in the first arm); RAISE NOTICE does not; RETURN does.
        assert_eq!(b.exits.len(), 2);
        assert_eq!(b.exits[0].branch.len(), 1);
        assert!(b.exits[0].seq > first_cond.seq && b.exits[0].seq < update.seq);
        // The CASE arms are another choice.
        let (da, db) = (at("DELETE FROM a"), at("DELETE FROM b"));
        assert_ne!(da.branch, db.branch);
        assert!(
            b.choices
                .iter()
                .any(|c| c.contains(&da.branch[0]) && c.contains(&db.branch[0]))
        );
        // The loop body is an arm of its own; the INSERT after END LOOP is on every path.
        assert_eq!(at("SELECT n + 1").branch.len(), 1);
        assert!(at("INSERT INTO bookings").branch.is_empty());
        assert!(b.exits[1].branch.is_empty());
    }

    #[test]
    fn exception_blocks_and_query_loops() {
        let body = "BEGIN
            BEGIN
                PERFORM pg_advisory_xact_lock(1);
                INSERT INTO t VALUES (1);
            EXCEPTION
                WHEN unique_violation THEN UPDATE t SET n = 1;
                WHEN others THEN RAISE;
            END;
            FOR r, q IN SELECT id, n FROM src WHERE batch = 1 LOOP
                UPDATE dst SET n = q WHERE id = r;
            END LOOP;
            FOR i IN 1..3 LOOP PERFORM f(i); END LOOP;
        END";
        let b = read_body(body, Dialect::Postgres);
        let seq = |text: &str| {
            b.statements
                .iter()
                .find(|s| s.raw.sql.contains(text))
                .unwrap()
        };
        // One handler block: its body is the lock and the INSERT; two handler arms.
        assert_eq!(b.handlers.len(), 1);
        let h = &b.handlers[0];
        assert_eq!(&body[h.range.clone()], "EXCEPTION");
        let (lock, insert) = (seq("pg_advisory_xact_lock").seq, seq("INSERT").seq);
        assert!(h.after < lock && insert <= h.upto);
        assert_eq!(h.arms.len(), 2);
        assert_eq!(seq("UPDATE t").branch.last(), Some(&h.arms[0]));
        assert_eq!(b.exits[0].branch.last(), Some(&h.arms[1]));
        // The query loop binds its targets; the integer loop is no query loop.
        assert_eq!(b.loops.len(), 1);
        let l = &b.loops[0];
        assert_eq!(l.vars, ["r", "q"]);
        assert_eq!(l.query, seq("FROM src").seq);
        assert_eq!(seq("UPDATE dst").branch, [l.arm]);
    }

    #[test]
    fn positions_point_into_the_body() {
        let body = "BEGIN\n  PERFORM f();\nEND";
        let b = read_body(body, Dialect::Postgres);
        let s = &b.statements[0].raw;
        assert_eq!(&body[s.range.clone()], "PERFORM f()");
    }
}
