//! Code that only runs of itself, or of code serialised with it, could race with.

use std::collections::{HashMap, HashSet};

use super::{Name, Program, Step, Unit};

/// Per table, the units that write it (by position in [`Program::units`]), each with the lock
/// it writes under (see [`super::Transaction::guard`]); one entry per unit and lock. And the
/// units (by address) with a transaction under a lock.
#[derive(Debug, Default)]
pub(super) struct Writers {
    by_table: HashMap<Name, Vec<(usize, Option<Name>)>>,
    guarded: HashSet<usize>,
}

impl Unit {
    /// This unit and `other` are one background job's (see [`Unit::job`]): the same unit, or
    /// units the same timer loop runs (its arms, its helpers), each awaited before the loop
    /// waits again, so they never run at once.
    pub fn same_job(&self, other: &Unit) -> bool {
        self.job.is_some() && (std::ptr::eq(self, other) || self.job == other.job)
    }
}

impl Program {
    /// Only code these steps are serialised with writes the tables they read or write, so no
    /// concurrent run races with them:
    /// - `unit` is a background job (see [`Unit::job`]) and no other unit writes those tables
    ///   but those the same timer loop runs (its other arms and helpers, each awaited before
    ///   the loop waits again): only another run of the job could, and txlint assumes one
    ///   process runs it;
    /// - or the steps run under one lock (an in-process one, or an application lease; see
    ///   [`super::Transaction::guard`]) and every write of those tables, in any unit, runs
    ///   under it too.
    pub fn alone<'s>(&self, unit: &Unit, steps: impl IntoIterator<Item = &'s Step>) -> bool {
        let writers = self.writers.get_or_init(|| writers(&self.units));
        let address = std::ptr::from_ref(unit) as usize;
        if unit.job.is_none() && !writers.guarded.contains(&address) {
            return false;
        }
        let steps: Vec<&Step> = steps.into_iter().collect();
        let guard = common_guard(unit, &steps);
        let tables = steps
            .iter()
            .flat_map(|s| s.facts.reads.iter().chain(&s.facts.writes));
        let mut by_job = unit.job.is_some();
        let mut by_guard = guard.is_some();
        for t in tables {
            for (u, g) in writers.by_table.get(&t.name).into_iter().flatten() {
                by_job &= unit.same_job(&self.units[*u]);
                by_guard &= g.as_deref() == guard;
            }
        }
        by_job || by_guard
    }

    /// Why steps that share a lock (see [`super::Transaction::guard`]) are not [`Program::alone`]:
    /// a write of a table they read or write that does not hold the lock, in another unit or
    /// in theirs. `None` when they share no lock or every write holds it.
    pub fn unguarded_write<'p>(&'p self, unit: &Unit, steps: &[&Step]) -> Option<&'p Step> {
        let guard = common_guard(unit, steps)?;
        let writers = self.writers.get_or_init(|| writers(&self.units));
        steps
            .iter()
            .flat_map(|s| s.facts.reads.iter().chain(&s.facts.writes))
            .find_map(|t| {
                let (u, g) = writers
                    .by_table
                    .get(&t.name)?
                    .iter()
                    .find(|(_, g)| g.as_deref() != Some(guard))?;
                self.units[*u]
                    .transactions
                    .iter()
                    .filter(|tx| tx.guard() == g.as_deref())
                    .flat_map(|tx| &tx.steps)
                    .find(|s| s.facts.writes.iter().any(|w| w.name == t.name))
            })
    }
}

/// The lock every one of `steps` runs under in `unit`, if they share one.
fn common_guard<'u>(unit: &'u Unit, steps: &[&Step]) -> Option<&'u str> {
    let guard_of = |s: &Step| {
        unit.transactions
            .iter()
            .find(|t| t.steps.iter().any(|x| std::ptr::eq(x, s)))
            .and_then(|t| t.guard())
    };
    let first = guard_of(steps.first()?)?;
    steps[1..]
        .iter()
        .all(|s| guard_of(s) == Some(first))
        .then_some(first)
}

fn writers(units: &[Unit]) -> Writers {
    let mut out = Writers::default();
    let by_table = &mut out.by_table;
    // A migration's own statements run once per database, before the code that uses it.
    for (i, u) in units.iter().enumerate().filter(|(_, u)| !u.runs_once()) {
        for t in &u.transactions {
            let guard = t.guard().map(Name::from);
            if guard.is_some() {
                out.guarded.insert(std::ptr::from_ref(u) as usize);
            }
            for w in t.steps.iter().flat_map(|s| &s.facts.writes) {
                let list = by_table.entry(w.name.clone()).or_default();
                if list.last() != Some(&(i, guard.clone())) {
                    list.push((i, guard.clone()));
                }
            }
        }
    }
    for list in by_table.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    out
}
