//! What one statement does, as far as concurrency is concerned.

use crate::model::Isolation;
use crate::source::{Dialect, Span};

/// The lists a step carries: most are empty, and an empty `ThinVec` is one pointer with no
/// allocation (a run keeps every statement's facts until its rules are done).
pub type List<T> = thin_vec::ThinVec<T>;

/// A name or a short text of a statement (a table, a column, a variable, an expression): up
/// to 24 bytes inline, with no allocation of its own (most names are that short).
pub type Name = compact_str::CompactString;

#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub kind: StmtKind,
    /// The database the statement is written for.
    pub dialect: Dialect,
    /// sqlparser parsed the statement; otherwise these facts come from tokens only.
    pub parsed: bool,
    /// The statement writes rows somewhere (its own DML or a data-modifying CTE).
    pub modifies: bool,
    pub writes: List<TableRef>,
    pub reads: List<TableRef>,
    pub row_locks: List<RowLock>,
    /// Calls a function other than a lock function or a well-known pure built-in: the
    /// statement may do its protected work itself.
    pub calls_functions: bool,
    /// Columns a query reads (`*` for a wildcard), lower case (from the AST).
    pub columns: List<Name>,
    /// `SET` items of an `UPDATE` (from the AST).
    pub sets: List<SetItem>,
    /// `col = value` conjuncts of the `WHERE` clause (from the AST).
    pub filters: List<Pred>,
    /// The `WHERE` clause has conditions besides `filters` (ranges, `OR`, functions, ...).
    pub other_conditions: bool,
    /// `ORDER BY` at the statement's top level (a deterministic lock order for a row set).
    pub ordered: bool,
    /// Computes values in key order (`LEAST(..)`, `GREATEST(..)`): keys assigned from it are
    /// sorted.
    pub orders: bool,
    /// Computes a value no other call can have (`gen_random_uuid()`, `uuidv7()`,
    /// `uuid_generate_v4()`, `nextval(..)`): a key assigned from it is this run's own.
    pub fresh: bool,
    /// Selects its rows from a set of keys: `= ANY(..)`, `IN (..)`, `unnest(..)`.
    pub key_set: bool,
    /// Joins a list of keys as a table of its own top level (`FROM unnest($1) AS k(id)`, `JOIN
    /// unnest(..)`; not inside a subquery, whose rows follow the subquery's plan): a plan
    /// that loops over the list and looks each key up visits, and locks, the rows in the
    /// list's order (`= ANY($1)` does not: its index scan sorts the array).
    pub joins_key_list: bool,
    /// Reads rows from a list of keys (`FROM unnest($1) AS k`, `JOIN unnest(..)`, at any
    /// depth) and sorts nothing (no `ORDER BY` anywhere): its rows come in the list's order,
    /// or in the order a join's plan gives, never in key order.
    pub rows_from_list: bool,
    /// `INSERT ... ON CONFLICT ... DO UPDATE` (MySQL `ON DUPLICATE KEY UPDATE`): locks the
    /// conflicting rows.
    pub upsert: bool,
    /// `INSERT`: the columns and the values of its first `VALUES` row.
    pub inserts: List<(Name, Operand)>,
    /// `INSERT ... ON CONFLICT`, `ON DUPLICATE KEY UPDATE`, `INSERT IGNORE`: a duplicate key is
    /// handled by the statement.
    pub on_conflict: bool,
    /// What few statements have; read with [`Facts::extra`], written with [`Facts::extra_mut`].
    extra: Option<Box<Extra>>,
}

