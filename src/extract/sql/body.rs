//! Routine bodies and `DO` blocks of a `.sql` file: each becomes a unit of its own.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::super::{Front, RoutineEvent};
use super::signature::*;
use crate::model::*;
use crate::parse::lex::{Kind, string_body};
use crate::parse::split::RawStatement;
use crate::parse::{plpgsql, split as splitter};
use crate::source::{OffsetMap, Span};

/// A body's statements, cut into transactions where a procedure commits or rolls back.
struct Cut {
    tx: Transaction,
    done: Vec<Transaction>,
}

impl Cut {
    fn new() -> Self {
        Cut {
            tx: Cut::transaction(),
            done: Vec::new(),
        }
    }

    /// A body's transaction: its caller's, on the caller's session.
    fn transaction() -> Transaction {
        Transaction::new(Scope::Caller, Executor::Session, Isolation::ReadCommitted)
    }

    fn push(&mut self, step: Step) {
        // A procedure's COMMIT or ROLLBACK ends the transaction and starts the next one.
        let ends = matches!(
            step.facts.extra().tx.as_ref(),
            Some(TxControl::Commit | TxControl::Rollback)
        );
        if ends {
            self.tx.set_end(Some(step.span));
            self.tx.set_ended_within(&step.branch);
            let done = std::mem::replace(&mut self.tx, Cut::transaction());
            self.done.push(done);
        } else {
            self.tx.steps.push(step);
        }
    }

    /// Room for `n` more steps in the transaction being cut (a body's statements, read at
    /// once: its steps are not held at twice their number).
    fn reserve(&mut self, n: usize) {
        self.tx.steps.reserve_exact(n);
    }

    fn finish(mut self) -> Vec<Transaction> {
        if !self.tx.steps.is_empty() || self.done.is_empty() {
            self.done.push(self.tx);
        }
        self.done
    }
}

impl Front {
    /// Routine bodies and `DO` blocks in `stmt` become units of their own.
    pub(super) fn bodies(&mut self, src: &str, stmt: &RawStatement, facts: &Facts) {
        let (kind, name) = match facts.kind {
            StmtKind::Do => (UnitKind::DoBlock, None),
            StmtKind::CreateRoutine => {
                let name = routine_name(src, &stmt.tokens);
                if let Some((name, arity)) = &name {
                    self.out.routines.push(RoutineEvent {
                        name: name.clone(),
                        arity: *arity,
                        span: Span::new(self.file, stmt.range.clone()),
                        dropped: false,
                        digest: RoutineEvent::digest_of(src.get(stmt.range.clone()).unwrap_or("")),
                        dump: false,
                    });
                }
                (UnitKind::Routine, name.map(|(n, _)| n))
            }
            _ => return,
        };
        let Some((body, map, language)) = body_text(src, stmt, kind) else {
            return;
        };
        let mut unit = Unit::new(kind, name, Span::new(self.file, stmt.range.clone()));
        if kind == UnitKind::Routine {
            unit.params = call_params(src, &stmt.tokens);
        }
        let mut cut = Cut::new();
        match language.as_str() {
            "plpgsql" => self.plpgsql(src, stmt, body, &map, &mut unit, &mut cut),
            "sql" => {
                let statements = splitter::split(&body, self.dialect, false).statements;
                for (seq, s) in statements.iter().enumerate() {
                    let mut step = self.step(&body, &map, s, Vec::new());
                    step.seq = seq;
                    cut.push(step);
                }
            }
            _ => return,
        }
        unit.transactions = cut.finish();
        self.out.units.push(unit);
    }

