//! `lost-update`: a value is read, changed outside SQL and written back with nothing that
//! stops a concurrent run from doing the same in between.

use std::borrow::Cow;

use super::Context;
use super::analysis_limit::{CANDIDATES, analysis_limit_diagnostic};
use crate::diagnostic::{Diagnostic, Label, Race};
use crate::model::flow::{At, Flow, constant, field_of_read, is_var, same_constant, value_key};
use crate::model::*;
use crate::source::Span;

pub use crate::registry::LOST_UPDATE as RULE;

pub(super) fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for unit in cx.program.units.iter().filter(|u| !u.runs_once()) {
        let flow = Flow::new(unit);
        let mut limited = None;
        // One finding per read and written statement: the same write sent through several
        // calls of this unit (one per arm of a `match`) is one race, its other calls labels.
        let mut found: Vec<((Span, Span), Diagnostic)> = Vec::new();
        for i in 0..flow.steps.len() {
            let Some((race, d)) = write(cx, unit, &flow, i, &mut limited) else {
                continue;
            };
            match found.iter_mut().find(|(r, _)| *r == race) {
                Some((_, first)) if first.span != d.span => {
                    first.labels.push(Label {
                        span: d.span,
                        message: "also written back by this call".into(),
                    });
                }
                Some(_) => {}
                None => found.push((race, d)),
            }
        }
        out.extend(found.into_iter().map(|(_, d)| d));
        if let Some(span) = limited {
            out.push(analysis_limit_diagnostic(
                span,
                RULE.name,
                "every read before some of this unit's writes",
                &format!("a write has more than {CANDIDATES} earlier reads of its table; the nearest were paired with it"),
            ));
        }
    }
}

/// The finding for the `UPDATE` at position `i`, against the nearest read that loses it, with
/// the read's and the write's statements. `limited` is set to the unit's place when a write
/// had more candidates than the budget.
fn write(
    cx: &Context,
    unit: &Unit,
    flow: &Flow,
    i: usize,
    limited: &mut Option<Span>,
) -> Option<((Span, Span), Diagnostic)> {
    let w = &flow.steps[i];
    let f = &w.step.facts;
    if w.txn.scope == Scope::Unknown {
        return None;
    }
    let (sets, filters) = written(w.step)?;
    let table = &f.writes.first()?.name;
    if is_hole(table)
        || flow.created.private(w.tx, w.step.seq, table)
        || cx.program.alone(unit, [w.step])
    {
        return None;
    }
    for (n, ri) in flow.reads_of(table, i).enumerate() {
        if n == CANDIDATES {
            limited.get_or_insert(unit.span);
            break;
        }
        let r = &flow.steps[ri];
        let rf = &r.step.facts;
        if r.txn.scope == Scope::Unknown || unit.exclusive(&r.step.branch, &w.step.branch) {
            continue;
        }
        let same_tx = r.tx == w.tx;
        let locked = rf.row_locks.iter().any(RowLock::exclusive);
        // The row is locked from the read to the write; or the database refuses the stale write;
        // or a session lock the unit holds from before the read until the write serialises runs.
        if same_tx && (locked || w.txn.isolation >= Isolation::RepeatableRead)
            || flow
                .session_locks_held(r.step.seq, w.step.seq)
                .next()
                .is_some()
        {
            return None;
        }
        let Some((keys, returned)) = same_row(cx, r.step, w.step, &filters) else {
            continue;
        };
        for set in sets.iter() {
            // A row named by the key the read returned: the value must carry the column itself
            // as read (`row.n + 1`), not just something computed from the row.
            if returned && !through_column(set, w.step, r.step) {
                continue;
            }
            // A key set to the value that names the row (`SET k = excluded.k` of an upsert on
            // `k`) changes nothing.
            let same = |p: &Pred| {
                p.column == set.column
                    && value_key(&p.value, w.step) == value_key(&set.value, w.step)
            };
            if relative(set, w.step) || filters.iter().any(same) || one_way(w.step, set) {
                continue;
            }
            let Some(strong) = evidence(flow, set, r.step, i) else {
                continue;
            };
            // Compare-and-swap: the write checks what was read; or a unique key refuses the
            // second run's copy of a value computed from it.
            if compares(w.step, r.step, &keys)
                || leaves_state(w.step)
                || claims_unique(cx, flow, r, w)
            {
                return None;
            }
            let d = diagnostic(cx, unit, (r, w), set, strong, same_tx);
            return Some(((r.step.span, w.step.span), d));
        }
    }
    None
}

