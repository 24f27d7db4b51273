//! The schedule that shows each rule's race: which session runs which statement, in what
//! order, for a finding of `xact-lock-outside-transaction`, `session-lock-on-pool`,
//! `lock-order-inversion`, `lost-update` and `check-then-act`.

use super::*;

pub(super) fn xact_lock(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let s = found.first().step;
    w.steps.push(step('A', sql(program, s)));
    if let Some(a) = s
        .facts
        .extra()
        .advisory
        .iter()
        .find(|a| a.scope == LockScope::Transaction)
    {
        let try_fn = a.function.replacen("pg_advisory", "pg_try_advisory", 1);
        w.steps.push(WitnessStep {
            shows: Some("t".into()),
            ..step('B', format!("SELECT {try_fn}({});", a.key))
        });
        w.look_for = format!(
            "step 2 takes the lock at once (`t`): `{}` ended with step 1's statement, so it protects nothing after it",
            a.function
        );
        return Ok(());
    }
    let Some(lock) = s.facts.row_locks.first() else {
        return Err(format!("{}: no transaction-scoped lock to show", w.at));
    };
    let table = s
        .facts
        .reads
        .first()
        .ok_or_else(|| format!("{}: the locked table is unknown", w.at))?;
    rows(w, program, &[s], &table.name)?;
    let text = program.files[s.span.file].text();
    let head = text.get(s.span.start()..lock.span.start()).unwrap_or("");
    let tail = text.get(lock.span.end()..s.span.end()).unwrap_or("");
    let nowait = format!(
        "{}FOR UPDATE NOWAIT{}",
        head,
        tail.trim_end().trim_end_matches(';')
    );
    w.steps.push(step('B', format!("{};", nowait.trim())));
    w.look_for = "step 2 locks the same rows at once instead of failing with 55P03 (lock not available): the row lock ended with step 1's statement".into();
    Ok(())
}

pub(super) fn session_lock(w: &mut Witness, found: &Found) -> Result<(), String> {
    let s = found.first().step;
    let a = s
        .facts
        .extra()
        .advisory
        .iter()
        .find(|a| a.scope == LockScope::Session && a.op == AdvisoryOp::Lock)
        .ok_or_else(|| format!("{}: no session lock to show", w.at))?;
    let unlock = if a.shared {
        "pg_advisory_unlock_shared"
    } else {
        "pg_advisory_unlock"
    };
    let try_fn = a.function.replacen("pg_advisory", "pg_try_advisory", 1);
    w.steps
        .push(step('A', format!("SELECT {}({});", a.function, a.key)));
    w.steps.push(WitnessStep {
        shows: Some("f".into()),
        ..step('B', format!("SELECT {unlock}({});", a.key))
    });
    w.steps.push(WitnessStep {
        shows: Some("f".into()),
        ..step('C', format!("SELECT {try_fn}({});", a.key))
    });
    w.look_for = "A is the pooled connection that took the lock, B the one the pool hands out next: its unlock fails (`f`, with a warning), and step 3 shows the lock still held by A's connection, for whatever runs on it next".into();
    Ok(())
}

pub(super) fn lock_order(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let [x1, x2, y1, y2] = found.steps[..] else {
        return Err(format!(
            "{}: the cycle is not two statements in each of two transactions",
            w.at
        ));
    };
    let first = x1.tx;
    if std::ptr::eq(x1.step, x2.step)
        || std::ptr::eq(y1.step, y2.step)
        || std::ptr::eq(first, y1.tx)
    {
        return Err(format!(
            "{}: the cycle is not two statements in each of two transactions",
            w.at
        ));
    }
    if !opens(first) || !opens(y1.tx) {
        return Err(format!(
            "{}: both sides must be explicit transactions",
            w.at
        ));
    }
    // Which rows a `SKIP LOCKED` claim takes depends on the data and on what else is locked:
    // setup rows chosen per statement need not be the rows the other side waits for.
    if found.steps.iter().any(|a| {
        a.step
            .facts
            .row_locks
            .iter()
            .any(|l| l.wait == LockWait::SkipLocked)
    }) {
        return Err(format!(
            "{}: a `SKIP LOCKED` claim takes whichever rows are free, which a witness cannot pin",
            w.at
        ));
    }
    let tables: Vec<&str> = found
        .steps
        .iter()
        .flat_map(|a| a.step.facts.writes.iter().chain(&a.step.facts.reads))
        .map(|t| t.name.as_str())
        .collect();
    let mut seen = Vec::new();
    for t in tables {
        if !seen.contains(&t) {
            seen.push(t);
            let on: Vec<&Step> = found.steps.iter().map(|a| a.step).collect();
            rows(w, program, &on, t)?;
        }
    }
    w.steps.push(step('A', "BEGIN;"));
    w.steps.push(step('A', sql(program, x1.step)));
    w.steps.push(step('B', "BEGIN;"));
    w.steps.push(step('B', sql(program, y1.step)));
    w.steps.push(WitnessStep {
        waits: true,
        ..step('A', sql(program, x2.step))
    });
    w.steps.push(step('B', sql(program, y2.step)));
    w.error = Some("40P01");
    w.look_for = "step 5 waits for B and step 6 for A: PostgreSQL aborts one of the two with 40P01 (deadlock detected)".into();
    Ok(())
}

