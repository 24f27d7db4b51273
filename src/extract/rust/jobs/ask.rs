//! The questions asked of the call graph: whether a function only a timer loop runs, whether
//! it runs one at a time, and where it is called from (see the module above).

use std::collections::{HashMap, HashSet};

use super::Key;
use super::scan::{Func, Graph, Site, TimerLoop};
use super::whole::Whole;
use crate::source::{FileId, Span};

/// A function asked about, and the type of its `impl` (see [`Graph::answers`]).
pub(super) type Asked = (Key, Option<u32>);

impl Graph {
    /// The timer loop that alone runs functions named `name` (see [`Ask`]).
    pub(super) fn job(&self, name: &Asked, ask: &mut Ask) -> Answer {
        if let Some(known) = ask.job.get(name) {
            return *known;
        }
        // A name on a call cycle is no job (the entry is in progress while it is asked).
        ask.job.insert(name.clone(), Answer::No);
        let out = self.job_uncached(name, ask);
        ask.job.insert(name.clone(), out);
        out
    }

    fn job_uncached(&self, name: &Asked, ask: &mut Ask) -> Answer {
        if let Some(unread) = ask.unread(&name.0) {
            return unread;
        }
        if self.drains(&name.0.0) {
            return Answer::No;
        }
        let mut out = None;
        for site in self.calls_of(name) {
            let found = match (site.concurrent, site.timer, site.caller) {
                (true, ..) => Answer::No,
                (false, Some(t), Some(c)) => match self.once(&self.key(c), ask) {
                    Answer::Yes(_) => Answer::Yes(Some(t)),
                    other => other,
                },
                (false, Some(t), None) => Answer::Yes(Some(t)),
                (false, None, Some(c)) => match self.lead_of(c, site) {
                    Some(t) => match self.once(&self.key(c), ask) {
                        Answer::Yes(_) => Answer::Yes(Some(t)),
                        other => other,
                    },
                    None => self.job(&self.key(c), ask),
                },
                (false, None, None) => Answer::No,
            };
            let both = out.map_or(found, |o: Answer| o.and(found));
            if both == Answer::No {
                return both;
            }
            out = Some(both);
        }
        // Never called: an entry point, no job.
        out.unwrap_or(Answer::No)
    }

    /// The timer loop of function `caller` (one that drains no channel) that `site` runs
    /// before, in the loop's own block, which runs nothing beside it (`warm_up().await; loop
    /// { tick; work().await }`, a closure bound there and called before and in the loop): if
    /// `caller` runs one at a time, the site's runs and the loop's follow one another.
    fn lead_of(&self, caller: usize, site: &Site) -> Option<Span> {
        let f = &self.fns[caller];
        let mut loops = f.loops.iter().filter(|_| !f.drains);
        loops.find(|l| l.before(site.at)).map(|l| l.at)
    }

    /// Functions named `name` run one at a time: no path from a function nothing calls
    /// starts them side by side.
    pub(super) fn once(&self, name: &Asked, ask: &mut Ask) -> Answer {
        // A binary's entry: the process runs it once.
        if name.0.0 == "main" {
            return Answer::Yes(None);
        }
        if let Some(known) = ask.once.get(name) {
            return *known;
        }
        if let Some(unread) = ask.unread(&name.0) {
            return unread;
        }
        ask.once.insert(name.clone(), Answer::Yes(None));
        let mut out = Answer::Yes(None);
        for s in self.calls_of(name) {
            let found = match (s.concurrent, s.caller) {
                (true, _) => Answer::No,
                (false, None) => Answer::Yes(None),
                (false, Some(c)) => self.once(&self.key(c), ask),
            };
            out = out.and(found);
            if out == Answer::No {
                break;
            }
        }
        ask.once.insert(name.clone(), out);
        out
    }

    /// Where functions named `name.0.0` are called or passed on, outside test code, in
    /// packages that can call the one of package `name.0.1` (see [`Graph::may_call`]), by
    /// calls it answers (see [`Graph::answers`]).
    pub(super) fn calls_of<'a>(&'a self, name: &'a Asked) -> impl Iterator<Item = &'a Site> {
        self.reaching(name).filter(|s| !s.test)
    }

    /// [`Graph::calls_of`], test code's included.
    fn reaching<'a>(&'a self, name: &'a Asked) -> impl Iterator<Item = &'a Site> {
        let sites = self.sites.get(&name.0.0).into_iter().flatten();
        sites.filter(move |s| {
            let from = self.package_of(s.at.file);
            self.may_call(&name.0, from) && self.answers(name, s.qualifier)
        })
    }

    /// Whether the function asked about, a method of type `owner`'s `impl` (none: any of its
    /// name), answers a path call qualified by type `qualifier` (`Metrics::start(..)` is no
    /// call of `Collector::start`): yes unless both are known and differ, or when it is a
    /// trait's method (called through the trait's name too).
    fn answers(&self, ((name, of), owner): &Asked, qualifier: Option<u32>) -> bool {
        let (Some(owner), Some(q)) = (*owner, qualifier) else {
            return true;
        };
        let fns = self.named(name);
        let mut mine = fns.filter(|f| f.owner == Some(owner) && self.package_of(f.file) == *of);
        owner == q || mine.any(|f| f.dispatched)
    }

