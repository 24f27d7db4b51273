//! `txlint witness`: for a finding in a `.sql` file, the two-session script that shows its race
//! on the user's own statements, on a scratch database.
//!
//! A witness is a setup (the tables from the run's schema, or tables inferred from the
//! statements with what was assumed said, and the rows the race needs) and numbered steps on
//! sessions `A`, `B` (and `C`, which only looks), in order. A step marked `waits` blocks until a
//! later step of the other session ends its transaction. What shows the race is said in words
//! and, for a driver, as the output of one step (`shows`) or an error code one of the steps
//! gets (`error`). `tests/truth` runs each rule's witness on PostgreSQL 15.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::Run;
use crate::diagnostic::Diagnostic;
use crate::model::*;
use crate::source::Span;

#[derive(Debug, Serialize)]
pub struct Witness {
    pub rule: &'static str,
    /// `path:line` of the finding.
    pub at: String,
    /// Run once on a scratch database, before the steps.
    pub setup: Vec<String>,
    pub steps: Vec<WitnessStep>,
    /// What to look for, in words.
    pub look_for: String,
    /// An error code (SQLSTATE) that one of the steps gets when the race happens.
    pub error: Option<&'static str>,
    /// The race shows as the last step's output being what running session A's steps alone
    /// (from the same setup) leaves: the other session's change is lost.
    pub same_as_one_run: bool,
    /// What txlint assumed to write the setup (column types it could not read).
    pub assumed: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct WitnessStep {
    pub session: char,
    pub sql: String,
    /// The statement blocks until another session's transaction ends.
    pub waits: bool,
    /// Its output when the race happens (psql's unaligned output, `t`/`f` for booleans).
    pub shows: Option<String>,
}

/// The witness for `d`, or what is missing to write one (for many findings of one run, build a
/// [`Witnesses`] once).
pub fn witness(run: &Run, d: &Diagnostic) -> Result<Witness, String> {
    Witnesses::new(run).of(d)
}

/// The run's statements by place, to find each finding's statements without a scan of the
/// whole model per finding.
pub struct Witnesses<'r> {
    run: &'r Run,
    /// Every step, by (file, start).
    steps: Vec<At<'r>>,
}

impl<'r> Witnesses<'r> {
    pub fn new(run: &'r Run) -> Self {
        let mut steps: Vec<At<'r>> = Vec::new();
        for unit in &run.program.units {
            for tx in &unit.transactions {
                steps.extend(tx.steps.iter().map(|step| At { step, tx, unit }));
            }
        }
        steps.sort_by_key(|a| (a.step.span.file, a.step.span.start()));
        Witnesses { run, steps }
    }

    /// The innermost statement around `s` (a routine body's, not the `CREATE FUNCTION` around
    /// it): the nearest of those that start at or before it, looking back a bounded way.
    fn innermost(&self, s: Span) -> Option<At<'r>> {
        let end = self
            .steps
            .partition_point(|a| (a.step.span.file, a.step.span.start()) <= (s.file, s.start()));
        self.steps[..end]
            .iter()
            .rev()
            .take(LOOK_BACK)
            .take_while(|a| a.step.span.file == s.file)
            .find(|a| s.end() <= a.step.span.end())
            .copied()
    }

    pub fn of(&self, d: &Diagnostic) -> Result<Witness, String> {
        build(self.run, d, self)
    }
}

/// Statements looked back over for the one around a span: nested bodies are shallow.
const LOOK_BACK: usize = 64;

