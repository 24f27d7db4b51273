//! Routine calls: a statement that calls a function or procedure the run defines
//! (`PERFORM debit(src, amount)`, `SELECT transfer($1, $2)`, `CALL p(..)`) runs that
//! routine's statements inside its own transaction, before its own work. They are copied into
//! the caller's transaction there, the routine's parameters replaced by the call's arguments
//! and its local variables renamed apart (`debit$v`), so every rule sees what the caller's
//! transaction does.
//!
//! Triggers are calls too: `CREATE TRIGGER .. BEFORE|AFTER INSERT|UPDATE|DELETE ON t ..
//! EXECUTE FUNCTION f()` runs `f` inside every such statement on `t`, before the row is
//! written (its conditional `RAISE` or `RETURN` an exit that can refuse the row, taken on the
//! reads it tests) or after. In a row trigger `NEW.c` is the value the statement writes to `c`
//! (inserted or assigned), `OLD.c` the value its `WHERE` selects the row by.
//!
//! What is copied, and what is not (precision first):
//! - only a routine with one definition of that name in the run, whose body is one
//!   transaction (a procedure that commits is not);
//! - the body's statements with their branch arms: a statement inside `IF`, `CASE` or a loop
//!   is copied into an arm of the caller's of its own, so the arms of one `IF` stay
//!   alternatives there too (its conditions are not copied: the caller does not know which arm
//!   runs); a trigger's arms for other events (`IF TG_OP = 'INSERT' THEN`) are not copied;
//! - calls by position (named arguments are not read), nested up to [`DEPTH`] levels, never a
//!   routine inside itself; at most [`MAX_COPIED`] statements per caller transaction.
//!
//! A copied statement keeps its own span (in the routine's body) and lists the call among its
//! call sites ([`Host::calls`]), so a finding shows both, and repeats from several callers
//! merge into one.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;

use super::*;

mod copy;
use copy::copy;

/// Calls followed inside called routines.
pub const DEPTH: usize = 4;

/// Statements copied into one transaction from the routines it calls.
pub const MAX_COPIED: usize = 1_000;

/// Routines by unqualified name and number of parameters.
type Index = HashMap<(String, usize), usize>;

/// A routine that calls can be followed into: its parameters and its body, calls expanded.
struct Callee<'a> {
    name: String,
    params: Vec<Name>,
    /// The routine's own statements borrowed, those of the routines it runs copied; each
    /// one's branch is its path among the routine's arms (and fresh ones for the copies).
    body: Vec<Cow<'a, Step>>,
    /// For each statement of `body`, its position in the routine (for a statement copied from
    /// a call, the call's).
    orig: Vec<usize>,
    /// The routine's exits that leave on a decision (`IF n >= cap THEN RAISE ..`, `RETURN
    /// NULL`), with the positions of the reads they are taken on, and whether they leave with
    /// an error: in a `BEFORE` trigger they refuse the row.
    refusals: Vec<(Span, Vec<usize>, bool)>,
    /// Groups of alternative arms among the paths of `body`.
    choices: Vec<Vec<usize>>,
    /// The paths of `body` use arm numbers below this.
    arms: usize,
    /// Arms that run only for some trigger events.
    events: Vec<(usize, TriggerEvents)>,
    /// Arms, and the body after a position, that run only when an `UPDATE` changes one of
    /// these columns (see [`Unit::change_arms`], [`Unit::changed_after`]).
    change_arms: Vec<(usize, Vec<Name>)>,
    changed_after: Option<(usize, Vec<Name>)>,
}

impl Callee<'_> {
    /// Statement `k` of the body runs when the routine is fired by `firing`: no arm on its path
    /// is for other events only, or needs a column changed that the `UPDATE` does not set.
    fn runs_for(&self, k: usize, firing: &Facts) -> bool {
        let b = &self.body[k];
        let set = set_columns(firing);
        let unset = |cols: &[Name]| set.as_ref().is_some_and(|s| !sets_one_of(s, cols));
        b.branch.iter().all(|a| {
            self.events
                .iter()
                .filter(|(arm, _)| arm == a)
                .all(|(_, e)| e.has(firing.kind).unwrap_or(true))
                && !self.change_arms.iter().any(|(arm, c)| arm == a && unset(c))
        }) && !self
            .changed_after
            .as_ref()
            .is_some_and(|(at, c)| self.orig[k] > *at && unset(c))
    }
}