    /// A PL/pgSQL body's statements, and what its control flow says about them.
    fn plpgsql(
        &mut self,
        src: &str,
        stmt: &RawStatement,
        body: String,
        map: &OffsetMap,
        unit: &mut Unit,
        cut: &mut Cut,
    ) {
        // `EXECUTE format(..)` read as the statement it runs (same length: `map` holds).
        let (body, dynamic) = crate::parse::dynamic::inline(&body).unwrap_or((body, Vec::new()));
        let mut parsed = plpgsql::read_body(&body, self.dialect);
        // A statement read from an `EXECUTE` is a template, and spans all of it.
        for s in &mut parsed.statements {
            let raw = &mut s.raw;
            if let Some(r) = dynamic.iter().find(|r| r.contains(&raw.range.start)) {
                raw.template = true;
                if raw.range.end < r.end {
                    raw.sql.push_str(&" ".repeat(r.end - raw.range.end));
                    raw.range.end = r.end;
                }
            }
        }
        if let Some(at) = parsed.too_deep {
            let at = map.host(at);
            self.out.limits.push(super::super::Limit {
                span: Span::new(self.file, at..at),
                what: format!(
                    "the arms of control structures nested more than {} deep (read as the arm enclosing them)",
                    plpgsql::MAX_NESTING
                ),
                why: "each statement keeps the path of arms it runs in, and deeper paths would cost memory that grows with the square of the depth".to_string(),
                fix: crate::rules::analysis_limit::SPLIT,
            });
        }
        let mut known: Vec<String> = parsed.declared.clone();
        known.extend(parsed.loops.iter().flat_map(|l| l.vars.iter().cloned()));
        known.extend(routine_params(src, &stmt.tokens));
        known.push("found".to_string());
        let statements = std::mem::take(&mut parsed.statements);
        let sources = self.plpgsql_steps(&body, map, statements, &parsed, known, unit, cut);
        self.plpgsql_flow(map, parsed, &sources, unit);
    }

    /// The body's statements (of `parsed`, taken out of it) as steps, in `cut`; the statements
    /// the values of each condition's come from.
    #[allow(clippy::too_many_arguments)]
    fn plpgsql_steps(
        &mut self,
        body: &str,
        map: &OffsetMap,
        statements: Vec<plpgsql::PlStatement>,
        parsed: &plpgsql::Body,
        mut known: Vec<String>,
        unit: &mut Unit,
        cut: &mut Cut,
    ) -> Sources {
        // The statements each variable's value comes from, and each condition's.
        let mut sources: HashMap<Name, BTreeSet<usize>> = HashMap::new();
        let mut out = Sources::default();
        let conditions: HashSet<usize> = parsed
            .conditions
            .iter()
            .flat_map(|c| c.from.iter().copied())
            .collect();
        cut.reserve(statements.len());
        for s in super::super::draining(statements) {
            let mut step = self.step(body, map, &s.raw, s.assigns.clone());
            step.seq = s.seq;
            step.branch = s.branch.as_slice().into();
            let uses = variables_used(body, &s.raw.tokens, &known);
            if !uses.is_empty() && uses.iter().all(|u| u == "found") {
                out.found_only.insert(s.seq);
            }
            if !uses.is_empty() {
                step.facts.extra_mut().uses = uses.into_iter().map(Name::from).collect();
            }
            let mut from: BTreeSet<usize> = step
                .facts
                .extra()
                .uses
                .iter()
                .filter_map(|u| sources.get(u))
                .flatten()
                .copied()
                .collect();
            // A SQL statement (not a condition or an assignment, which PL/pgSQL evaluates as
            // `SELECT <expression>`) sets FOUND.
            let queries = !step.facts.reads.is_empty() || !step.facts.writes.is_empty();
            if queries {
                from.insert(step.seq);
            }
            for a in &step.facts.extra().assigns {
                sources.insert(a.clone(), from.clone());
            }
            if queries && s.raw.prefix == 0 {
                sources.insert("found".into(), from.clone());
            }
            if conditions.contains(&step.seq) {
                out.of_step.insert(step.seq, from);
            }
            known.extend(s.assigns.iter().cloned());
            if let Some(l) = parsed.loops.iter().find(|l| l.query == step.seq) {
                unit.loops.push(Loop {
                    branch: l.arm,
                    vars: l.vars.clone(),
                    sorted: step.facts.ordered,
                    span: step.span,
                    query: Some(step.seq),
                });
            }
            cut.push(step);
        }
        out
    }

