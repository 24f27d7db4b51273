//! Questions rules ask of a unit's steps in program order: which values are the same, which
//! variables carry a read's result.

use std::collections::HashMap;

use super::*;

/// A step with the transaction it runs in (`tx` indexes [`Unit::transactions`]).
#[derive(Clone, Copy, Debug)]
pub struct At<'u> {
    pub tx: usize,
    pub txn: &'u Transaction,
    pub step: &'u Step,
}

impl Unit {
    /// Every step with its transaction, in program order.
    pub fn ordered(&self) -> Vec<At<'_>> {
        let mut steps: Vec<At> = self
            .transactions
            .iter()
            .enumerate()
            .flat_map(|(tx, txn)| txn.steps.iter().map(move |step| At { tx, txn, step }))
            .collect();
        steps.sort_by_key(|a| a.step.seq);
        steps
    }
}

/// The tables a unit creates, in program order: where each is private (see
/// [`Created::private`]).
#[derive(Debug, Default)]
pub struct Created<'u> {
    /// The creating statement's `seq`, its transaction (index in the unit's), whether that is
    /// a transaction that can hold it back (not autocommit, not unknown), the table, temporary.
    tables: Vec<(usize, usize, bool, &'u str, bool)>,
}

impl<'u> Created<'u> {
    pub fn of(unit: &'u Unit) -> Self {
        let mut tables = Vec::new();
        for (tx, txn) in unit.transactions.iter().enumerate() {
            let holds = !txn.scope.is_autocommit() && txn.scope != Scope::Unknown;
            for step in &txn.steps {
                if let Some(c) = step.facts.extra().created.as_deref() {
                    tables.push((step.seq, tx, holds, c.0.as_str(), c.1));
                }
            }
        }
        tables.sort_unstable_by_key(|t| t.0);
        Created { tables }
    }

    /// No other transaction can see `table` at the statement `seq` of transaction `tx`: the unit
    /// created it before as a temporary table (its session's alone), or earlier in that same
    /// transaction, which has not committed.
    pub fn private(&self, tx: usize, seq: usize, table: &str) -> bool {
        let before = self.tables.iter().take_while(|t| t.0 < seq);
        before
            .filter(|t| t.3 == table)
            .any(|&(_, t, holds, _, temp)| temp || (holds && t == tx))
    }
}

/// Reads whose results a variable carries: at most this many, the latest kept.
const ORIGINS: usize = 32;

/// A unit's steps in program order with what the pairing rules look up, built once in time
/// linear in the steps: reads by table, and for each step, the reads its variables' values
/// come from (PL/pgSQL `INTO` targets and assignments, psql `\gset`).
pub struct Flow<'u> {
    pub steps: Vec<At<'u>>,
    /// Positions in `steps` of plain reads (`SELECT`s that write nothing), by table read.
    reads: HashMap<&'u str, Vec<usize>>,
    /// For each position: each variable the step uses, and the reads (by `seq`) whose results
    /// its value carries there.
    origins: Vec<Vec<(&'u str, Vec<usize>)>>,
    /// Positions in `steps` of the steps that call advisory-lock functions: few, and asked
    /// about for every read-write pair.
    advisory: Vec<usize>,
    /// Tables the unit creates (see [`Created`]).
    pub created: Created<'u>,
}

