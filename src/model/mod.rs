//! The transaction model every rule reads: units -> transactions -> steps.
//!
//! Front-ends (`.sql` scripts, PL/pgSQL bodies, later Rust code) build it; rules read only it.
//! Nothing here refers to sqlparser or syn.

mod alone;
mod control;
mod facts;
pub mod flow;
pub mod lockgraph;
pub mod routines;
pub mod schema;
mod summary;

pub use control::*;
pub use facts::*;
pub use summary::{HandleUse, Returns, Summary};

use crate::source::{SourceFile, Span};

/// Everything one run analyses.
#[derive(Debug, Default)]
pub struct Program {
    pub files: Vec<SourceFile>,
    pub units: Vec<Unit>,
    /// Units the core rules do not analyse, and why.
    pub skipped: Vec<(Unit, Skip)>,
    /// Tables and keys the run's SQL declares (see [`Program::schema`]).
    pub schemas: schema::Schemas,
    /// SQL txlint wrote for query-builder chains (diesel), by the statement's span.
    pub generated: std::collections::HashMap<Span, String>,
    /// What each Rust helper that callers walk in place does to the handles it gets (for
    /// `txlint model`; the rules read the callers' units).
    pub summaries: Vec<Summary>,
    /// Calls that send SQL txlint could not read (see `extract::Extracted`), in
    /// file order.
    pub unread_sql: Vec<Span>,
    /// The CockroachDB file the run's transactions were assumed SERIALIZABLE from (see
    /// [`Program::default_isolation`]), when the configuration does not say.
    pub cockroach: Option<crate::source::FileId>,
    /// The units writing each table, each with the lock it writes under (built on the first
    /// [`Program::alone`] question, once units are done).
    writers: std::sync::OnceLock<alone::Writers>,
}

impl Program {
    /// The tables and keys the statements of `file` see.
    pub fn schema(&self, file: crate::source::FileId) -> &schema::Schema {
        self.schemas.of(file)
    }

    /// Every transaction that does not set its isolation level runs at `level`, the database's
    /// default (`default_transaction_isolation`; CockroachDB's is SERIALIZABLE).
    pub fn default_isolation(&mut self, level: Isolation) {
        let txs = self.units.iter_mut().flat_map(|u| &mut u.transactions);
        for tx in txs.filter(|t| !t.isolation_set) {
            tx.isolation = level;
        }
    }

    /// Drop the units and the schema once the rules are done; the files stay for reports.
    pub fn forget_model(&mut self) {
        self.units = Vec::new();
        self.skipped = Vec::new();
        self.schemas = schema::Schemas::default();
        self.generated = Default::default();
        self.summaries = Vec::new();
    }
}

/// Why the core rules skip a unit (`txlint model` shows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Test code (see [`Unit::test`]), unless `include_tests = true`.
    Test,
    /// Code nothing runs (see [`Unit::unused`]).
    Unused,
    /// A routine that a later `CREATE OR REPLACE` (here) redefines.
    Replaced(Span),
    /// A routine that a later `DROP FUNCTION|PROCEDURE` (here) removes.
    Dropped(Span),
    /// The same text as an earlier definition (here), which is analysed in its place: findings
    /// point where the routine was first written (a bundle of the per-routine sources).
    Copy(Span),
    /// A copy in a `pg_dump` schema file of a routine the run's own sources define: analysed
    /// at its latest definition there (here).
    Dumped(Span),
    /// Statements for a database the core rules have no semantics for (SQLite, SQL Server, one
    /// txlint cannot tell): read and parsed, not analysed.
    Dialect(crate::source::Dialect),
}

