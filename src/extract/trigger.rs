//! `CREATE TRIGGER`: the table and events a trigger fires on, its timing, its function, the
//! transition tables it names and the values its `WHEN` requires of the new row.

use super::sql::{paren_group, routine_name_at};
use crate::model::*;
use crate::parse::changes::{ColumnTest, column_test};
use crate::parse::lex::{Kind, Token};
use crate::source::Span;

/// `CREATE [OR REPLACE] [CONSTRAINT] TRIGGER name BEFORE|AFTER|INSTEAD OF event [OR ..] ON
/// table .. EXECUTE FUNCTION|PROCEDURE f(..)`. An `INSTEAD OF` trigger (on a view) runs its
/// function in place of the row's write: read as one that runs before it.
pub(super) fn trigger(src: &str, t: &[Token], span: Span) -> Option<Trigger> {
    if !t.first()?.is(src, "create") {
        return None;
    }
    let at = t.iter().take(5).position(|w| w.is(src, "trigger"))?;
    let (_, after_name) = routine_name_at(src, t, at + 1)?;
    let timing = t.get(after_name)?;
    let instead = timing.is(src, "instead") && t.get(after_name + 1)?.is(src, "of");
    let before = if timing.is(src, "before") || instead {
        true
    } else if timing.is(src, "after") {
        false
    } else {
        return None;
    };
    let on = after_name + t[after_name..].iter().position(|w| w.is(src, "on"))?;
    let mut events = TriggerEvents::default();
    for w in &t[after_name + 1..on] {
        events.insert |= w.is(src, "insert");
        events.update |= w.is(src, "update");
        events.delete |= w.is(src, "delete");
    }
    let (table, _) = routine_name_at(src, t, on + 1)?;
    let execute = on + t[on..].iter().position(|w| w.is(src, "execute"))?;
    let (function, _) = routine_name_at(src, t, execute + 2)?;
    let for_each_row = t[on..execute]
        .windows(2)
        .any(|w| w[0].is(src, "each") && w[1].is(src, "row"));
    // `REFERENCING {OLD | NEW} TABLE [AS] name ...`
    let mut transition = Vec::new();
    let clause = &t[on..execute];
    for (i, w) in clause.iter().enumerate() {
        if (w.is(src, "old") || w.is(src, "new"))
            && clause.get(i + 1).is_some_and(|n| n.is(src, "table"))
        {
            let at = i + 2 + usize::from(clause.get(i + 2).is_some_and(|a| a.is(src, "as")));
            if let Some((name, _)) = routine_name_at(src, clause, at) {
                transition.push(name.into());
            }
        }
    }
    // `UPDATE OF a, b`: the columns run up to the next event or `ON`.
    let mut changes: Vec<Name> = Vec::new();
    let events_clause = &t[after_name + 1..on];
    if let Some(of) = events_clause
        .windows(2)
        .position(|w| w[0].is(src, "update") && w[1].is(src, "of"))
    {
        changes = events_clause[of + 2..]
            .iter()
            .take_while(|w| !w.is(src, "or"))
            .filter(|w| !w.is_punct(src, ","))
            .map(|w| match w.kind {
                Kind::QuotedIdent => Name::from(w.text(src).trim_matches('"')),
                _ => Name::from(w.text(src).to_ascii_lowercase().as_str()),
            })
            .collect();
    }
    if changes.is_empty() {
        changes = when_changes(src, &t[on..execute]);
    }
    Some(Trigger {
        changes,
        table: table.into(),
        events,
        before,
        for_each_row,
        function: function.into(),
        transition,
        requires: when_requires(src, &t[on..execute]),
        span,
    })
}

/// `WHEN (NEW.a IS DISTINCT FROM OLD.a OR ..)`: the columns of which an `UPDATE` must change one.
fn when_changes(src: &str, t: &[Token]) -> Vec<Name> {
    let Some(at) = t.iter().position(|w| w.is(src, "when")) else {
        return Vec::new();
    };
    let Some(group) = paren_group(src, &t[at + 1..], |_| false) else {
        return Vec::new();
    };
    let tokens: Vec<Token> = group.parts.concat().into_iter().cloned().collect();
    match column_test(src, &tokens) {
        Some(ColumnTest::Changed(cols)) => cols.iter().map(|c| Name::from(c.as_str())).collect(),
        _ => Vec::new(),
    }
}

