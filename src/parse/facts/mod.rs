//! Statement -> [`Facts`]: token-level facts for everything txlint is about, and sqlparser
//! for the statement as a whole.
//!
//! Locking clauses, advisory-lock calls and transaction control are read from tokens because
//! sqlparser rejects several of them (`FOR NO KEY UPDATE`, `FOR UPDATE OF a, b`, `LOCK IN SHARE
//! MODE`) and drops the positions of others. They are blanked out (offsets kept) before the
//! statement goes to sqlparser, so a valid statement still parses.

mod control;
mod limits;
mod locks;
mod tables;

use std::ops::Range;

use sqlparser::parser::{Parser, ParserError};

use super::lex::{Kind, Token};
use super::split::RawStatement;
use crate::model::*;
use crate::source::Dialect;
use crate::source::{FileId, OffsetMap, Span};

pub use crate::model::ParseFailure;
use control::*;
use limits::*;
use locks::*;
use tables::*;

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
    /// Index of the first `,` between the `(` at `open` and its `)` at `close` that is not
    /// nested in another pair.
    fn top_level_comma(&self, open: usize, close: usize) -> Option<usize> {
        let mut i = open + 1;
        while i < close {
            if self.punct(i, ",") {
                return Some(i);
            }
            i = if self.punct(i, "(") { self.close(i) } else { i } + 1;
        }
        None
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

impl Reader<'_> {
    fn span(&self, range: Range<usize>) -> Span {
        Span::new(self.file, self.map.host_range(range))
    }

    fn tok_span(&self, t: &[Token], from: usize, to: usize) -> Span {
        self.span(t[from].start()..t[to].end())
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
                if self.dialect == Dialect::Postgres
                    && let Some(name) = created_if_missing(&c)
                {
                    f.extra_mut().creates_if_missing = Some(Box::new(name));
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
        let psql = PsqlNames(
            stmt.tokens
                .iter()
                .filter(|t| t.kind == Kind::PsqlVar)
                .map(|t| t.text(self.src)[1..].to_string())
                .filter(|v| v.starts_with(|c: char| c.is_alphabetic() || c == '_'))
                .collect(),
        );
        f.columns = std::mem::take(&mut s.columns)
            .into_iter()
            .map(Name::from)
            .collect();
        f.filters = std::mem::take(&mut s.filters).into();
        f.other_conditions = s.other_conditions;
        f.inserts = std::mem::take(&mut s.inserts)
            .into_iter()
            .map(|(c, o)| (c.into(), o))
            .collect();
        // Calls of lock functions are read from tokens, with their key's text.
        s.calls
            .retain(|(n, _)| !LOCK_FUNCTIONS.iter().any(|(l, ..)| l == n));
        extras(&mut s, f, &psql);
        for (_, o) in &mut f.inserts {
            psql.operand(o);
        }
        for p in &mut f.filters {
            psql.operand(&mut p.value);
        }
        for (mut item, range) in s.sets {
            psql.operand(&mut item.value);
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
        for v in psql.0 {
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
                    .find(|t| t.start() <= off && off < t.end())
                    .map_or(off, |t| t.end());
                self.span(off..end.max(off))
            }
            // At the end of the statement sqlparser gives no position: point at the last token.
            None => match stmt.tokens.last() {
                Some(t) if message.contains("found: EOF") => self.span(t.start()..t.end()),
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

/// The facts of one PostgreSQL statement, for the families' tests.
/// The psql variables of a statement (`:v` without its colon): sqlparser read `:v` as `_v`.
struct PsqlNames(Vec<String>);

impl PsqlNames {
    /// A psql variable `:v` that reached sqlparser as `_v`, named `:v` again.
    fn name(&self, i: &mut Name) {
        if let Some(v) = i.strip_prefix('_')
            && self.0.iter().any(|p| p == v)
        {
            *i = compact_str::format_compact!(":{v}");
        }
    }

    fn operand(&self, o: &mut Operand) {
        o.idents.iter_mut().for_each(|i| self.name(i));
    }
}

/// The rarer facts the syntax tree gives (aggregates, DDL, claims, conflicts, calls of the
/// run's routines), kept apart from the common ones (see [`Facts::extra`]).
fn extras(s: &mut super::ast::Structure, f: &mut Facts, psql: &PsqlNames) {
    if s.aggregates.is_empty()
        && s.ddl.is_none()
        && s.claim.is_empty()
        && s.compared.is_empty()
        && s.absent.is_empty()
        && s.calls.is_empty()
        && s.tests.is_empty()
        && s.conflict_sets.is_empty()
        && s.conflict_on.is_empty()
        && s.condition.is_none()
    {
        return;
    }
    let e = f.extra_mut();
    e.calls = std::mem::take(&mut s.calls)
        .into_iter()
        .map(|(name, args)| RoutineCall {
            name: name.into(),
            args,
        })
        .collect();
    e.aggregates = std::mem::take(&mut s.aggregates)
        .into_iter()
        .map(Name::from)
        .collect();
    e.ddl = s.ddl.take().map(Box::new);
    e.claim = std::mem::take(&mut s.claim)
        .into_iter()
        .map(Name::from)
        .collect();
    e.compared = std::mem::take(&mut s.compared)
        .into_iter()
        .map(|c| c.map(Name::from))
        .collect();
    e.absent = std::mem::take(&mut s.absent)
        .into_iter()
        .map(|(column, by)| {
            let mut by: List<Name> = by.into_iter().map(Name::from).collect();
            by.iter_mut().for_each(|i| psql.name(i));
            (column.into(), by)
        })
        .collect();
    e.condition = s.condition.take().map(|mut o| {
        psql.operand(&mut o);
        Box::new(o)
    });
    e.tests = std::mem::take(&mut s.tests)
        .into_iter()
        .map(Name::from)
        .collect();
    e.absent_tests = std::mem::take(&mut s.absent_tests)
        .into_iter()
        .map(Name::from)
        .collect();
    e.conflict_on = std::mem::take(&mut s.conflict_on)
        .into_iter()
        .map(Name::from)
        .collect();
    e.conflict_sets = std::mem::take(&mut s.conflict_sets)
        .into_iter()
        .map(|(c, mut o)| {
            psql.operand(&mut o);
            (c.into(), o)
        })
        .collect();
}

#[cfg(test)]
fn facts_of(sql: &str) -> (Facts, Option<ParseFailure>) {
    let map = OffsetMap::shifted(0);
    let routines = std::collections::HashSet::new();
    let reader = Reader {
        src: sql,
        map: &map,
        file: 0,
        dialect: Dialect::Postgres,
        parser: &sqlparser::dialect::PostgreSqlDialect {},
        routines: &routines,
    };
    let split = super::split::split(sql, Dialect::Postgres, false);
    let stmt = split.statements.first().expect("one statement");
    reader.read(stmt)
}