/// A piece of code whose statements run in order: a script, a routine body, a `DO` block.
#[derive(Debug)]
pub struct Unit {
    pub kind: UnitKind,
    /// Routine name, where there is one.
    pub name: Option<String>,
    pub span: Span,
    pub transactions: Vec<Transaction>,
    /// Early exits (`?`, `return`, `RAISE EXCEPTION`), in program order with the steps.
    pub exits: Vec<Exit>,
    /// Exits that leave only a helper walked in place or an `async` block (a `return Ok(..)` in
    /// a helper, a `?` whose error the code around handles), each with the `seq` at which that
    /// frame ended: the frame's steps after the exit in program order do not follow it, the
    /// caller's do.
    pub frame_exits: Vec<(Exit, usize)>,
    /// The database sessions this unit's steps run on (see [`Step::session`]).
    pub sessions: Vec<Session>,
    /// Branch arms taken on a condition computed from query results.
    pub conditions: Vec<Condition>,
    /// Loops over collections or query rows (the body is a branch arm).
    pub loops: Vec<Loop>,
    /// PL/pgSQL blocks that catch errors (savepoints).
    pub handlers: Vec<Handler>,
    /// The branch arms that are the body of a loop of a PL/pgSQL body (`LOOP`, `WHILE`,
    /// `FOR`): what runs in one may run again after what follows it in the arm.
    pub loop_arms: Vec<usize>,
    /// Groups of branch arms of which one run takes at most one: the arms of one `if`/`else`,
    /// `match`, PL/pgSQL `IF`/`ELSIF`/`ELSE` or `CASE`.
    pub choices: Vec<Vec<usize>>,
    /// Arms taken only when booleans bound once have these values (`if prorate` where `let
    /// prorate = !trial && ..`: `trial` false), by binding (`trial#3`), in arm order. Two arms
    /// that need opposite values of one never both run (see [`Unit::exclusive`]).
    pub requires: Vec<(usize, Vec<(Name, bool)>)>,
    /// The choice each arm is in, indexed by arm: built from `choices` on the first
    /// [`Unit::exclusive`] question, once the unit is complete (rules only read units).
    choice_of: std::sync::OnceLock<Vec<u32>>,
    /// Arms of a trigger function that run only for some events (`IF TG_OP = 'INSERT' THEN`).
    pub event_arms: Vec<(usize, TriggerEvents)>,
    /// Arms of a trigger function that run only when the firing `UPDATE` changes one of these
    /// columns (`IF NEW.a IS DISTINCT FROM OLD.a THEN`).
    pub change_arms: Vec<(usize, Vec<Name>)>,
    /// A trigger function's early `RETURN` when none of these columns changed: what runs after
    /// that position runs only when the firing `UPDATE` changes one of them.
    pub changed_after: Option<(usize, Vec<Name>)>,
    /// Test code (`#[test]`, `#[cfg(test)]`, files under `tests/` or `benches/`): the core rules
    /// skip it unless `include_tests = true`.
    pub test: bool,
    /// A private Rust function marked `#[allow(dead_code)]` that its file never names again:
    /// nothing runs it, so the core rules skip it.
    pub unused: bool,
    /// Who runs the `.sql` file (see [`Runner`]); for a migration, also set on its `DO` blocks:
    /// their statements do not race with another run of themselves.
    pub runner: Option<Runner>,
    /// A routine's parameters that calls pass arguments to, in order (`""` for one with no
    /// name, read as `$n`).
    pub params: Vec<Name>,
    /// Application code calls this query file's statements, or this routine, through a
    /// connection pool (see [`Runner::called`]): each call on whichever pooled connection
    /// serves it, so a session lock it returns holding stays with that connection.
    pub pooled_callers: Option<&'static str>,
    /// A Rust function that only a background job runs: every call of it leads to a loop
    /// woken by a timer (here) that receives from no channel. txlint assumes one process runs
    /// the job, so its runs follow one another: the unit races only with other units that
    /// write the same tables, not with another run of itself.
    pub job: Option<Span>,
    /// The `seq`s of an `async` function's session-lock statements every run of which is
    /// awaited to its end: each call of the function, and of its callers in turn, is awaited
    /// where it stands up to a `main` of its own package (or it is that `main`), as is each
    /// helper call on the way to the statement, under nothing that drops futures part way
    /// (`select!`, `timeout`). No caller drops the lock's future between two of its awaits (a
    /// request handler, a library's API, a timeout would).
    pub awaited_whole: Vec<usize>,
}

