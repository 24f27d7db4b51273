//! Background jobs: functions that only a loop woken by a timer runs, one run after another.
//!
//! `loop { ingest().await; sleep(every).await }`, `interval.tick()` in a `select!`, a sleep that
//! a shutdown signal ends early (`timeout(every, stop.changed())`), a closure
//! handed to a scheduler (`every(..)`, a `cron` call): what such a loop calls runs once per
//! wake-up, one run after the other, in the process that started the loop, and so does what
//! the loop's block runs before it when that block runs nothing beside the loop (a first run
//! at start-up). txlint assumes one process runs it (see [`crate::model::Unit::job`]). Not
//! such a job:
//! - a loop that also receives from a channel (`recv`, `try_recv`), or a function that drains
//!   one: it handles what this process's other code sent, so it runs wherever that code runs;
//! - work the loop runs side by side: spawned in it (`spawn`, `join_all` over a `map`), or
//!   pushed to a `FuturesUnordered`, `JoinSet` or under a `Semaphore` there;
//! - a loop started more than once at a time: its function spawned in a loop or a `map` (a
//!   worker pool), on any path from the functions nothing calls (`main` is run once);
//! - a retry: a loop that leaves with a value (`return Ok(row)`, `break conn`) or a `while`
//!   that counts its turns;
//! - a loop whose statements claim rows with `SKIP LOCKED` (a queue's workers).
//!
//! Read from tokens, not syntax trees: the loop is often in a file that sends no SQL (a
//! binary's `main`, a scheduler module), which the front-end never gives to syn; macro input
//! (`select!`) is read the same way. Callers are read as the answers need them, round by
//! round. Calls are matched by name alone (a method too), in the packages that can name the
//! function (see [`reach`]), so a name with one caller that is neither in such a loop nor
//! itself a job is no job, and so is a name whose mentions cannot all be read (a generic one
//! in many files, a file too large or not Rust tokens): names matched too widely only keep
//! findings.

use std::collections::{HashMap, HashSet};

use aho_corasick::{AhoCorasick, AhoCorasickKind};

use crate::config::{BackgroundJobs, Config};
use crate::model::{LockWait, Unit, UnitKind};
use crate::source::{FileId, SourceFile, Span};
use ask::{Answer, Ask, Callers};
use scan::Graph;
use whole::Whole;

mod ask;
mod reach;
mod scan;
mod whole;
mod words;

/// Rounds of looking for callers' callers, and the names looked for in all, per batch.
const MAX_ROUNDS: usize = 8;
const MAX_NAMES: usize = 4_096;

/// One Rust file of a batch, parsed by syn or not.
pub(super) struct Text<'a> {
    pub id: FileId,
    pub text: &'a str,
    /// Under `tests/` or `benches/`: its calls are no production path.
    pub test: bool,
    /// Its package (see [`reach::Reach`]).
    pub package: Option<usize>,
}

