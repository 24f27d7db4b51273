//! What a statement reads and writes: its tables, CTEs and shape (`WHERE`, `RETURNING`,
//! `ON CONFLICT`), and the tables it creates.

use super::*;

/// `CREATE [GLOBAL | LOCAL] [TEMP | TEMPORARY | UNLOGGED] TABLE [IF NOT EXISTS] name`: the
/// table's name, and whether it is temporary (seen by its session only); none for `IF NOT
/// EXISTS` of a table that is not temporary.
pub(super) fn created_table(c: &Cursor) -> Option<(Name, bool)> {
    if !c.is(0, "create") {
        return None;
    }
    let at = (1..5).find(|&i| c.is(i, "table"))?;
    let between = |w: &str| (1..at).any(|i| c.is(i, w));
    if !(1..at).all(|i| {
        c.word_is(i, |w| {
            matches!(w, "global" | "local" | "temp" | "temporary" | "unlogged")
        })
    }) {
        return None;
    }
    let temp = between("temp") || between("temporary");
    let mut i = at + 1;
    if c.is(i, "if") && c.is(i + 1, "not") && c.is(i + 2, "exists") {
        // A table that may have been there before is shared like any other (a temporary
        // one is still the session's).
        if !temp {
            return None;
        }
        i += 3;
    }
    let (name, _) = c.name(i)?;
    Some((name.into(), temp))
}

/// `CREATE [UNLOGGED] TABLE | [UNIQUE] INDEX | SEQUENCE | SCHEMA IF NOT EXISTS name`: the
/// object created when missing (not a temporary table, which is the session's own).
pub(super) fn created_if_missing(c: &Cursor) -> Option<Name> {
    if !c.is(0, "create") {
        return None;
    }
    let kinds = |w: &str| matches!(w, "table" | "index" | "sequence" | "schema");
    let at = (1..4).find(|&i| c.word_is(i, kinds))?;
    if !(1..at).all(|i| c.word_is(i, |w| matches!(w, "unlogged" | "unique"))) {
        return None;
    }
    let i = at + 1;
    if !(c.is(i, "if") && c.is(i + 1, "not") && c.is(i + 2, "exists")) {
        return None;
    }
    let (name, _) = c.name(i + 3)?;
    Some(name.into())
}

/// `CREATE TABLE`, `CREATE UNIQUE INDEX`, `ALTER TABLE`: DDL the schema is read from.
pub(super) fn declares_keys(c: &Cursor) -> bool {
    let mut i = 1;
    while [
        "global",
        "local",
        "temp",
        "temporary",
        "unlogged",
        "or",
        "replace",
    ]
    .iter()
    .any(|w| c.is(i, w))
    {
        i += 1;
    }
    (c.is(0, "create") && (c.is(i, "table") || (c.is(i, "unique") && c.is(i + 1, "index"))))
        || (c.is(0, "alter") && c.is(1, "table"))
}

/// The names a statement's `WITH` clauses define (`WITH j AS (...), k (a, b) AS (...)`), at any
/// depth.
pub(super) fn cte_names(c: &Cursor) -> Vec<String> {
    ctes(c).into_iter().map(|q| q.name).collect()
}

/// One `WITH` query of a statement.
pub(super) struct Cte {
    pub(super) name: String,
    /// Token indices of its body's parentheses.
    pub(super) body: (usize, usize),
    /// Its name appears outside its own definition.
    pub(super) referenced: bool,
    /// Its body writes (`INSERT`, `UPDATE`, `DELETE`): it runs whether referred to or not.
    pub(super) modifies: bool,
}