impl Unit {
    pub fn new(kind: UnitKind, name: Option<String>, span: Span) -> Self {
        Unit {
            kind,
            name,
            span,
            transactions: Vec::new(),
            exits: Vec::new(),
            frame_exits: Vec::new(),
            sessions: Vec::new(),
            conditions: Vec::new(),
            loops: Vec::new(),
            handlers: Vec::new(),
            loop_arms: Vec::new(),
            choices: Vec::new(),
            requires: Vec::new(),
            choice_of: std::sync::OnceLock::new(),
            event_arms: Vec::new(),
            change_arms: Vec::new(),
            changed_after: None,
            test: false,
            unused: false,
            runner: None,
            params: Vec::new(),
            pooled_callers: None,
            job: None,
            awaited_whole: Vec::new(),
        }
    }

    /// The files any of the unit's places are in (a helper walked in place puts its statements
    /// in its own file).
    pub fn files(&self) -> impl Iterator<Item = crate::source::FileId> + '_ {
        let txs = self.transactions.iter().flat_map(|tx| {
            let steps = tx
                .steps
                .iter()
                .flat_map(|s| std::iter::once(s.span).chain(s.host().calls.iter().copied()));
            tx.begin().into_iter().chain(tx.end()).chain(steps)
        });
        std::iter::once(self.span)
            .chain(txs)
            .chain(self.exits.iter().map(|e| e.span))
            .chain(self.sessions.iter().filter_map(|s| s.acquired))
            .chain(self.loops.iter().map(|l| l.span))
            .chain(self.job)
            .map(|s| s.file)
    }

    /// The unit's own statements run once per database (a migration's script or `DO` block),
    /// not as a code path that runs concurrently with itself.
    pub fn runs_once(&self) -> bool {
        matches!(
            self.kind,
            UnitKind::Script | UnitKind::DoBlock | UnitKind::RustFn
        ) && self.runner.is_some_and(|r| r.migration)
    }

    /// Take out the statements for databases the core rules have no semantics for, as a unit
    /// of their own (same name and place), if there are any.
    pub fn split_off_dialects(&mut self) -> Option<(Unit, crate::source::Dialect)> {
        let mut other = Unit::new(self.kind, self.name.clone(), self.span);
        let mut dialect = None;
        for tx in &mut self.transactions {
            if tx.steps.iter().all(|s| s.facts.dialect.has_rules()) {
                continue;
            }
            let (mut keep, mut away): (Steps, Steps) = std::mem::take(&mut tx.steps)
                .into_iter()
                .partition(|s| s.facts.dialect.has_rules());
            keep.shrink_to_fit();
            away.shrink_to_fit();
            dialect = dialect.or(away.first().map(|s| s.facts.dialect));
            tx.steps = keep;
            let mut moved = Transaction::new(tx.scope, tx.executor, tx.isolation);
            moved.steps = away;
            other.transactions.push(moved);
        }
        self.transactions.retain(|t| !t.steps.is_empty());
        dialect.map(|d| (other, d))
    }
}

/// Something a parser could not read: where and why (a `syntax-error`).
#[derive(Debug)]
pub struct ParseFailure {
    pub span: Span,
    pub message: String,
    /// A host-language file (Rust) rather than one SQL statement.
    pub host: bool,
}

/// A table name that is a hole of a template (`format!("... {table} ...")`, blanked to
/// underscores): not a table txlint knows.
pub fn is_hole(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c == '_')
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    /// A `.sql` file run as a script, or as one transaction (`sql.mode`).
    Script,
    /// A `.sql` file of statements sent one by one by application code (`sql.mode = "statements"`).
    QueryFile,
    /// A PL/pgSQL or SQL function, procedure or trigger body.
    Routine,
    /// A `DO` block.
    DoBlock,
    /// A Rust function or method body.
    RustFn,
}

