//! Statement -> [`Facts`]: token-level facts for everything txlint is about, and sqlparser
//! for the statement as a whole.
//!
//! Locking clauses, advisory-lock calls and transaction control are read from tokens because
//! sqlparser rejects several of them (`FOR NO KEY UPDATE`, `FOR UPDATE OF a, b`, `LOCK IN SHARE
//! MODE`) and drops the positions of others. They are blanked out (offsets kept) before the
//! statement goes to sqlparser, so a valid statement still parses.

use std::ops::Range;

use sqlparser::parser::{Parser, ParserError};

use super::lex::{Kind, Token};
use super::split::RawStatement;
use crate::model::*;
use crate::source::Dialect;
use crate::source::{FileId, OffsetMap, Span};

pub use crate::model::ParseFailure;

/// Reads statements of one text (a file, a body) into facts.
pub struct Reader<'a> {
    pub src: &'a str,
    pub map: &'a OffsetMap,
    pub file: FileId,
    pub dialect: Dialect,
    pub parser: &'a dyn sqlparser::dialect::Dialect,
    /// Calls of other functions are not kept (see [`crate::model::routines`]).
    pub routines: &'a std::collections::HashSet<String>,
}

struct Cursor<'a> {
    src: &'a str,
    t: &'a [Token],
}

impl Cursor<'_> {
    fn is(&self, i: usize, word: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is(self.src, word))
    }
    fn punct(&self, i: usize, p: &str) -> bool {
        self.t.get(i).is_some_and(|t| t.is_punct(self.src, p))
    }
    /// Whether the token at `i` is a word that `test` accepts in lower case (no allocation: the
    /// words tested against are short).
    fn word_is(&self, i: usize, test: impl Fn(&str) -> bool) -> bool {
        let Some(t) = self.t.get(i).filter(|t| t.kind == Kind::Word) else {
            return false;
        };
        let text = t.text(self.src).as_bytes();
        let mut buf = [0u8; 16];
        let Some(lower) = buf.get_mut(..text.len()) else {
            return false;
        };
        lower.copy_from_slice(text);
        lower.make_ascii_lowercase();
        std::str::from_utf8(lower).is_ok_and(test)
    }
    fn word(&self, i: usize) -> Option<String> {
        let t = self.t.get(i)?;
        (t.kind == Kind::Word).then(|| t.text(self.src).to_ascii_lowercase())
    }
    /// Index of the `)` matching the `(` at `open`, or the last token.
    fn close(&self, open: usize) -> usize {
        let mut depth = 0usize;
        for (i, t) in self.t.iter().enumerate().skip(open) {
            if t.is_punct(self.src, "(") {
                depth += 1;
            } else if t.is_punct(self.src, ")") {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i;
                }
            }
        }
        self.t.len().saturating_sub(1)
    }
    /// A possibly qualified name at `i`: (last component normalised, index after the name).
    fn name(&self, i: usize) -> Option<(String, usize)> {
        let mut i = i;
        let mut last;
        loop {
            let t = self.t.get(i)?;
            last = match t.kind {
                Kind::Word => t.text(self.src).to_ascii_lowercase(),
                Kind::QuotedIdent => {
                    // Its opening quote, and its closing one unless the text ended first
                    // (`"jobé` at the end of a file).
                    let s = t.text(self.src);
                    let inner = s.get(1..).unwrap_or_default();
                    let inner = inner.strip_suffix(['"', '`', ']']).unwrap_or(inner);
                    inner.replace("\"\"", "\"")
                }
                _ => return None,
            };
            if self.punct(i + 1, ".") {
                i += 2;
            } else {
                return Some((last, i + 1));
            }
        }
    }
}

