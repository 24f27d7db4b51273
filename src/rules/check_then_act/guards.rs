//! What protects a decision from changing before the write: a row or advisory lock held on
//! it, a unique key that refuses the write, a state transition the write re-checks.

use super::*;

/// Between the read and the write, on every path to the write, an insert of the checked key
/// that a unique key refuses and whose error leaves: the second run fails there (23505) and
/// never reaches the write (`INSERT INTO likes ..; UPDATE posts SET likes = likes + 1`).
/// `unique-violation-unhandled` says whether that failure is handled.
pub(super) fn refused_before(cx: &Context, unit: &Unit, r: &At, w: &At) -> bool {
    w.txn.steps.iter().any(|i| {
        let f = &i.facts;
        let Some(table) = f.writes.first().map(|t| t.name.as_str()) else {
            return false;
        };
        let leaves = match i.host.as_deref() {
            Some(h) => h.propagated,
            None => !unit.handlers.iter().any(|h| h.covers(i.seq)),
        };
        let key: Vec<&str> = f
            .inserts
            .iter()
            .filter(|(c, o)| {
                r.step
                    .facts
                    .filters
                    .iter()
                    .any(|p| p.column == *c && value_key(&p.value, r.step) == value_key(o, i))
            })
            .map(|(c, _)| c.as_str())
            .collect();
        (r.step.seq + 1..w.step.seq).contains(&i.seq)
            && f.kind == StmtKind::Insert
            && !f.on_conflict
            && leaves
            && w.step.branch.starts_with(&i.branch)
            && cx
                .program
                .schema(w.step.span.file)
                .unique_within(table, &key)
                .is_some()
    })
}

/// A state transition decided on a read of the state: the read (no aggregate: those decide
/// as counts) names its columns and looks one row up by key (`SELECT status FROM orders WHERE
/// id = $1`), and the write, in an arm taken on what it read, sets one of those columns on the
/// same row without testing it (`UPDATE orders SET status = 'paid' WHERE id = $1`). Two runs
/// both see the old state and both act. The column; none when the write tests it
/// (optimistic), takes a value computed from the read (`lost-update`'s finding), the read
/// reads `*` (what was decided on is not known), or the row is locked again before the write
/// (`SELECT .. FOR UPDATE` of the same key in its transaction: the write acts on what that
/// read found).
pub(super) fn transition<'s>(
    flow: &Flow,
    r: &'s Step,
    wi: usize,
    table: &str,
) -> Option<Transition<'s>> {
    let At { txn, step: w, .. } = flow.steps[wi];
    let (rf, wf) = (&r.facts, &w.facts);
    if wf.kind != StmtKind::Update
        || !rf.extra().aggregates.is_empty()
        || !rf.reads.iter().any(|t| t.name == table)
        || rf.columns.iter().any(|c| c.as_str() == "*")
        || !same_key(r, w)
    {
        return None;
    }
    let computed = wf
        .sets
        .iter()
        .map(|s| &s.value)
        .chain(wf.filters.iter().map(|p| &p.value))
        .any(|o| flow.flows_from(o, r, wi));
    let relocked = txn.steps.iter().any(|g| {
        (r.seq + 1..w.seq).contains(&g.seq)
            && g.facts.row_locks.iter().any(RowLock::exclusive)
            && g.facts.reads.iter().any(|t| t.name == table)
            && same_key(g, w)
    });
    if computed || relocked {
        return None;
    }
    let c = wf.sets.iter().find_map(|s| {
        rf.columns
            .iter()
            .find(|c| **c == s.column && !rf.filters.iter().any(|p| p.column == s.column))
    })?;
    if wf.filters.iter().any(|p| p.column == *c) {
        return None;
    }
    // Other conditions in the write: an ordering of the state itself (`state < 'succeeded'`)
    // lets more than the value read through, when the state is set to a value of its own (not
    // `available = available - $1 .. AND available >= $1`, whose test is the decision).
    // `state <> 'done'` is often the very test the decision made, and is left alone.
    let compared = &wf.extra().compared;
    let set_to_value = wf
        .sets
        .iter()
        .any(|s| s.column == *c && s.value.idents.iter().all(|i| is_var(i, w)));
    if wf.other_conditions
        && (compared.is_empty() || compared.iter().any(|o| o.as_ref() != Some(c)) || !set_to_value)
    {
        return None;
    }
    Some(Transition {
        column: c.as_str(),
        weaker: wf.other_conditions,
    })
}

/// See [`transition`].
#[derive(Clone, Copy)]
pub(super) struct Transition<'s> {
    /// The state column.
    pub(super) column: &'s str,
    /// The write tests it, but with a comparison that more states than the one read pass.
    pub(super) weaker: bool,
}

/// Some `WHERE` condition of `a` and one of `b` test the same column against the same value:
/// the two are about the same row (or rows).
pub(super) fn same_key(a: &Step, b: &Step) -> bool {
    a.facts.filters.iter().any(|p| {
        b.facts
            .filters
            .iter()
            .any(|q| q.column == p.column && value_key(&q.value, b) == value_key(&p.value, a))
    })
}

