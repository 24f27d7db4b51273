//! Two rows of one table locked by keys that are inputs, in input order: the same code called
//! with the inputs swapped locks them in the other order (`transfer(from, to)`).

use super::keys::{KeyPart, held_since_returned, names_the_written_row, read_from, row_key};
use super::{Context, RULE};
use crate::diagnostic::Diagnostic;
use crate::model::lockgraph::{self, Acquisition, LockGraph};
use crate::model::*;

/// Two rows of one table locked by keys that are inputs, in input order: the same code called
/// with the inputs swapped locks them in the other order (`transfer(from, to)`).
pub(super) fn self_inversion(
    cx: &Context,
    g: &LockGraph,
    t: &lockgraph::TxLocks,
    out: &mut Vec<Diagnostic>,
) {
    let acqs = &t.acquisitions;
    let keys: Vec<Option<Vec<KeyPart>>> = acqs.iter().map(|a| row_key(t.tx, a.step)).collect();
    for (j, b) in acqs.iter().enumerate() {
        let Some(b_key) = &keys[j] else {
            continue;
        };
        if held(acqs, &keys, j, b_key)
            || serialised(t.tx, b.step)
            || held_since_returned(t.tx, b.step)
        {
            continue;
        }
        for (i, a) in acqs[..j].iter().enumerate() {
            if a.resource != b.resource
                || std::ptr::eq(a.step, b.step)
                || t.unit.apart(a.step, b.step)
            {
                continue;
            }
            // Locked up front as one ordered set: later statements touch rows already held.
            if a.step.facts.ordered && a.step.facts.key_set {
                break;
            }
            let Some(a_key) = &keys[i] else {
                continue;
            };
            let Some(differing) = swappable(t, (a, a_key), (b, b_key)) else {
                continue;
            };
            out.push(swapped_diagnostic(
                cx,
                g,
                (a, a_key),
                (b, b_key),
                differing[0],
            ));
            return;
        }
    }
}

/// Rows already held when acquisition `j` locks `key`: locked earlier by keys put in order
/// from these values (`first := LEAST(src, dst)` holds the rows of `src` and `dst`).
fn held(acqs: &[Acquisition], keys: &[Option<Vec<KeyPart>>], j: usize, key: &[KeyPart]) -> bool {
    (0..j).any(|i| {
        let Some(earlier) = keys[i]
            .as_ref()
            .filter(|_| acqs[i].resource == acqs[j].resource)
        else {
            return false;
        };
        let among = |part: &KeyPart| {
            earlier
                .iter()
                .any(|q| q.column == part.column && q.ordered && q.sources.contains(&part.value))
        };
        key.iter().any(among)
            && key.iter().all(|part| {
                among(part)
                    || earlier
                        .iter()
                        .any(|q| q.column == part.column && q.value == part.value)
            })
    })
}

/// The key parts in which two locks of one table differ, where a run with those inputs
/// swapped would take them in the other order; `None` for the same row (a lock and then the
/// update it was taken for), another column set, keys put in order first, a fresh key, or
/// one key read from the other's row.
fn swappable(
    t: &lockgraph::TxLocks,
    (a, a_key): (&Acquisition, &[KeyPart]),
    (b, b_key): (&Acquisition, &[KeyPart]),
) -> Option<Vec<usize>> {
    let columns = |k: &[KeyPart]| k.iter().map(|p| p.column.clone()).collect::<Vec<_>>();
    if columns(a_key) != columns(b_key) {
        return None;
    }
    let differing: Vec<usize> = (0..a_key.len())
        .filter(|&i| a_key[i].value != b_key[i].value)
        .collect();
    if differing.is_empty()
        || differing
            .iter()
            .all(|&i| a_key[i].ordered && b_key[i].ordered)
        || differing.iter().any(|&i| a_key[i].fresh || b_key[i].fresh)
    {
        return None;
    }
    // Two keys computed from one input (a queue's table and its archive, both named after the
    // queue): a run given another input computes both for it, never these two swapped.
    if differing
        .iter()
        .all(|&i| a_key[i].from.is_some() && a_key[i].from == b_key[i].from)
    {
        return None;
    }
    if names_the_written_row(a.step, a_key, b_key, &differing) {
        return None;
    }
    // One key read from the other's row (an answer's id read from its question): a run that
    // starts from the second row does not reach the first.
    if read_from(t.tx, a.step, b_key) || read_from(t.tx, b.step, a_key) {
        return None;
    }
    Some(differing)
}