fn diagnostic(
    cx: &Context,
    unit: &Unit,
    (r, w): (&At, &At),
    set: &SetItem,
    strong: bool,
    same_tx: bool,
) -> Diagnostic {
    let primary = set.span.unwrap_or(w.step.span);
    // Where the finding will be: the column written back, or the call that sends the write
    // (see below).
    let call = composing_call(w.step, r.step, primary);
    let line = cx.place(r.step.span, call.unwrap_or(primary));
    let col = &set.column;
    let mut message = if strong {
        format!("`{col}` is read at {line} and written back without a lock or version check")
    } else {
        format!(
            "`{col}` is read at {line} and overwritten with a value from outside SQL, without a lock or version check (the value's origin could not be followed)"
        )
    };
    if let Some(v) = w
        .step
        .facts
        .sets
        .iter()
        .find(|s| is_version(&s.column) && relative(s, w.step))
    {
        message += &format!(
            "; `{}` is incremented but not compared, which does not stop it",
            v.column
        );
    }
    let shared_lock = same_tx
        && r.step.facts.row_locks.iter().any(|l| {
            matches!(
                l.strength,
                RowLockStrength::Share | RowLockStrength::KeyShare
            )
        });
    if shared_lock {
        message += "; a shared row lock lets both transactions read, then one loses or deadlocks";
    }
    let unguarded = super::unguarded(cx, unit, (r, w));
    if let Some((clause, _, _)) = &unguarded {
        message += &format!("; {clause}");
    }
    let lock_fix = if same_tx {
        "lock the read (`SELECT ... FOR UPDATE`)"
    } else {
        "lock the read (`SELECT ... FOR UPDATE`) in the same transaction as the `UPDATE`"
    };
    let mut d = Diagnostic::new(&RULE, primary, message)
        .note("overwritten here")
        .about(Race::LostUpdate, &[(unit, r.step), (unit, w.step)])
        .label(r.step.span, "read here")
        .help(format!(
            "make the update relative (`SET {col} = {col} + $delta`), {lock_fix}, or compare what was read (`WHERE ... AND {col} = $old`, or a version column) and check the affected row count"
        ));
    if let Some((_, at, label)) = unguarded {
        d = d.label(at, label);
    }
    // A write a host helper sends after a read reached through another call (`let c =
    // repo.load(id)?; ..; repo.save(&c)`): the function that makes those calls composes the
    // race, and the finding is at its call of the write (see [`composing_call`]). (A routine a
    // statement runs is no choice of the caller's: at the write, its calls labelled.)
    if call.is_some() {
        return super::at_the_call(
            d,
            (w.step, r.step),
            [
                "writes back through this call",
                "overwritten here",
                "read by this call",
            ],
        );
    }
    let (rc, wc) = (r.step.host().calls.first(), w.step.host().calls.first());
    if rc != wc {
        if let Some(&c) = rc {
            d = d.label(c, "read by this call");
        }
        if let Some(&c) = wc {
            d = d.label(c, "written back by this call");
        }
    }
    d.in_step(w.step)
}

/// The call of the function where the read `r` and the host write `w` meet, when `w` is sent
/// by a helper it calls and the written column (`primary`) is not in that call's own text (a
/// wrapper given the SQL: the race is already visible at the column).
fn composing_call(w: &Step, r: &Step, primary: Span) -> Option<Span> {
    w.host().via.as_ref()?;
    let call = *w.host().calls.get(super::shared_calls(w, r))?;
    (!call.contains(primary)).then_some(call)
}

