//! The reader's tools: looking at tokens, and keeping statements, branch arms, loops and
//! exits in program order.

use super::*;

impl Reader<'_> {
    pub(super) fn is(&self, i: usize, w: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is(self.src, w))
    }
    pub(super) fn punct(&self, i: usize, p: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is_punct(self.src, p))
    }
    pub(super) fn word(&self, i: usize) -> Option<String> {
        let t = self.t.get(i)?;
        (t.kind == Kind::Word).then(|| t.text(self.src).to_ascii_lowercase())
    }

    /// A name: a word (lower case) or a quoted identifier (as written).
    pub(super) fn name(&self, i: usize) -> Option<String> {
        let t = self.t.get(i)?;
        match t.kind {
            Kind::QuotedIdent => Some(t.text(self.src).trim_matches('"').to_string()),
            _ => self.word(i),
        }
    }

    /// The trigger events a condition in `from..to` holds for, when all it tests is `TG_OP`:
    /// `TG_OP = 'INSERT'`, `TG_OP IN ('INSERT', 'UPDATE')`, joined by `OR`, in parentheses.
    pub(super) fn tg_op_events(&self, from: usize, to: usize) -> Option<u8> {
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
    pub(super) fn catches_unique(&self, from: usize, to: usize) -> bool {
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
    pub(super) fn find(&self, from: usize, to: usize, words: &[&str]) -> Option<usize> {
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
    pub(super) fn find_punct(&self, from: usize, to: usize, p: &str) -> Option<usize> {
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
    pub(super) fn emit(
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
        let range = self.t[from].start()..self.t[to - 1].end();
        let mut sql = self.src[range.clone()].to_string();
        if let Some((a, b)) = blank {
            let (s, e) = (
                self.t[a].start() - range.start,
                self.t[b].end() - range.start,
            );
            sql.replace_range(s..e, &" ".repeat(e - s));
        }
        // A `:name` in a body is a tool's template variable (psql itself does not substitute
        // inside quotes): an identifier of the same length stands in for it.
        for t in self.t[from..to].iter().filter(|t| t.kind == Kind::PsqlVar) {
            let (s, e) = (t.start() - range.start, t.end() - range.start);
            sql.replace_range(s..s + 1, "_");
            debug_assert!(e > s);
        }
        if self.is(from, "perform") {
            sql.replace_range(0..7, "SELECT ");
        }
        // A body of a template file has holes too (`INSERT INTO {schema}.log ..`).
        let template =
            crate::parse::holes::fill(self.src, &self.t[from..to], range.start, &mut sql);
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
    pub(super) fn emitted(&self, from: usize) -> Option<usize> {
        self.out
            .statements
            .last()
            .filter(|s| {
                self.t
                    .get(from)
                    .is_some_and(|t| t.start() == s.raw.range.start)
            })
            .map(|s| s.seq)
    }

    /// The arms a statement at body offset `at` runs in, outermost first: those of the outer
    /// [`MAX_NESTING`] structures (each statement keeps its path; deeper paths would cost
    /// memory quadratic in the depth).
    pub(super) fn branch(&mut self, at: usize) -> Vec<usize> {
        if self.frames.len() > MAX_NESTING {
            self.out.too_deep.get_or_insert(at);
        }
        let outer = self.frames.iter().take(MAX_NESTING);
        outer.filter_map(|(_, arm)| *arm).collect()
    }

    /// Open a new arm in the innermost structure (closing the one it had), in choice `group`
    /// if the arms are alternatives, taken on the condition statements `conds`.
    pub(super) fn arm(&mut self, group: Option<usize>, conds: &[usize]) {
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
    pub(super) fn loop_arm(&mut self, conds: &[usize]) {
        self.frames.push((Frame::Loop, None));
        self.arm(None, conds);
        self.out.loop_arms.push(self.next_arm);
    }

    pub(super) fn choice(&mut self) -> usize {
        self.out.choices.push(Vec::new());
        self.out.choices.len() - 1
    }

    pub(super) fn exit(&mut self, at: usize, fails: bool) {
        self.seq += 1;
        let range = self.t[at].start()..self.t[at].end();
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
    pub(super) fn end(&mut self, what: Option<&str>) {
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
}