impl<'u> Flow<'u> {
    pub fn new(unit: &'u Unit) -> Self {
        let steps = unit.ordered();
        let mut reads: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut origins = Vec::with_capacity(steps.len());
        // The reads each variable's current value comes from.
        let mut current: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut advisory = Vec::new();
        for (i, a) in steps.iter().enumerate() {
            let f = &a.step.facts;
            if !f.extra().advisory.is_empty() {
                advisory.push(i);
            }
            if f.kind == StmtKind::Select && !f.modifies {
                for t in &f.reads {
                    reads.entry(t.name.as_str()).or_default().push(i);
                }
            }
            let used: Vec<(&str, Vec<usize>)> = f
                .extra()
                .uses
                .iter()
                .map(|u| {
                    (
                        u.as_str(),
                        current.get(u.as_str()).cloned().unwrap_or_default(),
                    )
                })
                .collect();
            if !f.extra().assigns.is_empty() {
                let mut from: Vec<usize> =
                    used.iter().flat_map(|(_, o)| o.iter().copied()).collect();
                // A read's result, or the rows a write returned (`RETURNING .. INTO`).
                if !f.reads.is_empty() || !f.writes.is_empty() {
                    from.push(a.step.seq);
                }
                from.sort_unstable();
                from.dedup();
                let keep = from.len().saturating_sub(ORIGINS);
                from.drain(..keep);
                for v in &f.extra().assigns {
                    current.insert(v.as_str(), from.clone());
                }
            }
            origins.push(used);
        }
        Flow {
            steps,
            reads,
            origins,
            advisory,
            created: Created::of(unit),
        }
    }

    /// Session advisory locks the unit holds from before `from` until `to` (by `seq`: taken on
    /// any of its sessions before `from`, with no unlock of the same key before `to`): every run
    /// of the code between is serialised on their keys, whichever connection runs it.
    pub fn session_locks_held(
        &self,
        from: usize,
        to: usize,
    ) -> impl Iterator<Item = (&'u AdvisoryCall, &'u Step)> + '_ {
        let calls = || {
            let steps = self.advisory.iter().map(|&i| self.steps[i].step);
            steps.flat_map(|s| s.facts.extra().advisory.iter().map(move |a| (a, s)))
        };
        calls()
            .take_while(move |(_, s)| s.seq < from)
            .filter(|(a, _)| a.takes_session_lock() && !a.shared)
            .filter(move |(a, s)| {
                !calls().any(|(x, u)| u.seq > s.seq && u.seq < to && x.releases(a))
            })
    }

    /// The position of the step with this `seq`.
    pub fn position(&self, seq: usize) -> Option<usize> {
        self.steps.binary_search_by_key(&seq, |a| a.step.seq).ok()
    }

    /// Positions of plain reads of `table` before position `before`, nearest first.
    pub fn reads_of(&self, table: &str, before: usize) -> impl Iterator<Item = usize> + '_ {
        let list = self.reads.get(table).map_or(&[][..], Vec::as_slice);
        let n = list.partition_point(|&i| i < before);
        list[..n].iter().rev().copied()
    }

    /// The reads (by `seq`) whose results the variables of the step at position `at` carry.
    pub fn var_origins(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        self.origins[at].iter().flat_map(|(_, o)| o.iter().copied())
    }

    /// The reads (by `seq`) whose results the variable `var` carries at position `at`: none
    /// when its value comes from no read (a parameter, a constant).
    pub fn origins_of(&self, at: usize, var: &str) -> &[usize] {
        self.origins[at]
            .iter()
            .find(|(u, _)| *u == var)
            .map_or(&[][..], |(_, o)| o.as_slice())
    }

    /// Does `o`, in the step at position `w`, carry data from the read `r`: a bound host value
    /// computed from its result, or a variable it filled (directly or through others)?
    pub fn flows_from(&self, o: &Operand, r: &Step, w: usize) -> bool {
        let ws = self.steps[w].step;
        o.params.iter().any(|p| {
            ws.host()
                .inputs
                .iter()
                .any(|i| i.param == *p && i.from.contains(&r.seq))
        }) || o.idents.iter().any(|ident| {
            let var = ident.split('.').next().unwrap_or(ident);
            self.origins[w]
                .iter()
                .any(|(u, from)| *u == var && from.contains(&r.seq))
        })
    }
}

