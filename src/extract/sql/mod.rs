//! `.sql` files: a script (or one transaction, or loose statements, as `sql.mode` says), plus a
//! unit for every routine body and `DO` block in it.

mod body;
mod signature;

use super::runners::{self, Detected};
use super::session::SessionWalker;
use super::{Extracted, Front, Limit, MAX_STATEMENTS, RoutineEvent};
use crate::config::{FileSettings, SqlMode};
use crate::model::*;
use crate::parse::lex::{Kind, Token, is_ident};
use crate::parse::split::split_each;
use crate::rules::analysis_limit::SPLIT;
use crate::source::{Dialect, FileId, OffsetMap, Span};
pub use signature::routine_names;
use signature::*;
pub(super) use signature::{paren_group, routine_name_at};

/// Read one `.sql` file; `runner` is who runs it, if txlint could tell (see [`runners`]).
///
/// [`runners`]: super::runners
pub fn extract(
    file: FileId,
    text: &str,
    dialect: Dialect,
    settings: FileSettings,
    runner: Option<Detected>,
    routines: super::Routines,
) -> Extracted {
    let mut x = Front::new(file, dialect, routines);
    // A UTF-8 byte-order mark is three bytes of nothing: spaces keep every offset.
    let unmarked;
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => {
            unmarked = format!("   {rest}");
            unmarked.as_str()
        }
        None => text,
    };
    // Go template actions (`{{ .Schema }}`) can hold quotes: blanked before tokens are read.
    let blanked = crate::parse::holes::blank_actions(text);
    let (text, actions) = match &blanked {
        Some((t, holes)) => (t.as_str(), holes.as_slice()),
        None => (text, &[][..]),
    };
    // The configuration decides the mode; else the runner txlint recognised; else a psql
    // script, unless a top-level `LOCK TABLE` outside `BEGIN` proves a wrapping runner (see
    // `script_unit`). Only then are the steps listed before they are grouped: otherwise each
    // goes into its transaction as it is read, and a large file is not held twice.
    let runner = runner.filter(|_| settings.mode.is_none());
    let mode = settings
        .mode
        .or(runner.map(|r| r.mode))
        .unwrap_or(SqlMode::Script);
    let mut steps = if settings.mode.is_none() && mode == SqlMode::Script && says_lock(text) {
        Steps::Listed(Vec::new())
    } else {
        Steps::Grouped(SessionWalker::script(mode))
    };
    x.script(text, actions, &mut steps);
    let unit = x.script_unit(text, steps, mode, runner);
    x.out.units.insert(0, unit);
    x.out
}

impl Front {
    /// The file's top-level statements as steps, each with the number of the simple-query
    /// message it is sent in; routine bodies, triggers and dropped routines recorded on the way.
    fn script(&mut self, text: &str, actions: &[std::ops::Range<usize>], steps: &mut Steps) {
        let (file, dialect) = (self.file, self.dialect);
        let map = OffsetMap::shifted(0);
        let mut read = 0;
        let mut skipped: Option<(usize, usize)> = None;
        let open = split_each(text, dialect, true, |mut stmt| {
            stmt.template |= actions
                .iter()
                .any(|h| h.start < stmt.range.end && stmt.range.start < h.end);
            if read >= MAX_STATEMENTS {
                let s = skipped.get_or_insert((stmt.range.start, 0));
                s.1 += 1;
                return;
            }
            let mut step = self.step(text, &map, &stmt, Vec::new());
            step.seq = read;
            read += 1;
            step.session = Some(0);
            self.bodies(text, &stmt, &step.facts);
            self.out
                .triggers
                .extend(super::trigger::trigger(text, &stmt.tokens, step.span));
            for (name, arity) in dropped_routines(text, &stmt.tokens) {
                self.out.routines.push(RoutineEvent {
                    name,
                    arity,
                    span: step.span,
                    dropped: true,
                    digest: 0,
                    dump: false,
                });
            }
            match steps {
                Steps::Grouped(walker) => walker.push(step, stmt.message),
                Steps::Listed(list) => list.push((step, stmt.message)),
            }
        });
        if is_schema_dump(text) {
            for e in &mut self.out.routines {
                e.dump = true;
            }
        }
        // PostgreSQL rejects a script with a quote or comment left open; the rest was read on
        // from the next line.
        if let Some((at, what)) = open.filter(|_| dialect.has_rules()) {
            let end = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
            self.out.failures.push(crate::parse::facts::ParseFailure {
                span: Span::new(file, at..end),
                message: format!(
                    "unterminated {what}: it runs to the end of the file, which PostgreSQL rejects (txlint read on from the next line)"
                ),
                host: false,
            });
        }
        if let Some((at, n)) = skipped {
            self.out.limits.push(Limit {
                span: Span::new(file, at..at),
                what: format!("the last {n} statements of this file"),
                why: format!(
                    "it has more than {} statements, and each one's facts stay in memory until the rules are done",
                    super::MAX_STATEMENTS
                ),
                fix: SPLIT,
            });
        }
    }

