//! `.sql` files: a script (or one transaction, or loose statements, as `sql.mode` says), plus a
//! unit for every routine body and `DO` block in it.

mod signature;

use std::collections::{BTreeSet, HashMap};

use super::runners::{self, Detected};
use super::session::SessionWalker;
use super::{Extracted, Front, MAX_STATEMENTS, RoutineEvent};
use crate::config::{FileSettings, SqlMode};
use crate::model::*;
use crate::parse::lex::{Kind, Token, is_ident, string_body};
use crate::parse::split::{RawStatement, split_each};
use crate::parse::{plpgsql, split as splitter};
use crate::source::{Dialect, FileId, OffsetMap, Span};
pub use signature::routine_names;
use signature::*;
pub(super) use signature::{paren_group, routine_name_at};

/// Read one `.sql` file; `runner` is who runs it, if txlint could tell (see [`runners`]).
///
/// [`runners`]: super::runners
pub fn extract(
    file: FileId,
    text: &str,
    dialect: Dialect,
    settings: FileSettings,
    runner: Option<Detected>,
    routines: super::Routines,
) -> Extracted {
    let mut x = Front::new(file, dialect, routines);
    // A UTF-8 byte-order mark is three bytes of nothing: spaces keep every offset.
    let unmarked;
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => {
            unmarked = format!("   {rest}");
            unmarked.as_str()
        }
        None => text,
    };
    // Go template actions (`{{ .Schema }}`) can hold quotes: blanked before tokens are read.
    let blanked = crate::parse::holes::blank_actions(text);
    let (text, actions) = match &blanked {
        Some((t, holes)) => (t.as_str(), holes.as_slice()),
        None => (text, &[][..]),
    };
    let map = OffsetMap::shifted(0);
    let mut steps = Vec::new();
    let mut skipped: Option<(usize, usize)> = None;
    let open = split_each(text, dialect, true, |mut stmt| {
        stmt.template |= actions
            .iter()
            .any(|h| h.start < stmt.range.end && stmt.range.start < h.end);
        if steps.len() >= MAX_STATEMENTS {
            let s = skipped.get_or_insert((stmt.range.start, 0));
            s.1 += 1;
            return;
        }
        let mut step = x.step(text, &map, &stmt, Vec::new());
        step.seq = steps.len();
        step.session = Some(0);
        x.bodies(text, &stmt, &step.facts);
        x.out
            .triggers
            .extend(super::trigger::trigger(text, &stmt.tokens, step.span));
        for (name, arity) in dropped_routines(text, &stmt.tokens) {
            x.out.routines.push(RoutineEvent {
                name,
                arity,
                span: step.span,
                dropped: true,
                digest: 0,
                dump: false,
            });
        }
        steps.push((step, stmt.message));
    });
    if is_schema_dump(text) {
        for e in &mut x.out.routines {
            e.dump = true;
        }
    }
    // PostgreSQL rejects a script with a quote or comment left open; the rest was read on from
    // the next line.
    if let Some((at, what)) = open.filter(|_| dialect.has_rules()) {
        let end = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
        x.out.failures.push(crate::parse::facts::ParseFailure {
            span: Span::new(file, at..end),
            message: format!(
                "unterminated {what}: it runs to the end of the file, which PostgreSQL rejects (txlint read on from the next line)"
            ),
            host: false,
        });
    }
    if let Some((at, n)) = skipped {
        x.out.limits.push((
            Span::new(file, at..at),
            format!("the last {n} statements of this file"),
            format!(
                "it has more than {} statements, and each one's facts stay in memory until the rules are done",
                super::MAX_STATEMENTS
            ),
        ));
    }
    // The configuration decides; else the runner txlint recognised; else a psql script.
    let mut runner = runner.filter(|_| settings.mode.is_none());
    let mode = settings
        .mode
        .or(runner.map(|r| r.mode))
        .unwrap_or(SqlMode::Script);
    let mut mode = mode;
    // A top-level `LOCK TABLE` outside `BEGIN` proves a wrapping runner, also where txlint took
    // the tool for one that does not wrap (PostgreSQL would refuse the file otherwise).
    if settings.mode.is_none() && mode == SqlMode::Script && lock_outside_transaction(&steps) {
        let wrapped = runners::wrapped_by_lock_table(runner);
        mode = wrapped.mode;
        runner = Some(wrapped);
    }
    let transactions = group(steps, mode);
    let kind = match mode {
        SqlMode::Statements => UnitKind::QueryFile,
        _ => UnitKind::Script,
    };
    let mut unit = Unit::new(kind, None, Span::new(file, 0..text.len()));
    unit.transactions = transactions;
    unit.runner = runner.map(|r| r.runner);
    let called = unit.runner.and_then(|r| r.called);
    if kind == UnitKind::QueryFile {
        unit.pooled_callers = called;
    }
    // A migration's `DO` blocks run once too, at deploy, like its other top-level statements.
    // Routines it defines run whenever they are called: they keep no runner, but what calls
    // them (a Supabase RPC) is known.
    for u in x.out.units.iter_mut() {
        match u.kind {
            UnitKind::DoBlock => u.runner = unit.runner.filter(|r| r.migration),
            UnitKind::Routine => u.pooled_callers = called,
            _ => {}
        }
    }
    unit.sessions = vec![Session {
        id: 0,
        kind: Executor::Session,
        acquired: None,
        inherited: false,
        handed_on: false,
        handed_on_at: None,
        in_async: false,
    }];
    x.out.units.insert(0, unit);
    x.out
}

