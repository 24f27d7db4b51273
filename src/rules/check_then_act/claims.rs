//! Claims a single statement makes or misses: an advisory lock taken first, a claim done in one
//! statement, an insert that checks its own key (`ON CONFLICT`, `WHERE NOT EXISTS`).

use super::*;

/// Where `tx` first takes an advisory transaction lock. A one-statement shape after it is
/// serialised by it: in its own transaction at READ COMMITTED (the statement's snapshot starts
/// after the wait), or, taken in autocommit, it was meant to (`xact-lock-outside-transaction`
/// reports that, and its fix settles the statement too: one race, one finding).
pub(super) fn first_advisory(tx: &Transaction) -> Option<usize> {
    tx.steps
        .iter()
        .find(|s| {
            s.facts
                .extra()
                .advisory
                .iter()
                .any(AdvisoryCall::takes_xact_lock)
        })
        .map(|s| s.seq)
}

/// `UPDATE jobs SET state = 'running' WHERE id = (SELECT id FROM jobs WHERE state = 'queued'
/// LIMIT 1)`: two sessions' subqueries pick the same row; the second `UPDATE` waits for the
/// first and then re-checks only its own `WHERE` (`id = ..`) against the new row, so it claims
/// the row too. A lock in the subquery (`FOR UPDATE SKIP LOCKED`) or the test repeated outside
/// it settles it; at REPEATABLE READ or SERIALIZABLE the second fails with 40001 instead.
pub(super) fn one_statement_claim(tx: &Transaction, step: &Step) -> Option<Diagnostic> {
    let f = &step.facts;
    if f.kind != StmtKind::Update
        || f.extra().claim.is_empty()
        || !f.row_locks.is_empty()
        || f.dialect != crate::source::Dialect::Postgres
        || tx.isolation >= Isolation::RepeatableRead
    {
        return None;
    }
    let set = f
        .sets
        .iter()
        .find(|s| f.extra().claim.contains(&s.column))?;
    let col = &set.column;
    let message = format!(
        "the subquery picks a row by `{col}` and the `UPDATE` changes `{col}` without testing it again: two sessions pick the same row, and the one that waited claims it after the other"
    );
    let mut d = Diagnostic::new(&RULE, step.span, message)
        .note("claims the row")
        .in_step(step)
        .help(format!(
            "lock the subquery's row (`SELECT .. FOR UPDATE SKIP LOCKED`), or test `{col}` again outside the subquery (`WHERE id = (SELECT ..) AND {col} = ..`) and check the affected row count"
        ));
    if let Some(at) = set.span {
        d = d.label(at, "changed here");
    }
    Some(d)
}

/// `INSERT INTO members (email) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM members WHERE email =
/// $1)` on a table the run declares with no unique key on those columns: two sessions both see
/// no row (neither sees the other's uncommitted insert) and both insert. Settled by a unique
/// key, `ON CONFLICT`, an advisory transaction lock taken first at READ COMMITTED (the waiting
/// statement then sees the committed row), or SERIALIZABLE.
pub(super) fn insert_unless_exists(
    cx: &Context,
    unit: &Unit,
    tx: &Transaction,
    step: &Step,
) -> Option<Outcome> {
    let f = &step.facts;
    let e = f.extra();
    if f.on_conflict {
        return conflict_key_misses_check(cx, step).map(Outcome::Race);
    }
    if f.kind != StmtKind::Insert
        || e.absent.is_empty()
        || !checks_one_key_per_run(e)
        || f.on_conflict
        || f.dialect != crate::source::Dialect::Postgres
        || tx.isolation == Isolation::Serializable
    {
        return None;
    }
    let table = f.writes.first()?;
    let schema = cx.program.schema(step.span.file);
    // Only where the run declares the table: a key declared elsewhere would settle it.
    if is_hole(&table.name) || !schema.declares(&table.name) {
        return None;
    }
    let absent: Vec<&str> = e.absent.iter().map(|(c, _)| c.as_str()).collect();
    let key = schema.unique_within_row(&table.name, &absent, &given(step), &[] as &[&str], &|_| {
        false
    });
    if let Some(key) = key {
        return refused::one_statement(unit, step, &key).map(Outcome::Refused);
    }
    let cols = absent.join("`, `");
    Some(Outcome::Race(
        Diagnostic::new(
            &RULE,
            table.span,
            format!(
                "`WHERE NOT EXISTS` checks `{cols}` in the statement's snapshot, and `{}` has no unique key on it: two sessions both see no row and both insert",
                table.name
            ),
        )
        .note("inserts unless it exists")
        .in_step(step)
        .help(format!(
            "add a unique constraint on (`{cols}`) and insert with `ON CONFLICT DO NOTHING`, or take `pg_advisory_xact_lock` on the key first in the same transaction (READ COMMITTED)"
        )),
    ))
}