    /// The file's own unit: its statements in transactions as `mode` (or the runner) says.
    fn script_unit(
        &mut self,
        text: &str,
        steps: Steps,
        mut mode: SqlMode,
        mut runner: Option<Detected>,
    ) -> Unit {
        let file = self.file;
        let transactions = match steps {
            Steps::Grouped(walker) => walker.finish(),
            Steps::Listed(steps) => {
                // A top-level `LOCK TABLE` outside `BEGIN` proves a wrapping runner, also where
                // txlint took the tool for one that does not wrap (PostgreSQL would refuse the
                // file otherwise).
                if lock_outside_transaction(&steps) {
                    let wrapped = runners::wrapped_by_lock_table(runner);
                    mode = wrapped.mode;
                    runner = Some(wrapped);
                }
                group(steps, mode)
            }
        };
        let kind = match mode {
            SqlMode::Statements => UnitKind::QueryFile,
            _ => UnitKind::Script,
        };
        let mut unit = Unit::new(kind, None, Span::new(file, 0..text.len()));
        unit.transactions = transactions;
        unit.runner = runner.map(|r| r.runner);
        let called = unit.runner.and_then(|r| r.called);
        if kind == UnitKind::QueryFile {
            unit.pooled_callers = called;
        }
        // A migration's `DO` blocks run once too, at deploy, like its other top-level
        // statements. Routines it defines run whenever they are called: they keep no runner,
        // but what calls them (a Supabase RPC) is known.
        for u in self.out.units.iter_mut() {
            match u.kind {
                UnitKind::DoBlock => u.runner = unit.runner.filter(|r| r.migration),
                UnitKind::Routine => u.pooled_callers = called,
                _ => {}
            }
        }
        unit.sessions = vec![Session {
            id: 0,
            kind: Executor::Session,
            acquired: None,
            inherited: false,
            handed_on: false,
            handed_on_at: None,
            in_async: false,
        }];
        unit
    }
}

/// A script's steps as they are read: grouped into transactions at once where the mode is
/// known before the file is read, else listed until it is.
enum Steps {
    Grouped(SessionWalker),
    Listed(Vec<(Step, usize)>),
}

/// The word `LOCK`, in any case: only then can a statement of the text be `LOCK TABLE`.
fn says_lock(text: &str) -> bool {
    let b = text.as_bytes();
    b.windows(4).enumerate().any(|(i, w)| {
        w.eq_ignore_ascii_case(b"lock")
            && (i == 0 || !is_ident(b[i - 1]))
            && b.get(i + 4).is_none_or(|&c| !is_ident(c))
    })
}

/// The file's statements grouped into transactions as `mode` runs them.
fn group(steps: Vec<(Step, usize)>, mode: SqlMode) -> Vec<Transaction> {
    let mut script = SessionWalker::script(mode);
    if mode != SqlMode::Transaction {
        script.reserve(steps.len());
    }
    for (step, message) in super::draining(steps) {
        script.push(step, message);
    }
    script.finish()
}

/// A `LOCK TABLE` outside `BEGIN ... COMMIT`, as psql would run the file.
fn lock_outside_transaction(steps: &[(Step, usize)]) -> bool {
    let mut open = false;
    steps.iter().any(|(s, _)| {
        match s.facts.extra().tx.as_ref() {
            Some(TxControl::Begin { .. }) => open = true,
            Some(TxControl::Commit | TxControl::Rollback | TxControl::PrepareTransaction) => {
                open = false
            }
            _ => {}
        }
        !open && s.facts.extra().table_lock.is_some()
    })
}

/// `pg_dump`'s output (a schema file a project keeps beside its migrations, Rails'
/// `structure.sql`): it opens with its banner.
fn is_schema_dump(text: &str) -> bool {
    let head = text.get(..text.len().min(400)).unwrap_or(text);
    head.contains("-- PostgreSQL database dump")
}

/// The parenthesised group `t` opens with, cut at its top-level tokens that `cut` picks.
pub(super) struct Group<'t> {
    /// The tokens between the cuts, nested groups included.
    pub parts: Vec<Vec<&'t Token>>,
    /// The tokens it was cut at, in order.
    pub cuts: Vec<&'t Token>,
    /// The group closes within `t`.
    pub closed: bool,
}

#[cfg(test)]
mod tests;