/// `g`, earlier in the write's transaction, serialises every run of this code before the read:
/// it locks the rows the read decides on, or takes an exclusive row lock (a `FOR UPDATE`, an
/// `UPDATE`) on a guard row whose key is a constant or one the read's predicate is about, so two
/// runs that could disagree wait for each other.
pub(super) fn guards(g: &Step, r: &Step) -> bool {
    let gf = &g.facts;
    let same_rows = !gf.row_locks.is_empty()
        && gf
            .reads
            .iter()
            .any(|t| r.facts.reads.iter().any(|x| x.name == t.name));
    let exclusive = gf.row_locks.iter().any(RowLock::waits_exclusive)
        || matches!(gf.kind, StmtKind::Update | StmtKind::Delete);
    let checked: Vec<String> = r
        .facts
        .filters
        .iter()
        .map(|p| value_key(&p.value, r))
        .collect();
    let keyed = !gf.filters.is_empty()
        && gf.filters.iter().all(|p| {
            (p.value.params.is_empty() && !p.value.idents.iter().any(|i| is_var(i, g)))
                || checked.contains(&value_key(&p.value, g))
        });
    same_rows || (exclusive && keyed)
}

/// The read's keys were all read through a row the transaction holds already (the crate row
/// it updated, then the count of that crate's versions by the id the update returned): two
/// runs on one parent wait there, and the second reads after the first committed.
pub(super) fn keyed_by_held_row(tx: &Transaction, r: &Step) -> bool {
    let f = &r.facts;
    // Constants pin nothing that varies; a variable is not followed.
    if f.filters
        .iter()
        .any(|p| p.value.idents.iter().any(|i| is_var(i, r)))
    {
        return false;
    }
    let params: Vec<usize> = f
        .filters
        .iter()
        .flat_map(|p| p.value.params.clone())
        .collect();
    let keys: Vec<&Input> = r
        .host()
        .inputs
        .iter()
        .filter(|i| params.contains(&i.param))
        .collect();
    !params.is_empty()
        && params.iter().all(|p| keys.iter().any(|i| i.param == *p))
        && from_held_rows(&tx.steps, r.seq, &keys)
}

/// PL/pgSQL's form of [`keyed_by_held_row`]: the read is keyed by a variable (`WHERE
/// consumer_id = v_consumer`) whose value comes only from rows the transaction holds
/// exclusively (`SELECT id INTO v_consumer .. FOR UPDATE`, `UPDATE .. RETURNING id INTO ..`).
/// Two runs that could disagree test the same value, so they meet at that row first. One such
/// conjunct is enough: every row the read decides on has that value.
pub(super) fn keyed_by_held_var(flow: &Flow, ri: usize, tx: &Transaction) -> bool {
    let r = flow.steps[ri].step;
    let holds = |seq: &usize| {
        tx.steps.iter().any(|s| {
            s.seq == *seq
                && s.seq < r.seq
                && (matches!(s.facts.kind, StmtKind::Update | StmtKind::Insert)
                    || s.facts.row_locks.iter().any(RowLock::waits_exclusive))
        })
    };
    r.facts.filters.iter().any(|p| {
        let v = &p.value;
        let [var] = v.idents.as_slice() else {
            return false;
        };
        let origins = flow.origins_of(ri, var.split('.').next().unwrap_or(var));
        v.params.is_empty() && is_var(var, r) && !origins.is_empty() && origins.iter().all(holds)
    })
}

/// The `NOT EXISTS` of an insert compares with parameters, literals or the unit's variables:
/// one key per run. A column of another query (`WHERE name = s.name` over a set) is not.
pub(super) fn checks_one_key_per_run(e: &crate::model::Extra) -> bool {
    e.absent
        .iter()
        .flat_map(|(_, by)| by)
        .all(|b| e.uses.contains(b))
}

/// An advisory lock serialises a check when two runs whose checks can see each other's rows
/// take the same key: a constant key (one lock for every run), or a key made only of values
/// the read's `WHERE` pins by equality (`pg_advisory_xact_lock(hashtext($1))` before `WHERE
/// email = $1`). A key on `id` does not cover `WHERE id = $1 OR token = $2`: two runs with
/// different ids and one token both pass. A key made of values the read does not use at all
/// is about something txlint cannot see, and is taken to cover it (nothing is guessed).
pub(super) fn covers(lock: &AdvisoryCall, lock_step: &Step, read: &Step) -> bool {
    let key = text_inputs(&lock.key, lock_step);
    if key.is_empty() {
        return true;
    }
    let pinned: Vec<String> = read
        .facts
        .filters
        .iter()
        .flat_map(|p| operand_inputs(&p.value, read))
        .collect();
    if key.iter().all(|k| pinned.contains(k)) {
        return true;
    }
    let mut used = pinned;
    if let Some(c) = &read.facts.extra().condition {
        used.extend(operand_inputs(c, read));
    }
    !key.iter().any(|k| used.contains(k))
}
