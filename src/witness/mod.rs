//! `txlint witness`: for a finding in a `.sql` file, the two-session script that shows its race
//! on the user's own statements, on a scratch database.
//!
//! A witness is a setup (the tables from the run's schema, or tables inferred from the
//! statements with what was assumed said, and the rows the race needs) and numbered steps on
//! sessions `A`, `B` (and `C`, which only looks), in order. A step marked `waits` blocks until a
//! later step of the other session ends its transaction. What shows the race is said in words
//! and, for a driver, as the output of one step (`shows`) or an error code one of the steps
//! gets (`error`). `tests/truth` runs each rule's witness on PostgreSQL 15.

use std::fmt::Write;

use serde::Serialize;

mod routine;
mod setup;

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
pub fn witness(program: &Program, d: &Diagnostic) -> Result<Witness, String> {
    Witnesses::new(program).of(d)
}

/// The run's statements by place, to find each finding's statements without a scan of the
/// whole model per finding.
pub struct Witnesses<'r> {
    program: &'r Program,
    /// Every step, by (file, start).
    steps: Vec<At<'r>>,
}

impl<'r> Witnesses<'r> {
    pub fn new(program: &'r Program) -> Self {
        let mut steps: Vec<At<'r>> = Vec::new();
        for unit in &program.units {
            for tx in &unit.transactions {
                steps.extend(tx.steps.iter().map(|step| At { step, tx, unit }));
            }
        }
        steps.sort_by_key(|a| (a.step.span.file, a.step.span.start()));
        Witnesses { program, steps }
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
        build(self.program, d, self)
    }
}

/// Statements looked back over for the one around a span: nested bodies are shallow.
const LOOK_BACK: usize = 64;

fn build(program: &Program, d: &Diagnostic, index: &Witnesses) -> Result<Witness, String> {
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
        routine::routine_calls(&mut w, &found, program)?;
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

fn check_then_insert(w: &mut Witness, found: &Found, program: &Program) -> Result<(), String> {
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

/// The table and the rows the steps' filters name: one row per distinct key, its other
/// columns read or written by the steps set to 100.
fn rows(
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