const LOCK_FUNCTIONS: &[(&str, LockScope, AdvisoryOp, bool)] = {
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
const NOT_WORK: &[&str] = &[
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
const NOT_CALL: &[&str] = &[
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

fn isolation_at(c: &Cursor, i: usize) -> Option<Isolation> {
    if c.is(i, "serializable") {
        Some(Isolation::Serializable)
    } else if c.is(i, "repeatable") {
        Some(Isolation::RepeatableRead)
    } else if c.is(i, "read") {
        Some(Isolation::ReadCommitted)
    } else {
        let t = c.t.get(i)?;
        isolation_from_str(t.text(c.src).trim_matches(['\'', '"']))
    }
}

fn isolation_from_str(s: &str) -> Option<Isolation> {
    let s = s.to_ascii_lowercase().replace(['-', '_'], " ");
    match s.trim() {
        "serializable" => Some(Isolation::Serializable),
        "repeatable read" => Some(Isolation::RepeatableRead),
        "read committed" | "read uncommitted" => Some(Isolation::ReadCommitted),
        _ => None,
    }
}

/// `CREATE [GLOBAL | LOCAL] [TEMP | TEMPORARY | UNLOGGED] TABLE [IF NOT EXISTS] name`: the
/// table's name, and whether it is temporary (seen by its session only); none for `IF NOT
/// EXISTS` of a table that is not temporary.
fn created_table(c: &Cursor) -> Option<(Name, bool)> {
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

/// `ISOLATION LEVEL x` anywhere in the statement.
fn isolation_clause(c: &Cursor) -> Option<Isolation> {
    (0..c.t.len())
        .find(|&i| c.is(i, "isolation") && c.is(i + 1, "level"))
        .and_then(|i| isolation_at(c, i + 2))
}

impl Reader<'_> {
    fn span(&self, range: Range<usize>) -> Span {
        Span::new(self.file, self.map.host_range(range))
    }

    fn tok_span(&self, t: &[Token], from: usize, to: usize) -> Span {
        self.span(t[from].start..t[to].end)
    }

    /// Facts of one statement, and why sqlparser rejected it if it did.
    pub fn read(&self, stmt: &RawStatement) -> (Facts, Option<ParseFailure>) {
        let c = Cursor {
            src: self.src,
            t: &stmt.tokens,
        };
        let mut f = Facts::default();
        f.kind = self.kind(&c, stmt);
        f.dialect = self.dialect;
        f.modifies = matches!(
            f.kind,
            StmtKind::Insert | StmtKind::Update | StmtKind::Delete | StmtKind::Merge
        ) || (0..c.t.len()).any(|i| {
            c.punct(i, "(")
                && ["insert", "update", "delete", "merge"]
                    .iter()
                    .any(|w| c.is(i + 1, w))
        }) || c.is(0, "truncate");
        let mut blank = Vec::new();
        // Row locks are taken by queries and DML, by cursors over them, and by `EXPLAIN ANALYZE`
        // (plain `EXPLAIN` runs nothing); `FOR UPDATE` elsewhere is other syntax (`CREATE POLICY`).
        let runs_query = match f.kind {
            StmtKind::Select
            | StmtKind::Insert
            | StmtKind::Update
            | StmtKind::Delete
            | StmtKind::Merge => true,
            StmtKind::Other if c.is(0, "explain") => {
                (1..c.t.len().min(6)).any(|i| c.is(i, "analyze") || c.is(i, "analyse"))
            }
            StmtKind::Other => c.is(0, "declare"),
            _ => false,
        };
        if runs_query {
            self.row_locks(&c, &mut f, &mut blank);
        }
        self.calls(&c, &mut f);
        self.tables(&c, &mut f);
        resolve_lock_aliases(&c, &mut f);
        self.shape(&c, &mut f);
        match f.kind {
            StmtKind::Transaction => f.extra_mut().tx = self.tx_control(&c),
            StmtKind::Set => f.extra_mut().set = set_fact(&c),
            StmtKind::Lock if self.dialect == Dialect::Postgres => {
                f.extra_mut().table_lock = Some(Box::new(self.table_lock(&c)));
            }
            StmtKind::Ddl => {
                if let Some(created) = created_table(&c) {
                    f.extra_mut().created = Some(Box::new(created));
                }
            }
            _ => {}
        }
        if f.extra().tx.is_none()
            && f.kind == StmtKind::Set
            && let Some(iso) = self.set_isolation(&c)
        {
            f.kind = StmtKind::Transaction;
            let e = f.extra_mut();
            e.tx = Some(iso);
            e.set = None;
        }
        // sqlparser cannot parse `DO` blocks nor many routine definitions (procedures, most
        // options); txlint reads their bodies itself and nothing in the header matters here.
        let own = matches!(f.kind, StmtKind::Do | StmtKind::CreateRoutine);
        let idle = !self.wants_tree(&c, stmt, f.kind);
        let failure = if own || idle {
            None
        } else {
            match self.parse(stmt, &blank) {
                Ok((sql, parsed)) => {
                    self.structure(stmt, &sql, &parsed, &mut f);
                    f.parsed = true;
                    None
                }
                // Most DDL and utility commands (VACUUM, GRANT, CREATE ROLE, ...) carry nothing
                // txlint uses beyond their tokens: a parse failure there is not worth a note.
                // The DDL that declares keys is, since the schema comes from it.
                Err(_) if f.kind == StmtKind::Ddl && !declares_keys(&c) => None,
                // Valid PostgreSQL that sqlparser does not know: txlint's limit, read from tokens.
                Err(_) if self.dialect == Dialect::Postgres && unsupported_postgres(&c) => None,
                Err(_) if self.dialect == Dialect::Mysql && unsupported_mysql(&c) => None,
                Err(e) => Some(e),
            }
        };
        (f, failure)
    }

    fn kind(&self, c: &Cursor, stmt: &RawStatement) -> StmtKind {
        // The first word of the text sent (a PL/pgSQL condition is sent as `SELECT ...`).
        let first = stmt
            .sql
            .trim_start_matches(|ch: char| ch.is_whitespace() || ch == '(');
        let first = first
            .split(|ch: char| !ch.is_ascii_alphanumeric() && ch != '_')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        match first.as_str() {
            "select" | "values" | "table" | "" => StmtKind::Select,
            "with" => {
                let mut depth = 0i32;
                for (i, t) in c.t.iter().enumerate() {
                    if t.is_punct(c.src, "(") {
                        depth += 1;
                    } else if t.is_punct(c.src, ")") {
                        depth -= 1;
                    } else if depth == 0 {
                        for (w, k) in [
                            ("insert", StmtKind::Insert),
                            ("update", StmtKind::Update),
                            ("delete", StmtKind::Delete),
                            ("merge", StmtKind::Merge),
                            ("select", StmtKind::Select),
                        ] {
                            if c.is(i, w) {
                                return k;
                            }
                        }
                    }
                }
                StmtKind::Select
            }
            "insert" | "replace" => StmtKind::Insert,
            "update" => StmtKind::Update,
            "delete" => StmtKind::Delete,
            "merge" => StmtKind::Merge,
            "lock" => StmtKind::Lock,
            "begin" | "start" | "savepoint" | "release" => StmtKind::Transaction,
            "commit" | "end" | "rollback" | "abort" => {
                if c.is(1, "prepared") {
                    StmtKind::Other
                } else {
                    StmtKind::Transaction
                }
            }
            "prepare" if c.is(1, "transaction") => StmtKind::Transaction,
            "set" | "reset" => StmtKind::Set,
            "copy" => StmtKind::Copy,
            "call" => StmtKind::Call,
            "execute" => StmtKind::Execute,
            "do" => StmtKind::Do,
            "create"
                if (1..4).any(|i| c.is(i, "function") || c.is(i, "procedure"))
                    && !c.is(1, "trigger") =>
            {
                StmtKind::CreateRoutine
            }
            "create" | "alter" | "drop" | "truncate" | "comment" | "grant" | "revoke"
            | "vacuum" | "analyze" | "cluster" | "reindex" | "refresh" | "security" => {
                StmtKind::Ddl
            }
            _ => StmtKind::Other,
        }
    }

    fn row_locks(&self, c: &Cursor, f: &mut Facts, blank: &mut Vec<Range<usize>>) {
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
            blank.push(c.t[start].start..c.t[last].end);
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
    fn calls(&self, c: &Cursor, f: &mut Facts) {
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
                let args = c.t[i + 1].end..c.t[close].start.max(c.t[i + 1].end);
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

    /// Lock-order shape: `ORDER BY` at the top level and at each locking clause's level, a key
    /// set, an upsert, `LEAST`/`GREATEST`.
    fn shape(&self, c: &Cursor, f: &mut Facts) {
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
                && self.span(c.t[i].start..c.t[i].end).start() == l.span.start()
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
    fn tables(&self, c: &Cursor, f: &mut Facts) {
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

    fn tx_control(&self, c: &Cursor) -> Option<TxControl> {
        let word = |i| c.word(i).unwrap_or_default();
        let name_at = |i: usize| c.name(i).map(|(n, _)| n).unwrap_or_default();
        let skip_work = |i: usize| {
            if c.is(i, "work") || c.is(i, "transaction") {
                i + 1
            } else {
                i
            }
        };
        Some(match word(0).as_str() {
            "begin" | "start" => TxControl::Begin {
                isolation: isolation_clause(c),
            },
            "commit" | "end" => TxControl::Commit,
            "rollback" | "abort" => {
                let i = skip_work(1);
                if c.is(i, "to") {
                    let i = if c.is(i + 1, "savepoint") {
                        i + 2
                    } else {
                        i + 1
                    };
                    TxControl::RollbackTo(name_at(i))
                } else {
                    TxControl::Rollback
                }
            }
            "savepoint" => TxControl::Savepoint(name_at(1)),
            "release" => TxControl::Release(name_at(if c.is(1, "savepoint") { 2 } else { 1 })),
            "prepare" => TxControl::PrepareTransaction,
            _ => return None,
        })
    }

    /// `SET TRANSACTION ISOLATION LEVEL`, `SET SESSION CHARACTERISTICS AS TRANSACTION ...`,
    /// MySQL `SET SESSION TRANSACTION ...`, `SET default_transaction_isolation = ...`.
    fn set_isolation(&self, c: &Cursor) -> Option<TxControl> {
        if !c.is(0, "set") {
            return None;
        }
        let session_word = c.is(1, "session");
        if (1..5).any(|i| c.is(i, "transaction")) && !c.is(1, "global") {
            let isolation = isolation_clause(c)?;
            return Some(TxControl::SetIsolation {
                isolation,
                session: session_word,
            });
        }
        let at = if session_word || c.is(1, "local") {
            2
        } else {
            1
        };
        let var = c.word(at)?;
        let session = match var.as_str() {
            "default_transaction_isolation" => true,
            "transaction_isolation" | "tx_isolation" => self.dialect == Dialect::Mysql,
            _ => return None,
        };
        let value = if c.punct(at + 1, "=") || c.is(at + 1, "to") {
            at + 2
        } else {
            at + 1
        };
        let isolation = isolation_at(c, value)?;
        Some(TxControl::SetIsolation { isolation, session })
    }

    fn table_lock(&self, c: &Cursor) -> TableLock {
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

    /// Columns, `SET` items and `WHERE` conjuncts from the AST, placed in the host file; psql
    /// variables (`:v`, parsed as `_v`) are named `:v`, apart from columns, and count as used.
    fn structure(
        &self,
        stmt: &RawStatement,
        sql: &str,
        parsed: &[sqlparser::ast::Statement],
        f: &mut Facts,
    ) {
        let Some(first) = parsed.first() else {
            return;
        };
        let locate = Locator {
            sql,
            base: stmt.range.start,
            prefix: stmt.prefix,
        };
        // The AST is walked for calls only if a word before `(` names a routine of the run.
        let calls = self.calls_routine(stmt);
        let mut s = super::ast::structure(first, &locate, calls.then_some(self.routines));
        let psql: Vec<String> = stmt
            .tokens
            .iter()
            .filter(|t| t.kind == Kind::PsqlVar)
            .map(|t| t.text(self.src)[1..].to_string())
            .filter(|v| v.starts_with(|c: char| c.is_alphabetic() || c == '_'))
            .collect();
        // A psql variable `:v` reached sqlparser as `_v`: named `:v` again.
        let named = |i: &mut Name| {
            if let Some(v) = i.strip_prefix('_')
                && psql.iter().any(|p| p == v)
            {
                *i = compact_str::format_compact!(":{v}");
            }
        };
        let rename = |o: &mut Operand| o.idents.iter_mut().for_each(named);
        f.columns = s.columns.into_iter().map(Name::from).collect();
        f.filters = s.filters.into();
        f.other_conditions = s.other_conditions;
        f.inserts = s.inserts.into_iter().map(|(c, o)| (c.into(), o)).collect();
        // Calls of lock functions are read from tokens, with their key's text.
        s.calls
            .retain(|(n, _)| !LOCK_FUNCTIONS.iter().any(|(l, ..)| l == n));
        if !s.aggregates.is_empty()
            || s.ddl.is_some()
            || !s.claim.is_empty()
            || !s.compared.is_empty()
            || !s.absent.is_empty()
            || !s.calls.is_empty()
            || !s.tests.is_empty()
            || !s.conflict_sets.is_empty()
            || !s.conflict_on.is_empty()
            || s.condition.is_some()
        {
            let e = f.extra_mut();
            e.calls = s
                .calls
                .into_iter()
                .map(|(name, args)| RoutineCall {
                    name: name.into(),
                    args,
                })
                .collect();
            e.aggregates = s.aggregates.into_iter().map(Name::from).collect();
            e.ddl = s.ddl.map(Box::new);
            e.claim = s.claim.into_iter().map(Name::from).collect();
            e.compared = s.compared.into_iter().map(|c| c.map(Name::from)).collect();
            e.absent = s
                .absent
                .into_iter()
                .map(|(column, by)| {
                    let mut by: List<Name> = by.into_iter().map(Name::from).collect();
                    by.iter_mut().for_each(named);
                    (column.into(), by)
                })
                .collect();
            e.condition = s.condition.map(|mut o| {
                rename(&mut o);
                Box::new(o)
            });
            e.tests = s.tests.into_iter().map(Name::from).collect();
            e.absent_tests = s.absent_tests.into_iter().map(Name::from).collect();
            e.conflict_on = s.conflict_on.into_iter().map(Name::from).collect();
            e.conflict_sets = s
                .conflict_sets
                .into_iter()
                .map(|(c, mut o)| {
                    rename(&mut o);
                    (c.into(), o)
                })
                .collect();
        }
        for (_, o) in &mut f.inserts {
            rename(o);
        }
        for p in &mut f.filters {
            rename(&mut p.value);
        }
        for (mut item, range) in s.sets {
            rename(&mut item.value);
            item.span = range.map(|r| self.span(r));
            f.sets.push(item);
        }
        if stmt.gset {
            f.extra_mut().assigns = s
                .outputs
                .iter()
                .map(|o| compact_str::format_compact!(":{o}"))
                .collect();
        }
        for v in psql {
            let v = compact_str::format_compact!(":{v}");
            if !f.extra().uses.contains(&v) {
                f.extra_mut().uses.push(v);
            }
        }
    }

    /// Whether the syntax tree adds to what the tokens give. The tree is read for the columns,
    /// predicates and values of queries and DML, for the keys DDL declares, and for calls of a
    /// routine of the run. Everything else a statement tells the rules (its tables, row locks,
    /// lock calls, transaction control, `SET`, `LOCK TABLE`) comes from its tokens, so parsing
    /// it would only cost time: DDL that declares no keys (`CREATE INDEX`, `GRANT`, ...),
    /// utility commands (`EXPLAIN`, `VACUUM`, `COPY`, ...), and a `SELECT` that reads no table
    /// (no `FROM`: `SELECT 1 + 1`, `SELECT pg_advisory_lock($1)`, a PL/pgSQL condition) unless
    /// psql's `\gset` keeps its output. On the PostgreSQL regression corpus, leaving these out
    /// cut a run's CPU time by a fifth.
    fn wants_tree(&self, c: &Cursor, stmt: &RawStatement, kind: StmtKind) -> bool {
        let tree = match kind {
            StmtKind::Insert | StmtKind::Update | StmtKind::Delete | StmtKind::Merge => true,
            StmtKind::Select => {
                stmt.gset || c.is(0, "table") || (0..c.t.len()).any(|i| c.is(i, "from"))
            }
            StmtKind::Ddl => declares_keys(c),
            _ => false,
        };
        tree || self.calls_routine(stmt)
    }

    /// Whether a word before `(` in the statement names a routine of the run.
    fn calls_routine(&self, stmt: &RawStatement) -> bool {
        let name = |t: &Token| match t.kind {
            Kind::Word => Some(t.text(self.src).to_ascii_lowercase()),
            Kind::QuotedIdent => Some(t.text(self.src).trim_matches('"').to_string()),
            _ => None,
        };
        !self.routines.is_empty()
            && stmt.tokens.windows(2).any(|w| {
                w[1].is_punct(self.src, "(")
                    && name(&w[0]).is_some_and(|n| self.routines.contains(&n))
            })
    }

    /// Hand the statement to sqlparser, with the locking clauses blanked out; the text it saw
    /// and what it parsed.
    fn parse(
        &self,
        stmt: &RawStatement,
        blank: &[Range<usize>],
    ) -> Result<(String, Vec<sqlparser::ast::Statement>), ParseFailure> {
        if let Some(why) = too_deep(self.src, &stmt.tokens) {
            return Err(ParseFailure {
                span: self.span(stmt.range.clone()),
                message: format!(
                    "statement too deep or too large to parse safely ({why}); its locks and transaction control were read from its tokens"
                ),
                host: false,
            });
        }
        let mut sql = stmt.sql.clone();
        let base = stmt.range.start;
        for r in blank {
            let (s, e) = (r.start - base + stmt.prefix, r.end - base + stmt.prefix);
            if e <= sql.len() && sql.is_char_boundary(s) && sql.is_char_boundary(e) {
                sql.replace_range(s..e, &" ".repeat(e - s));
            }
        }
        if self.dialect.has_rules() {
            let mysql = self.dialect == Dialect::Mysql;
            super::gaps::rewrite(self.src, &stmt.tokens, base, stmt.prefix, mysql, &mut sql);
        }
        let err = match self.parse_text(&sql) {
            Ok(parsed) => return Ok((sql, parsed)),
            Err(e) => e,
        };
        // `INSERT .. SELECT <values> ON CONFLICT ..` with no `FROM`: again without the clause,
        // which txlint reads from tokens.
        if let Some(r) = super::gaps::conflict_clause(self.src, &stmt.tokens) {
            let mut second = sql.clone();
            let (s, e) = (r.start - base + stmt.prefix, r.end - base + stmt.prefix);
            if e <= second.len() && second.is_char_boundary(s) && second.is_char_boundary(e) {
                second.replace_range(s..e, &" ".repeat(e - s));
                if let Ok(parsed) = self.parse_text(&second) {
                    return Ok((second, parsed));
                }
            }
        }
        let text = match err {
            ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
            ParserError::RecursionLimitExceeded => "statement nested too deeply".to_string(),
        };
        // sqlparser appends " at Line: L, Column: C" (1-based, columns in chars).
        let (message, at) = match text.rsplit_once(" at Line: ") {
            Some((msg, pos)) => (msg.to_string(), sql_offset(&sql, pos)),
            None => (text, None),
        };
        let span = match at {
            Some(off) => {
                let off = (base + off.saturating_sub(stmt.prefix)).min(stmt.range.end);
                let end = stmt
                    .tokens
                    .iter()
                    .find(|t| t.start <= off && off < t.end)
                    .map_or(off, |t| t.end);
                self.span(off..end.max(off))
            }
            // At the end of the statement sqlparser gives no position: point at the last token.
            None => match stmt.tokens.last() {
                Some(t) if message.contains("found: EOF") => self.span(t.start..t.end),
                _ => self.span(stmt.range.clone()),
            },
        };
        Err(ParseFailure {
            span,
            message,
            host: false,
        })
    }
}

impl Reader<'_> {
    /// sqlparser's statements of `sql`, from txlint's tokens where they have a plain form.
    fn parse_text(&self, sql: &str) -> Result<Vec<sqlparser::ast::Statement>, ParserError> {
        let parser = Parser::new(self.parser);
        let tokens = match self.dialect {
            Dialect::Postgres => super::feed::tokens(sql),
            _ => None,
        };
        match tokens {
            Some(tokens) => Ok(parser.with_tokens_with_locations(tokens)),
            None => parser.try_with_sql(sql),
        }
        .and_then(|mut p| p.parse_statements())
    }
}

/// Parentheses nested in one statement that sqlparser is given (its own limit is lower).
const NESTING: usize = 1_000;
/// Operators between two commas of one parenthesis level: each makes the expression tree
/// one level deeper, and walking or dropping that tree recurses (within [`crate::io::STACK`]).
const CHAIN: usize = 10_000;

/// Statements longer than this are read from their tokens only: sqlparser's tokens and tree for
/// a multi-megabyte bulk `INSERT` cost a hundred times its size, and txlint needs neither.
const LARGEST: usize = 1024 * 1024;

/// Why a statement is too deep (or too large) for the parser, if it is.
fn too_deep(src: &str, tokens: &[Token]) -> Option<String> {
    if let (Some(a), Some(b)) = (tokens.first(), tokens.last())
        && b.end - a.start > LARGEST
    {
        return Some(format!(
            "{} KiB, larger than the {} KiB txlint parses",
            (b.end - a.start) / 1024,
            LARGEST / 1024
        ));
    }
    let mut chains = vec![0usize];
    for t in tokens {
        let operator = match t.kind {
            Kind::Punct => {
                let p = t.text(src);
                match p {
                    "(" | "[" => {
                        chains.push(0);
                        if chains.len() > NESTING {
                            return Some(format!("parentheses nested more than {NESTING} deep"));
                        }
                        continue;
                    }
                    ")" | "]" => {
                        if chains.len() > 1 {
                            chains.pop();
                        }
                        continue;
                    }
                    "," => {
                        if let Some(c) = chains.last_mut() {
                            *c = 0;
                        }
                        continue;
                    }
                    _ => !p.is_empty() && p != "." && p != "::",
                }
            }
            Kind::Word => ["and", "or", "not", "is", "like", "ilike", "in"]
                .iter()
                .any(|w| t.is(src, w)),
            _ => false,
        };
        if operator && let Some(c) = chains.last_mut() {
            *c += 1;
            if *c > CHAIN {
                return Some(format!("more than {CHAIN} operators in one expression"));
            }
        }
    }
    None
}

/// Places AST identifiers in the snippet the statement was cut from.
struct Locator<'a> {
    sql: &'a str,
    base: usize,
    prefix: usize,
}

impl super::ast::Locate for Locator<'_> {
    fn ident(&self, ident: &sqlparser::ast::Ident) -> Option<Range<usize>> {
        let (s, e) = (ident.span.start, ident.span.end);
        if s.line == 0 {
            return None;
        }
        let start = line_col_offset(self.sql, s.line as usize, s.column as usize)?;
        let end = line_col_offset(self.sql, e.line as usize, e.column as usize)?;
        let to_snippet = |o: usize| self.base + o.saturating_sub(self.prefix);
        Some(to_snippet(start)..to_snippet(end.max(start)))
    }
}

/// Byte offset in `sql` of sqlparser's "L, Column: C".
fn sql_offset(sql: &str, pos: &str) -> Option<usize> {
    let (line, col) = pos.split_once(", Column: ")?;
    line_col_offset(sql, line.trim().parse().ok()?, col.trim().parse().ok()?)
}

/// Byte offset of a 1-based line and 1-based column counted in chars.
fn line_col_offset(sql: &str, line: usize, col: usize) -> Option<usize> {
    let line_start: usize = sql
        .split_inclusive('\n')
        .take(line.checked_sub(1)?)
        .map(str::len)
        .sum();
    let rest = sql.get(line_start..)?;
    let in_line: usize = rest
        .chars()
        .take(col.checked_sub(1)?)
        .map(char::len_utf8)
        .sum();
    Some(line_start + in_line)
}

fn set_fact(c: &Cursor) -> Option<SetFact> {
    if !c.is(0, "set") {
        return None;
    }
    let local = c.is(1, "local");
    let at = if local || c.is(1, "session") { 2 } else { 1 };
    Some(SetFact {
        name: c.name(at)?.0,
        local,
    })
}

/// PostgreSQL syntax sqlparser 0.64 rejects: `LIKE t INCLUDING ALL`, a recursive CTE's
/// `CYCLE`/`SEARCH` clause, `SET SCHEMA`, `SET STATISTICS`, `ROWS FROM (..)`, `ALTER
/// CONSTRAINT .. DEFERRABLE`, `ON CONFLICT ((expr))`, `ALTER COLUMN .. TYPE .. COLLATE`.
fn unsupported_postgres(c: &Cursor) -> bool {
    (0..c.t.len()).any(|i| {
        (c.is(i, "like")
            && c.name(i + 1)
                .is_some_and(|(_, n)| c.is(n, "including") || c.is(n, "excluding")))
            || (c.punct(i, ")") && (c.is(i + 1, "cycle") || c.is(i + 1, "search")))
            || (c.is(i, "set") && (c.is(i + 1, "schema") || c.is(i + 1, "statistics")))
            || (c.is(i, "rows") && c.is(i + 1, "from") && c.punct(i + 2, "("))
            || (c.is(i, "alter") && c.is(i + 1, "constraint"))
            || (c.is(i, "restart")
                && (c.is(i + 1, "with") || c.t.get(i + 1).is_some_and(|t| t.kind == Kind::Number)))
            || (c.is(i, "conflict") && c.punct(i + 1, "(") && c.punct(i + 2, "("))
            || (c.is(i, "type") && (i + 1..c.t.len().min(i + 6)).any(|j| c.is(j, "collate")))
    })
}

/// Valid MySQL `ALTER TABLE` forms sqlparser does not know: `DROP KEY k`, `DROP INDEX k`,
/// `ADD [COLUMN] (a int, b int)`. They declare no key, and their tokens tell the rest.
fn unsupported_mysql(c: &Cursor) -> bool {
    c.is(0, "alter")
        && (0..c.t.len()).any(|i| {
            (c.is(i, "drop") && (c.is(i + 1, "key") || c.is(i + 1, "index")))
                || (c.is(i, "add")
                    && (c.punct(i + 1, "(") || c.is(i + 1, "column") && c.punct(i + 2, "(")))
        })
}

/// `CREATE TABLE`, `CREATE UNIQUE INDEX`, `ALTER TABLE`: DDL the schema is read from.
fn declares_keys(c: &Cursor) -> bool {
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
fn cte_names(c: &Cursor) -> Vec<String> {
    ctes(c).into_iter().map(|q| q.name).collect()
}

/// `FOR UPDATE OF t` names a table by its alias (`FROM task t`): the locked table's name.
fn resolve_lock_aliases(c: &Cursor, f: &mut Facts) {
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
const ALIAS_STOP: &[&str] = &[
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

/// One `WITH` query of a statement.
struct Cte {
    name: String,
    /// Token indices of its body's parentheses.
    body: (usize, usize),
    /// Its name appears outside its own definition.
    referenced: bool,
    /// Its body writes (`INSERT`, `UPDATE`, `DELETE`): it runs whether referred to or not.
    modifies: bool,
}

/// The `WITH` queries of a statement, at any depth.
fn ctes(c: &Cursor) -> Vec<Cte> {
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
fn ends_from_list(w: &str) -> bool {
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
fn is_clause_word(w: &str) -> bool {
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