/// `INSERT .. SELECT .. WHERE NOT EXISTS (SELECT 1 FROM t WHERE path >= $2 AND path < $3) ON
/// CONFLICT (path) DO NOTHING`: the check is about rows the conflict key does not identify (a
/// range, another column), so two runs inserting different keys both see none and both insert;
/// the conflict settles only a duplicate of its own key. Not when the check tests every column
/// of the conflict target for equality (or, with no target, of a unique key).
pub(super) fn conflict_key_misses_check(cx: &Context, step: &Step) -> Option<Diagnostic> {
    let f = &step.facts;
    let e = f.extra();
    let table = f.writes.first()?;
    if f.kind != StmtKind::Insert
        || (e.absent.is_empty() && e.absent_tests.is_empty())
        || !checks_one_key_per_run(e)
        || f.dialect != crate::source::Dialect::Postgres
        || is_hole(&table.name)
    {
        return None;
    }
    let checked: Vec<&str> = e.absent.iter().map(|(c, _)| c.as_str()).collect();
    let schema = cx.program.schema(step.span.file);
    // Every row the check can find then has the inserted key: a run that would make it fail
    // inserts that key too, and one of the two meets the conflict.
    // With no target, only the run's schema tells which unique keys there are.
    let settled = match e.conflict_on.is_empty() {
        true => {
            !schema.declares(&table.name)
                || schema
                    .unique_within_row(&table.name, &checked, &given(step), &[] as &[&str], &|_| {
                        false
                    })
                    .is_some()
        }
        false => e.conflict_on.iter().all(|c| checked.contains(&c.as_str())),
    };
    if settled {
        return None;
    }
    let mut what: Vec<String> = e
        .absent_tests
        .iter()
        .map(|c| format!("`{c}` by a range or condition"))
        .collect();
    what.extend(
        checked
            .iter()
            .filter(|c| !e.conflict_on.iter().any(|k| k == *c))
            .map(|c| format!("`{c}`")),
    );
    what.dedup();
    let message = match e.conflict_on.is_empty() {
        true => format!(
            "`WHERE NOT EXISTS` tests {}, and no unique key of `{}` among the checked columns makes `ON CONFLICT` refuse a second such row: two sessions both see none in their snapshots and both insert",
            what.join(", "),
            table.name
        ),
        false => format!(
            "`WHERE NOT EXISTS` looks for rows other than the inserted key's (it tests {}), which `ON CONFLICT ({})` does not settle: two sessions inserting different keys both see no such row in their snapshots and both insert",
            what.join(", "),
            e.conflict_on.join(", ")
        ),
    };
    Some(
        Diagnostic::new(
            &RULE,
            table.span,
            message,
        )
        .note("inserts unless a row it does not lock exists")
        .in_step(step)
        .help("take `pg_advisory_xact_lock` on what the check is about (the range's prefix, the other column's value) before the insert, in the same transaction at READ COMMITTED, or run at SERIALIZABLE and retry"),
    )
}

/// The insert writes the key the read checked (`WHERE email = $1`, then `INSERT .. (email)
/// VALUES ($1)`): duplicate registration.
pub(super) fn inserts_checked_key(r: &Step, w: &Step, table: &str) -> bool {
    let f = &w.facts;
    f.kind == StmtKind::Insert
        && r.facts.reads.iter().any(|t| t.name == table)
        && r.facts.filters.iter().any(|p| {
            f.inserts.iter().any(|(c, o)| {
                *c == p.column
                    && value_key(o, w) == value_key(&p.value, r)
                    && (is_var(&o.text, w) || !o.params.is_empty())
            })
        })
}