/// How far a transaction reaches: this decides how long transaction-scoped locks are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A single statement in autocommit: the transaction ends with the statement.
    Autocommit,
    /// Several statements sent in one simple-query message in autocommit (psql `\;`): one
    /// implicit transaction that ends with the message.
    Message,
    /// `BEGIN ... COMMIT`, or a transaction object in host code.
    Explicit,
    /// The whole file runs in one transaction opened by the tool that runs it.
    File,
    /// A routine body or `DO` block: it runs inside its caller's transaction.
    Caller,
    /// Not known: statements sent by code txlint does not see.
    Unknown,
}

impl Scope {
    /// Locks taken here are released when the current statement or message ends.
    pub fn is_autocommit(self) -> bool {
        matches!(self, Scope::Autocommit | Scope::Message)
    }
}

/// What a statement is sent through (host code); `.sql` scripts run on one psql session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executor {
    /// A dedicated session, like psql running a script.
    Session,
    /// A pool: every call may land on a different session.
    Pool,
    /// A connection taken from a pool: one session, returned to the pool with its state.
    PooledConnection,
    /// A dedicated connection.
    Connection,
    /// A transaction object.
    Transaction,
    Unknown,
}

/// Also the configuration's `isolation` (`read-committed`, `repeatable-read`, `serializable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

/// The ordered steps that run on one session inside one transaction.
#[derive(Debug)]
pub struct Transaction {
    pub scope: Scope,
    pub executor: Executor,
    pub isolation: Isolation,
    /// The code sets `isolation` (`BEGIN ISOLATION LEVEL ..`, `SET TRANSACTION ..`, a session
    /// default it sets, host code's transaction builder); otherwise it is the database's
    /// default (see [`Program::default_isolation`]).
    pub isolation_set: bool,
    /// Where it is opened and ended, if either is written; boxed because most transactions
    /// are autocommit statements with neither (read with [`Transaction::begin`],
    /// [`Transaction::end`] and [`Transaction::opened_within`]).
    bounds: Option<Box<Bounds>>,
    pub steps: Steps,
}

/// Where a transaction is opened and ended.
#[derive(Clone, Debug, Default)]
struct Bounds {
    begin: Option<Span>,
    end: Option<Span>,
    /// The branch arms enclosing the place host code opens it (see [`Step::branch`]).
    within: List<usize>,
    /// The branch arms enclosing its end (a procedure's `COMMIT` inside a `LOOP`).
    ended_within: List<usize>,
    /// An exclusive in-process lock it is opened under (see [`Transaction::guard`]).
    guard: Option<Name>,
}

/// A transaction's steps in program order. Most transactions are one autocommit statement:
/// its step is kept inline, with no allocation of its own.
pub type Steps = smallvec::SmallVec<[Step; 1]>;

impl Transaction {
    /// Where the transaction is opened (`BEGIN`, `pool.begin()`), if it is opened explicitly.
    pub fn begin(&self) -> Option<Span> {
        self.bounds.as_ref().and_then(|b| b.begin)
    }

    /// Where it ends (`COMMIT`, `ROLLBACK`, `tx.commit()`), if it ends explicitly.
    pub fn end(&self) -> Option<Span> {
        self.bounds.as_ref().and_then(|b| b.end)
    }

    /// The branch arms (`if`, `match`, loop bodies) enclosing the place host code opens the
    /// transaction: one opened in a loop's body is a new transaction in every iteration.
    pub fn opened_within(&self) -> &[usize] {
        self.bounds.as_ref().map_or(&[], |b| &b.within)
    }

