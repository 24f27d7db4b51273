//! Whether a write depends on a read: the decision it was taken on, the premise it changes,
//! the values it is given.

use super::*;

/// A read whose answer code decides on: an existence check, `count`, `max`, ....
/// A read of no table (`FROM unnest($1)`, a trigger's transition table, which holds the firing
/// statement's own rows) decides nothing another transaction can change.
pub(super) fn reads_shared(rf: &Facts) -> bool {
    !(rf.parsed && rf.reads.is_empty())
}

pub(super) fn is_decision(r: &At) -> bool {
    let rf = &r.step.facts;
    rf.kind == StmtKind::Select
        && reads_shared(rf)
        && !rf.extra().aggregates.is_empty()
        && !rf.modifies
}

/// A read of rows by key whose presence code may decide on (`fetch_optional` then `None =>`,
/// PL/pgSQL `IF NOT FOUND`). Only get-or-create counts (see [`finding`]).
pub(super) fn is_presence(r: &At) -> bool {
    let rf = &r.step.facts;
    rf.kind == StmtKind::Select
        && reads_shared(rf)
        && rf.extra().aggregates.is_empty()
        && !rf.modifies
        && rf.row_locks.is_empty()
        && !rf.filters.is_empty()
}

/// What the read decides with, for messages.
pub(super) fn what(r: &Step) -> String {
    let agg = &r.facts.extra().aggregates;
    if agg.is_empty() {
        "lookup (whether a row exists)".to_string()
    } else if agg.iter().any(|a| a == "exists") {
        "existence check".to_string()
    } else {
        format!("`{}`", agg.join("`, `"))
    }
}

/// The arms taken on each read: on any condition on it, and on one that tests what it read
/// (not only whether it found a row: PL/pgSQL `IF FOUND`, see [`Condition::presence`]).
#[derive(Default)]
pub(super) struct Decided {
    pub(super) any: Taken,
    pub(super) on_value: Taken,
}

/// Code in these branch arms (a step's or an exit's) runs only on a condition on the read's
/// value.
pub(super) fn taken_on(taken: &Taken, r: &Step, branch: &[usize]) -> bool {
    taken
        .get(&r.seq)
        .is_some_and(|arms| arms.iter().any(|a| branch.contains(a)))
}

/// How a write depends on a decision read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dependence {
    /// It writes a value computed from the read.
    Data,
    /// It inserts the very key the read checked (duplicate registration).
    Key,
    /// It runs in a branch arm taken on the read's value.
    Branch,
    /// It runs after a return taken on the read's value was not.
    Return,
}

/// How the write depends on the read, if it does. A decision is a branch on the value that
/// was read, never on whether the call succeeded: a `?` decides nothing.
pub(super) fn depends(
    unit: &Unit,
    flow: &Flow,
    taken: &Taken,
    r: &Step,
    wi: usize,
    table: &str,
) -> Option<Dependence> {
    let w = flow.steps[wi].step;
    let f = &w.facts;
    if f.operands().any(|o| flow.flows_from(o, r, wi)) {
        return Some(Dependence::Data);
    }
    // Duplicate registration: insert the very key that was checked.
    if inserts_checked_key(r, w, table) {
        return Some(Dependence::Key);
    }
    // The write is in a branch taken on the read's value, or comes after an exit taken on it
    // (`if taken { return ... }`, `IF n >= cap THEN RAISE ...`) and is about what it checked.
    if taken_on(taken, r, &w.branch) {
        return Some(Dependence::Branch);
    }
    if about(r, w, table) && returned_on(unit, taken, r, w) {
        return Some(Dependence::Return);
    }
    None
}

