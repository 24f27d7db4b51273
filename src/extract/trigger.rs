//! `CREATE TRIGGER`: the table and events a trigger fires on, its timing, its function, the
//! transition tables it names and the values its `WHEN` requires of the new row.

use super::sql::{paren_group, routine_name_at};
use crate::model::*;
use crate::parse::lex::Token;
use crate::source::Span;

/// `CREATE [OR REPLACE] [CONSTRAINT] TRIGGER name BEFORE|AFTER event [OR ..] ON table ..
/// EXECUTE FUNCTION|PROCEDURE f(..)`. `INSTEAD OF` triggers (on views) are not read.
pub(super) fn trigger(src: &str, t: &[Token], span: Span) -> Option<Trigger> {
    if !t.first()?.is(src, "create") {
        return None;
    }
    let at = t.iter().take(5).position(|w| w.is(src, "trigger"))?;
    let (_, after_name) = routine_name_at(src, t, at + 1)?;
    let timing = t.get(after_name)?;
    let before = if timing.is(src, "before") {
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
    Some(Trigger {
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
}