/// The `WITH` queries of a statement, at any depth.
pub(super) fn ctes(c: &Cursor) -> Vec<Cte> {
    let mut found: Vec<(String, usize, (usize, usize))> = Vec::new();
    for i in (0..c.t.len()).filter(|&i| c.is(i, "with")) {
        let mut j = i + 1;
        if c.is(j, "recursive") {
            j += 1;
        }
        // name [(columns)] AS [NOT] [MATERIALIZED] ( body ) [, name ...]
        loop {
            let name = match c.t.get(j) {
                Some(t) if t.kind == Kind::Word => t.text(c.src).to_ascii_lowercase(),
                Some(t) if t.kind == Kind::QuotedIdent => {
                    t.text(c.src).trim_matches('"').to_string()
                }
                _ => break,
            };
            let mut k = j + 1;
            if c.punct(k, "(") {
                k = c.close(k) + 1;
            }
            if !c.is(k, "as") {
                break;
            }
            k += 1;
            while c.is(k, "not") || c.is(k, "materialized") {
                k += 1;
            }
            if !c.punct(k, "(") {
                break;
            }
            let end = c.close(k);
            found.push((name, j, (k, end)));
            if !c.punct(end + 1, ",") {
                break;
            }
            j = end + 2;
        }
    }
    let word = |i: usize| match c.t[i].kind {
        Kind::Word => Some(c.t[i].text(c.src).to_ascii_lowercase()),
        Kind::QuotedIdent => Some(c.t[i].text(c.src).trim_matches('"').to_string()),
        _ => None,
    };
    found
        .iter()
        .map(|(name, at, (open, close))| Cte {
            name: name.clone(),
            body: (*open, *close),
            referenced: (0..c.t.len())
                .filter(|&i| i != *at && (i < *open || i > *close))
                .any(|i| word(i).as_deref() == Some(name.as_str())),
            modifies: (*open..*close)
                .any(|i| c.is(i, "insert") || c.is(i, "update") || c.is(i, "delete")),
        })
        .collect()
}

/// Words that end a `FROM` list.
pub(super) fn ends_from_list(w: &str) -> bool {
    matches!(
        w,
        "where"
            | "group"
            | "having"
            | "window"
            | "order"
            | "limit"
            | "offset"
            | "fetch"
            | "for"
            | "union"
            | "except"
            | "intersect"
            | "returning"
            | "when"
            | "set"
    )
}

/// Words that end a table list rather than name a table or alias.
pub(super) fn is_clause_word(w: &str) -> bool {
    matches!(
        w,
        "where"
            | "join"
            | "inner"
            | "left"
            | "right"
            | "full"
            | "cross"
            | "natural"
            | "on"
            | "using"
            | "group"
            | "order"
            | "limit"
            | "offset"
            | "for"
            | "union"
            | "except"
            | "intersect"
            | "having"
            | "window"
            | "fetch"
            | "returning"
            | "set"
            | "values"
            | "select"
            | "when"
            | "lock"
            | "tablesample"
            | "default"
            | "outer"
    )
}