/// The `NEW.col = 'value'` conjuncts of a trigger's `WHEN (..)`, when it is nothing but
/// conjuncts of that form and others it does not constrain values with (`OLD.col != 'value'`).
fn when_requires(src: &str, t: &[Token]) -> Vec<(Name, String)> {
    let Some(at) = t.iter().position(|w| w.is(src, "when")) else {
        return Vec::new();
    };
    let Some(condition) = paren_group(src, &t[at + 1..], |w| w.is(src, "and") || w.is(src, "or"))
    else {
        return Vec::new();
    };
    if condition.cuts.iter().any(|c| c.is(src, "or")) {
        return Vec::new();
    }
    condition
        .parts
        .iter()
        .filter_map(|p| match p.as_slice() {
            [new, dot, col, eq, lit]
                if new.is(src, "new")
                    && dot.is_punct(src, ".")
                    && eq.is_punct(src, "=")
                    && lit.text(src).starts_with('\'') =>
            {
                Some((
                    col.text(src).to_ascii_lowercase().into(),
                    lit.text(src).to_string(),
                ))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::split::split;
    use crate::source::Dialect;

    fn parsed(sql: &str) -> Trigger {
        let s = split(sql, Dialect::Postgres, false);
        trigger(sql, &s.statements[0].tokens, Span::new(0, 0..sql.len())).expect("a trigger")
    }

    #[test]
    fn reads_transition_tables_and_when_values() {
        let t = parsed(
            "CREATE TRIGGER t AFTER UPDATE ON docs REFERENCING OLD TABLE AS gone NEW TABLE fresh \
             FOR EACH STATEMENT WHEN (NEW.status = 'done' AND OLD.status <> 'done') \
             EXECUTE FUNCTION f()",
        );
        assert_eq!(t.transition, vec![Name::from("gone"), Name::from("fresh")]);
        assert_eq!(
            t.requires,
            vec![(Name::from("status"), "'done'".to_string())]
        );
        assert!(!t.for_each_row && !t.before && t.events.update);
        // An `OR` at the top level requires nothing of any one column.
        let t = parsed(
            "CREATE TRIGGER t AFTER UPDATE ON docs FOR EACH ROW \
             WHEN (NEW.status = 'done' OR NEW.kind = 'x') EXECUTE FUNCTION f()",
        );
        assert!(t.requires.is_empty() && t.transition.is_empty());
    }

    #[test]
    fn instead_of_triggers_run_in_place_of_the_write() {
        let t = parsed(
            "CREATE TRIGGER w INSTEAD OF UPDATE OR DELETE ON jobs_view \
             FOR EACH ROW EXECUTE FUNCTION write_jobs()",
        );
        assert!(t.before && t.for_each_row && t.events.update && t.events.delete);
        assert!(!t.events.insert && t.changes.is_empty());
        assert_eq!(
            (t.table.as_str(), t.function.as_str()),
            ("jobs_view", "write_jobs")
        );
    }

    #[test]
    fn reads_the_columns_an_update_must_change() {
        let changes = |sql: &str| parsed(sql).changes;
        assert_eq!(
            changes(
                "CREATE TRIGGER t BEFORE UPDATE OF status, \"Owner\" OR DELETE ON docs \
                 FOR EACH ROW EXECUTE FUNCTION f()"
            ),
            vec![Name::from("status"), Name::from("Owner")]
        );
        assert_eq!(
            changes(
                "CREATE TRIGGER t AFTER UPDATE ON docs FOR EACH ROW \
                 WHEN (OLD.status IS DISTINCT FROM NEW.status OR NEW.a <> OLD.a) \
                 EXECUTE FUNCTION f()"
            ),
            vec![Name::from("status"), Name::from("a")]
        );
        // Both changed, or anything else: any update may fire it.
        for sql in [
            "CREATE TRIGGER t AFTER UPDATE ON docs FOR EACH ROW \
             WHEN (NEW.a <> OLD.a AND NEW.b <> OLD.b) EXECUTE FUNCTION f()",
            "CREATE TRIGGER t AFTER UPDATE ON docs FOR EACH ROW \
             WHEN (NEW.status = 'done') EXECUTE FUNCTION f()",
            "CREATE TRIGGER t AFTER UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION f()",
        ] {
            assert!(changes(sql).is_empty(), "{sql}");
        }
    }
}