/// The facts most statements do not have, in one box of their own so that the step of a
/// plain statement stays small (a run keeps every step until its rules are done).
#[derive(Clone, Debug, Default)]
pub struct Extra {
    pub advisory: List<AdvisoryCall>,
    /// `LOCK TABLE` (boxed, as `ddl`: rarer still than the rest of this box).
    pub table_lock: Option<Box<TableLock>>,
    pub tx: Option<TxControl>,
    /// `SET [LOCAL|SESSION] name ...`.
    pub set: Option<SetFact>,
    /// Decision functions in a query's select list: `count`, `max`, `min`, `sum`, `avg`,
    /// `exists` (also `SELECT 1 FROM ...`).
    pub aggregates: List<Name>,
    /// A table's keys declared by this statement (`CREATE TABLE`, `CREATE UNIQUE INDEX`,
    /// `ALTER TABLE ... ADD CONSTRAINT`).
    pub ddl: Option<Box<TableDdl>>,
    /// `UPDATE t SET state = .. WHERE id = (SELECT id FROM t WHERE state = 'queued' ..)`: the
    /// columns the subquery picks its row by and the outer `WHERE` does not test again (a
    /// one-statement claim: a waiting `UPDATE` re-checks only the outer `WHERE`).
    pub claim: List<Name>,
    /// An `UPDATE`'s `WHERE` conjuncts other than `col = value`: the column each orders
    /// against a value (`state < 'done'`), none for any other condition.
    pub compared: List<Option<Name>>,
    /// `INSERT INTO t .. SELECT .. WHERE NOT EXISTS (SELECT .. FROM t WHERE a = ..)`: the
    /// columns the insert first checks are absent (an existence check in the statement itself),
    /// each with the names it is compared with (none for parameters and literals): the check is
    /// on one key only when they are variables of the unit ([`Extra::uses`]).
    pub absent: List<(Name, List<Name>)>,
    /// Variables this statement assigns (PL/pgSQL `INTO` targets and `:=`, psql `\gset`).
    pub assigns: List<Name>,
    /// Variables of the unit that this statement reads.
    pub uses: List<Name>,
    /// Functions and procedures it calls, other than aggregates and lock functions (see
    /// [`crate::model::routines`]).
    pub calls: List<RoutineCall>,
    /// A decision read's, an `UPDATE`'s or a `DELETE`'s whole `WHERE` when `filters` are not all
    /// of it (see
    /// [`Facts::other_conditions`]).
    pub condition: Option<Box<Operand>>,
    /// `WHERE` conditions other than `col = value` and without parameters, as printed (lower
    /// case): all of a decision read's, or none; those a write tests again on the rows it
    /// changes, also in a subquery on its own table that picks them.
    pub tests: List<Name>,
    /// The `SET` items of an `INSERT .. ON CONFLICT .. DO UPDATE` with no `WHERE`: on a
    /// conflict it sets them whatever the row already there holds (see
    /// [`Step::overwrites`](crate::model::Step::overwrites)).
    pub conflict_sets: List<(Name, Operand)>,
    /// The columns the insert's `NOT EXISTS` on its own table tests otherwise than by `col =
    /// value` (`path >= $1 AND path < $2`): rows other than one key's.
    pub absent_tests: List<Name>,
    /// `ON CONFLICT (a, b)`: the columns of the conflict target.
    pub conflict_on: List<Name>,
    /// `CREATE [TEMP] TABLE t`: `t`, and whether it is temporary. Until its transaction commits
    /// no other transaction sees the table (a temporary one, never): nothing races on it.
    pub created: Option<Box<(Name, bool)>>,
    /// `CREATE TABLE|INDEX|SEQUENCE|SCHEMA IF NOT EXISTS name` (PostgreSQL, not temporary):
    /// `name`. The catalog is checked and the object created in two steps: two sessions can
    /// both find it missing, and the second fails on the catalog's unique index (23505).
    pub creates_if_missing: Option<Box<Name>>,
}

/// `f(a, $1)` or `CALL p(..)` in a statement: if the run defines `f`, its statements run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutineCall {
    /// Unqualified, lower case.
    pub name: Name,
    /// Positional arguments, in order.
    pub args: Vec<Operand>,
}

static NO_EXTRA: Extra = Extra {
    advisory: List::new(),
    table_lock: None,
    tx: None,
    set: None,
    aggregates: List::new(),
    ddl: None,
    claim: List::new(),
    compared: List::new(),
    absent: List::new(),
    assigns: List::new(),
    uses: List::new(),
    calls: List::new(),
    condition: None,
    tests: List::new(),
    conflict_sets: List::new(),
    absent_tests: List::new(),
    conflict_on: List::new(),
    created: None,
    creates_if_missing: None,
};

/// An expression's ingredients.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Operand {
    /// `$n` (and MySQL `?`, numbered in order).
    pub params: List<usize>,
    /// Identifiers: columns of the statement's tables, or variables (PL/pgSQL, psql), dotted
    /// when qualified (`r.balance`).
    pub idents: List<Name>,
    /// The expression as sqlparser prints it.
    pub text: Name,
}

/// `SET column = value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetItem {
    pub column: Name,
    pub value: Operand,
    /// The column name in the host file.
    pub span: Option<Span>,
}

/// `column = value` in a `WHERE` clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pred {
    pub column: Name,
    pub value: Operand,
}