/// Set [`Unit::job`] on the batch's units that only a background job runs, and
/// [`Unit::awaited_whole`] on those holding a session lock across awaits whose every run is
/// awaited to its end; a file the job's loop is in and that was not parsed gets its text back.
///
/// `unparsed` are the files of `own` the batch read and did not parse: their text was let go
/// (a large workspace's would sit beside its syntax trees) and is read again here, once the
/// trees are gone, and only when there is a unit to ask about.
pub(super) fn mark(
    units: &mut [Unit],
    own: &mut [(FileId, SourceFile)],
    unparsed: Vec<usize>,
    config: &Config,
) {
    // Only a unit that writes or locks can race (a plain read is no finding of any rule that
    // asks about jobs): the others' callers are not looked for, and `txlint model` shows no
    // job on them.
    let may_race = |u: &Unit| {
        let mut steps = u.transactions.iter().flat_map(|t| &t.steps);
        u.kind == UnitKind::RustFn
            && steps.any(|s| {
                let f = &s.facts;
                !f.writes.is_empty() || !f.row_locks.is_empty() || !f.extra().advisory.is_empty()
            })
    };
    let jobs = config.rust.background_jobs != BackgroundJobs::Replicated;
    let asks_jobs = jobs && units.iter().any(|u| u.name.is_some() && may_race(u));
    // Functions holding a session lock across awaits, and the calls they reach their locks
    // through.
    let (mut held, mut chains): (Vec<(&str, FileId)>, Vec<Span>) = (Vec::new(), Vec::new());
    for u in units.iter().filter(|u| holds_across_awaits(u)) {
        held.extend(u.name.as_deref().map(|n| (n, u.span.file)));
        chains.extend(whole::locks(u).flat_map(|s| s.host().calls.iter().copied()));
    }
    // A module named for tests (`test_utils.rs`) whose functions only tests call is test
    // code, although no `cfg(test)` says so: its units are asked about even with no job to
    // look for.
    let test_files: HashSet<FileId> = own
        .iter()
        .filter(|(_, f)| module_named_for_tests(&f.path))
        .map(|(id, _)| *id)
        .collect();
    let tested: HashSet<Span> = units
        .iter()
        .filter(|u| !u.test && may_race(u) && test_files.contains(&u.span.file))
        .map(|u| u.span)
        .collect();
    if !asks_jobs && held.is_empty() && tested.is_empty() {
        return;
    }
    let (reach, package) = reach::Reach::new(own.iter().map(|(_, f)| f.path.as_path()));
    let package_of: HashMap<FileId, Option<usize>> = own
        .iter()
        .map(|(id, _)| *id)
        .zip(package.iter().copied())
        .collect();
    let key = |u: &Unit| -> Option<(Key, Span)> {
        let package = package_of.get(&u.span.file).copied().flatten();
        Some(((u.name.clone()?, package), u.span))
    };
    let mut names: Vec<(Key, Span)> = units
        .iter()
        .filter(|u| may_race(u) && (jobs || tested.contains(&u.span)))
        .filter_map(key)
        .collect();
    let files: HashSet<FileId> = units.iter().flat_map(Unit::files).collect();
    // A file that cannot be read again is one whose mentions cannot all be read (see above).
    let unparsed: Vec<(usize, String)> = unparsed
        .into_iter()
        .filter_map(|i| Some((i, crate::io::read(&own.get(i)?.1.path).ok()?.0)))
        .collect();
    let mut texts: Vec<Text> = own
        .iter()
        .zip(&package)
        .filter(|((_, f), _)| !f.text().is_empty())
        .map(|((id, f), package)| Text {
            id: *id,
            text: f.text(),
            test: config.is_test_path(&f.path),
            package: *package,
        })
        .collect();
    texts.extend(unparsed.iter().map(|(i, text)| Text {
        id: own[*i].0,
        text,
        test: config.is_test_path(&own[*i].1.path),
        package: package[*i],
    }));
    // Every statement inside one timer loop on the way to it: the loop, if the unit runs one
    // at a time (statements in two loops are two jobs, which may run side by side: `main`
    // spawning both).
    let in_loop = |u: &Unit, found: &Jobs| {
        let mut at = u.transactions.iter().flat_map(|t| &t.steps).map(|s| {
            let chain = s.host().calls.iter().copied().chain([s.span]);
            found.loop_of(chain)
        });
        let first = at.next()??;
        at.all(|k| k == Some(first)).then_some(first)
    };
    // No text that could wait for a timer or hand work to a scheduler: no job to look for.
    let asked_jobs = jobs && texts.iter().any(|t| words::may_wait(t.text));
    if !asked_jobs {
        names.retain(|(_, unit)| tested.contains(unit));
    }
    if names.is_empty() && held.is_empty() {
        return;
    }
    let asked = (&names[..], &held[..], &chains[..]);
    let found = find(&texts, &files, asked, (reach, asked_jobs), |found| {
        let own = units
            .iter()
            .filter(|u| asked_jobs && may_race(u) && in_loop(u, found).is_some());
        own.filter_map(key).collect()
    });
    drop(texts);
    whole::mark(units, &found, &package_of);
    for u in units.iter_mut() {
        u.test |= tested.contains(&u.span) && found.tests_only.contains(&u.span);
        if asked_jobs && may_race(u) {
            u.job = found.called.get(&u.span).copied().or_else(|| {
                found
                    .once
                    .contains(&u.span)
                    .then(|| in_loop(u, &found))
                    .flatten()
            });
        }
    }
    unmark_queue_workers(units);
    let places: HashSet<FileId> = units.iter().filter_map(|u| u.job).map(|j| j.file).collect();
    for (i, text) in unparsed {
        let (id, f) = &mut own[i];
        if places.contains(id) {
            f.set_text(text);
        }
    }
}

/// An `async` function that takes a session lock on a connection it acquired (what
/// [`Unit::awaited_whole`] is asked for).
fn holds_across_awaits(u: &Unit) -> bool {
    u.kind == UnitKind::RustFn
        && u.sessions.iter().any(|s| s.in_async)
        && whole::locks(u).next().is_some()
}

/// A loop whose work claims rows with `SKIP LOCKED` is written for copies of itself running at
/// once (a queue's workers): none of its units is a job.
fn unmark_queue_workers(units: &mut [Unit]) {
    let skips = |u: &Unit| {
        let steps = u.transactions.iter().flat_map(|t| &t.steps);
        let mut locks = steps.flat_map(|s| &s.facts.row_locks);
        locks.any(|l| l.wait == LockWait::SkipLocked)
    };
    let shared: HashSet<Span> = units
        .iter()
        .filter(|u| skips(u))
        .filter_map(|u| u.job)
        .collect();
    for u in units
        .iter_mut()
        .filter(|u| u.job.is_some_and(|j| shared.contains(&j)))
    {
        u.job = None;
    }
}