/// The finding on the second lock (or the call that takes it).
fn swapped_diagnostic(
    cx: &Context,
    g: &LockGraph,
    (a, a_key): (&Acquisition, &[KeyPart]),
    (b, b_key): (&Acquisition, &[KeyPart]),
    first_differing: usize,
) -> Diagnostic {
    // Rows locked through two different calls (`PERFORM debit(src); PERFORM credit(dst)`,
    // or two calls of one Rust helper): the order is decided where those calls are made, so
    // the finding is there.
    let (ac, bc) = (
        a.step.host().calls.as_slice(),
        b.step.host().calls.as_slice(),
    );
    let i = super::super::shared_calls(a.step, b.step);
    let (first, second) = (ac.get(i).copied(), bc.get(i).copied());
    let line = cx.place(first.unwrap_or(a.span), second.unwrap_or(b.span));
    let table = g.resources[b.resource].label();
    let show = |k: &[KeyPart]| {
        k.iter()
            .map(|p| format!("{} = {}", p.column, p.shown))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    let col = &a_key[first_differing].column;
    let mut d = Diagnostic::new(
        &RULE,
        second.unwrap_or(b.span),
        format!(
            "{table} row `{}` is locked after row `{}` ({line}): the same code run with the two swapped locks them in the other order (deadlock)",
            show(b_key),
            show(a_key)
        ),
    )
    .help(format!(
        "lock both rows in key order first (`SELECT ... WHERE {col} IN (..) ORDER BY {col} FOR UPDATE`), or order the keys (`LEAST`/`GREATEST`, or sort them) before locking"
    ));
    if let Some(call) = first {
        d = d.label(call, "first row locked by this call");
    }
    d = d.label(a.span, "first row locked here");
    match second {
        Some(call) => {
            let mut d = d
                .note("second row locked by this call")
                .in_statement(call)
                .label(b.span, "second row locked here");
            d.calls = bc[..i].to_vec();
            d
        }
        None => d.note("second row locked here").in_step(b.step),
    }
}

/// Before `step`, on every path to it, a lock every run of this code takes first whatever its
/// inputs: a transaction-scoped advisory lock on a constant key, `LOCK TABLE` in a mode that
/// conflicts with itself, `ALTER TABLE`, or an exclusive row lock keyed by constants. A run
/// with the keys swapped waits there before it locks anything else.
fn serialised(tx: &Transaction, step: &Step) -> bool {
    tx.steps
        .iter()
        .filter(|g| g.seq < step.seq && step.branch.starts_with(&g.branch))
        .any(|g| {
            let f = &g.facts;
            f.extra()
                .advisory
                .iter()
                .any(|a| a.takes_xact_lock() && !a.shared && constant_key(&a.key))
                || f.extra().table_lock.as_ref().is_some_and(|l| {
                    matches!(
                        l.mode.to_ascii_uppercase().as_str(),
                        "SHARE ROW EXCLUSIVE" | "EXCLUSIVE" | "ACCESS EXCLUSIVE" | ""
                    )
                })
                || f.extra().ddl.as_ref().is_some_and(|d| d.alters)
                || (f.row_locks.iter().any(RowLock::waits_exclusive)
                    && !f.filters.is_empty()
                    && f.filters.iter().all(|p| p.value.is_literal()))
        })
}

/// An advisory key made of literals and calls on them (`42`, `hashtext('jobs')`, `1, 2`), with
/// no parameter or variable: every run locks the same key.
fn constant_key(key: &str) -> bool {
    // String literals dropped: what is left must be numbers, calls and punctuation.
    let mut rest = Vec::new();
    let mut quoted = false;
    for c in key.chars() {
        if c == '\'' {
            quoted = !quoted;
            rest.push(' ');
        } else if !quoted {
            rest.push(c);
        }
    }
    if rest.iter().any(|&c| c == '$' || c == ':') {
        return false;
    }
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < rest.len() {
        if !word_char(rest[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < rest.len() && word_char(rest[i]) {
            i += 1;
        }
        let number = rest[start..i].iter().all(|c| c.is_ascii_digit());
        let call = rest[i..].iter().find(|c| !c.is_whitespace()) == Some(&'(');
        if !number && !call {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::constant_key;

    #[test]
    fn constant_keys_are_literals_and_calls_on_them() {
        assert!(constant_key("42"));
        assert!(constant_key("1, 2"));
        assert!(constant_key("hashtext('wallet transfer: $1')"));
        assert!(!constant_key("p_from"));
        assert!(!constant_key("$1"));
        assert!(!constant_key("hashtext($1)"));
        assert!(!constant_key("hashtext(name)"));
        assert!(!constant_key("'k'::regclass::int"));
    }
}
