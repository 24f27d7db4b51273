//! `row-lock-predicate-gap`: `SELECT ... FOR UPDATE` used as if it locked a predicate: rows
//! that do not exist yet, the children of a locked parent, or a set counted after locking one
//! row.

use super::Context;
use crate::diagnostic::{Diagnostic, Race};
use crate::model::flow::{At, Flow, advisory_locks_before, value_key};
use crate::model::*;

pub use crate::registry::ROW_LOCK_PREDICATE_GAP as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for unit in cx.program.units.iter().filter(|u| !u.runs_once()) {
        let flow = Flow::new(unit);
        let steps = &flow.steps;
        for (i, l) in steps.iter().enumerate() {
            let Some(lock) = l.step.facts.row_locks.first() else {
                continue;
            };
            // Only a transaction holds the lock over later statements; SERIALIZABLE sees the
            // phantom; an advisory lock taken first already serialises the transactions.
            if matches!(l.txn.scope, Scope::Autocommit | Scope::Unknown)
                || l.txn.isolation == Isolation::Serializable
                || (l.txn.isolation == Isolation::ReadCommitted
                    && (advisory_locks_before(l.txn, l.step.seq).next().is_some()
                        || guard_before(l)))
                || l.step.facts.modifies
                || private(&flow, l, lock)
            {
                continue;
            }
            let later: Vec<&At> = steps[i + 1..]
                .iter()
                .filter(|a| a.tx == l.tx && !unit.exclusive(&l.step.branch, &a.step.branch))
                .collect();
            let steps = std::iter::once(l.step).chain(later.iter().map(|a| a.step));
            if cx.program.alone(unit, steps) {
                continue;
            }
            let missing = || {
                check_then_insert(cx, unit, l, lock, &later)
                    .or_else(|| check_then_overwrite(cx, unit, &flow, l, lock, &later))
            };
            let found = (!made_before(l, lock))
                .then(missing)
                .flatten()
                .or_else(|| parent_children(cx, l, lock, &later))
                .or_else(|| set_invariant(cx, unit, &flow, l, lock, &later));
            out.extend(found);
        }
    }
}

/// Earlier in the transaction, on every path, a blocking exclusive lock of a row that this
/// lock's key comes from (`SELECT id FROM pipelines WHERE .. FOR UPDATE`, then the pipeline's
/// jobs `FOR UPDATE` by that id): every run for one key waits there first, and at READ
/// COMMITTED the one that waited sees what the other inserted.
fn guard_before(l: &At) -> bool {
    l.txn.steps.iter().any(|g| {
        g.seq < l.step.seq
            && l.step.branch.starts_with(&g.branch)
            && g.facts.row_locks.iter().any(RowLock::waits_exclusive)
            && l.step.host().inputs.iter().any(|i| i.from.contains(&g.seq))
    })
}

/// Earlier in the transaction, on every path to the lock, an insert of the row it looks up
/// (`INSERT .. VALUES (key, ..) ON CONFLICT DO NOTHING`, then `SELECT .. WHERE key FOR
/// UPDATE`): the row exists when the lock runs, whether it was there or this run made it, so a
/// concurrent run waits on it.
fn made_before(l: &At, lock: &RowLock) -> bool {
    let tables = locked_tables(l.step, lock);
    l.txn.steps.iter().any(|a| {
        let f = &a.facts;
        a.seq < l.step.seq
            && f.kind == StmtKind::Insert
            && l.step.branch.starts_with(&a.branch)
            && f.writes
                .iter()
                .any(|t| tables.iter().any(|x| *x == *t.name))
            && inserts_key(a, l.step)
    })
}

/// `insert` inserts the key `lock` looks up: a value for each of its `col = value` filters,
/// the same value. Not when the lock has none.
fn inserts_key(insert: &Step, lock: &Step) -> bool {
    let keys = &lock.facts.filters;
    !keys.is_empty()
        && keys.iter().all(|p| {
            insert
                .facts
                .inserts
                .iter()
                .any(|(c, o)| *c == p.column && value_key(o, insert) == value_key(&p.value, lock))
        })
}

