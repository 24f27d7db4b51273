//! Locks a statement takes: row-locking clauses (and the tables they name through aliases),
//! advisory-lock calls and the other functions it calls, `LOCK TABLE`.

use super::*;

pub(super) const LOCK_FUNCTIONS: &[(&str, LockScope, AdvisoryOp, bool)] = {
    use AdvisoryOp::*;
    use LockScope::*;
    &[
        ("pg_advisory_lock", Session, Lock, false),
        ("pg_advisory_lock_shared", Session, Lock, true),
        ("pg_try_advisory_lock", Session, TryLock, false),
        ("pg_try_advisory_lock_shared", Session, TryLock, true),
        ("pg_advisory_unlock", Session, Unlock, false),
        ("pg_advisory_unlock_shared", Session, Unlock, true),
        ("pg_advisory_unlock_all", Session, UnlockAll, false),
        ("pg_advisory_xact_lock", Transaction, Lock, false),
        ("pg_advisory_xact_lock_shared", Transaction, Lock, true),
        ("pg_try_advisory_xact_lock", Transaction, TryLock, false),
        (
            "pg_try_advisory_xact_lock_shared",
            Transaction,
            TryLock,
            true,
        ),
        ("get_lock", Session, TryLock, false),
        ("release_lock", Session, Unlock, false),
        ("release_all_locks", Session, UnlockAll, false),
    ]
};

/// Words that may stand before `(` without being a call, and built-ins that do no work a lock
/// could protect. A call to anything else may be the protected work itself.
pub(super) const NOT_WORK: &[&str] = &[
    "in",
    "exists",
    "values",
    "as",
    "any",
    "all",
    "some",
    "over",
    "filter",
    "within",
    "array",
    "row",
    "cast",
    "not",
    "and",
    "or",
    "select",
    "from",
    "where",
    "using",
    "on",
    "lateral",
    "when",
    "then",
    "else",
    "between",
    "returning",
    "coalesce",
    "nullif",
    "greatest",
    "least",
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "hashtext",
    "hashtextextended",
    "abs",
    "lower",
    "upper",
    "length",
    "now",
    "format",
    "concat",
    "md5",
    "to_char",
    "substring",
    "trim",
    "extract",
    "crc32",
];

/// Words after which `(` opens a subquery or a list, not a function call's arguments.
pub(super) const NOT_CALL: &[&str] = &[
    "in",
    "exists",
    "from",
    "join",
    "as",
    "lateral",
    "any",
    "all",
    "some",
    "using",
    "materialized",
    "values",
    "select",
    "where",
    "and",
    "or",
    "not",
    "on",
    "when",
    "then",
    "else",
    "set",
    "by",
];

/// `FOR UPDATE OF t` names a table by its alias (`FROM task t`): the locked table's name.
pub(super) fn resolve_lock_aliases(c: &Cursor, f: &mut Facts) {
    if f.row_locks.iter().all(|l| l.of.is_empty()) {
        return;
    }
    let tables: Vec<String> = f.reads.iter().map(|t| t.name.to_string()).collect();
    // `<table> [AS] <alias>`: a name read as a table, followed by another name.
    let mut aliases: Vec<(String, String)> = Vec::new();
    for i in 0..c.t.len() {
        let Some((name, next)) = c.name(i) else {
            continue;
        };
        if !tables.contains(&name) || (i > 0 && c.punct(i - 1, ".")) {
            continue;
        }
        let at = if c.is(next, "as") { next + 1 } else { next };
        if let Some(alias) = c.word(at).filter(|w| !ALIAS_STOP.contains(&w.as_str())) {
            aliases.push((alias, name));
        }
    }
    for l in &mut f.row_locks {
        for o in &mut l.of {
            if !tables.contains(o)
                && let Some((_, t)) = aliases.iter().find(|(a, _)| a == o)
            {
                *o = t.clone();
            }
        }
    }
}