/// One of `cols` is among the columns set (names compared as SQL folds unquoted ones).
fn sets_one_of(set: &[&str], cols: &[Name]) -> bool {
    cols.iter()
        .any(|c| set.iter().any(|s| s.eq_ignore_ascii_case(c)))
}

/// The columns an `UPDATE` sets, when they are known (a parsed statement).
fn set_columns(f: &Facts) -> Option<Vec<&str>> {
    (f.kind == StmtKind::Update && f.parsed && !f.sets.is_empty())
        .then(|| f.sets.iter().map(|s| s.column.as_str()).collect())
}

/// What runs around one statement: routines it calls and triggers on what it writes.
#[derive(Default)]
struct Around {
    before: Vec<Step>,
    after: Vec<Step>,
    /// Decisions of `BEFORE` triggers that can refuse the statement: where, the copies in
    /// `before` (by index) they are taken on, and whether the refusal is an error.
    refusals: Vec<(Span, Vec<usize>, bool)>,
    /// Groups of alternative arms of the copies (numbered apart from the caller's own).
    choices: Vec<Vec<usize>>,
}

struct Expander<'a> {
    units: &'a [Unit],
    index: Index,
    triggers: Vec<&'a Trigger>,
    callees: HashMap<usize, Callee<'a>>,
}

/// Copy the statements of called routines, and of triggers on the tables written, into every
/// unit's transactions.
/// A trigger function's reads of its transition tables (`REFERENCING OLD TABLE AS o`) are of
/// the firing statement's own rows, which no other transaction can see or change: they are not
/// reads of a table of the database, and are dropped before the bodies are inlined.
pub fn drop_transition_reads(units: &mut [Unit], triggers: &[Trigger]) {
    for t in triggers.iter().filter(|t| !t.transition.is_empty()) {
        let function = unqualified(&t.function);
        for unit in units.iter_mut().filter(|u| {
            u.kind == UnitKind::Routine && u.name.as_deref().map(unqualified) == Some(function)
        }) {
            for step in unit.transactions.iter_mut().flat_map(|x| &mut x.steps) {
                step.facts.reads.retain(|r| !t.transition.contains(&r.name));
            }
        }
    }
}

/// The write gives a column a literal value other than the one the trigger's `WHEN` requires
/// of the new row (`SET status = 'failed'` against `WHEN (NEW.status = 'completed')`): the
/// trigger does not fire for it.
fn excluded_by_when(t: &Trigger, f: &Facts) -> bool {
    let given = f
        .sets
        .iter()
        .map(|s| (&s.column, &s.value))
        .chain(f.inserts.iter().map(|(c, o)| (c, o)));
    given.into_iter().any(|(c, o)| {
        let literal = o.params.is_empty() && o.idents.is_empty() && o.text.starts_with('\'');
        literal
            && t.requires
                .iter()
                .any(|(col, want)| col == c && want.as_str() != o.text.as_str())
    })
}