/// What [`find`] learnt.
#[derive(Default)]
pub(super) struct Jobs {
    /// The timer loop that alone runs each function asked about, by its unit's span (see
    /// [`Graph::job`]).
    called: HashMap<Span, Span>,
    /// Those of the functions asked about that run one at a time (see [`Graph::once`]).
    once: HashSet<Span>,
    /// Those that only test code calls (see [`Graph::callers`]).
    tests_only: HashSet<Span>,
    /// The timer loops of functions that drain no channel.
    loops: Vec<scan::TimerLoop>,
    /// What runs side by side with other runs of itself: the arguments of a `spawn` in a loop,
    /// of a `map` in a `join_all`.
    side_by_side: Vec<Span>,
    /// Of the functions asked about (name, file), those whose every run is awaited to its
    /// end, with the files of the `main`s that do (see [`whole`]).
    whole: HashMap<(String, FileId), Vec<FileId>>,
    /// Of the helpers called on the way to those functions' session locks (name, method),
    /// those whose every run is awaited to its end, with the files of the `main`s that do.
    helpers: HashMap<(String, bool), Vec<FileId>>,
    /// See [`Graph::calls_at`].
    calls_at: HashMap<(FileId, usize), scan::CallAt>,
}

impl Jobs {
    /// The timer loop a statement runs in, reached through `chain` (the calls of the helpers
    /// it is in, outermost first, then the statement) from a function that runs one at a time;
    /// none if a call on the way is run side by side.
    fn loop_of(&self, mut chain: impl Iterator<Item = Span>) -> Option<Span> {
        let mut found = None;
        chain
            .try_for_each(|at| {
                if self.side_by_side.iter().any(|c| c.contains(at)) {
                    return Err(());
                }
                if found.is_none() {
                    found = self.loops.iter().find(|l| l.runs(at)).map(|l| l.at);
                }
                Ok(())
            })
            .ok()?;
        found
    }
}

/// For the functions named `names` (units of the run, in `files` with the helpers they call),
/// the timer loop that alone runs each, and which of `own` (units with statements in timer
/// loops, see [`Jobs::loop_of`]) run one at a time; for those named `held`, whether each run
/// is awaited to its end. Callers are read as the answers need them, round by round; a name
/// still unknown at the end is no job, and not run whole.
fn find(
    texts: &[Text],
    files: &HashSet<FileId>,
    (names, held, chains): (&[AskedUnit], &[(&str, FileId)], &[Span]),
    (reach, asked_jobs): (reach::Reach, bool),
    own: impl Fn(&Jobs) -> Vec<AskedUnit>,
) -> Jobs {
    let mut graph = Graph {
        keep_calls: !held.is_empty(),
        reach,
        ..Graph::default()
    };
    let mut scanned = vec![false; texts.len()];
    for (i, t) in texts.iter().enumerate() {
        // One that cannot be read is left to `scan_mentions`, which says whose calls it hides.
        if files.contains(&t.id) && t.text.len() <= MAX_SCAN {
            scanned[i] = graph.scan(t);
        }
    }
    let mut jobs = Jobs {
        loops: graph.loops(),
        side_by_side: graph.side_by_side.clone(),
        ..Jobs::default()
    };
    let own = own(&jobs);
    let (mut read, mut blind) = (HashSet::new(), HashSet::new());
    // The helpers called on the way to a session lock, by their calls.
    let mut helpers: Vec<(String, bool)> = chains
        .iter()
        .filter_map(|c| graph.calls_at.get(&(c.file, c.end())))
        .map(|c| (c.name.clone(), c.method))
        .collect();
    helpers.sort();
    helpers.dedup();
    // Whether a session lock's function is run whole is asked of every function of its name.
    let held_names = held.iter().map(|(n, _)| (n.to_string(), None));
    let helper_names = helpers.iter().map(|(n, _)| (n.clone(), None));
    let mut wanted: Vec<Key> = names
        .iter()
        .map(|(k, _)| k.clone())
        .chain(held_names)
        .chain(helper_names)
        .collect();
    wanted.extend(own.iter().map(|(k, _)| k.clone()));
    for round in 0..=MAX_ROUNDS {
        wanted.sort();
        wanted.dedup();
        wanted.retain(|n| !read.contains(n) && !blind.contains(n));
        if round == MAX_ROUNDS || read.len() + wanted.len() > MAX_NAMES {
            break;
        }
        if !wanted.is_empty() {
            let unread = scan_mentions(texts, &wanted, &mut scanned, &mut graph);
            blind.extend(unread.into_iter().cloned());
            read.extend(wanted.drain(..).filter(|n| !blind.contains(n)));
        }
        let mut ask = Ask {
            read: Some(&read),
            blind: Some(&blind),
            ..Ask::default()
        };
        jobs.called.clear();
        jobs.once.clear();
        jobs.whole.clear();
        jobs.helpers.clear();
        for &(n, file) in held {
            let method = graph.is_method(n, file);
            if let Whole::From(mains) = graph.whole(n, method, &mut ask) {
                jobs.whole.insert((n.to_string(), file), mains);
            }
        }
        for (n, method) in &helpers {
            if let Whole::From(mains) = graph.whole(n, *method, &mut ask) {
                jobs.helpers.insert((n.clone(), *method), mains);
            }
        }
        for (n, unit) in names.iter().filter(|_| asked_jobs) {
            let asked = (n.clone(), graph.owner_at(&n.0, *unit));
            if let Answer::Yes(Some(at)) = graph.job(&asked, &mut ask) {
                jobs.called.insert(*unit, at);
            }
        }
        for (n, unit) in &own {
            let asked = (n.clone(), graph.owner_at(&n.0, *unit));
            if !graph.drains(&n.0) && graph.once(&asked, &mut ask) == Answer::Yes(None) {
                jobs.once.insert(*unit);
            }
        }
        if ask.wanted.is_empty() {
            break;
        }
        wanted = ask.wanted;
    }
    let only_tests =
        |(n, unit): &&AskedUnit| read.contains(n) && graph.callers(n, *unit) == Callers::Tests;
    jobs.tests_only = names.iter().filter(only_tests).map(|(_, u)| *u).collect();
    jobs.loops = graph.loops();
    jobs.side_by_side = graph.side_by_side;
    jobs.calls_at = graph.calls_at;
    jobs
}

