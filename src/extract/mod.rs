//! Front-ends: text of one kind of file -> units of the model.

pub mod dialects;
pub mod initdb;
pub mod runners;
pub mod rust;
pub mod session;
pub mod sql;
pub mod sqlc;
mod trigger;

use sqlparser::dialect::{
    Dialect as ParserDialect, GenericDialect, MsSqlDialect, MySqlDialect, PostgreSqlDialect,
    SQLiteDialect,
};

use crate::diagnostic::Diagnostic;
use crate::model::{List, Name, Step, Unit};
use crate::parse::facts::{ParseFailure, Reader};
use crate::parse::split::RawStatement;
use crate::source::Dialect;
use crate::source::{FileId, OffsetMap, Span};

fn parser_dialect(d: Dialect) -> Box<dyn ParserDialect> {
    match d {
        Dialect::Postgres => Box::new(PostgreSqlDialect {}),
        Dialect::Mysql => Box::new(MySqlDialect {}),
        Dialect::Sqlite => Box::new(SQLiteDialect {}),
        Dialect::Mssql => Box::new(MsSqlDialect {}),
        Dialect::Unknown => Box::new(GenericDialect {}),
    }
}

/// sqlparser's dialects, one of each, made once per front-end.
pub struct Parsers(Vec<(Dialect, Box<dyn ParserDialect>)>);

impl Default for Parsers {
    fn default() -> Self {
        use Dialect::*;
        Parsers(
            [Postgres, Mysql, Sqlite, Mssql, Unknown]
                .into_iter()
                .map(|d| (d, parser_dialect(d)))
                .collect(),
        )
    }
}

impl Parsers {
    pub fn get(&self, d: Dialect) -> &dyn ParserDialect {
        match self.0.iter().find(|(x, _)| *x == d) {
            Some((_, p)) => p.as_ref(),
            None => self.0[0].1.as_ref(),
        }
    }
}

/// What every front-end shares: reading statements into steps, collecting what it learned.
pub struct Front {
    pub file: FileId,
    /// The dialect of the text being read.
    pub dialect: Dialect,
    pub parsers: Parsers,
    pub out: Extracted,
    /// Names of the routines the run's `.sql` files may define: only calls of these are kept.
    pub routines: Routines,
}

/// Routine names (unqualified, lower case unless quoted) the run's `.sql` files define.
pub type Routines = std::sync::Arc<std::collections::HashSet<String>>;

impl Front {
    pub fn new(file: FileId, dialect: Dialect, routines: Routines) -> Self {
        Front {
            file,
            dialect,
            parsers: Parsers::default(),
            out: Extracted::default(),
            routines,
        }
    }

    /// The step of one statement of `src` (whose bytes `map` places in the host file). Its
    /// place in the unit (`seq`, `session`, `branch`) is the caller's to set.
    pub fn step(
        &mut self,
        src: &str,
        map: &OffsetMap,
        stmt: &RawStatement,
        assigns: Vec<String>,
    ) -> Step {
        let reader = Reader {
            src,
            map,
            file: self.file,
            dialect: self.dialect,
            parser: self.parsers.get(self.dialect),
            routines: &self.routines,
        };
        let (mut facts, failure) = reader.read(stmt);
        if !assigns.is_empty() {
            facts.extra_mut().assigns = assigns.into_iter().map(Name::from).collect();
        }
        facts.shrink_to_fit();
        self.out.stats += Stats {
            statements: 1,
            parsed: usize::from(facts.parsed),
            fallback: usize::from(!facts.parsed),
            rust_skipped: 0,
        };
        // A template's holes are filled by code txlint does not see: its parse failures are not
        // the SQL's (the statement is still analysed from its tokens).
        // SQL for a database the core rules do not analyse is parsed for its facts only: a
        // failure there is nobody's business here.
        self.out
            .failures
            .extend(failure.filter(|_| !stmt.template && self.dialect.has_rules()));
        Step {
            span: Span::new(self.file, map.host_range(stmt.range.clone())),
            facts,
            seq: 0,
            session: None,
            branch: List::new(),
            host: None,
        }
    }
}