/// Keys a DDL statement declares for a table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableDdl {
    pub table: String,
    /// The schema the statement names the table in (`underway` of `underway.task`); none for
    /// an unqualified name or `public`.
    pub schema: Option<String>,
    /// `CREATE TABLE` (as opposed to adding to a table declared elsewhere).
    pub creates: bool,
    /// `ALTER TABLE`: in a transaction, a lock on the table that conflicts with itself (`ACCESS
    /// EXCLUSIVE` for most forms, `SHARE ROW EXCLUSIVE` for foreign keys) until it ends.
    pub alters: bool,
    pub columns: Vec<String>,
    pub primary_key: Option<Vec<String>>,
    /// Unique column sets (`UNIQUE`, unique indexes), the primary key not repeated.
    pub unique: Vec<Vec<String>>,
    /// Partial unique indexes txlint can follow: the key, and the columns the index's `WHERE`
    /// requires to be NULL (`WHERE deleted_at IS NULL`). Other partial indexes, and indexes on
    /// expressions, are not keys here.
    pub partial: Vec<(Vec<String>, Vec<String>)>,
    /// Partial unique indexes on another predicate (`WHERE is_verified IS TRUE`): the key, and
    /// the predicate's tests as printed (lower case). They hold one row per key among the rows
    /// that pass every test, so they settle a check that makes all of those tests.
    pub predicated: Vec<(Vec<String>, Vec<String>)>,
    pub foreign_keys: Vec<ForeignKey>,
    /// `ALTER TABLE .. DROP CONSTRAINT name`: the constraints this statement removes.
    pub dropped: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKey {
    pub columns: Vec<String>,
    pub table: String,
    pub referred: Vec<String>,
    /// `CONSTRAINT name` when the DDL gives one (else PostgreSQL's `<table>_<columns>_fkey`).
    pub name: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StmtKind {
    Select,
    Insert,
    Update,
    Delete,
    Merge,
    /// `LOCK TABLE`.
    Lock,
    /// Transaction control.
    Transaction,
    Set,
    Copy,
    Call,
    Do,
    /// `EXECUTE`: a prepared statement, or PL/pgSQL's dynamic SQL: work whose text txlint
    /// does not read.
    Execute,
    /// `CREATE FUNCTION|PROCEDURE`.
    CreateRoutine,
    /// Other DDL (`CREATE`, `ALTER`, `DROP`, ...).
    Ddl,
    #[default]
    Other,
}

/// A table named by a statement (last name component, folded to lower case unless quoted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRef {
    pub name: Name,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowLockStrength {
    Update,
    NoKeyUpdate,
    Share,
    KeyShare,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    Block,
    Nowait,
    SkipLocked,
}

/// `FOR UPDATE | NO KEY UPDATE | SHARE | KEY SHARE [OF ...] [NOWAIT | SKIP LOCKED]`, MySQL
/// `LOCK IN SHARE MODE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLock {
    pub strength: RowLockStrength,
    /// The clause as written, keywords upper-cased (`FOR UPDATE OF a SKIP LOCKED`).
    pub clause: String,
    pub of: Vec<String>,
    pub wait: LockWait,
    pub span: Span,
    /// The query the clause belongs to has an `ORDER BY` (at the clause's own level, say inside
    /// a CTE): rows are locked in that order.
    pub ordered: bool,
}

impl RowLock {
    /// Excludes other lockers and writers of the row (`FOR UPDATE`, `FOR NO KEY UPDATE`).
    pub fn exclusive(&self) -> bool {
        matches!(
            self.strength,
            RowLockStrength::Update | RowLockStrength::NoKeyUpdate
        )
    }

