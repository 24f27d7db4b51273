//! `txlint witness`: for a finding in a `.sql` file, the two-session script that shows its race
//! on the user's own statements, on a scratch database.
//!
//! A witness is a setup (the tables from the run's schema, or tables inferred from the
//! statements with what was assumed said, and the rows the race needs) and numbered steps on
//! sessions `A`, `B` (and `C`, which only looks), in order. A step marked `waits` blocks until a
//! later step of the other session ends its transaction. What shows the race is said in words
//! and, for a driver, as the output of one step (`shows`) or an error code one of the steps
//! gets (`error`). `tests/truth` runs each rule's witness on PostgreSQL 15.
//!
//! The statements and the schedule come from the finding's subject
//! ([`crate::diagnostic::Subject`]), which the rule that reports the race sets; nothing is
//! guessed back from the finding's place.

use std::fmt::Write;

use serde::Serialize;

mod routine;
mod scenarios;
mod setup;
mod values;

use scenarios::*;

use crate::diagnostic::{Diagnostic, Race, StepRef};
use crate::model::*;

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

/// The run's statements by unit and place in it, to find each finding's subject without a scan
/// of the whole model per finding.
pub struct Witnesses<'r> {
    program: &'r Program,
    /// Every step, by unit (its span) and sequence number.
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
        steps.sort_by_key(At::key);
        Witnesses { program, steps }
    }

    /// The step a subject names.
    fn find(&self, r: &StepRef) -> Option<At<'r>> {
        let key = (r.unit.file, r.unit.start(), r.unit.end(), r.seq);
        let i = self.steps.binary_search_by_key(&key, At::key).ok()?;
        Some(self.steps[i])
    }

    pub fn of(&self, d: &Diagnostic) -> Result<Witness, String> {
        build(self.program, d, self)
    }
}

fn build(program: &Program, d: &Diagnostic, index: &Witnesses) -> Result<Witness, String> {
    let file = &program.files[d.span.file];
    let at = format!("{}:{}", file.display, file.line(d.span.start()));
    if crate::source::is_rust(&file.path) {
        return Err(format!(
            "{at}: the statements are sent by Rust code with values txlint does not know; a witness is written for findings in .sql files"
        ));
    }
    let subject = d.subject.as_ref().ok_or_else(|| {
        format!(
            "{at}: no witness is written for this kind of {} finding (see the rule page for its race)",
            d.rule
        )
    })?;
    let found = Found::of(index, &subject.steps)
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
    one_body_on_one_table(program, &found, &at)?;
    let race = subject.race;
    if race == Race::UniqueViolation {
        return Err(format!(
            "{at}: no witness is written for a race that a unique key ends in an error (see the rule page for the two-session steps)"
        ));
    }
    if race == Race::CheckThenWrite && found.last().unit.kind == UnitKind::Routine {
        routine::routine_calls(&mut w, &found, program)?;
        return Ok(w);
    }
    literal_script(program, &found, &at)?;
    match race {
        Race::LockEndsWithStatement => xact_lock(&mut w, &found, program)?,
        Race::SessionLockOnPool => session_lock(&mut w, &found)?,
        Race::Deadlock => lock_order(&mut w, &found, program)?,
        Race::LostUpdate => lost_update(&mut w, &found, program)?,
        Race::CheckThenWrite | Race::InsertAfterEmptyLock => {
            check_then_insert(&mut w, &found, program)?
        }
        Race::UniqueViolation => {}
    }
    Ok(w)
}

/// `path:line` of one of the finding's statements (a cycle's other side can be elsewhere).
fn place(program: &Program, s: &Step) -> String {
    let f = &program.files[s.span.file];
    format!("{}:{}", f.display, f.line(s.span.start()))
}

/// The statements are PostgreSQL's, each on one table, and none runs through a call or a
/// trigger: a witness replays one body's statements.
fn one_body_on_one_table(program: &Program, found: &Found, at: &str) -> Result<(), String> {
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
                place(program, s.step),
                tables.join(", ")
            ));
        }
    }
    if let Some(s) = found.steps.iter().find(|s| !s.step.host().calls.is_empty()) {
        return Err(format!(
            "{at}: {} runs through a call or a trigger; a witness is written for statements of one body",
            place(program, s.step)
        ));
    }
    Ok(())
}

/// The statements are a psql script's, with literal values.
fn literal_script(program: &Program, found: &Found, at: &str) -> Result<(), String> {
    for s in &found.steps {
        if !matches!(s.unit.kind, UnitKind::Script) {
            return Err(format!(
                "{at}: {} is in a routine body or a query file, whose values and transaction come from its caller; a witness is written for psql scripts",
                place(program, s.step)
            ));
        }
        if has_parameter(&sql(program, s.step)) {
            return Err(format!(
                "{at}: {} binds values from host code ($1, ...); a witness needs literal values",
                place(program, s.step)
            ));
        }
    }
    Ok(())
}

/// The steps of a finding's subject, in its order, with their transactions.
struct Found<'p> {
    steps: Vec<At<'p>>,
}

#[derive(Clone, Copy)]
struct At<'p> {
    step: &'p Step,
    tx: &'p Transaction,
    unit: &'p Unit,
}

impl At<'_> {
    fn key(&self) -> (usize, usize, usize, usize) {
        let u = self.unit.span;
        (u.file, u.start(), u.end(), self.step.seq)
    }
}

impl<'p> Found<'p> {
    fn of(index: &Witnesses<'p>, subject: &[StepRef]) -> Option<Found<'p>> {
        let steps: Option<Vec<At<'p>>> = subject.iter().map(|r| index.find(r)).collect();
        let steps = steps.filter(|s| !s.is_empty())?;
        Some(Found { steps })
    }

    fn first(&self) -> At<'p> {
        self.steps[0]
    }

    fn last(&self) -> At<'p> {
        self.steps[self.steps.len() - 1]
    }

    /// The read or check, the write after it, and its table (a subject `[read, write]`).
    fn read_write(&self, at: &str) -> Result<(At<'p>, At<'p>, &'p str), String> {
        let [read, write] = self.steps[..] else {
            return Err(format!("{at}: the finding is not about a read and a write"));
        };
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