fn build(run: &Run, d: &Diagnostic, index: &Witnesses) -> Result<Witness, String> {
    let program = &run.program;
    let file = &program.files[d.span.file];
    let at = format!("{}:{}", file.display, file.line(d.span.start()));
    if crate::source::is_rust(&file.path) {
        return Err(format!(
            "{at}: the statements are sent by Rust code with values txlint does not know; a witness is written for findings in .sql files"
        ));
    }
    let found = Found::of(index, d)
        .ok_or_else(|| format!("{at}: no statement of the model is at this finding"))?;
    let mut w = Witness {
        rule: d.rule,
        at: at.clone(),
        setup: Vec::new(),
        steps: Vec::new(),
        look_for: String::new(),
        error: None,
        same_as_one_run: false,
        assumed: Vec::new(),
    };
    // `path:line` of one of the finding's statements (a cycle's other side can be elsewhere).
    let place = |s: &Step| {
        let f = &program.files[s.span.file];
        format!("{}:{}", f.display, f.line(s.span.start()))
    };
    if let Some(s) = found
        .steps
        .iter()
        .find(|s| s.step.facts.dialect != crate::source::Dialect::Postgres)
    {
        return Err(format!(
            "{at}: the statements are for {:?}; a witness runs on PostgreSQL",
            s.step.facts.dialect
        ));
    }
    for s in &found.steps {
        let mut tables: Vec<&str> = s
            .step
            .facts
            .reads
            .iter()
            .chain(&s.step.facts.writes)
            .map(|t| t.name.as_str())
            .collect();
        tables.sort_unstable();
        tables.dedup();
        if tables.len() > 1 {
            return Err(format!(
                "{at}: {} uses several tables ({}); a witness is written for statements on one table each",
                place(s.step),
                tables.join(", ")
            ));
        }
    }
    if let Some(s) = found.steps.iter().find(|s| !s.step.host().calls.is_empty()) {
        return Err(format!(
            "{at}: {} runs through a call or a trigger; a witness is written for statements of one body",
            place(s.step)
        ));
    }
    let routine = found.primary().unit;
    if d.rule == "check-then-act" && routine.kind == UnitKind::Routine {
        routine_calls(&mut w, &found, program)?;
        return Ok(w);
    }
    for s in &found.steps {
        if !matches!(s.unit.kind, UnitKind::Script) {
            return Err(format!(
                "{at}: {} is in a routine body or a query file, whose values and transaction come from its caller; a witness is written for psql scripts",
                place(s.step)
            ));
        }
        if has_parameter(&sql(program, s.step)) {
            return Err(format!(
                "{at}: {} binds values from host code ($1, ...); a witness needs literal values",
                place(s.step)
            ));
        }
    }
    match d.rule {
        "xact-lock-outside-transaction" => xact_lock(&mut w, &found, program)?,
        "session-lock-on-pool" => session_lock(&mut w, &found)?,
        "lock-order-inversion" => lock_order(&mut w, &found, program)?,
        "lost-update" => lost_update(&mut w, &found, program)?,
        "row-lock-predicate-gap" | "check-then-act" => check_then_insert(&mut w, &found, program)?,
        "unique-violation-unhandled" => {
            return Err(format!(
                "{at}: no witness is written for a race that a unique key ends in an error (see the rule page for the two-session steps)"
            ));
        }
        other => return Err(format!("{at}: {other} is not a race between sessions")),
    }
    Ok(w)
}

/// The steps a finding names (its span and its labels), with their transactions.
struct Found<'p> {
    /// In program order; the finding's own step is `primary`.
    steps: Vec<At<'p>>,
    primary: usize,
}

#[derive(Clone, Copy)]
struct At<'p> {
    step: &'p Step,
    tx: &'p Transaction,
    unit: &'p Unit,
}

impl<'p> Found<'p> {
    fn of(index: &Witnesses<'p>, d: &Diagnostic) -> Option<Found<'p>> {
        let primary_span = index.innermost(d.span)?.step.span;
        let mut steps: Vec<At<'p>> = std::iter::once(d.span)
            .chain(d.labels.iter().map(|l| l.span))
            .filter_map(|s| index.innermost(s))
            .collect();
        steps.sort_by_key(|a| (a.step.span.file, a.step.span.start()));
        steps.dedup_by_key(|a| a.step.span);
        let primary = steps.iter().position(|a| a.step.span == primary_span)?;
        Some(Found { steps, primary })
    }

    fn primary(&self) -> At<'p> {
        self.steps[self.primary]
    }