pub fn inline(units: &mut [Unit], triggers: &[Trigger]) {
    // By name and number of parameters (overloads differ in it); a name defined twice alike
    // is not followed.
    let mut by_name: HashMap<(&str, usize), Option<usize>> = HashMap::new();
    for (i, u) in units.iter().enumerate() {
        if u.kind == UnitKind::Routine
            && u.transactions.len() == 1
            && let Some(name) = u.name.as_deref()
        {
            by_name
                .entry((unqualified(name), u.params.len()))
                .and_modify(|e| *e = None)
                .or_insert(Some(i));
        }
    }
    let index: Index = by_name
        .into_iter()
        .filter_map(|((n, k), i)| Some(((n.to_string(), k), i?)))
        .collect();
    if index.is_empty() {
        return;
    }
    // A later `CREATE TRIGGER` of the same name on the same table replaces an earlier one.
    let mut live: Vec<&Trigger> = Vec::new();
    for t in triggers {
        live.retain(|l| !(l.table == t.table && l.function == t.function));
        live.push(t);
    }
    let mut x = Expander {
        units,
        index,
        triggers: live,
        callees: HashMap::new(),
    };
    // In unit order: a ring of calls is cut where the walk meets it again, so the order decides
    // which copies hold what, and must not be the hash map's.
    let mut all: Vec<usize> = x.index.values().copied().collect();
    all.sort_unstable();
    for i in all {
        x.expand(i, &mut Vec::new());
    }
    let mut plans = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let mut plan: Vec<(usize, usize, Around)> = Vec::new();
        let arms = Cell::new(next_arm(unit));
        for (t, tx) in unit.transactions.iter().enumerate() {
            let mut budget = MAX_COPIED;
            for (s, step) in tx.steps.iter().enumerate() {
                let around = x.around(step, &[i], true, &arms);
                let n = around.before.len() + around.after.len();
                if n == 0 || n > budget {
                    continue;
                }
                budget -= n;
                plan.push((t, s, around));
            }
        }
        plans.push((plan, arms.get()));
    }
    drop(x);
    for (unit, (plan, arms)) in units.iter_mut().zip(plans) {
        if !plan.is_empty() {
            splice(unit, plan, arms);
        }
    }
}

