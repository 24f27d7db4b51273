//! `lock-order-inversion`: one advisory lock per row of a key list, in the list's order.

use super::{RULE, guarded};
use crate::diagnostic::Diagnostic;
use crate::model::*;
use crate::rules::Context;

/// A statement that takes one waiting advisory lock per row of a list of keys (`SELECT
/// pg_advisory_xact_lock(k) FROM unnest($1) AS k`, `PERFORM .. FROM unnest(p_keys)`, the list
/// joined to a table) with no `ORDER BY`: it holds each lock while it waits for the next, in
/// the list's order or the join's, so two runs with overlapping keys in different orders
/// deadlock (`truth::lock_order_advisory_locks_per_row_follow_the_array`).
///
/// Reported whatever the transaction, also on a connection the run does not show: the
/// statement itself holds the locks it took while it waits. Not reported: a try-lock (it never
/// waits), a key that is the same for every row (`pg_advisory_xact_lock($1) FROM unnest($2)`),
/// a list bound from a sorted collection (a `BTreeSet`, a sorted `Vec`) that nothing joins to
/// a table, and a statement after a lock that serialises its runs.
pub(super) fn per_row(cx: &Context, before: &[Step], step: &Step, out: &mut Vec<Diagnostic>) {
    let f = &step.facts;
    if !f.rows_from_list {
        return;
    }
    let Some(lock) = f
        .extra()
        .advisory
        .iter()
        .find(|a| a.op == AdvisoryOp::Lock && names_a_column(&a.key))
    else {
        return;
    };
    let inputs = &step.host().inputs;
    let sorted = !inputs.is_empty() && inputs.iter().all(|i| i.ordered);
    if (sorted && f.reads.is_empty()) || guarded(cx.program.schema(step.span.file), before, step) {
        return;
    }
    let order = match f.reads.is_empty() {
        true => "in the list's order, which is not sorted",
        false => "in the order the join's plan gives them, which is not the keys' order",
    };
    out.push(
        Diagnostic::new(
            &RULE,
            lock.span,
            format!(
                "this statement takes one advisory lock per key of a list, {order}: two transactions with overlapping keys in different orders can each hold some locks and wait for the others (deadlock)"
            ),
        )
        .note("locks taken in row order")
        .in_step(step)
        .help("sort the rows in the statement (`ORDER BY` the key, after any join), or lock a key that covers the whole set first"),
    );
}

/// The key reads a column of the row (`k`, `a.id`, `hashtext(concat($1, account_id))`): not
/// only literals, parameters, casts and calls, which name one key for every row.
fn names_a_column(key: &str) -> bool {
    let mut words = Vec::new();
    let (mut quoted, mut word) = (false, String::new());
    for c in key.chars().chain([' ']) {
        if c == '\'' {
            quoted = !quoted;
        } else if !quoted && (c.is_alphanumeric() || c == '_' || c == '.') {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if !quoted && !c.is_whitespace() && c != '\'' {
            words.push(c.to_string());
        }
    }
    (0..words.len()).any(|i| {
        let w = &words[i];
        let prev = |n: usize| i.checked_sub(n).map(|j| words[j].as_str());
        w.starts_with(|c: char| c.is_alphabetic() || c == '_')
            && words.get(i + 1).map(String::as_str) != Some("(")
            // A parameter (`$1`, `@key`, `:name`) or a cast's type (`::text`).
            && !matches!(prev(1), Some("$" | "@" | ":"))
            && !prev(1).is_some_and(|p| p.eq_ignore_ascii_case("as"))
            && !w.eq_ignore_ascii_case("as")
    })
}

#[cfg(test)]
mod tests {
    use super::names_a_column;

    #[test]
    fn a_key_names_a_column_when_a_word_is_not_a_call_a_cast_or_a_parameter() {
        for key in [
            "k",
            "a.id",
            "hashtext(concat($1::text, account_id::text, currency))",
        ] {
            assert!(names_a_column(key), "{key}");
        }
        for key in [
            "42",
            "$1",
            "hashtext('jobs')",
            "$1::bigint",
            "@key::bigint",
            "hashtext($1 || ':' || $2)",
            "CAST($1 AS bigint)",
            ":tenant",
        ] {
            assert!(!names_a_column(key), "{key}");
        }
    }
}