    /// The read or check just before the finding's write, the write, and its table.
    fn read_write(&self, at: &str) -> Result<(At<'p>, At<'p>, &'p str), String> {
        let write = self.primary();
        let read = self.steps[..self.primary]
            .last()
            .copied()
            .ok_or_else(|| format!("{at}: the read is not before the write"))?;
        let table = write
            .step
            .facts
            .writes
            .first()
            .ok_or_else(|| format!("{at}: the written table is unknown"))?;
        Ok((read, write, table.name.as_str()))
    }
}

/// `$1` outside quotes: a value the caller binds.
fn has_parameter(sql: &str) -> bool {
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '$' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => return true,
            _ => {}
        }
    }
    false
}

/// The statement's text as written, with `\gset` where psql assigns its result, ended by `;`.
fn sql(program: &Program, step: &Step) -> String {
    let text = program.files[step.span.file].text();
    let mut s = text
        .get(step.span.start()..step.span.end())
        .unwrap_or("")
        .trim()
        .trim_end_matches(';')
        .to_string();
    let gset = step
        .facts
        .extra()
        .assigns
        .iter()
        .any(|a| a.starts_with(':'));
    if gset && !s.contains("\\gset") {
        s += " \\gset";
    } else if !s.ends_with("\\gset") {
        s.push(';');
    }
    s
}

fn step(session: char, sql: impl Into<String>) -> WitnessStep {
    WitnessStep {
        session,
        sql: sql.into(),
        waits: false,
        shows: None,
    }
}

fn opens(tx: &Transaction) -> bool {
    tx.scope == Scope::Explicit
}

/// `BEGIN` for a transaction the script opens; nothing in autocommit.
fn begin(w: &mut Witness, session: char, tx: &Transaction) {
    if opens(tx) {
        w.steps.push(step(session, "BEGIN;"));
    }
}

fn commit(w: &mut Witness, session: char, tx: &Transaction) {
    if opens(tx) {
        w.steps.push(step(session, "COMMIT;"));
    }
}