impl Flow<'_> {
    /// The write at position `w` acts on what the read `r` returned: it writes a value
    /// computed from it, runs in a branch arm taken on its value, or runs after a return taken
    /// on its value was not (a `?` on the call's failure decides nothing).
    pub fn decided_by(&self, unit: &Unit, r: &Step, w: usize) -> bool {
        let ws = self.steps[w].step;
        let arms: Vec<usize> = unit
            .conditions
            .iter()
            .filter(|c| !c.failed && c.from.contains(&r.seq))
            .map(|c| c.branch)
            .collect();
        ws.facts.operands().any(|o| self.flows_from(o, r, w))
            || ws.branch.iter().any(|b| arms.contains(b))
            || unit
                .exits_between(r.seq, ws.seq)
                .any(|e| e.kind == ExitKind::Return && e.branch.iter().any(|b| arms.contains(b)))
    }
}

/// What a value is, comparable across statements: the host expression bound to a parameter,
/// or the SQL text (a literal, a variable).
pub fn value_key(o: &Operand, step: &Step) -> String {
    if !o.params.is_empty() {
        return o
            .params
            .iter()
            .map(|&p| param_key(p, step))
            .collect::<Vec<_>>()
            .join(",");
    }
    o.text.to_ascii_lowercase().to_string()
}

/// A value that is the same in every run, normalised (quotes and casts dropped, lower case): a
/// literal (`'active'`, `'Other'::platform`, `false`, `NULL` as `null`), or a bound host constant
/// (`Status::Active`, `"active"`, `None` as `null`); `None` for any other value.
pub fn constant(o: &Operand, step: &Step) -> Option<String> {
    let text = match o.params.as_slice() {
        [] if o.idents.is_empty() => o.text.to_string(),
        [p] if o.idents.is_empty() && o.text.trim() == format!("${p}") => {
            let input = step.host().inputs.iter().find(|i| i.param == *p)?;
            if !input.from.is_empty() {
                return None;
            }
            input.text.clone()
        }
        _ => return None,
    };
    let mut text = text.trim();
    // `'Other'::location_platform`: the literal, without its cast.
    if let Some((lit, ty)) = text.rsplit_once("'::")
        && text.starts_with('\'')
        && !ty.contains('\'')
    {
        text = &text[..lit.len() + 1];
    }
    let quoted = |q: char| text.len() >= 2 && text.starts_with(q) && text.ends_with(q);
    if quoted('\'') || quoted('"') {
        return Some(text[1..text.len() - 1].to_string());
    }
    let lower = text.to_ascii_lowercase();
    if text == "None" {
        return Some("null".into());
    }
    // An enum variant or a constant by its path.
    let variant = text.contains("::")
        && text
            .rsplit("::")
            .next()
            .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_uppercase()));
    let literal =
        matches!(lower.as_str(), "true" | "false" | "null") || lower.parse::<f64>().is_ok();
    (variant || literal).then_some(lower)
}

