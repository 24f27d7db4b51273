//! Functions whose every run is awaited to its end: each call of one is awaited where it
//! stands, and so is each call of its callers in turn, up to a binary's `main`. Nothing drops
//! such a future part way but the end of the process (which closes its connections too).
//!
//! Read from the same token graph as the background jobs, with the same caution: a name with
//! a mention that is not such a call (passed to a router, to `select!`, to `timeout`, to
//! `block_on`; a field) or with no caller at all (a request handler the framework calls, a
//! library's API) is not run whole.

use std::collections::HashMap;

use super::scan::Graph;
use super::{Answer, Ask, Jobs};
use crate::model::{Step, Unit};
use crate::source::FileId;

/// The statements of a unit that take or release session locks.
pub(super) fn locks(u: &Unit) -> impl Iterator<Item = &Step> {
    let steps = u.transactions.iter().flat_map(|t| &t.steps);
    steps.filter(|s| !s.facts.extra().advisory.is_empty())
}

/// Set [`Unit::awaited_whole`]: a session lock of the unit's own package, in a unit every run
/// of which is awaited to its end from a `main` of that package (or in that `main`), reached
/// through helper calls each awaited where it stands and each of whose helpers is run whole
/// from such a `main` too (a helper with another caller that can drop it is not).
///
/// Another package's `main` is one user of a library whose other users may drop its futures.
///
/// `package_of` gives the package of each file of the batch (see [`super::reach`]); a file of
/// no package is a package of its own.
pub(super) fn mark(units: &mut [Unit], found: &Jobs, package_of: &HashMap<FileId, Option<usize>>) {
    let of = |f: FileId| package_of.get(&f).map(|p| p.ok_or(f));
    for u in units.iter_mut().filter(|u| super::holds_across_awaits(u)) {
        let (Some(name), Some(home)) = (u.name.as_ref(), of(u.span.file)) else {
            continue;
        };
        let from_home =
            |files: &[FileId]| !files.is_empty() && files.iter().all(|&f| of(f) == Some(home));
        let mains = found.whole.get(&(name.clone(), u.span.file));
        let callers = name == "main" || mains.is_some_and(|m| from_home(m));
        if !callers {
            continue;
        }
        let mut seqs = Vec::new();
        for s in locks(u) {
            let mut calls = s
                .host()
                .calls
                .iter()
                .map(|c| found.calls_at.get(&(c.file, c.end())));
            let awaited = calls.all(|call| {
                call.is_some_and(|call| {
                    let helper = found.helpers.get(&(call.name.clone(), call.method));
                    call.awaited && helper.is_some_and(|m| from_home(m))
                })
            });
            if awaited && from_home(&[s.span.file]) {
                seqs.push(s.seq);
            }
        }
        u.awaited_whole = seqs;
    }
}

/// What [`Graph::whole`] found for a name.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Whole {
    /// Every run is awaited to its end from these `main`s (their files).
    From(Vec<FileId>),
    No,
    /// It depends on calls of names not read yet.
    Unknown,
}

impl Graph {
    /// Whether every run of functions named `name` is awaited to its end (see the module):
    /// methods (`method`) are called through any site of the name, free functions only
    /// through paths (`name(..)`, `module::name(..)`), never as `x.name(..)`.
    pub(super) fn whole(&self, name: &str, method: bool, ask: &mut Ask) -> Whole {
        let key = (name.to_string(), method);
        if let Some(known) = ask.whole.get(&key) {
            return known.clone();
        }
        // A call cycle decides nothing: the name's other callers do (the entry is in progress
        // while it is asked). A name called only on a cycle has no `main` to run it.
        ask.whole.insert(key.clone(), Whole::From(Vec::new()));
        let out = self.whole_uncached(name, method, ask);
        ask.whole.insert(key, out.clone());
        out
    }

    fn whole_uncached(&self, name: &str, method: bool, ask: &mut Ask) -> Whole {
        let key = ((name.to_string(), None), None);
        match ask.unread(&key.0) {
            Some(Answer::Unknown) => return Whole::Unknown,
            Some(_) => return Whole::No,
            None => {}
        }
        let (mut mains, mut unknown, mut called) = (Vec::new(), false, false);
        for site in self.calls_of(&key).filter(|s| method || !s.method) {
            called = true;
            let Some(caller) = site.caller.filter(|_| site.awaited) else {
                return Whole::No;
            };
            let caller = &self.fns[caller];
            if caller.name == "main" {
                mains.push(caller.file);
                continue;
            }
            match self.whole(&caller.name, caller.method, ask) {
                Whole::From(m) => mains.extend(m),
                Whole::No => return Whole::No,
                Whole::Unknown => unknown = true,
            }
        }
        match (called, unknown) {
            (false, _) => Whole::No,
            (true, true) => Whole::Unknown,
            (true, false) => {
                mains.sort_unstable();
                mains.dedup();
                Whole::From(mains)
            }
        }
    }

    /// Whether the function named `name` in `file` is a method (see [`Graph::whole`]).
    pub(super) fn is_method(&self, name: &str, file: FileId) -> bool {
        let fns = self.by_name.get(name).into_iter().flatten();
        fns.map(|&f| &self.fns[f])
            .any(|f| f.file == file && f.method)
    }
}
