//! Rows locked one at a time in a loop over keys in no particular order: each transaction locks
//! them in its own order.

use super::*;

/// `for id in ids { UPDATE ... WHERE id = $1 }` inside a transaction, `ids` not sorted: each
/// transaction locks the rows in its own order.
pub(super) fn unordered_loop(cx: &Context, unit: &Unit, out: &mut Vec<Diagnostic>) {
    let held = unit
        .transactions
        .iter()
        .filter(|t| matches!(t.scope, Scope::Explicit | Scope::File | Scope::Caller))
        .filter(|t| t.guard().is_none());
    // One finding per loop, at its first lock; the loop's other locks are labels on it.
    let mut found: Vec<(Span, Diagnostic)> = Vec::new();
    for tx in held {
        for (i, step) in tx.steps.iter().enumerate() {
            let Some((lp, d)) = loop_lock(cx, unit, tx, &tx.steps[..i], step) else {
                continue;
            };
            match found.iter_mut().find(|(l, _)| *l == lp) {
                Some((_, first)) => first.labels.push(crate::diagnostic::Label {
                    span: d.span,
                    message: "also locked in this loop".into(),
                }),
                None => found.push((lp, d)),
            }
        }
    }
    out.extend(found.into_iter().map(|(_, d)| d));
}

/// The rows `step` locks were locked before, in key order: an earlier loop over a sorted
/// collection (or an ordered query) locked rows of the same table by the same key values (`FOR
/// r IN SELECT .. ORDER BY key LOOP INSERT .. ON CONFLICT ..`, then an unordered pass over the
/// same keys). The second pass waits for nothing it does not hold.
fn held_in_order(unit: &Unit, before: &[Step], step: &Step) -> bool {
    let keys = |s: &Step| -> Vec<String> {
        s.facts
            .filters
            .iter()
            .map(|p| &p.value)
            .chain(s.facts.inserts.iter().map(|(_, o)| o))
            .map(|o| value_key(o, s))
            .collect()
    };
    let tables = |s: &Step| -> Vec<Resource> {
        lockgraph::acquisitions(s)
            .into_iter()
            .map(|(r, ..)| r)
            .collect()
    };
    let (mine, my_keys) = (tables(step), keys(step));
    before.iter().any(|g| {
        unit.loops
            .iter()
            .any(|l| l.sorted && g.branch.contains(&l.branch))
            && tables(g).iter().any(|r| mine.contains(r))
            && keys(g).iter().any(|k| my_keys.contains(k))
    })
}

fn loop_lock(
    cx: &Context,
    unit: &Unit,
    tx: &Transaction,
    before: &[Step],
    step: &Step,
) -> Option<(Span, Diagnostic)> {
    let lp = unit
        .loops
        .iter()
        .find(|l| !l.sorted && step.branch.contains(&l.branch))?;
    // A transaction opened in the loop's body ends in the same iteration: it never holds
    // one key's rows while it waits for the next key's.
    if tx.opened_within().contains(&lp.branch) {
        return None;
    }
    // A guard taken before the loop serialises the whole loop.
    let outside: Vec<Step> = before
        .iter()
        .filter(|s| !s.branch.contains(&lp.branch))
        .cloned()
        .collect();
    if guarded(cx.program.schema(step.span.file), &outside, step)
        || held_in_order(unit, &outside, step)
    {
        return None;
    }
    let (keys, keyed) = keyed_by_loop(lp, step);
    let schema = cx.program.schema(step.span.file);
    if from_held_rows(&outside, step.seq, &keys)
        || (!keys.is_empty()
            && keys
                .iter()
                .all(|i| flow::inserted_key(schema, before, step, i)))
    {
        return None;
    }
    // Rows claimed with `SKIP LOCKED` one key at a time never wait: no deadlock.
    let acquired = lockgraph::acquisitions(step)
        .into_iter()
        .find(|(r, _, waits)| *waits && matches!(r, Resource::Table(_)));
    let (Some((resource, span, _)), true) = (acquired, keyed) else {
        return None;
    };
    // `FOR r IN SELECT id FROM t .. LOOP UPDATE t .. WHERE id = r.id`: every run of the query
    // visits the rows of `t` in the same scan order; only rows of another table, reached
    // through the query's values, come in an order of their own.
    let query = lp.query.and_then(|q| before.iter().find(|s| s.seq == q));
    if query.is_some_and(|q| {
        q.facts.ordered
            || q.facts
                .reads
                .iter()
                .any(|t| matches!(&resource, Resource::Table(n) if *n == t.name))
    }) {
        return None;
    }
    Some((
        lp.span,
        loop_diagnostic(lp, step, &resource, span, query.is_some()),
    ))
}

/// The inputs of `step` that the loop's variables give its key, and whether the loop names
/// the row it locks. The row each iteration locks is named by the loop's variable: a key in
/// the `WHERE` (or, read from tokens only, anywhere in the statement) takes it. A statement
/// whose key stays the same while other values change (`UPDATE m SET meta = $2 WHERE id =
/// $1` for each entry of a map) locks one row, the first time. An upsert's row is named by
/// the values it inserts.
fn keyed_by_loop<'s>(lp: &Loop, step: &'s Step) -> (Vec<&'s Input>, bool) {
    let f = &step.facts;
    let key = f
        .filters
        .iter()
        .map(|p| &p.value)
        .chain(f.inserts.iter().map(|(_, o)| o));
    let key_params: Vec<usize> = key.clone().flat_map(|o| o.params.clone()).collect();
    let key_idents: Vec<&str> = key
        .flat_map(|o| o.idents.iter().map(|i| i.as_str()))
        .collect();
    let in_key = |param: usize| !f.parsed || key_params.contains(&param);
    let of_loop = |text: &str| {
        lp.vars
            .iter()
            .any(|v| text == v || text.starts_with(&format!("{v}.")))
    };
    let keys: Vec<&Input> = step
        .host()
        .inputs
        .iter()
        .filter(|i| in_key(i.param) && of_loop(&i.text))
        .collect();
    let keyed = !keys.is_empty()
        || f.extra().uses.iter().any(|u| {
            lp.vars.iter().any(|v| v.as_str() == u.as_str())
                && (!f.parsed
                    || key_idents
                        .iter()
                        .any(|k| k.split('.').next() == Some(u.as_str())))
        });
    (keys, keyed)
}

fn loop_diagnostic(
    lp: &Loop,
    step: &Step,
    resource: &Resource,
    span: Span,
    query: bool,
) -> Diagnostic {
    let (order, note, help) = match query {
        true => (
            "the rows of a query with no `ORDER BY`",
            "locked once per row of the loop's query",
            "add `ORDER BY` on the key to the loop's query, or lock the rows first in one statement (`SELECT ... ORDER BY id FOR UPDATE`)",
        ),
        false => (
            "a collection that is not sorted",
            "locked once per key, in collection order",
            "sort the keys before the loop (`ids.sort()`, or a `BTreeSet`), or lock them all first in one statement (`SELECT ... WHERE id = ANY($1) ORDER BY id FOR UPDATE`)",
        ),
    };
    Diagnostic::new(
        &RULE,
        span,
        format!(
            "rows of {} are locked one at a time in the order of {order}: two transactions with overlapping keys can each hold some rows and wait for the others (deadlock)",
            resource.label(),
        ),
    )
    .note(note)
    .in_step(step)
    .label(lp.span, "iterated in no particular order")
    .help(help)
}