pub(super) fn lost_update(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let (read, write, table) = found.read_write(&w.at)?;
    let t = rows(w, program, &[read.step, write.step], table)?;
    let column = write
        .step
        .facts
        .sets
        .first()
        .map_or("*", |s| s.column.as_str());
    let check = format!(
        "SELECT {column} FROM {} WHERE {};",
        t.name,
        where_of(&write.step.facts)?
    );
    let one_run = |w: &mut Witness, s: char| {
        begin(w, s, read.tx);
        w.steps.push(step(s, sql(program, read.step)));
    };
    one_run(w, 'A');
    one_run(w, 'B');
    // Both hold a shared row lock: each write waits for the other's, and one is aborted.
    let shared = std::ptr::eq(read.tx, write.tx)
        && opens(read.tx)
        && read.step.facts.row_locks.iter().any(|l| {
            matches!(
                l.strength,
                RowLockStrength::Share | RowLockStrength::KeyShare
            )
        });
    if shared {
        w.steps.push(WitnessStep {
            waits: true,
            ..step('A', sql(program, write.step))
        });
        w.steps.push(step('B', sql(program, write.step)));
        commit(w, 'A', write.tx);
        commit(w, 'B', write.tx);
        w.steps.push(step('C', check));
        w.error = Some("40P01");
        w.same_as_one_run = true;
        w.look_for = "both sessions read under a shared row lock (steps 2 and 4); each write waits for the other's lock, PostgreSQL aborts one with 40P01 (deadlock detected), and the last step shows only one run's change".into();
        return Ok(());
    }
    w.steps.push(step('A', sql(program, write.step)));
    commit(w, 'A', write.tx);
    w.steps.push(step('B', sql(program, write.step)));
    commit(w, 'B', write.tx);
    w.steps.push(step('C', check));
    w.same_as_one_run = true;
    w.look_for = format!(
        "both sessions read the same `{column}` (steps {} and {}) and both writes succeed: the value step {} shows is what one run alone leaves, the other run's change is lost",
        if opens(read.tx) { 2 } else { 1 },
        if opens(read.tx) { 4 } else { 2 },
        w.steps.len()
    );
    Ok(())
}

pub(super) fn check_then_insert(
    w: &mut Witness,
    found: &Found,
    program: &Program,
) -> Result<(), String> {
    let (read, write, table) = found.read_write(&w.at)?;
    if write.step.facts.kind != StmtKind::Insert {
        return Err(format!(
            "{}: a witness is written for a check followed by an INSERT; this write is an {:?}",
            w.at, write.step.facts.kind
        ));
    }
    let t = setup::table(w, program, &[read.step, write.step], table, &[])?;
    setup::parents_of_insert(w, program, &t, &write.step.facts);
    let check = duplicates(
        &t.name,
        &where_of(&read.step.facts)?,
        &write.step.facts,
        &[],
    );
    let both = opens(read.tx) && std::ptr::eq(read.tx, write.tx);
    let run = |w: &mut Witness, s: char| {
        begin(w, s, read.tx);
        w.steps.push(step(s, sql(program, read.step)));
    };
    run(w, 'A');
    run(w, 'B');
    let end = |w: &mut Witness, s: char| {
        w.steps.push(step(s, sql(program, write.step)));
        if both {
            commit(w, s, write.tx);
        }
    };
    end(w, 'A');
    end(w, 'B');
    w.steps.push(WitnessStep {
        shows: Some("2".into()),
        ..step('C', check)
    });
    w.look_for = format!(
        "both sessions find nothing (nothing to wait for) and both insert: step {} counts two equal rows where the check meant one",
        w.steps.len()
    );
    Ok(())
}

/// The most rows the check's key has with the same inserted values: 2 is the duplicate the check
/// meant to prevent (columns filled per transaction, such as `now()`, and those given a value
/// that differs by session, `varying`, left out).
pub(super) fn duplicates(table: &str, key: &str, insert: &Facts, varying: &[&str]) -> String {
    let per_tx = [
        "now()",
        "random",
        "uuid",
        "clock_timestamp",
        "nextval",
        "current_timestamp",
    ];
    let same: Vec<&str> = insert
        .inserts
        .iter()
        .filter(|(_, o)| {
            !per_tx
                .iter()
                .any(|f| o.text.to_ascii_lowercase().contains(f))
                && !varying.contains(&o.text.as_str())
        })
        .map(|(c, _)| c.as_str())
        .collect();
    match same.is_empty() {
        true => format!("SELECT count(*) FROM {table} WHERE {key};"),
        false => format!(
            "SELECT count(*) FROM {table} WHERE {key} GROUP BY {} ORDER BY 1 DESC LIMIT 1;",
            same.join(", ")
        ),
    }
}

/// `col = value AND ...` of a statement's equality filters (all literal).
pub(super) fn where_of(f: &Facts) -> Result<String, String> {
    let parts: Vec<String> = f
        .filters
        .iter()
        .map(|p| format!("{} = {}", p.column, p.value.text))
        .collect();
    match parts.is_empty() {
        true => Err("the statement names no row by key; a witness needs equality filters".into()),
        false => Ok(parts.join(" AND ")),
    }
}

/// The table and the rows the steps' filters name: one row per distinct key, its other
/// columns read or written by the steps set to 100.
pub(super) fn rows(
    w: &mut Witness,
    program: &Program,
    steps: &[&Step],
    table: &str,
) -> Result<setup::Table, String> {
    let t = setup::table(w, program, steps, table, &[])?;
    let mut keys: Vec<Vec<(String, String)>> = Vec::new();
    for s in steps {
        let on: Vec<(String, String)> = s
            .facts
            .filters
            .iter()
            .filter(|_| {
                s.facts
                    .reads
                    .iter()
                    .chain(&s.facts.writes)
                    .any(|t| t.name == table)
            })
            .map(|p| (p.column.to_string(), p.value.text.to_string()))
            .collect();
        if !on.is_empty() && !keys.contains(&on) {
            keys.push(on);
        }
    }
    for (n, key) in keys.iter().enumerate() {
        setup::insert_row(w, program, &t, key, "100", n + 1);
    }
    Ok(t)
}