    /// Who calls the function `name` declared within `unit` (a unit's span): calls or
    /// mentions (see [`Graph::calls_of`]) in production code, only in test code, or none; a
    /// trait's method, a `main` or one whose declaration was not read has callers unseen.
    pub(super) fn callers(&self, name: &Key, unit: Span) -> Callers {
        let Some(f) = self.named(&name.0).find(|f| unit.contains(f.at)) else {
            return Callers::Some;
        };
        if f.dispatched || f.name == "main" {
            return Callers::Some;
        }
        let asked = (name.clone(), f.owner);
        let mut out = Callers::None;
        for s in self.reaching(&asked) {
            if !s.test {
                return Callers::Some;
            }
            out = Callers::Tests;
        }
        out
    }

    /// The functions named `name` of the files scanned.
    fn named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Func> + use<'a> {
        let fns = self.by_name.get(name).into_iter().flatten();
        fns.map(|&f| &self.fns[f])
    }

    /// The package of a file scanned (none: of no package, or not scanned).
    fn package_of(&self, file: FileId) -> Option<usize> {
        self.package.get(&file).copied().flatten()
    }

    /// The type of the `impl` of the function `name` declared within `unit` (a unit's span).
    pub(super) fn owner_at(&self, name: &str, unit: Span) -> Option<u32> {
        let fns = self.named(name);
        fns.filter(|f| unit.contains(f.at)).find_map(|f| f.owner)
    }

    /// Whether code of package `from` can call the function `name.0` of package `name.1`:
    /// `from` is that package or depends on it; or the function is a trait's method there
    /// (the trait's package calls it), or none of that name is known there, or either has no
    /// package.
    pub(super) fn may_call(&self, (name, of): &Key, from: Option<usize>) -> bool {
        let Some(of) = *of else {
            return true;
        };
        let fns = self.named(name);
        let mut there = fns.filter(|f| self.package_of(f.file) == Some(of));
        let plain = there.next().is_some_and(|f| !f.dispatched) && there.all(|f| !f.dispatched);
        !plain || self.reach.sees(from, Some(of))
    }

    /// The function at `fns[f]` as it is asked about.
    fn key(&self, f: usize) -> Asked {
        let f = &self.fns[f];
        let package = self.package_of(f.file);
        ((f.name.clone(), package), f.owner)
    }

    /// The timer loops of functions that drain no channel.
    pub(super) fn loops(&self) -> Vec<TimerLoop> {
        let quiet = self.fns.iter().filter(|f| !f.drains);
        quiet.flat_map(|f| &f.loops).copied().collect()
    }

    pub(super) fn drains(&self, name: &str) -> bool {
        self.named(name).any(|f| f.drains)
    }
}

/// What a question about a name comes to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Answer {
    /// Yes (with the timer loop, for [`Graph::job`]).
    Yes(Option<Span>),
    No,
    /// It depends on calls of names not read yet ([`Ask::wanted`]).
    Unknown,
}

impl Answer {
    /// Both hold: no if either is no, else unknown if either is, else yes (with the first
    /// one's loop).
    fn and(self, other: Answer) -> Answer {
        match (self, other) {
            (Answer::No, _) | (_, Answer::No) => Answer::No,
            (Answer::Unknown, _) | (_, Answer::Unknown) => Answer::Unknown,
            (Answer::Yes(a), Answer::Yes(b)) => Answer::Yes(a.or(b)),
        }
    }
}

/// One round of questions over the files read so far.
#[derive(Default)]
pub(super) struct Ask<'a> {
    /// Names whose every mention was read.
    pub(super) read: Option<&'a HashSet<Key>>,
    /// Names with a mention that could not be read (see [`scan_mentions`]).
    pub(super) blind: Option<&'a HashSet<Key>>,
    /// Names to read next: their answer is [`Answer::Unknown`] until then.
    pub(super) wanted: Vec<Key>,
    pub(super) job: HashMap<Asked, Answer>,
    pub(super) once: HashMap<Asked, Answer>,
    pub(super) whole: HashMap<(String, bool), Whole>,
}

impl Ask<'_> {
    /// The answer for a name whose mentions are not all read: no for one that cannot be,
    /// unknown (and wanted) for one not read yet.
    pub(super) fn unread(&mut self, name: &Key) -> Option<Answer> {
        if self.blind.is_some_and(|b| b.contains(name)) {
            return Some(Answer::No);
        }
        if self.read.is_some_and(|r| r.contains(name)) {
            return None;
        }
        self.wanted.push(name.clone());
        Some(Answer::Unknown)
    }
}

/// Who calls a function (see [`Graph::callers`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Callers {
    None,
    Tests,
    Some,
}