/// The write changes what the read decided on: it inserts into or deletes from a table the
/// read looked at, or sets a column the read's condition or answer is made of. Two runs that
/// both pass the check then each change its premise (duplicate registration, a cap exceeded,
/// write skew).
pub(super) fn changes_premise(r: &Step, w: &Step) -> bool {
    let rf = &r.facts;
    let wf = &w.facts;
    let read_table = |t: &TableRef| rf.reads.iter().any(|x| x.name == t.name);
    if !wf.writes.iter().any(read_table) {
        return false;
    }
    match wf.kind {
        StmtKind::Insert | StmtKind::Delete | StmtKind::Merge => true,
        StmtKind::Update => {
            let condition = rf.extra().condition.as_deref();
            let last = |i: &Name| i.rsplit('.').next().unwrap_or(i).to_ascii_lowercase();
            let columns: Vec<String> = rf
                .filters
                .iter()
                .map(|p| p.column.to_string())
                .chain(rf.columns.iter().map(|c| c.to_string()))
                .chain(
                    condition
                        .into_iter()
                        .flat_map(|c| c.idents.iter().map(last)),
                )
                .collect();
            columns.iter().any(|c| c == "*")
                || wf
                    .sets
                    .iter()
                    .any(|s| columns.iter().any(|c| *c == s.column))
        }
        _ => false,
    }
}

/// `SET n = n + 1`, `SET total = total - $1`: the write accumulates, so two runs that both act
/// on one decision count twice. The column is named bare or by its table (`f.n` in a routine
/// `f` is its parameter `n`).
pub(super) fn accumulates(w: &Step) -> bool {
    let table = w.facts.writes.first().map_or("", |t| t.name.as_str());
    w.facts.sets.iter().any(|s| {
        s.value.idents.iter().any(|i| {
            let (qualifier, column) = match i.rsplit_once('.') {
                Some((q, c)) => (Some(q.rsplit('.').next().unwrap_or(q)), c),
                None => (None, i.as_str()),
            };
            column.eq_ignore_ascii_case(&s.column)
                && qualifier.is_none_or(|q| q.eq_ignore_ascii_case(table))
                && !is_var(i, w)
        })
    })
}

/// Between the read and the write, a return in an arm taken on the read's value.
pub(super) fn returned_on(unit: &Unit, taken: &Taken, r: &Step, w: &Step) -> bool {
    unit.exits_between(r.seq, w.seq)
        .any(|e| e.kind == ExitKind::Return && taken_on(taken, r, &e.branch))
}

/// Every early return taken on `r` between it and `w` leaves with an error (`if found {
/// return Err(AlreadyExists) }`, `RAISE EXCEPTION`), and `w` is not in an arm taken on `r`.
pub(super) fn fails_when_found(unit: &Unit, taken: &Taken, r: &Step, w: &Step) -> bool {
    let mut exits = unit
        .exits_between(r.seq, w.seq)
        .filter(|e| e.kind == ExitKind::Return && taken_on(taken, r, &e.branch))
        .peekable();
    !taken_on(taken, r, &w.branch) && exits.peek().is_some() && exits.all(|e| e.fails)
}

/// The columns a write gives a value that is not a literal NULL (the inserted row's, or those
/// an `UPDATE` sets): what decides whether a partial unique key covers the row.
pub(super) fn given(w: &Step) -> Vec<&str> {
    written(w)
        .filter(|(_, o)| !o.text.eq_ignore_ascii_case("null"))
        .map(|(c, _)| c)
        .collect()
}

/// The columns a write gives a value, with the value: the inserted row's, then those an
/// `UPDATE` sets.
fn written(w: &Step) -> impl Iterator<Item = (&str, &Operand)> {
    let f = &w.facts;
    let inserts = f.inserts.iter().map(|(c, o)| (c.as_str(), o));
    inserts.chain(f.sets.iter().map(|s| (s.column.as_str(), &s.value)))
}

