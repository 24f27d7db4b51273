//! `txlint model`: the transaction model as txlint understood the code, for people who want
//! to see why a finding was or was not made.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::*;
use crate::run::Run;

fn executor(e: Executor) -> &'static str {
    match e {
        Executor::Session => "session",
        Executor::Pool => "pool",
        Executor::PooledConnection => "pooled connection",
        Executor::Connection => "connection",
        Executor::Transaction => "transaction",
        Executor::Unknown => "unknown",
    }
}

/// `reads t`, then `writes u`, for each table a statement reads or writes.
fn tables(f: &Facts) -> impl Iterator<Item = String> + '_ {
    let reads = f.reads.iter().map(|t| format!("reads {}", t.name));
    reads.chain(f.writes.iter().map(|t| format!("writes {}", t.name)))
}

fn scope(s: Scope) -> &'static str {
    match s {
        Scope::Autocommit => "autocommit",
        Scope::Message => "one message",
        Scope::Explicit => "transaction",
        Scope::File => "file transaction",
        Scope::Caller => "caller's transaction",
        Scope::Unknown => "unknown transaction",
    }
}

pub fn render(run: &Run) -> String {
    let files = &run.program.files;
    let at = |span: crate::source::Span| {
        let lc = files[span.file].line_col(span.start());
        format!("{}:{}:{}", files[span.file].display, lc.line, lc.column)
    };
    let mut out = String::new();
    let mut by_executor: BTreeMap<&str, usize> = BTreeMap::new();
    for unit in &run.program.units {
        let _ = writeln!(out, "{}", unit_line(unit, &at));
        for tx in &unit.transactions {
            let iso = match tx.isolation {
                Isolation::ReadCommitted => "",
                Isolation::RepeatableRead => ", repeatable read",
                Isolation::Serializable => ", serializable",
            };
            let guard = tx
                .guard()
                .map(|g| format!(", under the lock `{g}`"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} via {}{iso}{guard}",
                scope(tx.scope),
                executor(tx.executor)
            );
            for step in &tx.steps {
                *by_executor.entry(executor(tx.executor)).or_default() += 1;
                let _ = writeln!(out, "    {}", step_line(step, &at));
                if let Some(sql) = run.program.generated.get(&step.span) {
                    let _ = writeln!(out, "      as SQL: {sql}");
                }
                binds(&mut out, unit, step, &at);
            }
        }
    }
    for (unit, why) in &run.program.skipped {
        let _ = writeln!(
            out,
            "{} {}: {}",
            at(unit.span),
            unit.name.as_deref().unwrap_or(""),
            skipped(unit, why, &at)
        );
    }
    let mut summaries: Vec<&Summary> = run.program.summaries.iter().collect();
    summaries.sort_by_key(|s| (&files[s.unit.span.file].display, s.unit.span.start()));
    for summary in summaries {
        helper(&mut out, summary, &at);
    }
    for &span in &run.program.unread_sql {
        let _ = writeln!(
            out,
            "{} query call whose SQL txlint could not read",
            at(span)
        );
    }
    let counts: Vec<String> = by_executor
        .iter()
        .map(|(k, n)| format!("{n} via {k}"))
        .collect();
    let _ = writeln!(
        out,
        "{}, {}: {}",
        super::text::plural(run.program.units.len(), "unit"),
        super::text::plural(by_executor.values().sum::<usize>(), "statement"),
        counts.join(", ")
    );
    out
}

/// A unit's heading: where it is, its kind and name, and what runs it.
fn unit_line(unit: &Unit, at: &dyn Fn(crate::source::Span) -> String) -> String {
    let kind = match unit.kind {
        UnitKind::Script => "script",
        UnitKind::QueryFile => "query file",
        UnitKind::Routine => "routine",
        UnitKind::DoBlock => "DO block",
        UnitKind::RustFn => "fn",
    };
    let runner = match (unit.kind, unit.runner) {
        (UnitKind::Script | UnitKind::QueryFile | UnitKind::RustFn, Some(r)) => {
            format!(" ({}, from {}: runs {})", r.name, r.evidence, r.runs)
        }
        (UnitKind::DoBlock, Some(r)) => {
            format!(" (in a {}: runs once, when it is applied)", r.name)
        }
        _ => String::new(),
    };
    let runner = match (unit.kind, unit.pooled_callers) {
        (UnitKind::Routine | UnitKind::QueryFile, Some(how)) => {
            format!("{runner} (called by {how})")
        }
        _ => runner,
    };
    let runner = match unit.job {
        Some(job) => format!(
            "{runner} (a background job: only the timer loop at {} runs it)",
            at(job)
        ),
        None => runner,
    };
    let runner = match unit.awaited_whole.len() {
        0 => runner,
        1 => format!("{runner} (a session lock awaited to its end from `main`)"),
        n => format!("{runner} ({n} session locks awaited to their end from `main`)"),
    };
    format!(
        "{} {} {}{runner}",
        at(unit.span),
        kind,
        unit.name.as_deref().unwrap_or("")
    )
}

