//! `xact-lock-outside-transaction`: a transaction-scoped lock where the transaction ends with
//! the statement, or released by `ROLLBACK TO SAVEPOINT` or a procedure's `COMMIT` before the
//! work it protects.

use super::Context;
use crate::diagnostic::{Diagnostic, Race};
use crate::model::*;
use crate::source::Span;

pub use crate::registry::XACT_LOCK_OUTSIDE_TRANSACTION as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for unit in &cx.program.units {
        let first = out.len();
        for tx in &unit.transactions {
            if tx.scope.is_autocommit() {
                autocommit(unit, tx, out);
            } else if tx.scope != Scope::Unknown {
                savepoints(tx, out);
            }
        }
        if matches!(unit.kind, UnitKind::Routine | UnitKind::DoBlock) {
            body_commits(unit, out);
            for h in &unit.handlers {
                handler(unit, h, out);
            }
        }
        if unit.kind == UnitKind::Script {
            for d in &mut out[first..] {
                explain_script(cx, unit, d);
            }
        }
    }
}

/// In a migration, say how txlint thinks it runs: a runner that does not wrap the file, or a
/// file that looks like a migration but that txlint reads as a psql script; if a tool wraps it
/// after all, `[[overrides]]` says so.
fn explain_script(cx: &Context, unit: &Unit, d: &mut Diagnostic) {
    let file = &cx.program.files[unit.span.file].display;
    let looks_like_migration = file
        .split('/')
        .any(|part| part.to_ascii_lowercase().contains("migrat"));
    match unit.runner {
        Some(r) => {
            d.message += &format!(
                "; this file is a {} that runs outside a transaction ({})",
                r.name, r.evidence
            );
        }
        None if looks_like_migration => {
            d.message += "; txlint does not know the tool that runs this migration and reads it as a psql script";
        }
        None => return,
    }
    // The glob is relative to the configuration's folder.
    let rel = cx
        .options
        .relative(&cx.program.files[unit.span.file].path)
        .to_string_lossy()
        .replace('\\', "/");
    let folder = rel.rsplit_once('/').map_or(".", |(d, _)| d);
    d.help = Some(format!(
        "if the tool runs this file inside a transaction, tell txlint in txlint.toml: `[[overrides]]` with `paths = [\"{folder}/**\"]` and `sql = {{ mode = \"transaction\" }}`; otherwise take the lock inside `BEGIN ... COMMIT` in the file"
    ));
}

/// Work that `step`'s row locks could have been meant to protect: a later write in the unit,
/// a later statement given what it returned, or, for rows (not a count), the caller they are
/// returned to. A `SKIP LOCKED` count or existence test with none (`SELECT count(*) .. FOR
/// UPDATE SKIP LOCKED`, counting the rows no worker holds) uses the lock as a filter of its
/// own and needs nothing to outlive it; rows picked with `SKIP LOCKED` are picked to be
/// claimed. (A blocking `FOR UPDATE` whose rows are only returned is reported too: the caller
/// acts on rows no longer locked.)
fn protects_later(unit: &Unit, step: &Step) -> bool {
    step.facts.extra().aggregates.is_empty()
        || unit
            .transactions
            .iter()
            .flat_map(|t| &t.steps)
            .filter(|s| s.seq > step.seq)
            .any(|s| {
                matches!(
                    s.facts.kind,
                    StmtKind::Insert | StmtKind::Update | StmtKind::Delete | StmtKind::Merge
                ) || s.facts.modifies
                    || s.host().inputs.iter().any(|i| i.from.contains(&step.seq))
            })
}

/// Locks taken where the transaction is the statement (or the simple-query message).
fn autocommit(unit: &Unit, tx: &Transaction, out: &mut Vec<Diagnostic>) {
    // A transaction object cannot be in autocommit, and an unknown executor may be one.
    if matches!(tx.executor, Executor::Transaction | Executor::Unknown) {
        return;
    }
    for (i, step) in tx.steps.iter().enumerate() {
        if from_caller(unit, step) {
            continue;
        }
        let f = &step.facts;
        // The statement does its work itself (a data-modifying CTE, an UPDATE with a locking
        // subquery): the lock lasts exactly as long as that work.
        if f.modifies {
            continue;
        }
        // Later statements of the same simple-query message still run under the lock.
        if i + 1 < tx.steps.len() {
            continue;
        }
        for a in f
            .extra()
            .advisory
            .iter()
            .filter(|a| a.scope == LockScope::Transaction)
        {
            // `SELECT pg_advisory_xact_lock(1), refresh_totals()`: the work is in the statement.
            if f.calls_functions {
                continue;
            }
            let call = format!("{}({})", a.function, a.key);
            out.push(
                Diagnostic::new(
                    &RULE,
                    a.span,
                    format!("`{call}` is taken {} and released when this statement ends, before any work it should protect", outside(tx.executor)),
                )
                .note("released at the end of this statement")
                .in_step(step)
                .about(Race::LockEndsWithStatement, &[(unit, step)])
                .help(format!(
                    "take the lock inside the transaction that does the protected work (`BEGIN; SELECT {call}; ...; COMMIT;`), or use the session-level `{}` with a matching unlock on the same connection",
                    a.function.replace("_xact", "")
                )),
            );
        }
        for l in f
            .row_locks
            .iter()
            .filter(|l| l.wait != LockWait::SkipLocked || protects_later(unit, step))
        {
            out.push(
                Diagnostic::new(
                    &RULE,
                    l.span,
                    format!("`{}` is taken {} and the row locks are released when this statement ends", l.clause, outside(tx.executor)),
                )
                .note("rows unlocked again at the end of this statement")
                .in_step(step)
                .about(Race::LockEndsWithStatement, &[(unit, step)])
                .help("run the locking read and the statements that depend on it in one transaction (`BEGIN; SELECT ... FOR UPDATE; UPDATE ...; COMMIT;`), or do the read and the write in one statement"),
            );
        }
        if let Some(l) = &f.extra().table_lock {
            out.push(
                Diagnostic::new(
                    &RULE,
                    l.span,
                    format!("`LOCK TABLE` is used {}: PostgreSQL refuses it there (25P01), and no lock would outlive the statement", outside(tx.executor)),
                )
                .in_step(step)
                .help("put `LOCK TABLE` inside `BEGIN ... COMMIT`, before the statements it protects"),
            );
        }
    }
}