/// A partial index's test (printed, lower case) that every row `w` writes passes, for the
/// constant it gives the column: `not (platform = 'other')` or `platform <> 'other'` when it
/// writes `Platform::Thoth`, `platform = 'thoth'` when it writes that.
pub(super) fn passes(test: &str, w: &Step) -> bool {
    let test = test.trim();
    let (cmp, negated) = match test.strip_prefix("not (").and_then(|t| t.strip_suffix(')')) {
        Some(inner) => (inner, true),
        None => (test, false),
    };
    let (column, value, equal) = match (cmp.split_once(" <> "), cmp.split_once(" = ")) {
        (Some((c, v)), _) => (c, v, false),
        (None, Some((c, v))) => (c, v, true),
        _ => return false,
    };
    let column = unqualified(column);
    let value = Operand {
        text: value.trim().into(),
        ..Operand::default()
    };
    let written = written(w)
        .find(|(c, _)| *c == column)
        .and_then(|(_, o)| constant(o, w));
    let (Some(wanted), Some(written)) = (constant(&value, w), written) else {
        return false;
    };
    wanted != "null" && written != "null" && same_constant(&wanted, &written) == (equal != negated)
}

/// An existence check followed by an `UPDATE`/`DELETE` whose `WHERE` repeats every condition the
/// check tested: the write re-evaluates the predicate on the rows it touches (under READ
/// COMMITTED, against the latest version), so a stale answer makes it touch nothing rather than
/// the wrong rows. Counts and sums are not re-checked this way: their write skew stays.
pub(super) fn rechecks(r: &Step, w: &Step) -> bool {
    let rf = &r.facts;
    let wf = &w.facts;
    let tests = &rf.extra().tests;
    rf.extra().aggregates.iter().all(|a| a == "exists")
        && matches!(wf.kind, StmtKind::Update | StmtKind::Delete)
        && rf.parsed
        && !(rf.filters.is_empty() && tests.is_empty())
        && (!rf.other_conditions || !tests.is_empty())
        && tests.iter().all(|t| wf.extra().tests.contains(t))
        && rf.filters.iter().all(|p| {
            wf.filters
                .iter()
                .any(|q| q.column == p.column && value_key(&q.value, w) == value_key(&p.value, r))
        })
}

/// The write changes what the read's predicate is about: a row of the table it counted with
/// the key it checked, or the column it filtered on.
pub(super) fn about(r: &Step, w: &Step, table: &str) -> bool {
    if !r.facts.reads.iter().any(|t| t.name == table) {
        return false;
    }
    let checked = &r.facts.filters;
    if checked.is_empty() {
        return true;
    }
    let f = &w.facts;
    match f.kind {
        StmtKind::Insert => f
            .inserts
            .iter()
            .any(|(c, _)| checked.iter().any(|p| p.column == *c)),
        StmtKind::Update => {
            f.sets
                .iter()
                .any(|s| checked.iter().any(|p| p.column == s.column))
                || same_key(r, w)
        }
        _ => same_key(r, w),
    }
}

/// What makes a value differ between runs, comparable across statements: each `$n` as the host
/// value bound to it, each variable by name.
pub(super) fn operand_inputs(o: &Operand, step: &Step) -> Vec<String> {
    let params = o.params.iter().map(|&p| param_key(p, step));
    let vars = o
        .idents
        .iter()
        .filter(|i| is_var(i, step))
        .map(|i| i.to_ascii_lowercase().to_string());
    params.chain(vars).collect()
}

/// [`operand_inputs`] of an expression's text (an advisory lock's key arguments).
pub(super) fn text_inputs(text: &str, step: &Step) -> Vec<String> {
    let mut out = Vec::new();
    for w in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.')) {
        if let Some(n) = w.strip_prefix('$').and_then(|n| n.parse().ok()) {
            out.push(param_key(n, step));
        } else if !w.is_empty() && is_var(w, step) {
            out.push(w.to_ascii_lowercase());
        }
    }
    out
}

impl Dependence {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Dependence::Data => "it writes a value computed from it",
            Dependence::Key => "it inserts the key it checked",
            Dependence::Branch => "it runs under a condition on it",
            Dependence::Return => "it runs only when an early return on it was not taken",
        }
    }
}