/// A statement's line: where it is, its kind, and its session, handle, tables and locks.
fn step_line(step: &Step, at: &dyn Fn(crate::source::Span) -> String) -> String {
    let f = &step.facts;
    let mut notes: Vec<String> = Vec::new();
    if let Some(s) = step.session {
        notes.push(format!("session {s}"));
    }
    if let Some(v) = &step.host().via {
        notes.push(format!("via `{v}`"));
    }
    notes.extend(tables(f));
    notes.extend(f.row_locks.iter().map(|l| l.clause.clone()));
    notes.extend(
        f.extra()
            .advisory
            .iter()
            .map(|a| format!("{}({})", a.function, a.key)),
    );
    if let Some(name) = &f.extra().creates_if_missing {
        notes.push(format!("creates `{name}` if missing"));
    }
    if !f.parsed {
        notes.push("tokens only".into());
    }
    // A helper's or a called routine's statement: where this unit reaches it.
    if let Some(&call) = step.host().calls.last() {
        notes.push(format!("called at {}", at(call)));
    }
    format!("{} {:?} {}", at(step.span), f.kind, notes.join(", ").trim())
}

/// Why a unit was not analysed.
fn skipped(unit: &Unit, why: &Skip, at: &dyn Fn(crate::source::Span) -> String) -> String {
    match why {
        Skip::Test => {
            "test code, skipped by the core rules (`include_tests = true` analyses it)".to_string()
        }
        Skip::Unused => {
            "marked `#[allow(dead_code)]` and named nowhere else in its file: nothing runs it, not analysed"
                .to_string()
        }
        Skip::Replaced(by) => format!("replaced at {}, not analysed", at(*by)),
        Skip::Dropped(by) => format!("dropped at {}, not analysed", at(*by)),
        Skip::Dumped(source) => format!(
            "a pg_dump schema file's copy of the definition at {}, analysed there",
            at(*source)
        ),
        Skip::Copy(first) => format!(
            "the same text as the definition at {}, analysed there",
            at(*first)
        ),
        Skip::Dialect(d) => format!(
            "{} statements for {}: parsed, but the core rules have no semantics for it",
            unit.transactions
                .iter()
                .map(|t| t.steps.len())
                .sum::<usize>(),
            d.name()
        ),
    }
}

/// A helper's summary: the handles it gets or takes, what it runs through each, the locks it
/// still holds on return, and what it gives back.
/// What host code binds to each parameter of `step`, and the statements of `unit` the value
/// was computed from.
fn binds(out: &mut String, unit: &Unit, step: &Step, at: &dyn Fn(crate::source::Span) -> String) {
    for i in &step.host().inputs {
        let from: Vec<String> = i
            .from
            .iter()
            .filter_map(|&q| {
                let mut steps = unit.transactions.iter().flat_map(|t| &t.steps);
                let s = steps.find(|s| s.seq == q)?;
                // Through named fields of its rows only: `a.rs:3:9 .start .cost`.
                let fields = i.fields_of(q).unwrap_or_default();
                Some(fields.iter().fold(at(s.span), |t, f| t + " ." + f))
            })
            .collect();
        let from = match from.is_empty() {
            true => String::new(),
            false => format!(" (from {})", from.join(", ")),
        };
        let _ = writeln!(out, "      binds ${} = {}{from}", i.param, i.text);
    }
}

fn helper(out: &mut String, summary: &Summary, at: &dyn Fn(crate::source::Span) -> String) {
    let unit = &summary.unit;
    let mut callers: Vec<String> = summary.callers.iter().take(3).map(|&c| at(c)).collect();
    if summary.callers.len() > 3 {
        callers.push(format!("{} more", summary.callers.len() - 3));
    }
    let _ = writeln!(
        out,
        "{} helper fn {}, walked in place from {}: {}",
        at(unit.span),
        unit.name.as_deref().unwrap_or(""),
        super::text::plural(summary.callers.len(), "call"),
        callers.join(", ")
    );
    for handle in summary.handles() {
        let from = match handle.acquired {
            None => "from its caller".to_string(),
            Some(span) => format!("taken at {}", at(span)),
        };
        let _ = writeln!(out, "  `{}`, {from}:", handle.via);
        for tx in &handle.transactions {
            let open = summary.left_open(tx);
            let ended = match tx.end() {
                Some(e) => format!("ended at {}", at(e)),
                None if open => "still open on return".to_string(),
                None => "ended where its scope ends".to_string(),
            };
            let what = match tx.begin() {
                Some(b) => format!("transaction opened at {}, {ended}", at(b)),
                // A transaction handle the helper is given: it runs in its caller's.
                None if tx.executor == Executor::Transaction && open => {
                    "its caller's transaction".to_string()
                }
                None if tx.executor == Executor::Transaction => {
                    format!("its caller's transaction, {ended}")
                }
                None => format!("{} via {}", scope(tx.scope), executor(tx.executor)),
            };
            let _ = writeln!(out, "    {what}");
            for step in &tx.steps {
                let f = &step.facts;
                let tables: Vec<String> = tables(f).collect();
                let _ = writeln!(
                    out,
                    "      {} {:?} {}",
                    at(step.span),
                    f.kind,
                    tables.join(", ")
                );
            }
        }
        for (span, lock) in &handle.held {
            let _ = writeln!(out, "    still held on return: {lock} at {}", at(*span));
        }
    }
    let returns = match &summary.returns {
        Returns::Nothing => "nothing read from the database".to_string(),
        Returns::Handle(kind) => format!("its {} handle", executor(*kind)),
        Returns::Data(seqs) => format!(
            "values computed from the results at {}",
            seqs.iter()
                .filter_map(|&seq| summary.step(seq))
                .map(|s| at(s.span))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let _ = writeln!(out, "  returns {returns}");
}