/// The insert sets a column the lock looked its row up by to another value (`SELECT .. WHERE
/// card_id = $parent FOR UPDATE`, then `INSERT .. (card_id) VALUES ($new)`): the row it adds
/// is not one the lock could have found, so the lock's gap is not what it relies on.
fn inserts_other_row(insert: &Step, lock: &Step) -> bool {
    lock.facts.filters.iter().any(|p| {
        insert
            .facts
            .inserts
            .iter()
            .any(|(c, o)| *c == p.column && value_key(o, insert) != value_key(&p.value, lock))
    })
}

/// Every table the lock takes rows of is one no other transaction can see there (temporary, or
/// created earlier in this transaction): no other one can insert the row it did not find.
fn private(flow: &Flow, l: &At, lock: &RowLock) -> bool {
    let tables = locked_tables(l.step, lock);
    !tables.is_empty()
        && tables
            .iter()
            .all(|t| flow.created.private(l.tx, l.step.seq, t))
}

fn locked_tables(step: &Step, lock: &RowLock) -> Vec<String> {
    step.facts
        .reads
        .iter()
        .filter(|t| lock.of.is_empty() || lock.of.iter().any(|o| *o == *t.name))
        .map(|t| t.name.to_string())
        .collect()
}

/// `SELECT ... WHERE key FOR UPDATE`, then `INSERT` into that table: nothing to lock when no
/// row exists, so two transactions both insert. Not an insert of another key than the one
/// looked up (see [`inserts_other_row`]). Not an insert run once per locked row (in a
/// loop over what the lock returned): with no row it does not run. Nor one after a lock whose
/// call fails when it finds no row and whose error leaves before the insert
/// (`.fetch_one(&mut *tx).await?`, also inside a transaction's closure or through a helper):
/// with no row, nothing is inserted either.
fn check_then_insert(
    cx: &Context,
    unit: &Unit,
    l: &At,
    lock: &RowLock,
    later: &[&At],
) -> Option<Diagnostic> {
    let tables = locked_tables(l.step, lock);
    let per_row = |a: &At| {
        unit.loops
            .iter()
            .any(|lp| lp.query == Some(l.step.seq) && a.step.branch.contains(&lp.branch))
    };
    let w = later.iter().find(|a| {
        let f = &a.step.facts;
        f.kind == StmtKind::Insert
            && !f.on_conflict
            && f.writes
                .iter()
                .any(|t| tables.iter().any(|x| *x == *t.name))
            && !per_row(a)
            && !unit.fails_before(l.step, a.step)
            && !inserts_other_row(a.step, l.step)
    })?;
    let table = &w.step.facts.writes.first()?.name;
    let key: Vec<String> = l
        .step
        .facts
        .filters
        .iter()
        .map(|p| p.column.to_string())
        .collect();
    // The key the lock looked up, where its `WHERE` says (not a join or a tuple `IN`).
    let on = match key.is_empty() {
        true => "the key".to_string(),
        false => format!("({})", key.join(", ")),
    };
    let settle = match cx
        .program
        .schema(l.step.span.file)
        .unique_within(table, &key)
    {
        Some(u) => format!(
            "; the unique key ({}) makes the second insert fail with 23505 instead: handle it with `ON CONFLICT`",
            u.join(", ")
        ),
        None if cx.program.schema(l.step.span.file).declares(table) => {
            format!("; no unique constraint on {on} stops the duplicate")
        }
        None => format!(
            "; a unique constraint on {on} would turn the duplicate into an error (no schema for `{table}` was found)"
        ),
    };
    Some(
        Diagnostic::new(
            &RULE,
            w.step.facts.writes[0].span,
            format!(
                "`{}` at {} locks only rows that exist: when none matches, two transactions both find nothing and both insert into `{table}`{settle}",
                lock.clause,
                cx.place(l.step.span, w.step.facts.writes[0].span)
            ),
        )
        .note("inserted without a lock on the key")
        .in_step(w.step)
        .about(Race::InsertAfterEmptyLock, &[(unit, l.step), (unit, w.step)])
        .label(lock.span, "locks the matching rows only")
        .help("insert with `INSERT ... ON CONFLICT` on a unique key, or take `pg_advisory_xact_lock` on the key before the check (at READ COMMITTED)"),
    )
}