/// Host code runs `step` on a connection its caller handed it as a type the driver's
/// transactions are too (`&mut PgConnection`, a diesel connection in a field of `self`):
/// whether a transaction is open on it is the caller's to say. Callers that are seen walk the
/// function in place and are judged there; a function no seen caller reaches (called through
/// a trait, or in a closure of the project's own transaction wrapper) is not judged alone.
fn from_caller(unit: &Unit, step: &Step) -> bool {
    step.session
        .and_then(|s| unit.sessions.get(s))
        .is_some_and(|s| s.inherited)
}

fn outside(executor: Executor) -> &'static str {
    match executor {
        Executor::Pool => "through a connection pool with no transaction open",
        Executor::PooledConnection | Executor::Connection => {
            "on a connection with no transaction open"
        }
        _ => "outside a transaction (autocommit)",
    }
}

/// `ROLLBACK TO SAVEPOINT s` releases every lock taken after `s`; work that follows it runs
/// unprotected unless the lock is taken again first.
fn savepoints(tx: &Transaction, out: &mut Vec<Diagnostic>) {
    // Locks held: (where taken, what).
    let mut held: Vec<(Span, String)> = Vec::new();
    // Savepoints: (name, number of locks held when it was set).
    let mut marks: Vec<(&str, usize)> = Vec::new();
    for (i, step) in tx.steps.iter().enumerate() {
        match step.facts.extra().tx.as_ref() {
            Some(TxControl::Savepoint(name)) => marks.push((name, held.len())),
            Some(TxControl::Release(name)) => {
                if let Some(p) = marks.iter().rposition(|(n, _)| n == name) {
                    marks.truncate(p);
                }
            }
            Some(TxControl::RollbackTo(name)) => {
                let Some(p) = marks.iter().rposition(|(n, _)| n == name) else {
                    continue;
                };
                let released: Vec<_> = held.drain(marks[p].1..).collect();
                marks.truncate(p + 1);
                if let Some(d) = released_then_work(&released, step, &tx.steps[i + 1..]) {
                    out.push(d);
                }
            }
            _ => held.extend(step.facts.xact_locks()),
        }
    }
}

fn released_then_work(
    released: &[(Span, String)],
    rollback: &Step,
    rest: &[Step],
) -> Option<Diagnostic> {
    let (lock_span, what) = released.first()?;
    for step in rest {
        if step.facts.extra().tx.is_some() {
            continue;
        }
        // Taking the same lock again before the work is the correct retry.
        if retakes(step, released) {
            return None;
        }
        return Some(
            Diagnostic::new(
                &RULE,
                rollback.span,
                format!("this `ROLLBACK TO SAVEPOINT` releases {what}, so the statements after it run without the lock"),
            )
            .note("releases the locks taken after the savepoint")
            .label(*lock_span, "lock taken here, after the savepoint")
            .label(step.span, "runs without the lock")
            .help("take the lock before the savepoint, or take it again after rolling back to the savepoint"),
        );
    }
    None
}