/// The write's transaction also inserts a value computed from the read into columns a unique
/// key covers (`INSERT INTO events (aggregate_id, version) VALUES (id, v + 1)` with that primary
/// key): a concurrent run computes the same value and fails there with 23505, so its write is
/// rolled back instead of lost.
fn claims_unique(cx: &Context, flow: &Flow, r: &At, w: &At) -> bool {
    w.txn.steps.iter().any(|a| {
        let f = &a.facts;
        if f.kind != StmtKind::Insert || f.on_conflict || a.seq < r.step.seq {
            return false;
        }
        let Some(ai) = flow.position(a.seq) else {
            return false;
        };
        let Some(table) = f.writes.first() else {
            return false;
        };
        let columns: Vec<&str> = f.inserts.iter().map(|(c, _)| c.as_str()).collect();
        let Some(key) = cx
            .program
            .schema(w.step.span.file)
            .unique_within(&table.name, &columns)
        else {
            return false;
        };
        f.inserts
            .iter()
            .any(|(c, o)| key.iter().any(|k| *k == **c) && flow.flows_from(o, r.step, ai))
    })
}

/// What a write sets, and the `col = value` conditions that name its row.
type Written<'a> = (Cow<'a, [SetItem]>, Cow<'a, [Pred]>);

/// What a write sets, and the `col = value` conditions that name its row: an `UPDATE`'s `SET`
/// and `WHERE`; an upsert's `DO UPDATE SET` items that overwrite the row whatever it holds
/// (`excluded.c` read as the value inserted into `c`) and its conflict target's columns with
/// the values inserted there. `None` for any other statement.
fn written(w: &Step) -> Option<Written<'_>> {
    let f = &w.facts;
    if f.kind == StmtKind::Update && !f.sets.is_empty() {
        return Some((Cow::Borrowed(&f.sets[..]), Cow::Borrowed(&f.filters[..])));
    }
    let x = f.extra();
    if f.kind != StmtKind::Insert || !f.upsert || x.conflict_on.is_empty() {
        return None;
    }
    let inserted = |c: &str| f.inserts.iter().find(|(i, _)| *i == *c).map(|(_, o)| o);
    let filters = x
        .conflict_on
        .iter()
        .map(|c| {
            inserted(c).map(|o| Pred {
                column: c.clone(),
                value: o.clone(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let sets: Vec<SetItem> = w
        .overwrites()
        .filter_map(|c| {
            let (_, v) = x.conflict_sets.iter().find(|(s, _)| s == c)?;
            let value = match &v.idents[..] {
                [i] if v.params.is_empty() => excluded(i),
                _ => None,
            };
            let value = match value {
                Some(column) => inserted(column)?.clone(),
                None => v.clone(),
            };
            Some(SetItem {
                column: c.clone(),
                value,
                span: None,
            })
        })
        .collect();
    (!sets.is_empty()).then_some((Cow::Owned(sets), Cow::Owned(filters)))
}

/// The write's `WHERE` (`filters`) names the same row as the read's: (key columns) with equal
/// values, and the key the read returned (`WHERE id = $1` bound to `row.id` of a row read by
/// another key): the table's unique key among such columns when the schema gives one, else the
/// first that is no version (`AND version = row.version` compares, it names no row). The second
/// value says whether a key the read returned was needed to name the row.
fn same_row(cx: &Context, r: &Step, w: &Step, filters: &[Pred]) -> Option<(Vec<String>, bool)> {
    let mut keys: Vec<String> = filters
        .iter()
        .filter(|wp| {
            r.facts.filters.iter().any(|rp| {
                rp.column == wp.column
                    && (value_key(&rp.value, r) == value_key(&wp.value, w)
                        || field_of_read(wp, w, r))
            })
        })
        .map(|p| p.column.to_string())
        .collect();
    let candidates: Vec<&str> = filters
        .iter()
        .filter(|wp| key_of_read(wp, w, r))
        .map(|p| p.column.as_str())
        .collect();
    let schema = cx.program.schema(w.span.file);
    let table = w.facts.writes.first().map_or("", |t| t.name.as_str());
    let returned = match schema.unique_within(table, &candidates) {
        Some(key) => key,
        None => candidates
            .into_iter()
            .find(|c| !is_version(c))
            .map(|c| vec![c.to_string()])
            .unwrap_or_default(),
    };
    let mut needed = false;
    for c in returned {
        if !keys.contains(&c) {
            keys.push(c);
            needed = true;
        }
    }
    (!keys.is_empty()).then_some((keys, needed))
}

/// The value set carries the read's own value of the column it sets (`n` of `row.n + 1`), by
/// name: a bound host value computed from that field of the row.
fn through_column(set: &SetItem, w: &Step, r: &Step) -> bool {
    let column = unqualified(&set.column);
    set.value.params.iter().any(|p| {
        w.host().inputs.iter().any(|i| {
            i.param == *p
                && i.from.contains(&r.seq)
                && i.fields_of(r.seq)
                    .is_some_and(|f| f.iter().any(|f| f.eq_ignore_ascii_case(column)))
        })
    })
}

/// The write's key is the value the read returned in that column (`WHERE id = $1` bound to
/// `row.id` of a row read by another key, or the `id` of the row read whole and converted):
/// the row read. Not a value built from other fields of it (a new record made from the row's
/// name, whose `id` is its own).
fn key_of_read(wp: &Pred, w: &Step, r: &Step) -> bool {
    let only_the_key = |i: &Input| {
        !wp.value.params.contains(&i.param)
            || i.fields_of(r.seq)
                .is_none_or(|f| f.iter().all(|f| f.eq_ignore_ascii_case(&wp.column)))
    };
    field_of_read(wp, w, r) && w.host().inputs.iter().all(only_the_key)
}

/// Computed from the current row (`SET n = n + $1`): not a lost update.
fn relative(set: &SetItem, w: &Step) -> bool {
    set.value.idents.iter().any(|i| !is_var(i, w))
}

/// A parameter or a variable: a value that comes from outside SQL.
fn from_outside(o: &Operand, step: &Step) -> bool {
    !o.params.is_empty() || o.idents.iter().any(|i| is_var(i, step))
}

/// Does the value written come from the read? `Some(true)` when the data flow shows it,
/// `Some(false)` when only the column overlap suggests it, `None` when it does not.
fn evidence(flow: &Flow, set: &SetItem, r: &Step, w: usize) -> Option<bool> {
    let o = &set.value;
    // The column written back was read: a value computed only from other columns (a file
    // found by the row's name, then its line counts stored) overwrites nothing it saw.
    let read = r.facts.columns.iter().any(|c| *c == set.column || c == "*");
    let ws = flow.steps[w].step;
    if flow.flows_from(o, r, w) {
        return (!other_columns(o, r, ws, &set.column) && (read || !r.facts.parsed))
            .then_some(true);
    }
    let w = ws;
    // Variables and bound host values are followed; only a parameter whose value txlint never
    // saw (a `$1` in a script, an unrecognised binding) falls back to the column overlap.
    let unseen = o
        .params
        .iter()
        .any(|p| !w.host().inputs.iter().any(|i| i.param == *p));
    (read && unseen).then_some(false)
}

/// The value carries the read only through other columns of its row (`SET total = $1` with
/// `total = usage.cost * secs`): it writes back nothing of `column` that it saw. A field the
/// read does not name as a column (an alias, a renamed struct field) proves nothing.
fn other_columns(o: &Operand, r: &Step, w: &Step, column: &str) -> bool {
    let is_column = |f: &String| {
        r.facts
            .columns
            .iter()
            .any(|c| c == "*" || c.eq_ignore_ascii_case(f))
    };
    let mut inputs = w
        .host()
        .inputs
        .iter()
        .filter(|i| o.params.contains(&i.param) && i.from.contains(&r.seq))
        .peekable();
    inputs.peek().is_some()
        && inputs.all(|i| {
            i.fields_of(r.seq).is_some_and(|f| {
                f.iter().all(is_column) && !f.iter().any(|f| f.eq_ignore_ascii_case(column))
            })
        })
        && !o.idents.iter().any(|i| is_var(i, w))
}

/// The write lets the column only move one way: its `WHERE` compares the column with the value
/// it sets (`SET seen_at = $2 WHERE id = $1 AND (seen_at IS NULL OR seen_at < $2)`). A run that
/// read before another wrote waits, tests the new row again and writes only a value past it:
/// what the other wrote is never set back.
fn one_way(w: &Step, set: &SetItem) -> bool {
    // The value set: one parameter, or one variable (PL/pgSQL).
    let v = &set.value;
    let param = match (&v.params[..], &v.idents[..]) {
        ([p], []) if v.text.trim() == format!("${p}") => format!("${p}"),
        ([], [i]) if v.text.trim() == i.as_str() => i.to_ascii_lowercase().to_string(),
        _ => return false,
    };
    let Some(condition) = w.facts.extra().condition.as_deref() else {
        return false;
    };
    let text = condition.text.to_ascii_lowercase();
    let column = unqualified(&set.column).to_ascii_lowercase();
    [("<", ">"), ("<=", ">="), (">", "<"), (">=", "<=")]
        .iter()
        .any(|(op, mirrored)| {
            compared(&text, &format!("{column} {op} {param}"))
                || compared(&text, &format!("{param} {mirrored} {column}"))
        })
}

/// `text` holds `comparison` as a whole: not inside a longer name or parameter (`$2` in `$21`);
/// a column may be qualified (`t.seen_at < $2`).
fn compared(text: &str, comparison: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    text.match_indices(comparison).any(|(at, m)| {
        let before = text[..at].chars().next_back();
        let after = text[at + m.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The `UPDATE` checks a value it read (or a version) besides the row key: compare-and-swap.
fn compares(w: &Step, r: &Step, keys: &[String]) -> bool {
    w.facts.filters.iter().any(|p| {
        !keys.iter().any(|k| *k == *p.column)
            && from_outside(&p.value, w)
            && (is_version(&p.column) || r.facts.columns.iter().any(|c| *c == p.column || c == "*"))
    })
}

/// The `UPDATE` tests a state of the row that its own `SET` leaves (`WHERE activated_at IS
/// NULL` with `SET activated_at = now()`, `WHERE status = 'trial'` with `SET status =
/// 'active'`): a second run that read the row before the first committed re-checks its `WHERE`
/// on the new version and matches nothing, so its value is never written.
fn leaves_state(w: &Step) -> bool {
    let f = &w.facts;
    let set = |column: &str| f.sets.iter().find(|s| unqualified(&s.column) == column);
    let by_test = f.extra().tests.iter().any(|t| {
        null_test(t).is_some_and(|(column, null)| {
            // Any value but NULL leaves `IS NULL` (a claim sets a worker, a time).
            set(column).is_some_and(|s| null == (constant(&s.value, w).as_deref() != Some("null")))
        })
    });
    by_test
        || f.filters.iter().any(|p| {
            set(unqualified(&p.column)).is_some_and(|s| {
                matches!(
                    (constant(&p.value, w), constant(&s.value, w)),
                    (Some(a), Some(b)) if !same_constant(&a, &b)
                )
            })
        })
}

/// `c IS NULL` (true) or `c IS NOT NULL` (false), with its column unqualified.
fn null_test(test: &str) -> Option<(&str, bool)> {
    let (column, null) = match test.strip_suffix(" is null") {
        Some(c) => (c, true),
        None => (test.strip_suffix(" is not null")?, false),
    };
    let column = unqualified(column.trim());
    column
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then_some((column, null))
}

fn is_version(column: &str) -> bool {
    column == "version" || column.ends_with("_version") || column == "revision"
}