/// `SELECT .. WHERE key FOR UPDATE`, a decision on what it found, then `INSERT .. ON CONFLICT
/// (key) DO UPDATE SET state = ..` (no `WHERE`) of a column it read: when no row exists yet
/// both transactions find nothing and pass the check, and the second one's upsert overwrites
/// the row the first inserted (and may have moved on since) instead of failing.
fn check_then_overwrite(
    cx: &Context,
    unit: &Unit,
    flow: &Flow,
    l: &At,
    lock: &RowLock,
    later: &[&At],
) -> Option<Diagnostic> {
    let tables = locked_tables(l.step, lock);
    let read = &l.step.facts.columns;
    let (w, column) = later.iter().find_map(|a| {
        let f = &a.step.facts;
        if !f.upsert
            || !f
                .writes
                .iter()
                .any(|t| tables.iter().any(|x| *x == *t.name))
        {
            return None;
        }
        let column = a
            .step
            .overwrites()
            .find(|c| read.iter().any(|r| r == "*" || r == *c))?;
        (inserts_key(a.step, l.step) && flow.decided_by(unit, l.step, flow.position(a.step.seq)?))
            .then_some((a, column))
    })?;
    let table = &w.step.facts.writes.first()?.name;
    Some(
        Diagnostic::new(
            &RULE,
            w.step.facts.writes[0].span,
            format!(
                "`{}` at {} locks only rows that exist: when none matches, two transactions both pass the check, and the second one's upsert overwrites the `{column}` of the `{table}` row the first inserted instead of seeing it",
                lock.clause,
                cx.place(l.step.span, w.step.facts.writes[0].span)
            ),
        )
        .note("overwritten on a conflict, unchecked")
        .in_step(w.step)
        .label(lock.span, "locks the matching rows only")
        .help(format!(
            "insert the row first (`INSERT .. ON CONFLICT DO NOTHING`), then lock it (`SELECT .. FOR UPDATE`) and decide on what that returns; or test `{column}` again in `DO UPDATE .. WHERE`"
        )),
    )
}

