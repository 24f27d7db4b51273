//! `session-lock-on-pool`: a session advisory lock whose lock and unlock can land on different
//! sessions, or that goes back to the pool still held.

use super::{Context, at_the_call};
use crate::diagnostic::{Diagnostic, Race};
use crate::model::*;
use crate::registry::PoolMode;
use crate::source::Span;

pub use crate::registry::SESSION_LOCK_ON_POOL as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let transaction_pooling = cx.options.pool_mode == PoolMode::Transaction;
    if !transaction_pooling {
        returned_holding(cx, out);
    }
    for unit in &cx.program.units {
        let steps: Vec<(&Step, Executor)> = unit
            .transactions
            .iter()
            .flat_map(|t| t.steps.iter().map(move |s| (s, t.executor)))
            .collect();
        for &(step, executor) in &steps {
            for lock in step
                .facts
                .extra()
                .advisory
                .iter()
                .filter(|a| a.takes_session_lock())
            {
                let call = format!("{}({})", lock.function, lock.key);
                let base = |message: String| {
                    Diagnostic::new(&RULE, lock.span, message)
                        .in_step(step)
                        .about(Race::SessionLockOnPool, &[(unit, step)])
                };
                if transaction_pooling {
                    out.push(
                        base(format!("`{call}` is a session lock, but with transaction pooling (`pool_mode = \"transaction\"`) the server session can change after every transaction"))
                            .note("held by whichever server session ran this")
                            .help("use a transaction-scoped lock (`pg_advisory_xact_lock`) inside the transaction that does the work"),
                    );
                    continue;
                }
                if executor == Executor::Pool {
                    out.push(
                        base(format!("`{call}` is taken through a connection pool, so the unlock can run on another session and the lock stays with a connection that serves other requests"))
                            .note("taken on whichever pooled connection runs this")
                            .help("acquire one connection (`pool.acquire()`), lock and unlock on it on every path, or use a transaction-scoped lock inside `pool.begin()`"),
                    );
                    continue;
                }
                let Some(session) = step
                    .session
                    .and_then(|id| unit.sessions.iter().find(|s| s.id == id))
                else {
                    continue;
                };
                if let Some(d) = cancel_window(&steps, step, session, lock, &call) {
                    out.push(d);
                    continue;
                }
                // Only a pool-owned session goes back to serve other requests with the lock; a
                // session handed in by the caller may be unlocked there, unless this function
                // unlocks it itself and an early return skips that (see [`callers_lock_kept`]).
                let found = match (session.kind, session.acquired) {
                    (Executor::PooledConnection, Some(_)) => {
                        unlock_problem(unit, &steps, step, session, lock, &call)
                    }
                    (_, None) => callers_lock_kept(unit, &steps, step, lock, &call),
                    _ => None,
                };
                out.extend(found);
            }
        }
    }
}