/// The file's statements grouped into transactions as `mode` runs them.
fn group(mut steps: Vec<(Step, usize)>, mode: SqlMode) -> Vec<Transaction> {
    let mut script = SessionWalker::script(mode);
    // Taken from the back of the reversed list, which gives its room back as it empties: the
    // steps of a large file are not held twice, once listed and once grouped.
    steps.reverse();
    while let Some((step, message)) = steps.pop() {
        script.push(step, message);
        if steps.len() < steps.capacity() / 2 {
            steps.shrink_to_fit();
        }
    }
    script.finish()
}

/// A `LOCK TABLE` outside `BEGIN ... COMMIT`, as psql would run the file.
fn lock_outside_transaction(steps: &[(Step, usize)]) -> bool {
    let mut open = false;
    steps.iter().any(|(s, _)| {
        match s.facts.extra().tx.as_ref() {
            Some(TxControl::Begin { .. }) => open = true,
            Some(TxControl::Commit | TxControl::Rollback | TxControl::PrepareTransaction) => {
                open = false
            }
            _ => {}
        }
        !open && s.facts.extra().table_lock.is_some()
    })
}

/// `pg_dump`'s output (a schema file a project keeps beside its migrations, Rails'
/// `structure.sql`): it opens with its banner.
fn is_schema_dump(text: &str) -> bool {
    let head = text.get(..text.len().min(400)).unwrap_or(text);
    head.contains("-- PostgreSQL database dump")
}