/// A lock on a parent row, then writes to another table filtered by the parent's key and a
/// state: the children's writers never take the parent lock.
fn parent_children(cx: &Context, l: &At, lock: &RowLock, later: &[&At]) -> Option<Diagnostic> {
    let parents = locked_tables(l.step, lock);
    let keys: Vec<String> = l
        .step
        .facts
        .filters
        .iter()
        .map(|p| value_key(&p.value, l.step))
        .collect();
    if keys.is_empty() {
        return None;
    }
    // A state is a column compared with a constant (`state = 'packed'`); a column compared with
    // an input is another key of the child (`slug = $2`), which names rows, not a state, and
    // one compared with another column (`b.id`) is a join.
    let state = |p: &Pred, a: &At| {
        !keys.contains(&value_key(&p.value, a.step))
            && p.value.params.is_empty()
            && p.value.idents.is_empty()
    };
    let writes: Vec<&&At> = later
        .iter()
        .filter(|a| {
            let f = &a.step.facts;
            matches!(f.kind, StmtKind::Update | StmtKind::Delete)
                && f.writes
                    .iter()
                    .any(|t| !parents.iter().any(|x| *x == *t.name))
                && f.filters
                    .iter()
                    .any(|p| keys.contains(&value_key(&p.value, a.step)))
                && f.filters.iter().any(|p| state(p, a))
        })
        .collect();
    let w = writes.first()?;
    let child = &w.step.facts.writes[0].name;
    let parent = parents.first()?;
    let state: Vec<String> = w
        .step
        .facts
        .filters
        .iter()
        .filter(|p| state(p, w))
        .map(|p| format!("{} = {}", p.column, p.value.text))
        .collect();
    let fk = match cx
        .program
        .schema(l.step.span.file)
        .foreign_key(child, parent)
    {
        Some(fk) => format!(
            " (its rows reference `{parent}` by ({}))",
            fk.columns.join(", ")
        ),
        None => String::new(),
    };
    let mut d = Diagnostic::new(
        &RULE,
        w.step.facts.writes[0].span,
        format!(
            "the `{}` on `{parent}` at {} does not lock its `{child}` rows{fk}: writers of `{child}` do not take it, so rows matching `{}` can change between statements",
            lock.clause,
            cx.place(l.step.span, w.step.facts.writes[0].span),
            state.join(" AND ")
        ),
    )
    .note("filtered by the parent's key and a state")
    .in_step(w.step)
    .label(lock.span, "locks the parent row only");
    if let Some(second) = writes.get(1) {
        d = d.label(
            second.step.span,
            "a second state-filtered write misses rows that moved in between",
        );
    }
    Some(d.help(format!(
        "lock the `{child}` rows themselves (`SELECT ... FROM {child} WHERE ... FOR UPDATE`), or do the change in one statement (`WITH target AS MATERIALIZED (SELECT ... FOR UPDATE) UPDATE ... FROM target`)"
    )))
}

/// Every statement of the run that writes `set` in a way that `breaks` runs in a transaction
/// that first locked a row of one of `guards` (a locking read or an `UPDATE` of it).
fn every_writer_locks(
    cx: &Context,
    set: &str,
    guards: &[String],
    breaks: impl Fn(&Step) -> bool,
) -> bool {
    let takes_guard = |s: &Step| {
        let f = &s.facts;
        let names = match f.kind {
            StmtKind::Update => &f.writes,
            _ if !f.row_locks.is_empty() => &f.reads,
            _ => return false,
        };
        names.iter().any(|t| guards.iter().any(|x| *x == *t.name))
    };
    cx.program
        .units
        .iter()
        .filter(|u| !u.runs_once())
        .flat_map(|u| &u.transactions)
        .all(|tx| {
            tx.steps.iter().enumerate().all(|(i, s)| {
                let writes = matches!(
                    s.facts.kind,
                    StmtKind::Insert | StmtKind::Update | StmtKind::Delete
                ) && s.facts.writes.iter().any(|t| t.name == set);
                !writes || !breaks(s) || tx.steps[..i].iter().any(takes_guard)
            })
        })
}

/// The writes of the set that `agg` reads that can change what it told `write`. An insert
/// decided by a `count` or a `max` (room left, the next number) is undone only by what adds rows
/// to the set or raises the counted column: inserts, and updates of a column `agg` reads or
/// filters on. A delete only lowers a count or a max, and an update of other columns changes
/// neither. Any other decision (a `sum`, a `min`, a delete or update decided by a count) can be
/// undone by any write. Decided once per decision, asked of every writer of the set.
fn breakers<'a>(agg: &'a Step, write: &Step) -> impl Fn(&Step) -> bool + 'a {
    let a = &agg.facts;
    let grows = write.facts.kind == StmtKind::Insert
        && a.extra()
            .aggregates
            .iter()
            .all(|g| matches!(g.as_str(), "count" | "max"));
    let watched = move |c: &str| {
        a.other_conditions
            || a.columns
                .iter()
                .chain(a.filters.iter().map(|p| &p.column))
                .any(|x| x == "*" || x.eq_ignore_ascii_case(c))
    };
    move |other: &Step| {
        !grows
            || match other.facts.kind {
                StmtKind::Delete => false,
                StmtKind::Update => {
                    other.facts.sets.is_empty()
                        || other.facts.sets.iter().any(|x| watched(&x.column))
                }
                _ => true,
            }
    }
}