/// A PL/pgSQL block that catches errors is a savepoint: when its handler runs, the locks its
/// body took are gone, and the work that follows on that path (in the handler, or after the
/// block) runs without them.
fn handler(unit: &Unit, h: &Handler, out: &mut Vec<Diagnostic>) {
    // A handler that leaves (`RAISE`, `RETURN`) ends its path.
    let leaves = |arm: usize, before: usize| {
        unit.exits
            .iter()
            .any(|e| e.seq > h.upto && e.seq < before && e.branch.last() == Some(&arm))
    };
    let falls_through = h.arms.iter().any(|&a| !leaves(a, usize::MAX));
    for tx in &unit.transactions {
        let mut body = tx.steps.iter().filter(|s| h.covers(s.seq));
        let Some(lock) = body.find(|s| s.facts.xact_locks().next().is_some()) else {
            continue;
        };
        let locked: Vec<&Step> = std::iter::once(lock).chain(body).collect();
        let released: Vec<(Span, String)> =
            locked.iter().flat_map(|s| s.facts.xact_locks()).collect();
        let (lock_span, what) = &released[0];
        let tables = |s: &Step| -> Vec<Name> {
            let f = &s.facts;
            f.reads
                .iter()
                .chain(&f.writes)
                .map(|t| t.name.clone())
                .collect()
        };
        let guarded: Vec<Name> = locked.iter().flat_map(|s| tables(s)).collect();
        for step in tx.steps.iter().filter(|s| s.seq > h.upto) {
            if retakes(step, &released) {
                break;
            }
            // A write to what the lock guarded; a handler that logs elsewhere, or reads the
            // row that won (get-or-create), needs no lock.
            if !step.facts.modifies || !tables(step).iter().any(|t| guarded.contains(t)) {
                continue;
            }
            let reached = match h.arms.iter().find(|a| step.branch.contains(a)) {
                Some(&arm) => !leaves(arm, step.seq),
                None => falls_through && !unit.exclusive(&lock.branch, &step.branch),
            };
            if !reached {
                continue;
            }
            out.push(
                Diagnostic::new(
                    &RULE,
                    h.span,
                    format!("when this handler catches an error, the block's work is rolled back and {what} with it, so the statements that follow run without the lock"),
                )
                .note("a block with an `EXCEPTION` clause runs as a savepoint")
                .label(*lock_span, "lock taken here, inside the block")
                .label(step.span, "runs without the lock when the handler ran")
                .help("take the lock before the `BEGIN` of the block that catches errors, or take it again in the handler"),
            );
            break;
        }
    }
}

/// A procedure or `DO` block that ends its transaction (`COMMIT`, `ROLLBACK`) releases every
/// transaction-scoped lock taken before: a write after it, before the lock is taken again, runs
/// unguarded. An end inside a loop comes before the loop's next turn too: the turn's work up to
/// the end runs again, without the lock, unless the turn takes it again first.
fn body_commits(unit: &Unit, out: &mut Vec<Diagnostic>) {
    let transactions = &unit.transactions;
    for (i, tx) in transactions.iter().enumerate() {
        let Some(end) = tx.end() else { continue };
        let held: Vec<(Span, String)> =
            tx.steps.iter().flat_map(|s| s.facts.xact_locks()).collect();
        let Some((lock_span, what)) = held.first() else {
            continue;
        };
        let later = transactions[i + 1..].iter().flat_map(|t| &t.steps);
        let (message, step) = match unguarded(later, &held) {
            Some(step) => (
                format!(
                    "ending the transaction here releases {what}, so the writes after it in the body run without the lock"
                ),
                step,
            ),
            None => match next_turn(unit, i).and_then(|turn| unguarded(turn, &held)) {
                Some(step) => (
                    format!(
                        "ending the transaction here, inside a loop, releases {what}, so the loop's next turn runs its work without the lock"
                    ),
                    step,
                ),
                None => continue,
            },
        };
        out.push(
            Diagnostic::new(&RULE, end, message)
                .note("ends the transaction and releases its locks")
                .label(*lock_span, "lock taken here")
                .label(step.span, "runs without the lock")
                .help("take the lock again after the `COMMIT` or `ROLLBACK`, before the writes it guards, or end the transaction only after them"),
        );
    }
}

/// The first step of `steps` that does work (writes, or runs SQL txlint cannot read) before one
/// of the released locks is taken again.
fn unguarded<'s>(
    steps: impl Iterator<Item = &'s Step>,
    released: &[(Span, String)],
) -> Option<&'s Step> {
    for step in steps {
        if retakes(step, released) {
            return None;
        }
        if step.facts.modifies || step.facts.kind == StmtKind::Execute {
            return Some(step);
        }
    }
    None
}

/// The steps that run after transaction `i` ends inside a loop, until that place again: the
/// rest of the innermost loop's body, then its body from the top.
fn next_turn(unit: &Unit, i: usize) -> Option<impl Iterator<Item = &Step>> {
    let tx = &unit.transactions[i];
    let arm = *tx
        .ended_within()
        .iter()
        .rev()
        .find(|a| unit.loop_arms.contains(a))?;
    let in_arm = move |s: &&Step| s.branch.contains(&arm);
    let rest = unit.transactions[i + 1..].iter().flat_map(|t| &t.steps);
    let top = unit.transactions[..=i].iter().flat_map(|t| &t.steps);
    Some(rest.filter(in_arm).chain(top.filter(in_arm)))
}

/// Whether `step` takes one of the released locks again.
fn retakes(step: &Step, released: &[(Span, String)]) -> bool {
    step.facts
        .xact_locks()
        .any(|(_, w)| released.iter().any(|(_, r)| *r == w))
}
