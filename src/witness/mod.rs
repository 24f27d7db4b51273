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
mod scenarios;
mod setup;
mod values;

use scenarios::*;

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