    /// The branch arms enclosing its end (see [`Transaction::opened_within`]).
    pub fn ended_within(&self) -> &[usize] {
        self.bounds.as_ref().map_or(&[], |b| &b.ended_within)
    }

    pub fn set_ended_within(&mut self, branch: &[usize]) {
        if !branch.is_empty() {
            self.bounds.get_or_insert_with(Box::default).ended_within = branch.into();
        }
    }

    pub fn set_opened_within(&mut self, branch: &[usize]) {
        if !branch.is_empty() {
            self.bounds.get_or_insert_with(Box::default).within = branch.into();
        }
    }

    /// The exclusive lock this transaction runs under, by name: an in-process lock (a `Mutex`,
    /// an `RwLock`'s write side) whose guard held the database handle it was opened on (`let
    /// inner = self.inner.write().await; inner.db.begin()`), named by the lock
    /// (`Controller.inner`), since the process keeps its handle behind the lock; or an
    /// application lease the function holds (a value whose constructor claims a row by
    /// compare-and-set or a session advisory lock and whose `Drop` releases it), named by its
    /// type. Two transactions under one such lock never overlap.
    pub fn guard(&self) -> Option<&str> {
        self.bounds.as_ref().and_then(|b| b.guard.as_deref())
    }

    pub fn set_guard(&mut self, lock: Name) {
        self.bounds.get_or_insert_with(Box::default).guard = Some(lock);
    }

    pub fn set_begin(&mut self, at: Option<Span>) {
        if at.is_some() || self.bounds.is_some() {
            self.bounds.get_or_insert_with(Box::default).begin = at;
        }
    }

    pub fn set_end(&mut self, at: Option<Span>) {
        if at.is_some() || self.bounds.is_some() {
            self.bounds.get_or_insert_with(Box::default).end = at;
        }
    }

    pub fn new(scope: Scope, executor: Executor, isolation: Isolation) -> Self {
        Transaction {
            scope,
            executor,
            isolation,
            isolation_set: false,
            bounds: None,
            steps: Steps::new(),
        }
    }
}

/// One statement with its facts.
#[derive(Clone, Debug)]
pub struct Step {
    /// The statement in its host file.
    pub span: Span,
    pub facts: Facts,
    /// Position in program order within the unit (steps and exits share the numbering).
    pub seq: usize,
    /// The database session the statement runs on, where one is known; statements sent through
    /// a pool have none (each may run on another session).
    pub session: Option<usize>,
    /// Branch arms (`if`, `match`, loop bodies) enclosing the statement in host code, outermost
    /// first; empty when it runs on every path.
    pub branch: List<usize>,
    /// What host code says about the statement; read with [`Step::host`]. `.sql` files have none.
    pub host: Option<Box<Host>>,
}

/// How host code sends a statement, kept in a box of its own (most steps come from `.sql` files).
#[derive(Clone, Debug, Default)]
pub struct Host {
    /// What the statement is sent through, as written in host code (`&mut *tx`).
    pub via: Option<Box<str>>,
    /// Host values bound to its parameters, and which earlier steps' results they come from.
    pub inputs: List<Input>,
    /// Call sites through which the unit reaches this statement (a helper walked in place),
    /// outermost first; empty for the unit's own statements.
    pub calls: List<Span>,
    /// The collection its `VALUES` rows are pushed from (sqlx `push_values(rows, ..)`).
    pub rows: Option<Span>,
    /// Its error leaves with `?` (`.execute(&mut *tx).await?`), from every helper it is reached
    /// through: nothing on the way tells one error from another.
    pub propagated: bool,
    /// The call fails when the statement returns no row (sqlx's `fetch_one`, tokio-postgres's
    /// `query_one`, diesel's `first` and `get_result` without `.optional()`).
    pub required: bool,
}

static NO_HOST: Host = Host {
    via: None,
    inputs: List::new(),
    calls: List::new(),
    rows: None,
    propagated: false,
    required: false,
};

