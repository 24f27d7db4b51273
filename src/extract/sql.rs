//! `.sql` files: a script (or one transaction, or loose statements, as `sql.mode` says), plus a
//! unit for every routine body and `DO` block in it.

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
    }];
    x.out.units.insert(0, unit);
    x.out
}

/// Names of the routines `text` may define: each word after `CREATE [OR REPLACE] FUNCTION` or
/// `PROCEDURE` (its last dotted part; lower case unless quoted). A byte scan, run over every
/// `.sql` file before any is parsed, so that parsing keeps only calls of these; a match in a
/// comment or a string only adds a name.
pub fn routine_names(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    // A plain byte loop: a case-insensitive automaton for two words whose first letters are
    // common ran at a third of this speed (2 % of a run over the PostgreSQL corpus).
    for start in 0..b.len() {
        let word: &[u8] = match b[start] | 0x20 {
            b'f' => b"function",
            b'p' => b"procedure",
            _ => continue,
        };
        let end = start + word.len();
        if !b
            .get(start..end)
            .is_some_and(|w| w.eq_ignore_ascii_case(word))
            || (start > 0 && is_ident(b[start - 1]))
            || b.get(end).is_some_and(|&c| is_ident(c))
        {
            continue;
        }
        // The word before: `create` or `replace`.
        let before = text[..start].trim_end();
        let prev = before
            .rsplit(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("");
        if !(prev.eq_ignore_ascii_case("create") || prev.eq_ignore_ascii_case("replace")) {
            continue;
        }
        // The name: dotted parts, each a word or a quoted identifier; the last one counts.
        let mut rest = text[end..].trim_start();
        let mut name = None;
        loop {
            let part = if let Some(q) = rest.strip_prefix('"') {
                let Some(close) = q.find('"') else { break };
                rest = &q[close + 1..];
                q[..close].to_string()
            } else {
                let len = rest.bytes().take_while(|&c| is_ident(c)).count();
                if len == 0 {
                    break;
                }
                let w = rest[..len].to_ascii_lowercase();
                rest = &rest[len..];
                w
            };
            name = Some(part);
            match rest.strip_prefix('.') {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.extend(name);
    }
    out
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

/// `DROP FUNCTION|PROCEDURE|ROUTINE [IF EXISTS] a(int), b [CASCADE]`: the names dropped, with
/// the number of parameters where they are listed.
fn dropped_routines(src: &str, t: &[Token]) -> Vec<(String, Option<usize>)> {
    let mut names = Vec::new();
    if !(t.first().is_some_and(|w| w.is(src, "drop"))
        && t.get(1).is_some_and(|w| {
            w.is(src, "function") || w.is(src, "procedure") || w.is(src, "routine")
        }))
    {
        return names;
    }
    let mut i = 2;
    if t.get(i).is_some_and(|w| w.is(src, "if")) {
        i += 2;
    }
    let mut depth = 0usize;
    let mut expect_name = true;
    while let Some(tok) = t.get(i) {
        if tok.is_punct(src, "(") {
            depth += 1;
        } else if tok.is_punct(src, ")") {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && tok.is_punct(src, ",") {
            expect_name = true;
        } else if depth == 0
            && expect_name
            && let Some((name, next)) = routine_name_at(src, t, i)
        {
            names.push((name, arity(src, t, next)));
            i = next;
            expect_name = false;
            continue;
        }
        i += 1;
    }
    names
}

/// The number of parameters in the list that opens at token `open`, if one does.
fn arity(src: &str, t: &[Token], open: usize) -> Option<usize> {
    if !t.get(open)?.is_punct(src, "(") {
        return None;
    }
    let (mut depth, mut commas, mut empty) = (0usize, 0, true);
    for tok in &t[open..] {
        if tok.is_punct(src, "(") {
            depth += 1;
        } else if tok.is_punct(src, ")") {
            depth -= 1;
            if depth == 0 {
                return Some(if empty { 0 } else { commas + 1 });
            }
        } else if depth == 1 && tok.is_punct(src, ",") {
            commas += 1;
        } else if depth == 1 {
            empty = false;
        }
    }
    None
}

/// The name of the routine a `CREATE FUNCTION|PROCEDURE` defines, and its number of parameters.
fn routine_name(src: &str, t: &[Token]) -> Option<(String, Option<usize>)> {
    let i = t
        .iter()
        .position(|t| t.is(src, "function") || t.is(src, "procedure"))?;
    routine_name_at(src, t, i + 1).map(|(name, next)| (name, arity(src, t, next)))
}

/// A possibly qualified routine name at token `i` (its last component, lower case unless
/// quoted) and the index after it.
pub(super) fn routine_name_at(src: &str, t: &[Token], mut i: usize) -> Option<(String, usize)> {
    let mut name = None;
    while let Some(tok) = t.get(i) {
        name = Some(match tok.kind {
            Kind::Word => tok.text(src).to_ascii_lowercase(),
            Kind::QuotedIdent => tok.text(src).trim_matches('"').to_string(),
            _ => break,
        });
        i += 1;
        if !t.get(i).is_some_and(|d| d.is_punct(src, ".")) {
            break;
        }
        i += 1;
    }
    name.map(|n| (n, i))
}

/// Names of a routine's parameters: `(acct int, OUT total numeric, int)` gives `acct`, `total`.
fn routine_params(src: &str, t: &[Token]) -> Vec<String> {
    params(src, t).into_iter().filter_map(|(n, _)| n).collect()
}

/// The parameters a call passes arguments to, in order (`""` for one with no name): a
/// function's `OUT` parameters take none, a procedure's do (PostgreSQL 14 on).
fn call_params(src: &str, t: &[Token]) -> Vec<Name> {
    let procedure = t.iter().take(6).any(|t| t.is(src, "procedure"));
    params(src, t)
        .into_iter()
        .filter(|(_, out)| procedure || !out)
        .map(|(n, _)| n.unwrap_or_default().into())
        .collect()
}

/// Each parameter's name, where it has one, and whether it is `OUT` only.
fn params(src: &str, t: &[Token]) -> Vec<(Option<String>, bool)> {
    let Some(open) = t.iter().position(|t| t.is_punct(src, "(")) else {
        return Vec::new();
    };
    let Some(list) = paren_group(src, &t[open..], |tok| tok.is_punct(src, ",")) else {
        return Vec::new();
    };
    // A parameter the list does not close is not read.
    let done = list.parts.len() - usize::from(!list.closed);
    let mut names = Vec::new();
    for arg in &list.parts[..done] {
        let words: Vec<&&Token> = arg
            .iter()
            .skip_while(|a| {
                ["in", "out", "inout", "variadic"]
                    .iter()
                    .any(|m| a.is(src, m))
            })
            .collect();
        // A name is followed by its type; a lone type is an unnamed parameter.
        let out = arg.first().is_some_and(|a| a.is(src, "out"));
        if words.len() >= 2 && words[0].kind == Kind::Word {
            names.push((Some(words[0].text(src).to_ascii_lowercase()), out));
        } else if !words.is_empty() {
            names.push((None, out));
        }
    }
    names
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

/// [`Group`] of `t`; `None` when `t` does not open with `(`.
pub(super) fn paren_group<'t>(
    src: &str,
    t: &'t [Token],
    cut: impl Fn(&Token) -> bool,
) -> Option<Group<'t>> {
    if !t.first()?.is_punct(src, "(") {
        return None;
    }
    let mut g = Group {
        parts: vec![Vec::new()],
        cuts: Vec::new(),
        closed: false,
    };
    let mut depth = 0usize;
    for tok in t {
        if tok.is_punct(src, "(") {
            depth += 1;
            if depth == 1 {
                continue;
            }
        } else if tok.is_punct(src, ")") {
            depth -= 1;
            if depth == 0 {
                g.closed = true;
                break;
            }
        } else if depth == 1 && cut(tok) {
            g.cuts.push(tok);
            g.parts.push(Vec::new());
            continue;
        }
        if let Some(p) = g.parts.last_mut() {
            p.push(tok);
        }
    }
    Some(g)
}

/// Words of `tokens` that name a known variable.
fn variables_used(src: &str, tokens: &[Token], known: &[String]) -> Vec<String> {
    let mut used: Vec<String> = Vec::new();
    for t in tokens.iter().filter(|t| t.kind == Kind::Word) {
        let w = t.text(src).to_ascii_lowercase();
        if known.contains(&w) && !used.contains(&w) {
            used.push(w);
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(text: &str, toml: &str) -> Vec<Unit> {
        let config = crate::config::Config::parse(toml).unwrap();
        let settings = FileSettings {
            dialect: config.dialect,
            mode: config.sql.mode,
        };
        extract(0, text, Dialect::Postgres, settings, None, names(text)).units
    }

    fn names(text: &str) -> super::super::Routines {
        std::sync::Arc::new(routine_names(text).into_iter().collect())
    }

    #[test]
    fn routine_names_are_read_from_bytes() {
        let text = "create or replace FUNCTION public.Debit(a int) ..;\n\
                    CREATE PROCEDURE \"Pay Out\"();\n\
                    -- CREATE FUNCTION in_a_comment()\n\
                    DROP FUNCTION gone(); SELECT my_function(1); CREATE FUNCTIONS x;";
        assert_eq!(routine_names(text), ["debit", "Pay Out", "in_a_comment"]);
    }

    fn shape(u: &Unit) -> Vec<(Scope, Isolation, usize)> {
        u.transactions
            .iter()
            .map(|t| (t.scope, t.isolation, t.steps.len()))
            .collect()
    }

    #[test]
    fn script_transactions() {
        let sql = "select 1;\nbegin isolation level serializable;\nselect 2;\nupdate t set a = 1;\ncommit;\nselect 3 \\; select 4;\nset session characteristics as transaction isolation level repeatable read;\nstart transaction;\nselect 5;\nrollback;\n";
        let u = units(sql, "");
        use Isolation::*;
        use Scope::*;
        assert_eq!(
            shape(&u[0]),
            vec![
                (Autocommit, ReadCommitted, 1),
                (Explicit, Serializable, 2),
                (Message, ReadCommitted, 2),
                (Autocommit, ReadCommitted, 1),
                (Explicit, RepeatableRead, 1),
            ]
        );
        let tx = &u[0].transactions[1];
        assert_eq!(
            tx.begin().map(|s| &sql[s.range()]),
            Some("begin isolation level serializable")
        );
        assert_eq!(tx.end().map(|s| &sql[s.range()]), Some("commit"));
    }

    #[test]
    fn modes() {
        let sql = "begin;\nselect 1;\ncommit;\nselect 2;\n";
        let u = units(sql, "[sql]\nmode = \"transaction\"\n");
        assert_eq!(
            shape(&u[0]),
            vec![(Scope::File, Isolation::ReadCommitted, 2)]
        );
        let u = units(sql, "[sql]\nmode = \"statements\"\n");
        assert_eq!(u[0].kind, UnitKind::QueryFile);
        assert!(
            u[0].transactions
                .iter()
                .all(|t| t.scope == Scope::Unknown && t.steps.len() == 1)
        );
        assert_eq!(u[0].transactions.len(), 4);
    }

    #[test]
    fn routine_bodies_are_units_with_host_positions_and_data_flow() {
        let sql = "create function f(k int) returns int language plpgsql as $$\ndeclare v int;\nbegin\n  select balance into v from accounts where id = k;\n  update accounts set balance = v + 1 where id = k;\n  commit;\n  perform pg_advisory_xact_lock(k);\n  return v;\nend $$;\n";
        let u = units(sql, "");
        assert_eq!(u.len(), 2);
        let f = &u[1];
        assert_eq!((f.kind, f.name.as_deref()), (UnitKind::Routine, Some("f")));
        // COMMIT in a procedure body ends one transaction and starts the next.
        assert_eq!(f.transactions.len(), 2);
        let read = &f.transactions[0].steps[0];
        assert_eq!(
            &sql[read.span.range()],
            "select balance into v from accounts where id = k"
        );
        assert_eq!(read.facts.extra().assigns, vec!["v"]);
        assert_eq!(read.facts.reads[0].name, "accounts");
        let write = &f.transactions[0].steps[1];
        assert_eq!(write.facts.kind, StmtKind::Update);
        // `k` is the function's parameter: a variable too.
        assert_eq!(write.facts.extra().uses, vec!["v", "k"]);
        assert_eq!(write.facts.writes[0].name, "accounts");
        let lock = &f.transactions[1].steps[0].facts.extra().advisory[0];
        assert_eq!(&sql[lock.span.range()], "pg_advisory_xact_lock(k)");
        assert_eq!(
            (lock.scope, lock.key.as_str()),
            (LockScope::Transaction, "k")
        );
    }

    #[test]
    fn quoted_and_atomic_bodies() {
        let sql = "create function g() returns void as 'begin update t set s = ''x''; end' language plpgsql;\ncreate function h() returns int language sql begin atomic select 1 from t for update; end;\ndo language plpgsql $$ begin perform 1; end $$;\n";
        let u = units(sql, "");
        assert_eq!(u.len(), 4);
        let g = &u[1].transactions[0].steps[0];
        assert_eq!(&sql[g.span.range()], "update t set s = ''x''");
        let h = &u[2].transactions[0].steps[0];
        assert_eq!(&sql[h.span.range()], "select 1 from t for update");
        assert_eq!(h.facts.row_locks.len(), 1);
        assert_eq!(u[3].kind, UnitKind::DoBlock);
    }

    #[test]
    fn facts_of_statements() {
        let sql = "with c as (select id from jobs for update of jobs skip locked) update jobs set s = 1 from c where jobs.id = c.id;\nlock table only a, b in share row exclusive mode nowait;\nset local lock_timeout = '1s';\nrollback to savepoint sp;\nselect * from a join b on true, c where x in (select 1 from d);\n";
        let u = units(sql, "");
        let steps: Vec<&Step> = u[0].transactions.iter().flat_map(|t| &t.steps).collect();
        let f = &steps[0].facts;
        assert_eq!(f.kind, StmtKind::Update);
        assert!(f.modifies);
        assert_eq!(f.row_locks[0].of, vec!["jobs"]);
        assert_eq!(f.row_locks[0].wait, LockWait::SkipLocked);
        let l = steps[1].facts.extra().table_lock.as_ref().unwrap();
        let names: Vec<_> = l.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            (names, l.mode.as_str()),
            (vec!["a", "b"], "SHARE ROW EXCLUSIVE")
        );
        assert_eq!(
            steps[2].facts.extra().set.as_ref(),
            Some(&SetFact {
                name: "lock_timeout".into(),
                local: true
            })
        );
        assert_eq!(
            steps[3].facts.extra().tx.as_ref(),
            Some(&TxControl::RollbackTo("sp".into()))
        );
        let reads: Vec<_> = steps[4]
            .facts
            .reads
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(reads, vec!["a", "b", "c", "d"]);
    }

    /// DDL whose tree no rule reads is left unparsed; DDL the schema comes from, and DDL that
    /// calls a routine of the run, are parsed.
    #[test]
    fn ddl_parsed_only_where_its_tree_is_read() {
        let sql = "create function f() returns int language sql as 'select 1';\ncreate index i on t (a);\ngrant select on t to r;\ncreate table t (id int primary key);\ncreate materialized view v as select f();\n";
        let u = units(sql, "");
        let parsed: Vec<(&str, bool)> = u[0]
            .transactions
            .iter()
            .flat_map(|t| &t.steps)
            .map(|s| (&sql[s.span.range()], s.facts.parsed))
            .collect();
        assert_eq!(
            parsed[1..],
            [
                ("create index i on t (a)", false),
                ("grant select on t to r", false),
                ("create table t (id int primary key)", true),
                ("create materialized view v as select f()", true),
            ]
        );
    }
}
