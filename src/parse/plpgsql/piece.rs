//! One piece of a body (what lies between two `;`): the block and control-flow syntax in
//! front of it, then the statement, assignment or condition it holds.

use super::*;

/// What the block syntax at the start of a piece leaves.
enum Syntax {
    /// Read on at this token.
    Next(usize),
    /// The piece was a declaration.
    Declared,
    /// Not block syntax: the piece's statement starts here.
    Statement,
}

impl Reader<'_> {
    /// One `;`-terminated piece of the body.
    pub(super) fn piece(&mut self, mut i: usize, end: usize, in_declare: &mut bool) {
        // Read block and control-flow syntax in front of the statement.
        while i < end {
            match self.syntax(i, end, in_declare) {
                Syntax::Next(next) => i = next,
                Syntax::Declared => return,
                Syntax::Statement => break,
            }
        }
        if i < end {
            self.statement_piece(i, end);
        }
    }

    /// The block or control-flow word at `i`: where to read on.
    fn syntax(&mut self, i: usize, end: usize, in_declare: &mut bool) -> Syntax {
        if self.punct(i, "<") && self.punct(i + 1, "<") {
            let label_end = (i + 2..end)
                .find(|&j| self.punct(j, ">") && self.punct(j + 1, ">"))
                .map_or(end, |j| j + 2);
            return Syntax::Next(label_end);
        }
        if self.is(i, "declare") {
            *in_declare = true;
            return Syntax::Next(i + 1);
        }
        if self.is(i, "begin") {
            *in_declare = false;
            let after = self.seq;
            self.frames.push((
                Frame::Block {
                    after,
                    handlers: None,
                },
                None,
            ));
            return Syntax::Next(i + 1);
        }
        if *in_declare {
            self.declaration(i, end);
            return Syntax::Declared;
        }
        const WORDS: [&str; 12] = [
            "exception",
            "else",
            "loop",
            "when",
            "end",
            "if",
            "elsif",
            "elseif",
            "while",
            "case",
            "for",
            "foreach",
        ];
        let next = match WORDS.into_iter().find(|w| self.is(i, w)) {
            Some("exception") => self.exception(i),
            Some("else") => self.else_arm(i),
            Some("loop") => {
                self.loop_arm(&[]);
                i + 1
            }
            Some("when") => self.when_arm(i, end),
            Some("end") => self.end_of(i, end),
            Some("if" | "elsif" | "elseif") => self.if_arm(i, end),
            Some("while") => self.while_loop(i, end),
            Some("case") => self.case(i, end),
            Some("for" | "foreach") => self.for_loop(i, end),
            _ => return Syntax::Statement,
        };
        Syntax::Next(next)
    }

    /// A declaration: `n int := (SELECT count(*) FROM t)`, an initializer that queries, is a
    /// read; one that calls a function or names a variable (`id uuid := gen_random_uuid()`,
    /// `db text := id`) is an assignment, as in the body.
    fn declaration(&mut self, i: usize, end: usize) {
        if let Some(name) = self.word(i) {
            self.out.declared.push(name);
        }
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
    }

    /// `EXCEPTION`: the enclosing block's handlers begin.
    fn exception(&mut self, i: usize) -> usize {
        let group = self.choice();
        let handler = self.out.handlers.len();
        if let Some((Frame::Block { after, handlers }, _)) = self.frames.last_mut() {
            *handlers = Some((group, handler));
            let after = *after;
            self.out.handlers.push(PlHandler {
                after,
                upto: self.seq,
                arms: Vec::new(),
                range: self.t[i].start()..self.t[i].end(),
                unique: false,
            });
        }
        i + 1
    }

    /// `ELSE` of an `IF` or a `CASE`.
    fn else_arm(&mut self, i: usize) -> usize {
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
            Some((Frame::Case { group, conds }, _)) => Some((*group, conds.clone(), 0, None)),
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
        i + 1
    }

    /// `WHEN .. THEN` of a `CASE` or of an exception handler.
    fn when_arm(&mut self, i: usize, end: usize) -> usize {
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
        then + 1
    }

    /// `END`, `END IF`, `END LOOP`, `END CASE` (and a label after it).
    fn end_of(&mut self, i: usize, end: usize) -> usize {
        let mut i = i + 1;
        let what = ["if", "loop", "case"].into_iter().find(|w| self.is(i, w));
        if what.is_some() {
            i += 1;
        }
        self.end(what);
        // `END label;`, `END LOOP label;`
        if i + 1 == end && self.word(i).is_some() {
            i += 1;
        }
        i
    }

    /// `IF`, `ELSIF` or `ELSEIF` and its condition, up to `THEN`.
    fn if_arm(&mut self, i: usize, end: usize) -> usize {
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
            // Only when a column changed: this arm's test says so, or the chain's first said
            // none did and this is a later arm.
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
        stop + 1
    }

    /// `WHILE cond LOOP`.
    fn while_loop(&mut self, i: usize, end: usize) -> usize {
        let stop = self.find(i + 1, end, &["loop"]).unwrap_or(end);
        self.emit(i + 1, stop, "SELECT ", None, Vec::new());
        let cond: Vec<usize> = self.emitted(i + 1).into_iter().collect();
        self.loop_arm(&cond);
        stop + 1
    }

    /// `CASE [selector]`, up to its first `WHEN`.
    fn case(&mut self, i: usize, end: usize) -> usize {
        let when = self.find(i + 1, end, &["when"]).unwrap_or(end);
        // `CASE selector WHEN ...`: the selector is evaluated once.
        self.emit(i + 1, when, "SELECT ", None, Vec::new());
        let conds: Vec<usize> = self.emitted(i + 1).into_iter().collect();
        let group = self.choice();
        self.frames.push((Frame::Case { group, conds }, None));
        when
    }

    /// `FOR v IN query LOOP` / `FOREACH .. LOOP`: a loop over a query's rows is a loop of the
    /// model, its variables bound to the query.
    fn for_loop(&mut self, i: usize, end: usize) -> usize {
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
        stop + 1
    }

    /// What follows the block syntax: `RETURN`, `RAISE`, an assignment or a statement.
    fn statement_piece(&mut self, i: usize, end: usize) {
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
    pub(super) fn assignment(&self, i: usize, end: usize) -> Option<usize> {
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
    pub(super) fn statement(&mut self, i: usize, end: usize) {
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