impl Step {
    /// What host code says about the statement (nothing, for a `.sql` file's).
    pub fn host(&self) -> &Host {
        self.host.as_deref().unwrap_or(&NO_HOST)
    }

    /// A statement of a trigger (or routine) that `w` runs: a copy listing `w` among its call
    /// sites.
    pub fn run_by(&self, w: &Step) -> bool {
        self.host().calls.contains(&w.span)
    }

    /// The columns an upsert sets on a conflict whatever the row already there holds: `DO
    /// UPDATE SET c = v` with no `WHERE`, `v` reading nothing of that row (only `excluded`,
    /// parameters, literals, variables; `SET n = t.n + 1` and `SET n = n + 1` read it).
    pub fn overwrites(&self) -> impl Iterator<Item = &Name> {
        self.facts
            .extra()
            .conflict_sets
            .iter()
            .filter(|(_, v)| {
                v.idents
                    .iter()
                    .all(|i| excluded(i).is_some() || flow::is_var(i, self))
            })
            .map(|(c, _)| c)
    }
}

/// The column `excluded.c` names in an upsert's `DO UPDATE` (the value the statement tried to
/// insert into `c`); `None` for any other identifier.
pub fn excluded(ident: &str) -> Option<&str> {
    ident
        .get(..9)
        .filter(|p| p.eq_ignore_ascii_case("excluded."))
        .and(ident.get(9..))
}

/// A value host code binds to a statement parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// 1-based parameter number (`$1`, or the n-th `?`).
    pub param: usize,
    /// Sequence numbers of the steps whose results flow into the value.
    pub from: Vec<usize>,
    /// The host value, with references and conversions that keep it the same value stripped
    /// (`&x`, `x.clone()`, `x.as_str()` are all `x`).
    pub text: String,
    /// Computed to be in key order with the statement's other keys (`min`/`max`, a tuple
    /// swapped on comparison, an element of a sorted collection).
    pub ordered: bool,
    /// For an ordered value, the values it was put in order from (`a` and `b` for
    /// `a.min(b)`), normalised like [`Input::text`].
    pub sources: Vec<String>,
    /// The steps of [`Input::from`] whose rows reach the value only through these named
    /// fields (`usage.start`, `row.get("start")`): it carries none of their other columns.
    pub through: Vec<(usize, Vec<String>)>,
}

impl Input {
    /// The named fields through which the value carries `seq`'s rows; `None` when it may
    /// carry any of them.
    pub fn fields_of(&self, seq: usize) -> Option<&[String]> {
        self.through
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, f)| f.as_slice())
    }

    /// The value is a field named `column` of another value (`c.id` for `id`): with `from`, the
    /// key of the row that value was read from.
    pub fn is_field(&self, column: &str) -> bool {
        // A cast keeps the value (`self.id as TaskId`).
        let value = self.text.split(" as ").next().unwrap_or(&self.text);
        value.rsplit_once('.').is_some_and(|(_, f)| f == column)
    }

    /// The value as shown in messages: as written when it is short and on one line (`id`,
    /// `to_db_typed_uuid(volume_id)`: two rows' keys bound to `$2` of two statements are told
    /// apart), else the parameter.
    pub fn shown(&self) -> String {
        let plain = self.text.chars().count() <= 40 && !self.text.contains('\n');
        if plain && !self.text.is_empty() {
            self.text.clone()
        } else {
            format!("${}", self.param)
        }
    }
}

// A run keeps every statement's step until its rules are done: these sizes are the memory a
// statement costs before its lists (`cargo bench --bench scale` measures the whole). Growing
// one is a decision, not an accident (rustc's `static_assert_size!` habit).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<Step>() == 136);
    assert!(std::mem::size_of::<Transaction>() == 160);
    assert!(std::mem::size_of::<facts::Facts>() == 80);
    assert!(std::mem::size_of::<facts::Extra>() == 200);
};