/// A query file or a routine that application code calls through a connection pool (sqlc
/// queries, Supabase RPCs) and that returns still holding a session lock: each call runs on
/// whichever pooled connection serves it, so nothing unlocks the lock on that connection. A
/// routine some other code of the run calls is judged in its callers (its statements are
/// copied there); a query file is judged only when no unlock is sent anywhere in the run (a
/// caller may run its lock and unlock queries on one dedicated connection).
fn returned_holding(cx: &Context, out: &mut Vec<Diagnostic>) {
    let units = || cx.program.units.iter().filter(|u| !u.test);
    let releases = |s: &Step| {
        s.facts.extra().advisory.iter().any(|a| {
            a.scope == LockScope::Session
                && matches!(a.op, AdvisoryOp::Unlock | AdvisoryOp::UnlockAll)
        })
    };
    if !units().any(|u| u.pooled_callers.is_some()) {
        return;
    }
    let copied: std::collections::HashSet<Span> = units()
        .flat_map(|u| u.transactions.iter().flat_map(|t| &t.steps))
        .filter(|s| !s.host().calls.is_empty())
        .map(|s| s.span)
        .collect();
    let mut unlocked_anywhere = None;
    for unit in units() {
        let Some(how) = unit.pooled_callers else {
            continue;
        };
        let steps: Vec<&Step> = unit.ordered().into_iter().map(|a| a.step).collect();
        let query_file = unit.kind == UnitKind::QueryFile;
        if !query_file
            && steps
                .iter()
                .any(|s| s.host().calls.is_empty() && copied.contains(&s.span))
        {
            continue;
        }
        for (i, step) in steps.iter().enumerate() {
            for lock in step
                .facts
                .extra()
                .advisory
                .iter()
                .filter(|a| a.takes_session_lock())
            {
                let released = match query_file {
                    true => *unlocked_anywhere.get_or_insert_with(|| {
                        units().any(|u| u.transactions.iter().flat_map(|t| &t.steps).any(releases))
                    }),
                    false => steps[i..].iter().any(|s| releases(s)),
                };
                if released {
                    continue;
                }
                let (what, help) = match query_file {
                    true => (
                        "query",
                        "take `pg_advisory_xact_lock` inside the transaction that does the work, or run the lock, the work and `pg_advisory_unlock` on one connection taken from the pool",
                    ),
                    false => (
                        "function",
                        "take `pg_advisory_xact_lock` instead (a function called as an RPC runs inside the call's transaction), or unlock before this function returns",
                    ),
                };
                out.push(
                    Diagnostic::new(
                        &RULE,
                        lock.span,
                        format!(
                            "`{}({})` is a session lock, and this {what} returns still holding it: it is called by {how}, each call on whichever pooled connection serves it, so the lock stays with that connection and a release sent in another call can run on another one",
                            lock.function, lock.key
                        ),
                    )
                    .in_step(step)
                    .note("held after the call returns")
                    .help(help),
                );
            }
        }
    }
}

fn unlocks(step: &Step, lock: &AdvisoryCall) -> bool {
    step.facts.extra().advisory.iter().any(|a| a.releases(lock))
}

/// A blocking session lock awaited before the value that would unlock it owns the connection
/// (`lock(&mut conn).await?; Ok(Guard::new(conn))`, in an `async` function): a caller that
/// drops the future while the lock is awaited (a timeout, `select!`) leaves the lock to be
/// granted with nothing to unlock it, on a connection that may go back to a pool. A try-lock
/// does not wait; a connection handed to the guard first, or unlocked before it is handed
/// on, is not such a window.
fn cancel_window(
    steps: &[(&Step, Executor)],
    lock_step: &Step,
    session: &Session,
    lock: &AdvisoryCall,
    call: &str,
) -> Option<Diagnostic> {
    let at = session.handed_on_at?;
    if lock.op != AdvisoryOp::Lock
        || at < lock_step.seq
        || matches!(session.kind, Executor::Pool | Executor::Transaction)
    {
        return None;
    }
    if unlocks_after(steps, lock_step, lock).any(|s| s.seq <= at && s.session == lock_step.session)
    {
        return None;
    }
    Some(
        Diagnostic::new(
            &RULE,
            lock.span,
            format!("`{call}` waits for the lock before anything that would unlock it owns the connection: if the caller drops this future while it waits (a timeout, `select!`), the lock can still be granted and nothing unlocks it"),
        )
        .in_step(lock_step)
        .note("awaited while the connection has no guard")
        .help("hand the connection to the guard that unlocks it (in its `Drop` or release) before awaiting the lock, and lock through the guard; or use `pg_advisory_xact_lock` inside a transaction"),
    )
}

/// The steps after `lock_step` that release `lock`, on any session.
fn unlocks_after<'s>(
    steps: &'s [(&'s Step, Executor)],
    lock_step: &'s Step,
    lock: &'s AdvisoryCall,
) -> impl Iterator<Item = &'s Step> {
    steps
        .iter()
        .map(|(s, _)| *s)
        .filter(move |s| s.seq > lock_step.seq && unlocks(s, lock))
}

/// `inner` runs whenever `outer` does: its branch arms are a prefix of the other's.
fn on_every_path_of(inner: &[usize], outer: &[usize]) -> bool {
    outer.starts_with(inner)
}