/// What a front-end learned from one file.
#[derive(Debug, Default)]
pub struct Extracted {
    pub units: Vec<Unit>,
    /// Statements sqlparser rejected (reported as `syntax-error`).
    pub failures: Vec<ParseFailure>,
    /// SQL files sent by host code (`include_str!`, `query_file!`): they are query files of
    /// that code, not scripts of their own.
    pub embedded: std::collections::BTreeSet<FileId>,
    /// `CREATE FUNCTION|PROCEDURE` and `DROP FUNCTION|PROCEDURE` statements, in file order: a
    /// routine replaced or dropped later in the run (a later migration) is no longer live.
    pub routines: Vec<RoutineEvent>,
    /// Parts of the input left unanalysed because they exceeded a budget.
    pub limits: Vec<Limit>,
    pub stats: Stats,
    /// Files read here (late, by the Rust front-end) that could not be read, or only in part.
    pub notes: Vec<crate::diagnostic::Diagnostic>,
    /// Of those, the files that could not be read at all.
    pub unreadable: usize,
    /// SQL txlint wrote for query-builder chains (diesel), by the chain's span.
    pub generated: Vec<(Span, String)>,
    /// Calls that send a query on a database handle whose SQL txlint could not read (built at
    /// run time, from a factory it cannot follow): what the run did not see.
    pub unread_sql: Vec<Span>,
    /// Tables host code declares (diesel's `table!`).
    pub declared: Vec<crate::model::TableDdl>,
    /// `CREATE TRIGGER` statements, in file order.
    pub triggers: Vec<crate::model::Trigger>,
    /// Rust helpers that callers walk in place, summarised.
    pub summaries: Vec<crate::model::Summary>,
}

impl Extracted {
    /// Add another batch's results after this one's.
    pub fn merge(&mut self, o: Extracted) {
        self.units.extend(o.units);
        self.failures.extend(o.failures);
        self.embedded.extend(o.embedded);
        self.routines.extend(o.routines);
        self.generated.extend(o.generated);
        self.unread_sql.extend(o.unread_sql);
        self.declared.extend(o.declared);
        self.triggers.extend(o.triggers);
        self.summaries.extend(o.summaries);
        self.limits.extend(o.limits);
        self.stats += o.stats;
        self.notes.extend(o.notes);
        self.unreadable += o.unreadable;
    }
}

/// Statements of one `.sql` file analysed; the rest is counted and skipped, with a note (each
/// statement's facts stay in memory until the rules are done).
pub const MAX_STATEMENTS: usize = 100_000;

/// The items of `list` in order, each handed over as it is taken: the list gives its room back
/// as it empties, so a large file's statements are not held twice, once listed and once as
/// what they become.
fn draining<T>(mut list: Vec<T>) -> impl Iterator<Item = T> {
    list.reverse();
    std::iter::from_fn(move || {
        let item = list.pop()?;
        if list.len() < list.capacity() / 2 {
            list.shrink_to_fit();
        }
        Some(item)
    })
}

/// A part of the input left unanalysed because it exceeded a budget: where, what, why, and
/// what to do about it.
#[derive(Debug)]
pub struct Limit {
    pub span: Span,
    pub what: String,
    pub why: String,
    pub fix: &'static str,
}

/// A routine created or dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutineEvent {
    pub name: String,
    /// Number of parameters, where the statement lists them (overloads differ in it).
    pub arity: Option<usize>,
    /// The `CREATE` or `DROP` statement.
    pub span: Span,
    pub dropped: bool,
    /// A hash of the `CREATE` statement's words (0 for a `DROP`): two definitions with the
    /// same digest are one text.
    pub digest: u64,
    /// In a `pg_dump` schema file: a copy of what the project's own sources define.
    pub dump: bool,
}

impl RoutineEvent {
    /// The digest of a statement's text, whitespace and line comments aside (a generated
    /// bundle may drop them; both copies are cut alike, also inside a string).
    pub fn digest_of(text: &str) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let words: Vec<&str> = text
            .lines()
            .map(|l| l.split_once("--").map_or(l, |(code, _)| code))
            .flat_map(str::split_whitespace)
            .collect();
        BuildHasherDefault::<DefaultHasher>::default().hash_one(words)
    }
}