impl Reader<'_> {
    /// Lock-order shape: `ORDER BY` at the top level and at each locking clause's level, a key
    /// set, an upsert, `LEAST`/`GREATEST`.
    pub(super) fn shape(&self, c: &Cursor, f: &mut Facts) {
        // Whether the query open at each parenthesis depth has an `ORDER BY` so far.
        let mut ordered = vec![false];
        let (mut locks, mut sorts, mut lists) = (0, false, false);
        for i in 0..c.t.len() {
            if c.punct(i, "(") {
                ordered.push(false);
            } else if c.punct(i, ")") && ordered.len() > 1 {
                ordered.pop();
            }
            let depth = ordered.len() - 1;
            if c.is(i, "order") && c.is(i + 1, "by") {
                ordered[depth] = true;
                f.ordered |= depth == 0;
                sorts = true;
            }
            if let Some(l) = f.row_locks.get_mut(locks)
                && self.span(c.t[i].start()..c.t[i].end()).start() == l.span.start()
            {
                l.ordered = ordered[depth];
                locks += 1;
            }
            if (c.is(i, "least") || c.is(i, "greatest")) && c.punct(i + 1, "(") {
                f.orders = true;
            }
            const FRESH: [&str; 6] = [
                "gen_random_uuid",
                "uuidv7",
                "uuidv4",
                "uuid_generate_v4",
                "uuid_generate_v7",
                "nextval",
            ];
            if FRESH.iter().any(|g| c.is(i, g)) && c.punct(i + 1, "(") {
                f.fresh = true;
            }
            // A list of keys, not a subquery (whose rows follow the plan of the subquery).
            if (c.is(i, "any") || c.is(i, "in") || c.is(i, "unnest"))
                && c.punct(i + 1, "(")
                && !(c.is(i + 2, "select") || c.is(i + 2, "with") || c.is(i + 2, "values"))
            {
                f.key_set = true;
                let rows = c.is(i, "unnest")
                    && i > 0
                    && (c.is(i - 1, "from") || c.is(i - 1, "join") || c.punct(i - 1, ","));
                f.joins_key_list |= rows && depth == 0;
                lists |= rows;
            }
            if (c.is(i, "conflict")
                && (i + 2..c.t.len()).any(|j| c.is(j, "do") && c.is(j + 1, "update")))
                || (c.is(i, "duplicate") && c.is(i + 1, "key") && c.is(i + 2, "update"))
            {
                f.upsert = f.kind == StmtKind::Insert;
            }
            if f.kind == StmtKind::Insert
                && ((c.is(i, "on") && (c.is(i + 1, "conflict") || c.is(i + 1, "duplicate")))
                    || (i == 1 && c.is(i, "ignore")))
            {
                f.on_conflict = true;
            }
        }
        f.rows_from_list = lists && !sorts;
    }

    /// Tables written (after `UPDATE`, `INSERT INTO`, `DELETE FROM`, `MERGE INTO`) and read (in
    /// `FROM` and `USING` lists and after `JOIN`).
    pub(super) fn tables(&self, c: &Cursor, f: &mut Facts) {
        let query = matches!(
            f.kind,
            StmtKind::Select
                | StmtKind::Insert
                | StmtKind::Update
                | StmtKind::Delete
                | StmtKind::Merge
        );
        let ctes = cte_names(c);
        // Open parentheses, and whether each is a function call's (a FROM inside is not a table).
        let mut parens: Vec<bool> = Vec::new();
        // Parenthesis depths at which a FROM list is open: a `,` there starts another table.
        let mut from_lists: Vec<usize> = Vec::new();
        let dml_position = |i: usize| i == 0 || c.punct(i - 1, "(") || c.punct(i - 1, ")");
        for i in 0..c.t.len() {
            if c.punct(i, "(") {
                let call = i > 0
                    && c.t[i - 1].kind == Kind::Word
                    && !c.word_is(i - 1, |w| NOT_CALL.contains(&w))
                    && !(c.is(i + 1, "select") || c.is(i + 1, "with") || c.is(i + 1, "values"));
                parens.push(call);
                continue;
            }
            if c.punct(i, ")") {
                parens.pop();
                from_lists.retain(|&d| d <= parens.len());
                continue;
            }
            if parens.last() == Some(&true) {
                continue;
            }
            let depth = parens.len();
            let in_from = from_lists.last() == Some(&depth);
            let target = if dml_position(i) && c.is(i, "update") {
                Some((i + 1, true))
            } else if dml_position(i)
                && (((c.is(i, "insert") || c.is(i, "merge") || c.is(i, "replace"))
                    && c.is(i + 1, "into"))
                    || (c.is(i, "delete") && c.is(i + 1, "from")))
            {
                Some((i + 2, true))
            } else if query
                && (c.is(i, "from") || c.is(i, "using"))
                && !(i > 0 && (c.is(i - 1, "delete") || c.is(i - 1, "distinct")))
            {
                if !in_from {
                    from_lists.push(depth);
                }
                Some((i + 1, false))
            } else if query && (c.is(i, "join") || (in_from && c.punct(i, ","))) {
                Some((i + 1, false))
            } else {
                if in_from && c.word_is(i, ends_from_list) {
                    from_lists.pop();
                }
                None
            };
            let Some((mut at, write)) = target else {
                continue;
            };
            if c.is(at, "only") || c.is(at, "lateral") {
                at += 1;
            }
            let Some((name, next)) = c.name(at) else {
                continue;
            };
            // A function in FROM (`INSERT INTO t (cols)` is a column list), or no table at all.
            if (!write && c.punct(next, "(")) || is_clause_word(&name) {
                continue;
            }
            // A CTE's name is the statement's own rows, not a table.
            if ctes.contains(&name) {
                continue;
            }
            let r = TableRef {
                name: name.into(),
                span: self.tok_span(c.t, at, next - 1),
            };
            if write {
                f.writes.push(r)
            } else {
                f.reads.push(r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::facts_of;
    use crate::model::*;

    #[test]
    fn writes_and_reads_of_dml_and_ctes() {
        let (f, _) = facts_of("UPDATE accounts SET balance = balance - 1 WHERE id = 7");
        assert_eq!(f.kind, StmtKind::Update);
        assert_eq!(&*f.writes[0].name, "accounts");
        let (f, _) = facts_of(
            "WITH moved AS (DELETE FROM inbox WHERE id = 1 RETURNING *) INSERT INTO archive SELECT * FROM moved",
        );
        let written: Vec<&str> = f.writes.iter().map(|t| &*t.name).collect();
        assert!(
            written.contains(&"inbox") && written.contains(&"archive"),
            "{written:?}"
        );
        // The CTE is not a table.
        assert!(f.reads.iter().all(|t| &*t.name != "moved"));
    }
}