fn xact_lock(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let s = found.primary().step;
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

fn session_lock(w: &mut Witness, found: &Found) -> Result<(), String> {
    let s = found.primary().step;
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

fn lock_order(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let first = found.primary().tx;
    let (mine, theirs): (Vec<At>, Vec<At>) =
        found.steps.iter().partition(|a| std::ptr::eq(a.tx, first));
    let ([x1, x2, ..], [y1, y2, ..]) = (mine.as_slice(), theirs.as_slice()) else {
        return Err(format!(
            "{}: the cycle is not two statements in each of two transactions",
            w.at
        ));
    };
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

fn lost_update(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let (read, write, table) = found.read_write(&w.at)?;
    rows(w, program, &[read.step, write.step], table)?;
    let column = write
        .step
        .facts
        .sets
        .first()
        .map_or("*", |s| s.column.as_str());
    let check = format!(
        "SELECT {column} FROM {table} WHERE {};",
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

fn check_then_insert(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let (read, write, table) = found.read_write(&w.at)?;
    if write.step.facts.kind != StmtKind::Insert {
        return Err(format!(
            "{}: a witness is written for a check followed by an INSERT; this write is an {:?}",
            w.at, write.step.facts.kind
        ));
    }
    table_for(w, program, &[read.step, write.step], table)?;
    let check = duplicates(table, &where_of(&read.step.facts)?, &write.step.facts, &[]);
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

/// A check-then-act inside a routine: two transactions call it with the same key, the first
/// one's write not committed yet when the second one checks.
fn routine_calls(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
    let (read, write, table) = found.read_write(&w.at)?;
    let table = table.to_string();
    let unit = write.unit;
    let at = w.at.clone();
    let name = unit
        .name
        .as_deref()
        .ok_or_else(|| format!("{}: the routine has no name", w.at))?;
    let text = program.files[unit.span.file].text();
    let ddl = text
        .get(unit.span.start()..unit.span.end())
        .unwrap_or("")
        .trim();
    let params = routine_params(ddl, name)
        .ok_or_else(|| format!("{}: the parameters of `{name}` could not be read", w.at))?;
    // A parameter the check filters on is the key both calls share; the others differ.
    let keys: Vec<&str> = read
        .step
        .facts
        .filters
        .iter()
        .flat_map(|p| p.value.idents.iter().map(|i| i.as_str()))
        .collect();
    // An existence check meant one row per key: the calls' own values (a user id beside the
    // checked address) do not tell its duplicates apart. (A count's cap is shown per value.)
    let counts = read
        .step
        .facts
        .extra()
        .aggregates
        .iter()
        .any(|a| a == "count");
    let varying: Vec<&str> = params
        .iter()
        .map(|p| p.0.as_str())
        .filter(|p| !counts && !keys.contains(p))
        .collect();
    let value = |param: &(String, String), session: usize| -> Result<String, String> {
        let n = if keys.contains(&param.0.as_str()) {
            0
        } else {
            session
        };
        sample(&param.1, n).ok_or_else(|| {
            format!(
                "{at}: no sample value for `{}` of type {}",
                param.0, param.1
            )
        })
    };
    let subst = |o: &Operand| -> Result<String, String> {
        match params.iter().find(|p| o.idents.len() == 1 && o.text == p.0) {
            Some(p) => value(p, 0),
            None if o.idents.is_empty() => Ok(o.text.to_string()),
            None => Err(format!("{at}: `{}` is computed in the routine", o.text)),
        }
    };
    let filters = |f: &Facts| -> Result<String, String> {
        let parts: Result<Vec<String>, String> = f
            .filters
            .iter()
            .map(|p| Ok(format!("{} = {}", p.column, subst(&p.value)?)))
            .collect();
        let parts = parts?;
        match parts.is_empty() {
            true => Err(format!("{at}: the statement names no row by key")),
            false => Ok(parts.join(" AND ")),
        }
    };
    let columns = table_typed(w, program, &[read.step, write.step], &table, &params)?;
    let (check, shows, waits) = match write.step.facts.kind {
        StmtKind::Insert => (
            duplicates(
                &table,
                &filters(&read.step.facts)?,
                &write.step.facts,
                &varying,
            ),
            "2".to_string(),
            false,
        ),
        StmtKind::Update => {
            // The row the check finds, in the state the check lets through, and a written
            // value that tells the two calls apart.
            let mut row = read
                .step
                .facts
                .filters
                .iter()
                .map(|p| Ok((p.column.to_string(), subst(&p.value)?)))
                .collect::<Result<Vec<(String, String)>, String>>()?;
            if let Some((c, v)) = checked_state(program, write.tx, read.step)
                && !row.iter().any(|(k, _)| *k == c)
            {
                row.push((c, v));
            }
            w.setup.push(insert_row(&table, &row, &columns, "0"));
            let set = write
                .step
                .facts
                .sets
                .iter()
                .find_map(|s| {
                    let p = params
                        .iter()
                        .find(|p| s.value.text == p.0 && !keys.contains(&p.0.as_str()))?;
                    Some((s.column.to_string(), p))
                })
                .ok_or_else(|| format!("{}: no written value tells the two calls apart", w.at))?;
            (
                format!(
                    "SELECT {} FROM {table} WHERE {};",
                    set.0,
                    filters(&write.step.facts)?
                ),
                // What psql prints for it: a text sample without its quotes.
                value(set.1, 2)?.trim_matches('\'').to_string(),
                true,
            )
        }
        other => {
            return Err(format!(
                "{}: a witness is written for an INSERT or UPDATE, not {other:?}",
                w.at
            ));
        }
    };
    w.setup.push(format!("{};", ddl.trim_end_matches(';')));
    let call = |session: usize| -> Result<String, String> {
        let args: Result<Vec<String>, String> = params.iter().map(|p| value(p, session)).collect();
        Ok(format!("SELECT {name}({});", args?.join(", ")))
    };
    w.steps.push(step('A', "BEGIN;"));
    w.steps.push(step('A', call(1)?));
    w.steps.push(step('B', "BEGIN;"));
    w.steps.push(WitnessStep {
        waits,
        ..step('B', call(2)?)
    });
    w.steps.push(step('A', "COMMIT;"));
    w.steps.push(step('B', "COMMIT;"));
    w.steps.push(WitnessStep {
        shows: Some(shows.clone()),
        ..step('C', check)
    });
    w.look_for = match waits {
        false => "B's check (step 4) does not see A's uncommitted row and nothing makes it wait: both calls insert, and step 7 counts two equal rows where the check meant one".into(),
        true => format!(
            "B's check (step 4) passes on the row as it was before A's change; its write waits for A and then goes through: step 7 shows B's value `{shows}` over A's claim"
        ),
    };
    Ok(())
}

/// The state a check lets through: after `SELECT state INTO s ..`, a condition on `s` that
/// compares it with one text literal (`IF s <> 'queued' THEN RAISE ..`, `IF s = 'queued'
/// THEN ..`): the column read into `s` and that literal. The row is set up in that state so
/// that both calls pass the check on what is in the row, not on a NULL.
fn checked_state(program: &Program, tx: &Transaction, read: &Step) -> Option<(String, String)> {
    let f = &read.facts;
    let assigns = &f.extra().assigns;
    if assigns.len() != f.columns.len() {
        return None;
    }
    tx.steps
        .iter()
        .filter(|s| s.seq > read.seq && s.facts.reads.is_empty())
        .find_map(|s| {
            let i = assigns
                .iter()
                .position(|a| s.facts.extra().uses.contains(a))?;
            let text = program.files[s.span.file]
                .text()
                .get(s.span.start()..s.span.end())?;
            let mut quoted = text.split('\'');
            let (_, literal, _) = (quoted.next()?, quoted.next()?, quoted.next()?);
            quoted
                .next()
                .is_none()
                .then(|| (f.columns[i].to_string(), format!("'{literal}'")))
        })
}

/// The routine's input parameters (name, type) from its `CREATE` statement.
fn routine_params(ddl: &str, name: &str) -> Option<Vec<(String, String)>> {
    let lower = ddl.to_ascii_lowercase();
    let at = lower.find(&name.to_ascii_lowercase())? + name.len();
    let open = at + ddl[at..].find('(')?;
    let mut depth = 0;
    let mut close = None;
    for (i, c) in ddl[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let list = &ddl[open + 1..close?];
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let mut words: Vec<&str> = part.split_whitespace().collect();
        match words.first().map(|w| w.to_ascii_lowercase()) {
            Some(m) if m == "out" => continue,
            Some(m) if m == "in" || m == "inout" || m == "variadic" => {
                words.remove(0);
            }
            _ => {}
        }
        let end = words
            .iter()
            .position(|w| w.eq_ignore_ascii_case("default") || *w == "=")
            .unwrap_or(words.len());
        if end < 2 {
            return None;
        }
        out.push((
            words[0].to_string(),
            words[1..end].join(" ").to_ascii_lowercase(),
        ));
    }
    Some(out)
}

/// A value of a parameter's type: `n` 0 for a shared key, 1 and 2 for each session's own.
fn sample(ty: &str, n: usize) -> Option<String> {
    let ty = ty.trim();
    let ints = [
        "int", "integer", "bigint", "smallint", "int2", "int4", "int8", "numeric",
    ];
    if ints.contains(&ty) {
        return Some(["1", "10", "11"][n].to_string());
    }
    if ty == "text" || ty.starts_with("varchar") || ty.starts_with("character varying") {
        return Some(["'k'", "'a'", "'b'"][n].to_string());
    }
    None
}

/// The most rows the check's key has with the same inserted values: 2 is the duplicate the check
/// meant to prevent (columns filled per transaction, such as `now()`, and those given a value
/// that differs by session, `varying`, left out).
fn duplicates(table: &str, key: &str, insert: &Facts, varying: &[&str]) -> String {
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
fn where_of(f: &Facts) -> Result<String, String> {
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

/// `INSERT` of the row with `key`'s columns and values, its other `int` columns set to `fill`.
fn insert_row(
    table: &str,
    key: &[(String, String)],
    columns: &[(String, String)],
    fill: &str,
) -> String {
    let mut names: Vec<&str> = key.iter().map(|(c, _)| c.as_str()).collect();
    let mut values: Vec<&str> = key.iter().map(|(_, v)| v.as_str()).collect();
    for (c, ty) in columns {
        if !names.contains(&c.as_str()) && ty == "int" {
            names.push(c);
            values.push(fill);
        }
    }
    format!(
        "INSERT INTO {table} ({}) VALUES ({});",
        names.join(", "),
        values.join(", ")
    )
}

/// The table and the rows the steps' filters name: one row per distinct key, its other
/// columns read or written by the steps set to 100.
fn rows(w: &mut Witness, program: &Program, steps: &[&Step], table: &str) -> Result<(), String> {
    let columns = table_for(w, program, steps, table)?;
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
    for key in keys {
        w.setup.push(insert_row(table, &key, &columns, "100"));
    }
    Ok(())
}

/// `CREATE TABLE` for `table`: the run's own statement, or one inferred from the steps (types
/// from the literals compared with or stored in each column; `int` where nothing tells, said
/// in `assumed`). Returns the columns the steps use with their inferred kind.
fn table_for(
    w: &mut Witness,
    program: &Program,
    steps: &[&Step],
    table: &str,
) -> Result<Vec<(String, String)>, String> {
    table_typed(w, program, steps, table, &[])
}

/// [`table_for`], with the types of a routine's parameters (`email = e`, `e text`).
fn table_typed(
    w: &mut Witness,
    program: &Program,
    steps: &[&Step],
    table: &str,
    params: &[(String, String)],
) -> Result<Vec<(String, String)>, String> {
    let mut columns: BTreeMap<String, Option<&'static str>> = BTreeMap::new();
    // Columns compared with or given a value of a type txlint cannot tell (`now() + ..`), and
    // conditions that are not `col = value`: an inferred table could reject the statements.
    let mut untyped: Vec<String> = Vec::new();
    let mut conditions = false;
    for s in steps {
        let f = &s.facts;
        if !f.reads.iter().chain(&f.writes).any(|t| t.name == table) {
            continue;
        }
        conditions |= f.other_conditions;
        let typed = f
            .filters
            .iter()
            .map(|p| (&p.column, &p.value))
            .chain(f.inserts.iter().map(|(c, o)| (c, o)))
            .chain(f.sets.iter().map(|s| (&s.column, &s.value)));
        for (c, o) in typed {
            let param = params.iter().find(|p| o.text == p.0);
            let kind = literal_kind(&o.text).or_else(|| param.and_then(|p| kind_of_type(&p.1)));
            if kind.is_none() {
                untyped.push(c.to_string());
            }
            let e = columns.entry(c.to_string()).or_insert(None);
            *e = e.or(kind);
        }
        // Columns, not the unit's variables (`WHERE id = s` reads the parameter `s`).
        for c in f
            .columns
            .iter()
            .filter(|c| *c != "*" && !f.extra().uses.contains(c))
        {
            columns.entry(c.to_string()).or_insert(None);
        }
    }
    let kinds: Vec<(String, String)> = columns
        .iter()
        .map(|(c, k)| (c.clone(), k.unwrap_or("int").to_string()))
        .collect();
    // The table as the finding's own file creates it, else as the run's schema has it.
    let file = steps.first().map(|s| s.span.file);
    let here = program
        .units
        .iter()
        .filter(|u| Some(u.span.file) == file && u.kind == UnitKind::Script)
        .flat_map(|u| u.transactions.iter().flat_map(|t| &t.steps))
        .find(|s| {
            s.facts
                .extra()
                .ddl
                .as_ref()
                .is_some_and(|d| d.creates && d.table == table)
        })
        .map(|s| s.span);
    let declared = here.or_else(|| program.schema.tables.get(table).and_then(|t| t.declared));
    if let Some(declared) = declared {
        let text = program.files[declared.file].text();
        let ddl = text
            .get(declared.start()..declared.end())
            .unwrap_or("")
            .trim();
        w.setup.push(format!("{};", ddl.trim_end_matches(';')));
        return Ok(kinds);
    }
    if columns.is_empty() {
        return Err(format!(
            "{}: no schema for `{table}` and no columns to infer one from",
            w.at
        ));
    }
    untyped.retain(|c| columns.get(c).is_some_and(Option::is_none));
    if let Some(c) = untyped.first() {
        return Err(format!(
            "{}: no CREATE TABLE for `{table}` in the run, and the type of `{c}` cannot be told from the statements",
            w.at
        ));
    }
    if conditions && columns.values().any(Option::is_none) {
        return Err(format!(
            "{}: no CREATE TABLE for `{table}` in the run, and its conditions need the columns' types",
            w.at
        ));
    }
    let assumed: Vec<&str> = columns
        .iter()
        .filter(|(_, k)| k.is_none())
        .map(|(c, _)| c.as_str())
        .collect();
    if !assumed.is_empty() {
        w.assumed.push(format!(
            "no CREATE TABLE for `{table}` in the run: its columns are inferred from the statements, {} as int",
            assumed.join(", ")
        ));
    }
    let list: Vec<String> = kinds.iter().map(|(c, k)| format!("{c} {k}")).collect();
    w.setup
        .push(format!("CREATE TABLE {table} ({});", list.join(", ")));
    Ok(kinds)
}

/// The kind of a declared type, as the inferred tables use them.
fn kind_of_type(ty: &str) -> Option<&'static str> {
    match () {
        _ if sample(ty, 0).is_some_and(|v| v.starts_with('\'')) => Some("text"),
        _ if sample(ty, 0).is_some() => Some("int"),
        _ if ty == "boolean" || ty == "bool" => Some("boolean"),
        _ => None,
    }
}

fn literal_kind(text: &str) -> Option<&'static str> {
    let t = text.trim();
    // Arithmetic on names and whole numbers (`:balance - 10`, `coalesce(last, 0) + 1`).
    let arithmetic = t.chars().any(|c| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_alphanumeric() || " _.:+-*/(),".contains(c))
        && !t.to_ascii_lowercase().contains("now");
    if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') {
        Some("text")
    } else if t.parse::<i64>().is_ok() || arithmetic {
        Some("int")
    } else if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        Some("boolean")
    } else {
        None
    }
}

/// The witness as two psql sessions would run it, step by step.
pub fn render(w: &Witness) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "-- txlint witness: {} at {}", w.rule, w.at);
    let _ = writeln!(
        out,
        "-- On a scratch database: run the setup once, then open psql sessions A and B (and C to\n-- look) and run the steps in this order. A step marked `waits` blocks; go on with the next."
    );
    for a in &w.assumed {
        let _ = writeln!(out, "-- assumed: {a}");
    }
    match w.setup.is_empty() {
        true => {
            let _ = writeln!(out, "\n-- setup: none");
        }
        false => {
            let _ = writeln!(out, "\n-- setup");
        }
    }
    for s in &w.setup {
        let _ = writeln!(out, "{s}");
    }
    let _ = writeln!(out);
    for (i, s) in w.steps.iter().enumerate() {
        let mut note = String::new();
        if s.waits {
            note += "  -- waits";
        }
        if let Some(shows) = &s.shows {
            note += &format!("  -- the race: `{shows}`");
        }
        let _ = writeln!(out, "-- {}. {}\n{}{note}", i + 1, s.session, s.sql);
    }
    let _ = writeln!(out, "\n-- look for: {}", w.look_for);
    if let Some(code) = w.error {
        let _ = writeln!(out, "-- error code: {code}");
    }
    if w.same_as_one_run {
        let _ = writeln!(
            out,
            "-- compare: on a fresh setup, run only A's steps and then the last step; the same output means one run's work was lost"
        );
    }
    out
}