fn unlock_problem(
    unit: &Unit,
    steps: &[(&Step, Executor)],
    lock_step: &Step,
    session: &Session,
    lock: &AdvisoryCall,
    call: &str,
) -> Option<Diagnostic> {
    let later_unlocks: Vec<&Step> = unlocks_after(steps, lock_step, lock).collect();
    let same: Vec<&Step> = later_unlocks
        .iter()
        .copied()
        .filter(|s| s.session == lock_step.session)
        .collect();
    let base = |message: String, other: Option<&Step>| {
        composed_at(Diagnostic::new(&RULE, lock.span, message), lock_step, other)
    };
    // Never unlocked here, but the connection was handed on (to a guard whose `Drop` may
    // unlock it, to the caller): its new owner decides.
    if later_unlocks.is_empty() && session.handed_on {
        return None;
    }
    if same.is_empty() {
        if let Some(other) = later_unlocks.first() {
            return Some(
                base(format!("`{call}` is taken on one connection and unlocked through another handle, where the unlock does nothing"), Some(other))
                    .label(other.span, format!("unlocked through `{}`, another session", other.host().via.as_deref().unwrap_or("another handle")))
                    .help("unlock through the same connection that took the lock"),
            );
        }
        return Some(
            base(format!("`{call}` is never unlocked on this pooled connection, so the lock goes back to the pool with it"), None)
                .note("session lock taken here")
                .help("unlock on the same connection before it is dropped, on every path (`pg_advisory_unlock`), or use `pg_advisory_xact_lock` inside a transaction"),
        );
    }
    // An unlock that runs whenever the lock did.
    let Some(final_unlock) = same
        .iter()
        .find(|u| on_every_path_of(&u.branch, &lock_step.branch))
    else {
        return Some(
            base(format!("`{call}` is unlocked only on some paths; on the others the lock goes back to the pool with the connection"), Some(same[0]))
                .label(same[0].span, "unlocked only on this path")
                .help("unlock on every path, for example in a block that runs whether the work succeeded or not"),
        );
    };
    let Some(exit) = early_exit(unit, steps, lock_step, lock, &same, final_unlock) else {
        return dropped_while_held(unit, steps, (lock_step, lock), session, final_unlock, call);
    };
    Some(
        base(format!("`{call}` is not unlocked when the function returns early here, so the lock goes back to the pool with the connection"), Some(final_unlock))
            .label(exit.span, "returns without unlocking")
            .label(final_unlock.span, "unlocked only when this is reached")
            .help("unlock before every early return (or map the error, unlock, then return it), or use `pg_advisory_xact_lock` inside a transaction"),
    )
}

/// A session lock taken on a connection the caller handed in, that this function unlocks
/// itself on every path that reaches its unlock, but an early return between the two skips:
/// the function owns the lock's lifetime (its callers do not know the key and never unlock
/// it), so on that return the caller's connection keeps the lock, and goes back to its pool
/// with it when it is a pooled one. A function that only locks (a lock helper) leaves the
/// unlock to its callers and is judged there.
fn callers_lock_kept(
    unit: &Unit,
    steps: &[(&Step, Executor)],
    lock_step: &Step,
    lock: &AdvisoryCall,
    call: &str,
) -> Option<Diagnostic> {
    let same: Vec<&Step> = unlocks_after(steps, lock_step, lock)
        .filter(|s| s.session == lock_step.session)
        .collect();
    let final_unlock = *same
        .iter()
        .find(|u| on_every_path_of(&u.branch, &lock_step.branch))?;
    let exit = early_exit(unit, steps, lock_step, lock, &same, final_unlock)?;
    let d = Diagnostic::new(
        &RULE,
        lock.span,
        format!("`{call}` is not unlocked when the function returns early here, so the caller's connection keeps the lock (a pooled one goes back to the pool with it) and nothing that knows the key will unlock it"),
    )
    .in_step(lock_step)
    .about(Race::SessionLockOnPool, &[(unit, lock_step)]);
    Some(
        composed_at(d, lock_step, Some(final_unlock))
            .label(exit.span, "returns without unlocking")
            .label(final_unlock.span, "unlocked only when this is reached")
            .help("unlock before every early return (or keep the result, unlock, then return it), or use `pg_advisory_xact_lock` inside a transaction"),
    )
}