    /// Exclusive, and waits for a row another session holds (no `NOWAIT`, no `SKIP LOCKED`).
    pub fn waits_exclusive(&self) -> bool {
        self.exclusive() && self.wait == LockWait::Block
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockScope {
    Session,
    Transaction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdvisoryOp {
    Lock,
    TryLock,
    Unlock,
    UnlockAll,
}

/// A call to an advisory-lock function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvisoryCall {
    /// The function as written, lower case (`pg_advisory_xact_lock`).
    pub function: String,
    pub scope: LockScope,
    pub op: AdvisoryOp,
    pub shared: bool,
    /// The key arguments, whitespace-normalised (`hashtext('jobs'), 1`).
    pub key: String,
    pub span: Span,
}

/// `LOCK TABLE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableLock {
    pub tables: Vec<TableRef>,
    pub mode: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxControl {
    Begin {
        isolation: Option<Isolation>,
    },
    Commit,
    Rollback,
    Savepoint(String),
    RollbackTo(String),
    Release(String),
    PrepareTransaction,
    /// `SET TRANSACTION ISOLATION LEVEL` (this transaction) or a session default.
    SetIsolation {
        isolation: Isolation,
        session: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetFact {
    pub name: String,
    pub local: bool,
}

impl Operand {
    /// Written out in the statement itself (a literal, a call on literals): no parameter, no
    /// identifier, the same value in every run.
    pub fn is_literal(&self) -> bool {
        self.params.is_empty() && self.idents.is_empty()
    }

    fn shrink_to_fit(&mut self) {
        self.params.shrink_to_fit();
        self.idents.shrink_to_fit();
        self.text.shrink_to_fit();
    }
}

impl AdvisoryCall {
    /// Takes (or tries to take) a transaction-scoped lock.
    pub fn takes_xact_lock(&self) -> bool {
        self.scope == LockScope::Transaction
            && matches!(self.op, AdvisoryOp::Lock | AdvisoryOp::TryLock)
    }

    /// Takes (or tries to take) a session-scoped lock.
    pub fn takes_session_lock(&self) -> bool {
        self.scope == LockScope::Session
            && matches!(self.op, AdvisoryOp::Lock | AdvisoryOp::TryLock)
    }

    /// Releases the session lock `lock` takes: `pg_advisory_unlock_all()`, or an unlock of the
    /// same key in the same mode (`pg_advisory_unlock_shared` releases only a shared lock).
    pub fn releases(&self, lock: &AdvisoryCall) -> bool {
        self.scope == LockScope::Session
            && (self.op == AdvisoryOp::UnlockAll
                || (self.op == AdvisoryOp::Unlock
                    && self.key == lock.key
                    && self.shared == lock.shared))
    }
}

impl Facts {
    /// The values the statement writes (`SET` items, inserted values) and picks its rows by
    /// (`col = value` conjuncts).
    pub fn operands(&self) -> impl Iterator<Item = &Operand> + Clone {
        self.sets
            .iter()
            .map(|s| &s.value)
            .chain(self.inserts.iter().map(|(_, o)| o))
            .chain(self.filters.iter().map(|p| &p.value))
    }

    /// The facts few statements have (empty lists and `None` when this one has none).
    pub fn extra(&self) -> &Extra {
        self.extra.as_deref().unwrap_or(&NO_EXTRA)
    }

    /// The facts few statements have, boxed on first write.
    pub fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// Give back what building the facts over-allocated: a run keeps the facts of every
    /// statement until its rules are done.
    pub fn shrink_to_fit(&mut self) {
        self.writes.shrink_to_fit();
        self.reads.shrink_to_fit();
        self.row_locks.shrink_to_fit();
        self.columns.shrink_to_fit();
        self.sets.shrink_to_fit();
        self.sets.iter_mut().for_each(|s| s.value.shrink_to_fit());
        self.filters.shrink_to_fit();
        self.filters
            .iter_mut()
            .for_each(|p| p.value.shrink_to_fit());
        self.inserts.shrink_to_fit();
        self.inserts.iter_mut().for_each(|(_, o)| o.shrink_to_fit());
        if let Some(e) = &mut self.extra {
            e.advisory.shrink_to_fit();
            e.aggregates.shrink_to_fit();
            e.assigns.shrink_to_fit();
            e.uses.shrink_to_fit();
        }
    }

    /// Transaction-scoped locks this statement takes: xact advisory locks, row locks, `LOCK TABLE`.
    pub fn xact_locks(&self) -> impl Iterator<Item = (Span, String)> + '_ {
        let advisory = self
            .extra()
            .advisory
            .iter()
            .filter(|a| a.scope == LockScope::Transaction)
            .map(|a| (a.span, format!("`{}({})`", a.function, a.key)));
        let rows = self
            .row_locks
            .iter()
            .map(|l| (l.span, format!("`{}`", l.clause)));
        let table = self
            .extra()
            .table_lock
            .iter()
            .map(|l| (l.span, "`LOCK TABLE`".to_string()));
        advisory.chain(rows).chain(table)
    }
}

/// The last part of a dotted name: `public.f` and `f` are one routine (txlint does not follow
/// `search_path`), `t.col` and `col` one column.
pub fn unqualified(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}
