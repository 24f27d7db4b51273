//! Questions rules ask of a unit's steps in program order: which values are the same, which
//! variables carry a read's result.

use std::collections::BTreeSet;

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

/// What a value is, comparable across statements: the host expression bound to a parameter,
/// or the SQL text (a literal, a variable).
pub fn value_key(o: &Operand, step: &Step) -> String {
    if !o.params.is_empty() {
        return o
            .params
            .iter()
            .map(|p| match step.inputs.iter().find(|i| i.param == *p) {
                Some(i) => format!("host:{}", i.text),
                None => format!("${p}"),
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    o.text.to_ascii_lowercase()
}

/// An identifier that names one of the step's variables (PL/pgSQL, psql `:v`), not a column.
pub fn is_var(ident: &str, step: &Step) -> bool {
    let first = ident.split('.').next().unwrap_or(ident);
    step.facts.uses.iter().any(|u| u == first)
}

/// Variables whose values come from `r`'s result, as of step `w`.
pub fn tainted_vars(steps: &[At], r: &Step, w: &Step) -> BTreeSet<String> {
    let mut tainted: BTreeSet<String> = r.facts.assigns.iter().cloned().collect();
    for a in steps
        .iter()
        .filter(|a| a.step.seq > r.seq && a.step.seq < w.seq)
    {
        if a.step.facts.uses.iter().any(|u| tainted.contains(u)) {
            tainted.extend(a.step.facts.assigns.iter().cloned());
        }
    }
    tainted
}

/// Does `o` (in step `w`) carry data from `r`: a bound host value computed from its result, or
/// a variable it filled?
pub fn flows_from(o: &Operand, r: &Step, w: &Step, tainted: &BTreeSet<String>) -> bool {
    o.params.iter().any(|p| {
        w.inputs
            .iter()
            .any(|i| i.param == *p && i.from.contains(&r.seq))
    }) || o
        .idents
        .iter()
        .any(|i| is_var(i, w) && tainted.contains(i.split('.').next().unwrap_or(i)))
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
        || !rf.aggregates.iter().any(|a| a != "exists")
        || matches!(tx.scope, Scope::Autocommit | Scope::Unknown)
        || tx.isolation == Isolation::Serializable
    {
        return None;
    }
    let keys = |s: &Step| -> Vec<(String, String)> {
        s.facts
            .filters
            .iter()
            .map(|p| (p.column.clone(), value_key(&p.value, s)))
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
            .filter(|t| lock.of.is_empty() || lock.of.contains(&t.name))
            .map(|t| t.name.as_str())
            .collect();
        let same_set =
            rf.reads.iter().all(|t| locked.contains(&t.name.as_str())) && keys(read) == keys(l);
        let serialised =
            tx.isolation == Isolation::ReadCommitted && advisory_before(tx, l.seq).is_some();
        l.seq < read.seq && !l.facts.modifies && !same_set && !serialised
    })
}

/// A transaction-scoped advisory lock taken in `tx` before `seq`.
pub fn advisory_before(tx: &Transaction, seq: usize) -> Option<&AdvisoryCall> {
    tx.steps
        .iter()
        .filter(|s| s.seq < seq)
        .flat_map(|s| &s.facts.advisory)
        .find(|a| {
            a.scope == LockScope::Transaction
                && matches!(a.op, AdvisoryOp::Lock | AdvisoryOp::TryLock)
        })
}