/// An early exit between `lock_step` and `final_unlock` that no unlock on its own path
/// precedes. An exit on the lock's own failure (`?` on it, `if let Err(e) = lock {..}`,
/// `let Ok(_) = lock else {..}`) leaves without the lock.
fn early_exit<'u>(
    unit: &'u Unit,
    steps: &[(&Step, Executor)],
    lock_step: &Step,
    lock: &AdvisoryCall,
    same: &[&Step],
    final_unlock: &Step,
) -> Option<&'u Exit> {
    let failed = |branch: &[usize]| {
        unit.conditions
            .iter()
            .any(|c| c.failed && branch.contains(&c.branch) && c.from.contains(&lock_step.seq))
    };
    // A return decided on a try-lock's answer, in an arm that does no work, is the way out
    // when the lock was not taken (`if !locked { return Ok(false) }`): nothing is held there.
    let not_taken = |e: &Exit| {
        lock.op == AdvisoryOp::TryLock
            && e.kind == ExitKind::Return
            && unit.conditions.iter().any(|c| {
                !c.failed
                    && c.from.contains(&lock_step.seq)
                    && e.branch.contains(&c.branch)
                    && !steps.iter().any(|(s, _)| s.branch.contains(&c.branch))
            })
    };
    unit.exits_between(lock_step.seq, final_unlock.seq)
        .find(|e| {
            e.owner != Some(lock_step.seq)
                && !failed(&e.branch)
                && !not_taken(e)
                && !same
                    .iter()
                    .any(|u| u.seq < e.seq && on_every_path_of(&u.branch, &e.branch))
        })
}

/// Unlocked on every path, but by hand, after other work the `async` function awaits while it
/// holds the lock (`lock; let r = work(&mut conn).await; unlock; r`): a caller that drops the
/// future at one of those awaits (a timeout, `select!`, an aborted task, a request whose
/// client went away) never runs the unlock, and the pool takes the connection back still
/// holding the lock. Nothing awaited in between (`lock; unlock`) leaves no such window, and
/// nothing drops a future every run of which is awaited to its end from `main`
/// ([`Unit::awaited_whole`]: a migration run at start-up).
fn dropped_while_held(
    unit: &Unit,
    steps: &[(&Step, Executor)],
    (lock_step, lock): (&Step, &AdvisoryCall),
    session: &Session,
    final_unlock: &Step,
    call: &str,
) -> Option<Diagnostic> {
    if !session.in_async || unit.awaited_whole.contains(&lock_step.seq) {
        return None;
    }
    let work = steps
        .iter()
        .map(|(s, _)| *s)
        .find(|s| (lock_step.seq + 1..final_unlock.seq).contains(&s.seq))?;
    let d = Diagnostic::new(
        &RULE,
        lock.span,
        format!(
            "`{call}` is held while this `async` code awaits other work, and only the unlock reached afterwards releases it: if the caller drops the future meanwhile (a timeout, `select!`, an aborted task), the connection goes back to the pool still holding the lock"
        ),
    );
    Some(
        composed_at(d, lock_step, Some(final_unlock))
            .label(work.span, "awaited while the lock is held")
            .label(final_unlock.span, "not run when the future is dropped before it")
            .help("take `pg_advisory_xact_lock` inside a transaction (a dropped transaction rolls back and releases it), or hand the connection to a guard whose `Drop` unlocks it (sqlx's `PgAdvisoryLock`)"),
    )
}

/// Where a lock's lifetime goes wrong when an unlock is involved: the function that reaches
/// both the lock and `other` (that unlock). A lock taken by a helper (`lock_copying(&mut
/// conn)`) and released through another (`unlock_copying(&mut other_conn)`) is composed by
/// their caller, so the finding is at its call of the lock helper (see [`at_the_call`]). A
/// lock never unlocked stays at the lock (one helper leaking for every caller is one finding
/// there).
fn composed_at(d: Diagnostic, lock_step: &Step, other: Option<&Step>) -> Diagnostic {
    match other {
        Some(other) => at_the_call(
            d,
            (lock_step, other),
            [
                "locks through this call",
                "the lock it takes",
                "the unlock this call sends",
            ],
        ),
        None => d.in_step(lock_step),
    }
}