/// Text above which a file is not read for calls (generated code): the names it mentions are
/// taken to have callers there that are no job's.
const MAX_SCAN: usize = 4 * 1024 * 1024;

/// Files of a batch that may mention a name before it is taken for a generic one (`new`,
/// `run`, `fmt`): its callers are not looked for, and it is no job's.
const MAX_FILES: usize = 32;

/// A function asked about: its name, and the package it is in (none: any package), which
/// the calls that can reach it are kept to (see [`reach`]).
type Key = (String, Option<usize>);

/// A unit asked about: its function's key, and the unit's span.
type AskedUnit = (Key, Span);

/// The texts not scanned yet that name any of `keys` as a word, where such a function can be
/// called (see [`Graph::may_call`]), are scanned into `graph`. Returns the keys whose
/// mentions could not all be read (too many files, too large, not Rust tokens).
fn scan_mentions<'k>(
    texts: &[Text],
    keys: &'k [Key],
    scanned: &mut [bool],
    graph: &mut Graph,
) -> Vec<&'k Key> {
    let Ok(finder) = AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::DFA))
        .build(keys.iter().map(|k| &k.0))
    else {
        return keys.iter().collect();
    };
    // The keys each file mentions the name of as a word, where it can call them.
    let mentions: Vec<Vec<usize>> = texts
        .iter()
        .map(|t| {
            let b = t.text.as_bytes();
            let word = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
            let mut named: Vec<usize> = finder
                .find_overlapping_iter(b)
                .filter(|m| {
                    !word(m.start().checked_sub(1).and_then(|s| b.get(s))) && !word(b.get(m.end()))
                })
                .map(|m| m.pattern().as_usize())
                .collect();
            named.sort_unstable();
            named.dedup();
            named.retain(|&k| graph.may_call(&keys[k], t.package));
            named
        })
        .collect();
    let mut files = vec![0usize; keys.len()];
    mentions.iter().flatten().for_each(|&n| files[n] += 1);
    let mut blind: Vec<bool> = files.iter().map(|&f| f > MAX_FILES).collect();
    for (i, t) in texts.iter().enumerate() {
        let wanted: Vec<usize> = mentions[i].iter().copied().filter(|&n| !blind[n]).collect();
        if scanned[i] || wanted.is_empty() {
            continue;
        }
        scanned[i] = true;
        if t.text.len() > MAX_SCAN || !graph.scan(t) {
            wanted.into_iter().for_each(|n| blind[n] = true);
        }
    }
    let blind = keys.iter().zip(blind).filter(|(_, b)| *b);
    blind.map(|(n, _)| n).collect()
}

#[cfg(test)]
mod tests;

/// A module named for tests: its file's stem (or, for a `mod.rs`, its folder's name) has a
/// word for tests in it (`test_utils.rs`, `testing/mod.rs`, `fixtures.rs`).
fn module_named_for_tests(path: &std::path::Path) -> bool {
    let stem = path.file_stem().and_then(|s| s.to_str());
    let name = match stem {
        Some("mod") => path
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str()),
        other => other,
    };
    name.is_some_and(|n| super::modules::named_for_tests(&n.replace('_', "-")))
}
