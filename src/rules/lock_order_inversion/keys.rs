//! `lock-order-inversion`: the key a statement locks its row by, and what tells two keys of one
//! transaction apart or the same.

use crate::model::flow::{is_var, value_key};
use crate::model::*;

/// Every input of `step`'s row key was read from the row `other` names: a host value computed
/// from a statement keyed by `other` (`SELECT reply_id .. WHERE id = $1`), or a PL/pgSQL
/// variable such a statement assigned.
pub(super) fn read_from(tx: &Transaction, step: &Step, other: &[KeyPart]) -> bool {
    let keyed_by_other = |s: &Step| {
        row_key(tx, s).is_some_and(|k| {
            k.iter().any(|p| {
                other
                    .iter()
                    .any(|o| o.column == p.column && o.value == p.value)
            })
        })
    };
    let by_seq = |seq: usize| tx.steps.iter().find(|s| s.seq == seq);
    let mut inputs = 0;
    let all = step.facts.filters.iter().all(|p| {
        if let Some(&n) = p.value.params.first() {
            inputs += 1;
            let Some(i) = step.host().inputs.iter().find(|i| i.param == n) else {
                return false;
            };
            !i.from.is_empty()
                && i.from
                    .iter()
                    .all(|&q| by_seq(q).is_some_and(keyed_by_other))
        } else if p.value.idents.len() == 1 && is_var(&p.value.idents[0], step) {
            inputs += 1;
            assigned_before(tx, step, &p.value.idents[0]).is_some_and(keyed_by_other)
        } else {
            true
        }
    });
    all && inputs > 0
}

/// Every input of `step`'s row key is that key's column of rows an earlier statement of the
/// transaction wrote or locked in the same table (`krate.id` of `UPDATE crates .. RETURNING
/// *`, `row.id` of `SELECT .. FOR UPDATE`): the row is held since then, and locking it again
/// waits for nobody, whatever was locked in between.
pub(super) fn held_since_returned(tx: &Transaction, step: &Step) -> bool {
    let Some(table) = locked_table(step) else {
        return false;
    };
    let mut inputs = 0;
    let all = step.facts.filters.iter().all(|p| {
        let Some(&n) = p.value.params.first() else {
            return !p.value.idents.iter().any(|i| is_var(i, step));
        };
        inputs += 1;
        let Some(i) = step.host().inputs.iter().find(|i| i.param == n) else {
            return false;
        };
        i.is_field(&p.column)
            && !i.from.is_empty()
            && i.from.iter().all(|&q| {
                tx.steps
                    .iter()
                    .find(|s| s.seq == q && s.seq < step.seq)
                    .is_some_and(|s| locked_table(s) == Some(table))
            })
    });
    all && inputs > 0
}

/// The table whose rows `step` holds once it ran: the one it inserts into, updates or deletes
/// from, or the one it reads `FOR UPDATE`.
pub(super) fn locked_table(step: &Step) -> Option<&Name> {
    let f = &step.facts;
    match f.kind {
        StmtKind::Insert | StmtKind::Update | StmtKind::Delete => Some(&f.writes.first()?.name),
        StmtKind::Select if f.row_locks.iter().any(RowLock::exclusive) && f.reads.len() == 1 => {
            Some(&f.reads.first()?.name)
        }
        _ => None,
    }
}

/// The last statement before `step` that assigns the PL/pgSQL variable `var`.
fn assigned_before<'t>(tx: &'t Transaction, step: &Step, var: &Name) -> Option<&'t Step> {
    tx.steps
        .iter()
        .rfind(|s| s.seq < step.seq && s.facts.extra().assigns.contains(var))
}

/// The assignments a PL/pgSQL variable's value comes through, nearest first: the statement
/// that last assigned `var` before `step`, then, while each reads no table and uses exactly
/// one other variable (given beside it), the one that last assigned that (at most five).
fn assignments<'t>(
    tx: &'t Transaction,
    step: &Step,
    var: &Name,
) -> Vec<(&'t Step, Option<&'t Name>)> {
    let mut out: Vec<(&Step, Option<&Name>)> = Vec::new();
    let Some(mut s) = assigned_before(tx, step, var) else {
        return out;
    };
    let mut var = var;
    loop {
        let from = match s.facts.extra().uses.as_slice() {
            [v] if v != var && s.facts.reads.is_empty() => Some(v),
            _ => None,
        };
        out.push((s, from));
        let Some(v) = from.filter(|_| out.len() < 5) else {
            return out;
        };
        let Some(next) = assigned_before(tx, s, v) else {
            return out;
        };
        (s, var) = (next, v);
    }
}