/// Whether two [`constant`]s name the same value, when one is a Rust enum variant and the other
/// the SQL label it is stored as (`LocationPlatform::Thoth` and `'Thoth'`, `ProjectMuse` and
/// `'project_muse'`): compared by letters and digits, case aside (a test of a partial index is
/// kept in lower case).
pub fn same_constant(a: &str, b: &str) -> bool {
    let label = |v: &str| -> String {
        let v = v.rsplit("::").next().unwrap_or(v);
        v.chars()
            .filter(|c| c.is_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    label(a) == label(b)
}

/// What the parameter `$p` of `step` is, comparable across statements: the host expression
/// bound to it, or `$p` itself.
pub fn param_key(p: usize, step: &Step) -> String {
    match step.host().inputs.iter().find(|i| i.param == p) {
        Some(i) => format!("host:{}", i.text),
        None => format!("${p}"),
    }
}

/// An identifier that names one of the step's variables (PL/pgSQL, psql `:v`), not a column.
pub fn is_var(ident: &str, step: &Step) -> bool {
    let first = ident.split('.').next().unwrap_or(ident);
    step.facts.extra().uses.iter().any(|u| u == first)
}

/// The row lock that a count or sum over a set relies on: a locking read of rows (not the very
/// rows counted) earlier in the same transaction, which an advisory lock, SERIALIZABLE or a
/// data-modifying statement does not make moot. `row-lock-predicate-gap` reports this shape at
/// the count; `check-then-act` leaves it to that rule, so one race gives one finding.
pub fn one_row_lock_before<'t>(tx: &'t Transaction, read: &Step) -> Option<&'t Step> {
    let rf = &read.facts;
    if rf.kind != StmtKind::Select
        || rf.modifies
        || !rf.row_locks.is_empty()
        || !rf.extra().aggregates.iter().any(|a| a != "exists")
        || matches!(tx.scope, Scope::Autocommit | Scope::Unknown)
        || tx.isolation == Isolation::Serializable
    {
        return None;
    }
    let keys = |s: &Step| -> Vec<(String, String)> {
        s.facts
            .filters
            .iter()
            .map(|p| (p.column.to_string(), value_key(&p.value, s)))
            .collect()
    };
    tx.steps.iter().find(|l| {
        let Some(lock) = l.facts.row_locks.first() else {
            return false;
        };
        let locked: Vec<&str> = l
            .facts
            .reads
            .iter()
            .filter(|t| lock.of.is_empty() || lock.of.iter().any(|o| *o == t.name))
            .map(|t| t.name.as_str())
            .collect();
        let same_set =
            rf.reads.iter().all(|t| locked.contains(&t.name.as_str())) && keys(read) == keys(l);
        let serialised = tx.isolation == Isolation::ReadCommitted
            && advisory_locks_before(tx, l.seq).next().is_some();
        l.seq < read.seq && !l.facts.modifies && !same_set && !serialised
    })
}

/// The write's key `wp` is that column of a value built from the read (`c.id`, where `c` came
/// from `r`'s rows): the same row, whatever the functions that sent the two statements call
/// its key.
pub fn field_of_read(wp: &Pred, w: &Step, r: &Step) -> bool {
    !wp.value.params.is_empty()
        && wp.value.params.iter().all(|p| {
            w.host()
                .inputs
                .iter()
                .any(|i| i.param == *p && i.from.contains(&r.seq) && i.is_field(&wp.column))
        })
}

/// The transaction-scoped advisory locks `tx` takes before `seq`, with their statements.
/// Every value of `inputs` was read through rows the transaction already holds, among the
/// statements of `steps` before position `upto` (see [`Step::seq`]), on every path: rows it locked (`FOR UPDATE`), updated or created, or rows read by values
/// read so (`UPDATE crates .. RETURNING id`, then the crate's versions by that id). Two runs
/// reach rows named so only through the same held row, and the second waits there (or, under
/// `SKIP LOCKED`, never gets it).
pub fn from_held_rows(steps: &[Step], upto: usize, inputs: &[&Input]) -> bool {
    fn held(steps: &[Step], upto: usize, seq: usize, depth: usize) -> bool {
        let Some(s) = steps.iter().find(|s| s.seq == seq && seq < upto) else {
            return false;
        };
        let f = &s.facts;
        // A row returned under `SKIP LOCKED` or `NOWAIT` is held as well: another run skips it
        // (or fails), and never reaches the rows named by it either.
        let locks = matches!(f.kind, StmtKind::Update | StmtKind::Insert)
            || f.row_locks.iter().any(RowLock::exclusive);
        let inputs: Vec<&Input> = s.host().inputs.iter().collect();
        locks
            || (depth < 4
                && f.kind == StmtKind::Select
                && all_held(steps, upto, &inputs, depth + 1))
    }
    fn all_held(steps: &[Step], upto: usize, inputs: &[&Input], depth: usize) -> bool {
        !inputs.is_empty()
            && inputs
                .iter()
                .all(|i| !i.from.is_empty() && i.from.iter().all(|&q| held(steps, upto, q, depth)))
    }
    all_held(steps, upto, inputs, 0)
}