/// Why a routine's unit is not analysed (see [`superseded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Superseded {
    /// A later `CREATE OR REPLACE` or `DROP` (here).
    By(Span),
    /// The same text as the definition here, earlier in the run, which is analysed instead:
    /// a bundle that concatenates the per-routine sources, a migration that re-creates a
    /// routine unchanged. Findings point where it was first written.
    CopyOf(Span),
    /// A `pg_dump` schema file's copy of a routine the run's own sources define (here, its
    /// latest definition), which is analysed instead.
    Dumped(Span),
}

/// Units of routines that a later `CREATE OR REPLACE` or `DROP` of the same project supersedes,
/// with the statement that does: `events` in file order (files sorted by path, as migrations
/// apply). `project` says which project a file belongs to: two projects in one run (services
/// of a monorepo, each with its own database) may define routines of one name.
pub fn superseded<P: Eq + std::hash::Hash>(
    events: &[RoutineEvent],
    mut project: impl FnMut(FileId) -> P,
) -> Vec<(Span, Superseded)> {
    // A routine of a `pg_dump` schema file that the run's own sources define (in any project:
    // the dump is a snapshot of what they build) is analysed there, at its latest definition.
    let mut source = std::collections::HashMap::<&str, usize>::new();
    for (i, e) in events.iter().enumerate().filter(|(_, e)| !e.dump) {
        source.insert(e.name.as_str(), i);
    }
    let copied: Vec<Option<usize>> = events
        .iter()
        .map(|e| {
            e.dump
                .then(|| source.get(e.name.as_str()).copied())
                .flatten()
        })
        .collect();
    // From the end: the events after each one, latest first, by project and name.
    let mut after = std::collections::HashMap::<_, Vec<(Option<usize>, usize)>>::new();
    let mut by: Vec<Option<usize>> = vec![None; events.len()];
    for (i, e) in events.iter().enumerate().rev() {
        if copied[i].is_some() {
            continue;
        }
        let later = after
            .entry((project(e.span.file), e.name.as_str()))
            .or_default();
        if !e.dropped
            && let Some((_, j)) = later
                .iter()
                .find(|(a, _)| a.is_none() || e.arity.is_none() || *a == e.arity)
        {
            by[i] = Some(*j);
        }
        later.push((e.arity, i));
    }
    // A live definition whose text earlier definitions repeat: the copy in the file that
    // defines the fewest routines (the routine's own source, not a bundle of all of them),
    // the earliest of those, is analysed in its place.
    let mut defined_in = std::collections::HashMap::<FileId, usize>::new();
    for e in events.iter().filter(|e| !e.dropped && !e.dump) {
        *defined_in.entry(e.span.file).or_default() += 1;
    }
    let rank = |k: usize| (defined_in.get(&events[k].span.file).copied(), k);
    let mut first: Vec<Option<usize>> = vec![None; events.len()];
    for (i, e) in events.iter().enumerate() {
        if let Some(j) = by[i]
            && !e.dropped
            && events[j].digest == e.digest
        {
            let best = [first[i].unwrap_or(i), first[j].unwrap_or(j)]
                .into_iter()
                .chain(first[j])
                .min_by_key(|&k| rank(k));
            first[j] = best.filter(|&k| k != j);
        }
    }
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let Some(j) = copied[i] {
            if !e.dropped {
                out.push((e.span, Superseded::Dumped(events[j].span)));
            }
            continue;
        }
        match (by[i], first[i]) {
            (None, Some(f)) => out.push((e.span, Superseded::CopyOf(events[f].span))),
            (Some(j), _) => {
                let live_copy = by[j].is_none() && first[j].is_some_and(|f| f == i);
                if !live_copy {
                    out.push((e.span, Superseded::By(events[j].span)));
                }
            }
            (None, None) => {}
        }
    }
    out
}

/// Counts for the closing summary and for measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub statements: usize,
    /// Parsed by sqlparser.
    pub parsed: usize,
    /// Analysed from tokens only (sqlparser rejected them, or they are `DO` blocks).
    pub fallback: usize,
    /// Rust files the pre-scan found nothing in (no SQL, no handle): not parsed.
    pub rust_skipped: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.statements += o.statements;
        self.parsed += o.parsed;
        self.fallback += o.fallback;
        self.rust_skipped += o.rust_skipped;
    }
}