/// A PL/pgSQL variable whose value this run made (`revision uuid := uuidv7()`, also through
/// another variable: `db text := revision`): no concurrent run can hold that key, so none
/// locks it in another order.
fn fresh_var(tx: &Transaction, step: &Step, var: &Name) -> bool {
    assignments(tx, step, var)
        .iter()
        .any(|(s, _)| s.facts.fresh)
}

/// The one variable a PL/pgSQL variable is computed from without reading a table, followed
/// through other such variables (`archive := 'a_' || p_queue` gives `p_queue`), if it is
/// computed from exactly one.
fn computed_from(tx: &Transaction, step: &Step, var: &Name) -> Option<String> {
    let chain = assignments(tx, step, var);
    let links = chain
        .iter()
        .take_while(|(s, from)| from.is_some() && !s.facts.fresh);
    links
        .last()
        .and_then(|(_, from)| from.map(|v| v.to_string()))
}

/// One column of the key a statement locks its row by.
pub(super) struct KeyPart {
    pub(super) column: String,
    /// The value, comparable across statements.
    pub(super) value: String,
    /// As messages show it.
    pub(super) shown: String,
    /// Put in key order with the other keys before (`LEAST`/`GREATEST`, `min`/`max`).
    pub(super) ordered: bool,
    /// For an ordered part, the values it was put in order from, comparable with `value`.
    pub(super) sources: Vec<String>,
    /// A value this run made itself (see [`fresh_var`]): no other run passes it.
    pub(super) fresh: bool,
    /// The one input a variable is computed from (see [`computed_from`]).
    pub(super) from: Option<String>,
}

/// The whole key a statement locks its row by (`tenant_id = $1 AND id = $2` is one row), when
/// at least one part is an input (a parameter or a variable); parts sorted by column.
pub(super) fn row_key(tx: &Transaction, step: &Step) -> Option<Vec<KeyPart>> {
    let mut parts = Vec::new();
    let mut input = false;
    for p in &step.facts.filters {
        let text = p.value.text.to_ascii_lowercase();
        let orders = text.contains("least(") || text.contains("greatest(");
        let part = if let Some(&n) = p.value.params.first() {
            let bound = step.host().inputs.iter().find(|i| i.param == n);
            input = true;
            KeyPart {
                column: p.column.to_string(),
                value: bound.map_or_else(
                    || format!("${n}"),
                    |i| {
                        read_row_key(tx, i, &p.column)
                            .or_else(|| column_of_one_row(tx, i))
                            .unwrap_or_else(|| format!("host:{}", i.text))
                    },
                ),
                shown: bound.map_or_else(|| format!("${n}"), Input::shown),
                ordered: orders || bound.is_some_and(|i| i.ordered),
                sources: bound
                    .map(|i| i.sources.iter().map(|s| format!("host:{s}")).collect())
                    .unwrap_or_default(),
                fresh: false,
                from: None,
            }
        } else if p.value.idents.len() == 1 && is_var(&p.value.idents[0], step) {
            let var = &p.value.idents[0];
            input = true;
            // A PL/pgSQL variable assigned from `LEAST(..)`/`GREATEST(..)` is in key order.
            let assigned = assigned_before(tx, step, var);
            let ordered = orders || assigned.is_some_and(|s| s.facts.orders);
            KeyPart {
                column: p.column.to_string(),
                value: var.to_string(),
                shown: var.to_string(),
                ordered,
                sources: match assigned {
                    Some(s) if ordered => {
                        s.facts.extra().uses.iter().map(|u| u.to_string()).collect()
                    }
                    _ => Vec::new(),
                },
                fresh: fresh_var(tx, step, var),
                from: computed_from(tx, step, var),
            }
        } else {
            KeyPart {
                column: p.column.to_string(),
                value: value_key(&p.value, step),
                shown: p.value.text.to_string(),
                ordered: orders,
                sources: Vec::new(),
                fresh: p.value.idents.is_empty() && step.facts.fresh,
                from: None,
            }
        };
        parts.push(part);
    }
    parts.sort_by(|a, b| a.column.cmp(&b.column));
    input.then_some(parts)
}