/// Every row `step` writes or locks in `table` has a column equal to the key of a row the
/// transaction inserted earlier (`INSERT .. RETURNING id` with no `ON CONFLICT`, the value named
/// like a column of a unique key of that table). Until the transaction commits no other one
/// sees that row, so none knows the key and can hold or wait for these rows; a second insert
/// of the same key waits at the first insert, before any of them.
pub fn fresh_rows(schema: &schema::Schema, steps: &[Step], step: &Step, table: &str) -> bool {
    let f = &step.facts;
    let single =
        f.reads.iter().all(|t| t.name == table) && f.writes.iter().all(|t| t.name == table);
    let keyed: Vec<&Operand> = match f.kind {
        StmtKind::Insert if step.host().rows.is_none() => {
            f.inserts.iter().map(|(_, o)| o).collect()
        }
        StmtKind::Update | StmtKind::Delete | StmtKind::Select if single => {
            f.filters.iter().map(|p| &p.value).collect()
        }
        _ => Vec::new(),
    };
    let new_key = |i: &Input| {
        let column = i.text.rsplit('.').next().unwrap_or(&i.text);
        let returned = !i.from.is_empty()
            && i.from.iter().all(|&q| {
                steps.iter().any(|s| {
                    let sf = &s.facts;
                    s.seq == q
                        && q < step.seq
                        && sf.kind == StmtKind::Insert
                        && !sf.on_conflict
                        && sf
                            .writes
                            .first()
                            .is_some_and(|t| schema.in_unique_key(&t.name, column))
                })
            });
        returned || inserted_key(schema, steps, step, i)
    };
    keyed
        .into_iter()
        .any(|o| bare_input(step, o).is_some_and(new_key))
}

/// The host value `i` is a key this transaction made new before `step`, on every path to it:
/// generated in the host (`Uuid::new_v4()`), or stored by an earlier `INSERT` (no `ON
/// CONFLICT`) as the whole of a unique key of its table. No other transaction reaches rows by
/// a value it cannot know yet; one that passes the same value waits at that insert first, and
/// a deadlock there is the insert's, not these rows'.
pub fn inserted_key(schema: &schema::Schema, steps: &[Step], step: &Step, i: &Input) -> bool {
    let generated = ["new_v4()", "now_v7()", "new_v7()", "Ulid::new()"];
    if i.from.is_empty() && generated.iter().any(|g| i.text.ends_with(g)) {
        return true;
    }
    !i.text.is_empty()
        && steps.iter().any(|s| {
            let sf = &s.facts;
            let Some(table) = sf.writes.first() else {
                return false;
            };
            s.seq < step.seq
                && step.branch.starts_with(&s.branch)
                && sf.kind == StmtKind::Insert
                && !sf.on_conflict
                && s.host().rows.is_none()
                && sf.inserts.iter().any(|(c, o)| {
                    schema.unique_within(&table.name, &[c.as_str()]).is_some()
                        && bare_input(s, o).is_some_and(|b| b.text == i.text && b.from.is_empty())
                })
        })
}

/// The host value an operand is, when it is a bare parameter (`$2`, not `$2 + 1`).
pub fn bare_input<'s>(step: &'s Step, o: &Operand) -> Option<&'s Input> {
    let [param] = o.params[..] else {
        return None;
    };
    if o.text.trim() != format!("${param}") {
        return None;
    }
    step.host().inputs.iter().find(|i| i.param == param)
}

pub fn advisory_locks_before(
    tx: &Transaction,
    seq: usize,
) -> impl Iterator<Item = (&AdvisoryCall, &Step)> {
    tx.steps
        .iter()
        .filter(move |s| s.seq < seq)
        .flat_map(|s| s.facts.extra().advisory.iter().map(move |a| (a, s)))
        .filter(|(a, _)| a.takes_xact_lock())
}