    /// The body's handlers, conditions, exits and arms, in the unit.
    fn plpgsql_flow(
        &self,
        map: &OffsetMap,
        parsed: plpgsql::Body,
        sources: &Sources,
        unit: &mut Unit,
    ) {
        unit.handlers = parsed
            .handlers
            .iter()
            .map(|h| Handler {
                after: h.after,
                upto: h.upto,
                arms: h.arms.clone(),
                span: Span::new(self.file, map.host_range(h.range.clone())),
                unique: h.unique,
            })
            .collect();
        unit.conditions = parsed
            .conditions
            .iter()
            .map(|c| Condition {
                branch: c.arm,
                from: c
                    .from
                    .iter()
                    .filter_map(|s| sources.of_step.get(s))
                    .flatten()
                    .copied()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                failed: false,
                presence: !c.from.is_empty()
                    && c.from.iter().all(|s| sources.found_only.contains(s)),
            })
            .collect();
        unit.exits = parsed
            .exits
            .iter()
            .map(|e| Exit {
                seq: e.seq,
                span: Span::new(self.file, map.host_range(e.range.clone())),
                owner: None,
                branch: e.branch.as_slice().into(),
                kind: ExitKind::Return,
                fails: e.fails,
            })
            .collect();
        unit.choices = parsed.choices;
        unit.loop_arms = parsed.loop_arms;
        let names = |c: &[String]| c.iter().map(|c| Name::from(c.as_str())).collect();
        unit.change_arms = parsed
            .change_arms
            .iter()
            .map(|(arm, c)| (*arm, names(c)))
            .collect();
        unit.changed_after = parsed.changed_after.as_ref().map(|(at, c)| (*at, names(c)));
        unit.event_arms = parsed
            .events
            .iter()
            .map(|&(arm, e)| {
                let events = TriggerEvents {
                    insert: e & plpgsql::TG_INSERT != 0,
                    update: e & plpgsql::TG_UPDATE != 0,
                    delete: e & plpgsql::TG_DELETE != 0,
                };
                (arm, events)
            })
            .collect();
    }
}

/// What a PL/pgSQL body's statements read their values from.
#[derive(Default)]
struct Sources {
    /// The statements each statement's values come from, by its sequence number.
    of_step: HashMap<usize, BTreeSet<usize>>,
    /// Statements (conditions) whose only variable is FOUND.
    found_only: BTreeSet<usize>,
}

/// The body of a routine or `DO` block, the map from its offsets to the file's, and its
/// language (lower case).
fn body_text(
    src: &str,
    stmt: &RawStatement,
    kind: UnitKind,
) -> Option<(String, OffsetMap, String)> {
    let t = &stmt.tokens;
    let language = t.windows(2).find(|w| w[0].is(src, "language")).map(|w| {
        w[1].text(src)
            .trim_matches(['\'', '"'])
            .to_ascii_lowercase()
    });
    let atomic = t
        .windows(2)
        .position(|w| w[0].is(src, "begin") && w[1].is(src, "atomic"));
    if let Some(i) = atomic {
        // SQL-standard body: `BEGIN ATOMIC stmt; ... END`, in the statement itself.
        let (first, end) = (t.get(i + 2)?, t.last()?);
        let range = first.start()..end.start().max(first.start());
        return Some((
            src[range.clone()].to_string(),
            OffsetMap::shifted(range.start),
            "sql".to_string(),
        ));
    }
    let body_token = match kind {
        UnitKind::DoBlock => t.iter().skip(1).find(|t| t.kind == Kind::String),
        _ => t
            .windows(2)
            .find(|w| w[0].is(src, "as") && w[1].kind == Kind::String)
            .map(|w| &w[1]),
    }?;
    let (body, map) = string_body(src, body_token)?;
    let default = match kind {
        UnitKind::DoBlock => "plpgsql",
        _ => "",
    };
    Some((body, map, language.unwrap_or_else(|| default.to_string())))
}