/// `b` names the row `a` wrote, by its key before or after `a` changed it: `a` sets each
/// differing key column (`UPDATE t SET name = $1 WHERE name = $2`, a rename), and `b`'s value
/// there is made of nothing but `a`'s old and new values (`name`, `original_name`,
/// `name.unwrap_or(original_name)`). A run with the two swapped renames the other way; it
/// locks one row too.
pub(super) fn names_the_written_row(
    a: &Step,
    a_key: &[KeyPart],
    b_key: &[KeyPart],
    differing: &[usize],
) -> bool {
    differing.iter().all(|&i| {
        let column = &a_key[i].column;
        let Some(set) = a.facts.sets.iter().find(|s| s.column == column.as_str()) else {
            return false;
        };
        let mut known = roots(&a_key[i].value);
        known.extend(roots(&value_key(&set.value, a)));
        let used = roots(&b_key[i].value);
        !used.is_empty() && used.iter().all(|r| known.contains(r))
    })
}

/// The names a value is made of (`name`, `original_name` in
/// `host:name.clone().unwrap_or(original_name.to_string())`): words that are neither a method
/// or function called nor a field after a dot.
fn roots(value: &str) -> Vec<String> {
    let text = value.strip_prefix("host:").unwrap_or(value);
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word(bytes[i]) {
            i += 1;
        }
        let after_dot = start > 0 && bytes[start - 1] == b'.';
        let called = bytes.get(i) == Some(&b'(');
        if !after_dot && !called && !bytes[start].is_ascii_digit() {
            out.push(text[start..i].to_string());
        }
    }
    out
}

/// A key bound to a field of a value built from an earlier read of this transaction (`c.id`,
/// where `c` came from the read that selected by `id = $1`): that read's key, so both name the
/// same row.
fn read_row_key(tx: &Transaction, input: &Input, column: &str) -> Option<String> {
    if !input.is_field(column) {
        return None;
    }
    tx.steps
        .iter()
        .filter(|s| input.from.contains(&s.seq))
        .find_map(|s| {
            s.facts
                .filters
                .iter()
                .find(|q| q.column == column)
                .map(|q| (s, q))
        })
        .map(|(s, q)| value_key(&q.value, s))
}

/// A key that is one column of one row fetched earlier in this transaction: the
/// `customer_id` selected from the invoice `WHERE id = $1`, or the `customer_id` field of that
/// invoice locked later by the same key. Every read it comes from names its table, the same
/// key values and that column, so two keys made so are one value (and one row). The column is
/// the field the value was taken through, or the only column the read selects.
fn column_of_one_row(tx: &Transaction, input: &Input) -> Option<String> {
    let mut found: Option<String> = None;
    for &q in &input.from {
        let s = tx.steps.iter().find(|s| s.seq == q)?;
        let f = &s.facts;
        let column = match input.fields_of(q) {
            Some([field]) => field.as_str(),
            Some(_) => return None,
            None => match &f.columns[..] {
                [only] if **only != *"*" => &**only,
                _ => return None,
            },
        };
        // One row: a fetch that fails without one (`fetch_one`, diesel's `first`).
        let ([table], false, true) = (&f.reads[..], f.filters.is_empty(), s.host().required) else {
            return None;
        };
        let mut key: Vec<String> = f
            .filters
            .iter()
            .map(|p| format!("{} = {}", p.column, value_key(&p.value, s)))
            .collect();
        key.sort();
        let this = format!("{}[{}].{column}", table.name, key.join(", "));
        if found.as_ref().is_some_and(|f| *f != this) {
            return None;
        }
        found = Some(this);
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn roots_are_the_names_a_value_is_made_of() {
        assert_eq!(
            super::roots("host:name.clone().unwrap_or(original_name.to_string())"),
            ["name", "original_name"]
        );
        assert_eq!(super::roots("host:tenant_id.0"), ["tenant_id"]);
        assert_eq!(super::roots("$2"), Vec::<String>::new());
        assert_eq!(super::roots("p_from"), ["p_from"]);
    }
}