/// Words after a table name that are not its alias.
pub(super) const ALIAS_STOP: &[&str] = &[
    "where",
    "join",
    "inner",
    "left",
    "right",
    "full",
    "cross",
    "on",
    "using",
    "set",
    "group",
    "order",
    "limit",
    "offset",
    "for",
    "union",
    "except",
    "intersect",
    "having",
    "window",
    "natural",
    "lateral",
    "returning",
    "values",
    "select",
    "default",
    "tablesample",
    "only",
];

impl Reader<'_> {
    pub(super) fn row_locks(&self, c: &Cursor, f: &mut Facts, blank: &mut Vec<Range<usize>>) {
        let n = c.t.len();
        // A `WITH` query nothing refers to is not run (unless it modifies data): its locking
        // clause takes no lock.
        let dead: Vec<(usize, usize)> = ctes(c)
            .into_iter()
            .filter(|q| !q.referenced && !q.modifies)
            .map(|q| q.body)
            .collect();
        let mut i = 0;
        while i < n {
            let start = i;
            let strength = if c.is(i, "for") && c.is(i + 1, "update") {
                i += 2;
                RowLockStrength::Update
            } else if c.is(i, "for") && c.is(i + 1, "share") {
                i += 2;
                RowLockStrength::Share
            } else if c.is(i, "for")
                && c.is(i + 1, "no")
                && c.is(i + 2, "key")
                && c.is(i + 3, "update")
            {
                i += 4;
                RowLockStrength::NoKeyUpdate
            } else if c.is(i, "for") && c.is(i + 1, "key") && c.is(i + 2, "share") {
                i += 3;
                RowLockStrength::KeyShare
            } else if self.dialect == Dialect::Mysql
                && c.is(i, "lock")
                && c.is(i + 1, "in")
                && c.is(i + 2, "share")
                && c.is(i + 3, "mode")
            {
                i += 4;
                RowLockStrength::Share
            } else {
                i += 1;
                continue;
            };
            let mut of = Vec::new();
            if c.is(i, "of") {
                i += 1;
                while let Some((name, next)) = c.name(i) {
                    of.push(name);
                    i = next;
                    if c.punct(i, ",") {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            let mut wait = LockWait::Block;
            if c.is(i, "nowait") {
                wait = LockWait::Nowait;
                i += 1;
            } else if c.is(i, "skip") && c.is(i + 1, "locked") {
                wait = LockWait::SkipLocked;
                i += 2;
            } else if c.is(i, "wait") && c.t.get(i + 1).is_some_and(|t| t.kind == Kind::Number) {
                i += 2;
            }
            let last = i - 1;
            let clause: Vec<String> = c.t[start..i]
                .iter()
                .map(|t| {
                    let text = t.text(c.src);
                    const KEYWORDS: &[&str] = &[
                        "for", "update", "no", "key", "share", "of", "nowait", "skip", "locked",
                        "lock", "in", "mode", "wait",
                    ];
                    if t.kind == Kind::Word && KEYWORDS.iter().any(|k| text.eq_ignore_ascii_case(k))
                    {
                        text.to_ascii_uppercase()
                    } else {
                        text.to_string()
                    }
                })
                .collect();
            blank.push(c.t[start].start()..c.t[last].end());
            if dead
                .iter()
                .any(|&(open, close)| open < start && start < close)
            {
                continue;
            }
            f.row_locks.push(RowLock {
                strength,
                clause: clause.join(" ").replace(" ,", ","),
                of,
                wait,
                span: self.tok_span(c.t, start, last),
                ordered: false,
            });
        }
    }

    /// Advisory-lock calls, and whether anything else is called.
    pub(super) fn calls(&self, c: &Cursor, f: &mut Facts) {
        let mut i = 0;
        while i + 1 < c.t.len() {
            if !(c.t[i].kind == Kind::Word && c.punct(i + 1, "(")) {
                i += 1;
                continue;
            }
            let name = c.t[i].text(c.src);
            if let Some(&(function, scope, op, shared)) = LOCK_FUNCTIONS
                .iter()
                .find(|(n, ..)| n.eq_ignore_ascii_case(name))
            {
                let close = c.close(i + 1);
                // MySQL's `GET_LOCK(name, timeout)` is keyed by its name alone, as
                // `RELEASE_LOCK(name)` is: the timeout is no part of the key.
                let end = match function {
                    "get_lock" => c.top_level_comma(i + 1, close).unwrap_or(close),
                    _ => close,
                };
                let args = c.t[i + 1].end()..c.t[end].start().max(c.t[i + 1].end());
                let key = c.src[args].split_whitespace().collect::<Vec<_>>().join(" ");
                f.extra_mut().advisory.push(AdvisoryCall {
                    function: function.to_string(),
                    scope,
                    op,
                    shared,
                    key,
                    span: self.tok_span(c.t, i, close),
                });
                // The key expression is not work the lock protects.
                i = close + 1;
                continue;
            }
            let subquery = c.is(i + 2, "select") || c.is(i + 2, "with");
            let qualified = i > 0 && c.punct(i - 1, ".");
            if !subquery
                && (qualified || !NOT_WORK.iter().any(|w| w.eq_ignore_ascii_case(name)))
                && f.kind == StmtKind::Select
            {
                f.calls_functions = true;
            }
            i += 1;
        }
    }

    pub(super) fn table_lock(&self, c: &Cursor) -> TableLock {
        let mut tables = Vec::new();
        let mut i = if c.is(1, "table") { 2 } else { 1 };
        if c.is(i, "only") {
            i += 1;
        }
        while let Some((name, next)) = c.name(i) {
            tables.push(TableRef {
                name: name.into(),
                span: self.tok_span(c.t, i, next - 1),
            });
            i = next;
            if c.punct(i, "*") {
                i += 1;
            }
            if c.punct(i, ",") {
                i += 1;
            } else {
                break;
            }
        }
        let mode = (0..c.t.len())
            .find(|&i| c.is(i, "in"))
            .map(|i| {
                let end = (i + 1..c.t.len()).find(|&j| c.is(j, "mode")).unwrap_or(i);
                let words: Vec<_> = (i + 1..end).filter_map(|j| c.word(j)).collect();
                words.join(" ").to_ascii_uppercase()
            })
            .unwrap_or_else(|| "ACCESS EXCLUSIVE".to_string());
        TableLock {
            tables,
            mode,
            span: self.tok_span(c.t, 0, c.t.len() - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::facts_of;
    use crate::model::*;

    #[test]
    fn row_lock_clauses_are_read_as_written() {
        let (f, _) =
            facts_of("SELECT * FROM jobs j WHERE j.id = 1 FOR NO KEY UPDATE OF j SKIP LOCKED");
        let l = &f.row_locks[0];
        assert_eq!(l.clause, "FOR NO KEY UPDATE OF j SKIP LOCKED");
        assert_eq!(l.wait, LockWait::SkipLocked);
        // The alias names the table the lock takes rows of.
        assert_eq!(l.of, vec!["jobs".to_string()]);
        assert!(
            f.parsed,
            "the statement still parses with the clause blanked"
        );
    }

    #[test]
    fn advisory_calls_and_table_locks() {
        let (f, _) = facts_of("SELECT pg_advisory_xact_lock(hashtext('jobs'), 1)");
        let a = &f.extra().advisory[0];
        assert_eq!(a.function, "pg_advisory_xact_lock");
        assert_eq!(a.scope, LockScope::Transaction);
        assert_eq!(a.key, "hashtext('jobs'), 1");
        let (f, _) = facts_of("LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE");
        assert!(f.extra().table_lock.is_some());
        let (f, _) = facts_of("SELECT id FROM accounts WHERE id = 1");
        assert!(f.row_locks.is_empty() && f.extra().advisory.is_empty());
    }
}