impl Expander<'_> {
    fn callee(&self, call: &RoutineCall) -> Option<usize> {
        self.index
            .get(&(call.name.to_string(), call.args.len()))
            .copied()
    }

    /// The body of routine `i` as its callers run it: its statements, each with what runs
    /// around it.
    fn expand(&mut self, i: usize, stack: &mut Vec<usize>) {
        if self.callees.contains_key(&i) || stack.contains(&i) || stack.len() >= DEPTH {
            return;
        }
        stack.push(i);
        let units = self.units;
        let unit = &units[i];
        let mut body = Vec::new();
        let mut orig = Vec::new();
        let mut choices = unit.choices.clone();
        let arms = Cell::new(next_arm(unit));
        for step in unit.transactions.iter().flat_map(|t| &t.steps) {
            for r in self.needed(step) {
                self.expand(r, stack);
            }
            let around = self.around(step, stack, false, &arms);
            choices.extend(around.choices);
            orig.extend(std::iter::repeat_n(step.seq, around.before.len()));
            body.extend(around.before.into_iter().map(Cow::Owned));
            if acts(step) {
                orig.push(step.seq);
                body.push(Cow::Borrowed(step));
            }
            orig.extend(std::iter::repeat_n(step.seq, around.after.len()));
            body.extend(around.after.into_iter().map(Cow::Owned));
            if body.len() > MAX_COPIED {
                body.truncate(MAX_COPIED);
                orig.truncate(MAX_COPIED);
                break;
            }
        }
        let refusals = unit
            .exits
            .iter()
            .filter(|e| e.kind == ExitKind::Return && !e.branch.is_empty())
            .filter_map(|e| {
                let from: Vec<usize> = unit
                    .conditions
                    .iter()
                    .filter(|c| !c.failed && e.branch.contains(&c.branch))
                    .flat_map(|c| c.from.iter().copied())
                    .collect();
                (!from.is_empty()).then_some((e.span, from, e.fails))
            })
            .collect();
        stack.pop();
        self.callees.insert(
            i,
            Callee {
                name: unqualified(unit.name.as_deref().unwrap_or_default()).to_string(),
                params: unit.params.clone(),
                body,
                orig,
                refusals,
                choices,
                arms: arms.get(),
                events: unit.event_arms.clone(),
                change_arms: unit.change_arms.clone(),
                changed_after: unit.changed_after.clone(),
            },
        );
    }

    /// The routines `step` runs: those it calls and the triggers on what it writes.
    fn needed(&self, step: &Step) -> Vec<usize> {
        let calls = step
            .facts
            .extra()
            .calls
            .iter()
            .filter_map(|c| self.callee(c));
        let fired = self.fired(step).filter_map(|(t, _)| self.trigger_fn(t));
        calls.chain(fired).collect()
    }

    fn trigger_fn(&self, t: &Trigger) -> Option<usize> {
        self.index.get(&(t.function.to_string(), 0)).copied()
    }

    /// The triggers a write fires, each with whether it runs before the row is written.
    fn fired<'s>(&'s self, step: &'s Step) -> impl Iterator<Item = (&'s Trigger, bool)> + 's {
        let f = &step.facts;
        let table = f.writes.first().map(|t| t.name.as_str());
        self.triggers
            .iter()
            .filter(move |t| Some(t.table.as_str()) == table && t.events.has(f.kind) == Some(true))
            .filter(move |t| !excluded_by_when(t, f))
            .filter(move |t| {
                t.changes.is_empty() || set_columns(f).is_none_or(|s| sets_one_of(&s, &t.changes))
            })
            .map(|t| (*t, t.before))
    }

    /// What runs around `step`, from routines already expanded and not in `outside` (the
    /// routines being expanded, or the unit itself). `refusals`: also the decisions of its
    /// `BEFORE` triggers. The arms of each copy are numbered from `arms` on.
    fn around(&self, step: &Step, outside: &[usize], refusals: bool, arms: &Cell<usize>) -> Around {
        let mut a = Around::default();
        let ready = |r: usize| {
            (!outside.contains(&r))
                .then(|| self.callees.get(&r))
                .flatten()
        };
        // Fresh arm numbers for one copy of `callee`'s body, and its choices with them.
        let renumber = |a: &mut Around, callee: &Callee| {
            let base = arms.get();
            arms.set(base + callee.arms);
            a.choices.extend(
                callee
                    .choices
                    .iter()
                    .map(|g| g.iter().map(|x| x + base).collect()),
            );
            base
        };
        let fire = |a: &mut Around, before: bool| {
            for (t, b) in self.fired(step) {
                let Some(callee) = self.trigger_fn(t).and_then(ready).filter(|_| b == before)
                else {
                    continue;
                };
                let row = t.for_each_row.then_some(step);
                let start = a.before.len();
                let arm = renumber(a, callee);
                // Positions in the body of the statements that run for this event.
                let runs: Vec<usize> = (0..callee.body.len())
                    .filter(|&k| callee.runs_for(k, &step.facts))
                    .collect();
                let copies = runs
                    .iter()
                    .map(|&k| copy(&callee.body[k], callee, &[], row, step, arm));
                if before {
                    a.before.extend(copies);
                    if refusals {
                        for (span, from, fails) in &callee.refusals {
                            let at: Vec<usize> = runs
                                .iter()
                                .enumerate()
                                .filter(|(_, k)| from.contains(&callee.orig[**k]))
                                .map(|(n, _)| start + n)
                                .collect();
                            if !at.is_empty() {
                                a.refusals.push((*span, at, *fails));
                            }
                        }
                    }
                } else {
                    a.after.extend(copies);
                }
            }
        };
        fire(&mut a, true);
        for call in &step.facts.extra().calls {
            if let Some(callee) = self.callee(call).and_then(ready) {
                let arm = renumber(&mut a, callee);
                a.before.extend(
                    callee
                        .body
                        .iter()
                        .map(|b| copy(b, callee, &call.args, None, step, arm)),
                );
            }
        }
        fire(&mut a, false);
        a
    }
}

/// A statement a caller's rules can see: it touches a table or takes a lock, or assigns a
/// variable (data flow); a condition evaluated as `SELECT <expr>` does not.
fn acts(step: &Step) -> bool {
    let f = &step.facts;
    let e = f.extra();
    !f.reads.is_empty()
        || !f.writes.is_empty()
        || !f.row_locks.is_empty()
        || !e.advisory.is_empty()
        || e.table_lock.is_some()
        || !e.assigns.is_empty()
}