/// Read the file `id` of the run: its text and a note if some bytes were not UTF-8, or the
/// `read-error` that says why it could not be read.
pub(crate) fn load(
    path: &std::path::Path,
    id: FileId,
) -> Result<(String, Option<Diagnostic>), Box<Diagnostic>> {
    let read_error =
        |span: Span, message: String| Diagnostic::new(&crate::registry::READ_ERROR, span, message);
    match crate::io::read(path) {
        Ok((text, bad_utf8)) => {
            let note = bad_utf8.map(|offset| {
                read_error(
                    Span::new(id, offset..offset),
                    "file is not valid UTF-8 here; invalid bytes were replaced and the rest was analysed".to_string(),
                )
            });
            Ok((text, note))
        }
        Err(message) => Err(Box::new(read_error(Span::new(id, 0..0), message))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(file: FileId, at: usize, text: &str) -> RoutineEvent {
        RoutineEvent {
            name: "debit".into(),
            arity: Some(2),
            span: Span::new(file, at..at + 1),
            dropped: false,
            digest: RoutineEvent::digest_of(text),
            dump: false,
        }
    }

    #[test]
    fn a_later_redefinition_supersedes_and_an_identical_copy_points_at_its_source() {
        let body = "CREATE FUNCTION debit(a int, n int) AS $$ UPDATE w SET b = b - n; $$";
        // The source (file 1, one routine) and a bundle (file 2, applied later, with a second
        // routine): the bundle's copy is the live one, the source is analysed in its place.
        let mut other = def(2, 0, "CREATE FUNCTION credit(a int) AS $$ $$");
        other.name = "credit".into();
        let source = def(1, 0, &format!("{body} -- the source"));
        let bundle = def(2, 50, &body.replace(' ', "  "));
        let out = superseded(&[source.clone(), other, bundle.clone()], |_| ());
        assert_eq!(out, [(bundle.span, Superseded::CopyOf(source.span))]);
        // Three copies, the middle one in the smallest file: it is analysed, the first is
        // superseded by the live one, which is a copy of the middle one.
        let a = def(3, 0, body);
        let mut filler = def(3, 10, "CREATE FUNCTION x() AS $$ $$");
        filler.name = "x".into();
        let b = def(4, 0, body);
        let c = def(5, 0, body);
        let mut more = def(5, 10, "CREATE FUNCTION y() AS $$ $$");
        more.name = "y".into();
        let out = superseded(&[a.clone(), filler, b.clone(), c.clone(), more], |_| ());
        assert_eq!(
            out,
            [
                (a.span, Superseded::By(c.span)),
                (c.span, Superseded::CopyOf(b.span)),
            ]
        );
        // A different text later replaces: nothing is a copy.
        let changed = def(
            6,
            0,
            "CREATE FUNCTION debit(a int, n int) AS $$ SELECT 1; $$",
        );
        let out = superseded(&[a.clone(), changed.clone()], |_| ());
        assert_eq!(out, [(a.span, Superseded::By(changed.span))]);
    }

    #[test]
    fn a_schema_dump_copy_is_analysed_at_the_sources_latest_definition() {
        // The dump sorts first and sits in another project; its text is pg_dump's own.
        let mut dumped = def(
            0,
            0,
            "CREATE FUNCTION public.debit(a integer, n integer) AS $$ $$",
        );
        dumped.dump = true;
        let mut only_dumped = def(0, 10, "CREATE FUNCTION public.audit() AS $$ $$");
        only_dumped.name = "audit".into();
        only_dumped.dump = true;
        let first = def(
            1,
            0,
            "CREATE FUNCTION debit(a int, n int) AS $$ SELECT 1 $$",
        );
        let latest = def(
            2,
            0,
            "CREATE OR REPLACE FUNCTION debit(a int, n int) AS $$ $$",
        );
        let events = [dumped.clone(), only_dumped, first.clone(), latest.clone()];
        // The dump in a project of its own, the migrations in another.
        let out = superseded(&events, |f| f == 0);
        assert_eq!(
            out,
            [
                (dumped.span, Superseded::Dumped(latest.span)),
                (first.span, Superseded::By(latest.span)),
            ]
        );
    }
}