/// Lock one row, then count or sum a set and write the set on the strength of it: the set is
/// not locked. A write to another table (a rollup, a log) cannot break the invariant over the
/// set for a concurrent run: that is write skew's mechanism, each run's write changing what the
/// other counted. Where code can branch on the count (host code, PL/pgSQL), the write must
/// depend on it: a count that only feeds a return value decides nothing.
fn set_invariant(
    cx: &Context,
    unit: &Unit,
    flow: &Flow,
    l: &At,
    lock: &RowLock,
    later: &[&At],
) -> Option<Diagnostic> {
    let locked = locked_tables(l.step, lock);
    let lock_keys: Vec<(String, String)> = l
        .step
        .facts
        .filters
        .iter()
        .map(|p| (p.column.to_string(), value_key(&p.value, l.step)))
        .collect();
    let (ai, agg) = later.iter().enumerate().find(|(_, a)| {
        let f = &a.step.facts;
        let keys: Vec<(String, String)> = f
            .filters
            .iter()
            .map(|p| (p.column.to_string(), value_key(&p.value, a.step)))
            .collect();
        // Counting the very rows that were locked is fine.
        let same_set =
            f.reads.iter().all(|t| locked.iter().any(|x| *x == *t.name)) && keys == lock_keys;
        f.kind == StmtKind::Select
            && !f.modifies
            && f.row_locks.is_empty()
            && f.extra().aggregates.iter().any(|g| g != "exists")
            && !same_set
    })?;
    let agg_step = later[ai].step;
    let w = later[ai + 1..].iter().find(|a| {
        let f = &a.step.facts;
        matches!(
            f.kind,
            StmtKind::Insert | StmtKind::Update | StmtKind::Delete
        ) && f
            .writes
            .iter()
            .any(|t| agg_step.facts.reads.iter().any(|r| r.name == t.name))
            && (unit.kind == UnitKind::Script
                || flow
                    .position(a.step.seq)
                    .is_some_and(|wi| flow.decided_by(unit, agg_step, wi)))
    })?;
    let set = agg
        .step
        .facts
        .reads
        .first()
        .map_or("the set", |t| t.name.as_str());
    // A guard row keyed by what the set is about serialises the runs of this code; when every
    // writer of the set in the run takes it first too, nothing changes the set behind the count.
    let set_keys: Vec<String> = agg
        .step
        .facts
        .filters
        .iter()
        .map(|p| value_key(&p.value, agg.step))
        .collect();
    // Or the set is keyed by a value read from the locked row (`SELECT id INTO v_team ..
    // FOR UPDATE`, then `count(*) .. WHERE team_id = v_team`).
    let from_lock = flow.position(agg_step.seq).is_some_and(|ai| {
        agg_step.facts.filters.iter().any(|p| {
            let [var] = p.value.idents.as_slice() else {
                return false;
            };
            p.value.params.is_empty()
                && flow.origins_of(ai, var.split('.').next().unwrap_or(var)) == [l.step.seq]
        })
    });
    let keyed =
        (!lock_keys.is_empty() && lock_keys.iter().all(|(_, v)| set_keys.contains(v))) || from_lock;
    if keyed && every_writer_locks(cx, set, &locked, breakers(agg_step, w.step)) {
        return None;
    }
    Some(
        Diagnostic::new(
            &RULE,
            agg.step.span,
            format!(
                "this `{}` over `{set}` relies on the `{}` at {}, which locks one row, not the set: concurrent writers change `{set}` and both invariants pass",
                agg.step.facts.extra().aggregates.join(", "),
                lock.clause,
                cx.place(l.step.span, agg.step.span)
            ),
        )
        .note("the set is read without a lock")
        .label(lock.span, "locks one row")
        .label(w.step.span, "written on the strength of it")
        .help("have every writer of the set take the same row lock first, lock the set itself (`SELECT ... FOR UPDATE` over it), or run at SERIALIZABLE and retry"),
    )
}