/// Put what runs around each planned statement before and after it, add the refusals of its
/// `BEFORE` triggers as exits between the two (each in an arm of its own, taken on the copied
/// reads), and renumber the unit's program order around them.
fn splice(unit: &mut Unit, plan: Vec<(usize, usize, Around)>, mut arm: usize) {
    // Positions added before and after each planned statement, by its position; a refusal
    // takes one more before it.
    let mut added: Vec<(usize, usize, usize)> = plan
        .iter()
        .map(|(t, s, a)| {
            let refusal = usize::from(!a.refusals.is_empty());
            let seq = unit.transactions[*t].steps[*s].seq;
            (seq, a.before.len() + refusal, a.after.len())
        })
        .collect();
    added.sort_unstable();
    // Positions added at the planned statements before each one (prefix sums).
    let mut sums = Vec::with_capacity(added.len() + 1);
    sums.push(0);
    for &(_, before, after) in &added {
        sums.push(sums.last().copied().unwrap_or(0) + before + after);
    }
    // Where an original position moves: after everything added at earlier statements, and
    // after what its own statement gets before it.
    let map = |seq: usize| -> usize {
        let k = added.partition_point(|&(at, ..)| at < seq);
        let own = added.get(k).filter(|a| a.0 == seq).map_or(0, |a| a.1);
        seq + sums[k] + own
    };
    for exit in &mut unit.exits {
        exit.seq = map(exit.seq);
        exit.owner = exit.owner.map(map);
    }
    for (exit, until) in &mut unit.frame_exits {
        exit.seq = map(exit.seq);
        exit.owner = exit.owner.map(map);
        // The end of a frame is no statement: what the next one gets before it stays outside.
        let k = added.partition_point(|&(at, ..)| at < *until);
        *until += sums[k];
    }
    for c in &mut unit.conditions {
        c.from.iter_mut().for_each(|s| *s = map(*s));
    }
    let mut plan = plan.into_iter().peekable();
    let mut exits = Vec::new();
    let mut conditions = Vec::new();
    for (t, tx) in unit.transactions.iter_mut().enumerate() {
        let old = std::mem::take(&mut tx.steps);
        for (s, mut step) in old.into_iter().enumerate() {
            let here = map(step.seq);
            let around = plan
                .next_if(|(pt, ps, _)| (*pt, *ps) == (t, s))
                .map(|p| p.2);
            let Around {
                before,
                after,
                refusals,
                choices,
            } = around.unwrap_or_default();
            unit.choices.extend(choices);
            let first = here - before.len() - usize::from(!refusals.is_empty());
            let copied: Vec<usize> = (first..first + before.len()).collect();
            for (k, mut c) in before.into_iter().enumerate() {
                c.seq = first + k;
                remap_inputs(&mut c, map);
                tx.steps.push(c);
            }
            for (span, from, fails) in refusals {
                let mut branch = step.branch.to_vec();
                branch.push(arm);
                conditions.push(Condition {
                    branch: arm,
                    from: from
                        .iter()
                        .filter_map(|&k| copied.get(k).copied())
                        .collect(),
                    failed: false,
                    presence: false,
                });
                exits.push(Exit {
                    seq: here - 1,
                    span,
                    owner: None,
                    branch: branch.into(),
                    kind: ExitKind::Return,
                    fails,
                });
                arm += 1;
            }
            step.seq = here;
            remap_inputs(&mut step, map);
            tx.steps.push(step);
            for (k, mut c) in after.into_iter().enumerate() {
                c.seq = here + 1 + k;
                remap_inputs(&mut c, map);
                tx.steps.push(c);
            }
        }
    }
    unit.exits.extend(exits);
    unit.exits.sort_by_key(|e| e.seq);
    unit.conditions.extend(conditions);
}

/// A branch arm number no step, exit, condition or loop of the unit uses yet.
fn next_arm(unit: &Unit) -> usize {
    let steps = unit
        .transactions
        .iter()
        .flat_map(|t| &t.steps)
        .flat_map(|s| s.branch.iter().copied());
    let exits = unit.exits.iter().flat_map(|e| e.branch.iter().copied());
    let rest = unit
        .conditions
        .iter()
        .map(|c| c.branch)
        .chain(unit.loops.iter().map(|l| l.branch))
        .chain(unit.choices.iter().flatten().copied());
    steps.chain(exits).chain(rest).max().map_or(0, |m| m + 1)
}

fn remap_inputs(step: &mut Step, map: impl Fn(usize) -> usize) {
    if let Some(host) = step.host.as_mut() {
        for i in &mut host.inputs {
            i.from.iter_mut().for_each(|s| *s = map(*s));
            i.through.iter_mut().for_each(|(s, _)| *s = map(*s));
        }
    }
}