impl Front {
    /// Routine bodies and `DO` blocks in `stmt` become units of their own.
    fn bodies(&mut self, src: &str, stmt: &RawStatement, facts: &Facts) {
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
        let t = &stmt.tokens;
        let language = t.windows(2).find(|w| w[0].is(src, "language")).map(|w| {
            w[1].text(src)
                .trim_matches(['\'', '"'])
                .to_ascii_lowercase()
        });
        let atomic = t
            .windows(2)
            .position(|w| w[0].is(src, "begin") && w[1].is(src, "atomic"));
        let (body, map, language) = if let Some(i) = atomic {
            // SQL-standard body: `BEGIN ATOMIC stmt; ... END`, in the statement itself.
            let (Some(first), Some(end)) = (t.get(i + 2), t.last()) else {
                return;
            };
            let range = first.start..end.start.max(first.start);
            (
                src[range.clone()].to_string(),
                OffsetMap::shifted(range.start),
                "sql".to_string(),
            )
        } else {
            let body_token = match kind {
                UnitKind::DoBlock => t.iter().skip(1).find(|t| t.kind == Kind::String),
                _ => t
                    .windows(2)
                    .find(|w| w[0].is(src, "as") && w[1].kind == Kind::String)
                    .map(|w| &w[1]),
            };
            let Some(tok) = body_token else {
                return;
            };
            let Some((body, map)) = string_body(src, tok) else {
                return;
            };
            let default = if kind == UnitKind::DoBlock {
                "plpgsql"
            } else {
                ""
            };
            (body, map, language.unwrap_or_else(|| default.to_string()))
        };
        let mut tx = Transaction::new(Scope::Caller, Executor::Session, Isolation::ReadCommitted);
        let mut txs = Vec::new();
        let push = |step: Step, txs: &mut Vec<Transaction>, tx: &mut Transaction| {
            // A procedure's COMMIT or ROLLBACK ends the transaction and starts the next one.
            let ends = matches!(
                step.facts.extra().tx.as_ref(),
                Some(TxControl::Commit | TxControl::Rollback)
            );
            if ends {
                tx.set_end(Some(step.span));
                tx.set_ended_within(&step.branch);
                let done = std::mem::replace(
                    tx,
                    Transaction::new(Scope::Caller, Executor::Session, Isolation::ReadCommitted),
                );
                txs.push(done);
            } else {
                tx.steps.push(step);
            }
        };
        let mut unit = Unit::new(kind, name, Span::new(self.file, stmt.range.clone()));
        if kind == UnitKind::Routine {
            unit.params = call_params(src, &stmt.tokens);
        }
        match language.as_str() {
            "plpgsql" => {
                // `EXECUTE format(..)` read as the statement it runs (same length: `map` holds).
                let (body, dynamic) =
                    crate::parse::dynamic::inline(&body).unwrap_or((body, Vec::new()));
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
                    self.out.limits.push((
                        Span::new(self.file, at..at),
                        format!(
                            "the arms of control structures nested more than {} deep (read as the arm enclosing them)",
                            plpgsql::MAX_NESTING
                        ),
                        "each statement keeps the path of arms it runs in, and deeper paths would cost memory that grows with the square of the depth".to_string(),
                    ));
                }
                let mut known: Vec<String> = parsed.declared.clone();
                known.extend(parsed.loops.iter().flat_map(|l| l.vars.iter().cloned()));
                known.extend(routine_params(src, &stmt.tokens));
                known.push("found".to_string());
                // The statements each variable's value comes from, and each statement's.
                let mut sources: HashMap<Name, BTreeSet<usize>> = HashMap::new();
                let mut of_step: HashMap<usize, BTreeSet<usize>> = HashMap::new();
                // Statements (conditions) whose only variable is FOUND.
                let mut found_only: BTreeSet<usize> = BTreeSet::new();
                for s in &parsed.statements {
                    let mut step = self.step(&body, &map, &s.raw, s.assigns.clone());
                    step.seq = s.seq;
                    step.branch = s.branch.as_slice().into();
                    let uses = variables_used(&body, &s.raw.tokens, &known);
                    if !uses.is_empty() && uses.iter().all(|u| u == "found") {
                        found_only.insert(s.seq);
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
                    // A SQL statement (not a condition or an assignment, which PL/pgSQL
                    // evaluates as `SELECT <expression>`) sets FOUND.
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
                    of_step.insert(step.seq, from);
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
                    push(step, &mut txs, &mut tx);
                }
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
                            .filter_map(|s| of_step.get(s))
                            .flatten()
                            .copied()
                            .collect::<BTreeSet<_>>()
                            .into_iter()
                            .collect(),
                        failed: false,
                        presence: !c.from.is_empty()
                            && c.from.iter().all(|s| found_only.contains(s)),
                    })
                    .collect();
                unit.exits = parsed
                    .exits
                    .iter()
                    .map(|e| Exit {
                        seq: e.seq,
                        span: Span::new(self.file, map.host_range(e.range.clone())),
                        owner: None,
                        branch: e.branch.clone(),
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
            "sql" => {
                let statements = splitter::split(&body, self.dialect, false).statements;
                for (seq, s) in statements.iter().enumerate() {
                    let mut step = self.step(&body, &map, s, Vec::new());
                    step.seq = seq;
                    push(step, &mut txs, &mut tx);
                }
            }
            _ => return,
        }
        if !tx.steps.is_empty() || txs.is_empty() {
            txs.push(tx);
        }
        unit.transactions = txs;
        self.out.units.push(unit);
    }
}

/// The parenthesised group `t` opens with, cut at its top-level tokens that `cut` picks.
pub(super) struct Group<'t> {
    /// The tokens between the cuts, nested groups included.
    pub parts: Vec<Vec<&'t Token>>,
    /// The tokens it was cut at, in order.
    pub cuts: Vec<&'t Token>,
    /// The group closes within `t`.
    pub closed: bool,
}

#[cfg(test)]
mod tests;
