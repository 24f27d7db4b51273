//! What a unit's code does around its statements: the triggers a script declares, who runs a
//! `.sql` file, loops, exception handlers, the conditions branches are taken on, the sessions
//! statements run on, and where code leaves early.

use super::*;

/// `CREATE TRIGGER .. ON table .. EXECUTE FUNCTION f()`: `f` runs inside every statement of
/// those kinds on the table (see [`routines`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub table: Name,
    pub events: TriggerEvents,
    /// `BEFORE` or `INSTEAD OF` (else `AFTER`): runs before the row is written (or in its
    /// place, on a view), and can refuse it.
    pub before: bool,
    /// `FOR EACH ROW` (else once per statement): `NEW` and `OLD` are the row.
    pub for_each_row: bool,
    pub function: Name,
    /// `REFERENCING OLD TABLE AS o NEW TABLE AS n`: the transition tables its function reads,
    /// the rows of the firing statement alone.
    pub transition: Vec<Name>,
    /// `WHEN (NEW.col = 'value' AND ..)`: the new row's columns and the literal values the
    /// condition requires of them (none read when any part of it is something else at the top
    /// level, such as an `OR`).
    pub requires: Vec<(Name, String)>,
    /// `UPDATE OF a, b`, or `WHEN (NEW.a IS DISTINCT FROM OLD.a OR ..)`: an `UPDATE` fires it
    /// only when it sets one of these columns (none: any `UPDATE`).
    pub changes: Vec<Name>,
    /// The `CREATE TRIGGER` statement.
    pub span: Span,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriggerEvents {
    pub insert: bool,
    pub update: bool,
    pub delete: bool,
}

impl TriggerEvents {
    /// Whether a statement of `kind` is one of these events; none for a statement that fires
    /// no row trigger (a `SELECT`, a call).
    pub fn has(&self, kind: StmtKind) -> Option<bool> {
        match kind {
            StmtKind::Insert => Some(self.insert),
            StmtKind::Update => Some(self.update),
            StmtKind::Delete => Some(self.delete),
            _ => None,
        }
    }
}

/// Who runs a `.sql` file and how, when txlint can tell from its name, folder or content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runner {
    /// `sqlx migration`, `diesel migration`, `sqlc query file`, ...
    pub name: &'static str,
    /// Why txlint thinks so (`migrations/<version>_<name>.sql`, `-- name: X :one`, ...).
    pub evidence: &'static str,
    /// How it runs the file (`each file in a transaction`, ...).
    pub runs: &'static str,
    /// A migration: applied once per database, not a code path that runs concurrently.
    pub migration: bool,
    /// Who calls what the file holds (its queries, the routines it defines), when that is
    /// application code going through a connection pool.
    pub called: Option<&'static str>,
}

/// `for id in ids { ... }` in host code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// The branch arm of the body (see [`Step::branch`]).
    pub branch: usize,
    /// Names the loop binds.
    pub vars: Vec<String>,
    /// The collection is visited in sorted order.
    pub sorted: bool,
    /// The collection expression.
    pub span: Span,
    /// PL/pgSQL `FOR r IN <query> LOOP`, or a Rust loop over the rows one query returned: the
    /// query's step (by [`Step::seq`]).
    pub query: Option<usize>,
}

/// `BEGIN .. EXCEPTION WHEN .. THEN .. END`: the block runs as a savepoint; when a handler
/// runs, the body's work and the locks it took were rolled back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handler {
    /// The body is the steps after position `after` up to `upto` (see [`Step::seq`]).
    pub after: usize,
    pub upto: usize,
    /// The handlers' branch arms.
    pub arms: Vec<usize>,
    /// The `EXCEPTION` keyword.
    pub span: Span,
    /// A handler catches a unique violation (`WHEN unique_violation`, `OTHERS`, ..).
    pub unique: bool,
}

impl Handler {
    /// The step numbered `seq` runs in the block's body: its errors are caught here, and its
    /// work is rolled back when a handler runs.
    pub fn covers(&self, seq: usize) -> bool {
        seq > self.after && seq <= self.upto
    }
}

/// A branch arm (see [`Step::branch`]) taken on a condition computed from the results of
/// earlier steps: `if count > 1 { ... }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub branch: usize,
    /// Sequence numbers of the steps the condition is computed from.
    pub from: Vec<usize>,
    /// The arm runs only when those steps failed (`if let Err(e) = ..`, `let Ok(..) = .. else`,
    /// a `match` arm on `Err`): what they would have done did not happen.
    pub failed: bool,
    /// The condition tests only whether those steps found a row (PL/pgSQL `IF FOUND`), not
    /// what they read: an arm taken on it decides on a row's presence, not on its state.
    pub presence: bool,
}

/// One database session used by a unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub id: usize,
    /// Pool-owned (`pool.acquire()`, `pool.get()`, `pool.begin()`), dedicated, or not known
    /// (a parameter of unknown origin).
    pub kind: Executor,
    /// Where this unit takes the session from its pool or opens it; `None` when the unit got it
    /// from its caller.
    pub acquired: Option<Span>,
    /// Handed in by the caller as a type the driver's transactions are too (`&mut
    /// PgConnection` that `&mut *tx` gives, diesel's `conn.transaction(|conn| ..)`): a
    /// transaction the caller opened may be open on it.
    pub inherited: bool,
    /// The connection itself is moved on by value (into a tuple, a struct, a call's argument
    /// that is not `drop`): its new owner, a guard whose `Drop` may unlock it, decides when it
    /// goes back to the pool.
    pub handed_on: bool,
    /// In an `async` function, where the connection is first moved on by value (a step
    /// position, see [`Step::seq`]), whoever gave it: a lock taken before that point is held
    /// through `.await`s while nothing that would unlock it owns the connection yet.
    pub handed_on_at: Option<usize>,
    /// Taken in an `async` function: every statement on it is awaited, and a caller can drop
    /// the future at any of those awaits (a timeout, `select!`, an aborted task, a request
    /// whose client went away), skipping whatever was to run after.
    pub in_async: bool,
}

/// A place where host code may leave the function early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// Position in program order among the unit's steps (see [`Step::seq`]).
    pub seq: usize,
    pub span: Span,
    /// The step whose own result this exit propagates (`query(..).execute(..).await?`): if it
    /// fires, that step did not happen.
    pub owner: Option<usize>,
    /// Branch arms enclosing the exit (see [`Step::branch`]).
    pub branch: List<usize>,
    pub kind: ExitKind,
    /// It leaves with an error: `return Err(..)`, `bail!`, `.ok_or(..)?`, `RAISE EXCEPTION`
    /// (and every [`ExitKind::Propagate`]).
    pub fails: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitKind {
    /// `?` on a call's result: leaves when the call failed, decides nothing about data.
    Propagate,
    /// `return`, a `let ... else` that diverges, `bail!`, `.ok_or(..)?`, PL/pgSQL `RETURN` and
    /// `RAISE EXCEPTION`: leaves on a decision.
    Return,
}

/// Which of a unit's statements run together: branch arms and early exits.
impl Unit {
    /// Statements in these two branch paths never both run in one execution: they sit in
    /// different arms of one choice.
    pub fn exclusive(&self, a: &[usize], b: &[usize]) -> bool {
        let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) else {
            return false;
        };
        // A unit with routines copied in has thousands of choices and is asked about every
        // pair of its statements: look arms up, never scan the choices.
        let of = self.choice_of.get_or_init(|| {
            let arms = self.choices.iter().flatten().max().map_or(0, |m| m + 1);
            let mut of = vec![u32::MAX; arms];
            for (c, choice) in self.choices.iter().enumerate() {
                for &arm in choice {
                    of[arm] = c as u32;
                }
            }
            of
        });
        let choice = |arm: usize| of.get(arm).copied().unwrap_or(u32::MAX);
        choice(a[i]) != u32::MAX && choice(a[i]) == choice(b[i])
            || self.contradict(&a[i..], &b[i..])
    }

    /// Arms of the two paths need opposite values of one boolean bound once (see
    /// [`Unit::requires`]).
    fn contradict(&self, a: &[usize], b: &[usize]) -> bool {
        if self.requires.is_empty() {
            return false;
        }
        let needs = |path: &[usize]| -> Vec<&(Name, bool)> {
            path.iter()
                .filter_map(|arm| {
                    let i = self.requires.binary_search_by_key(arm, |(a, _)| *a).ok()?;
                    Some(&self.requires[i].1)
                })
                .flatten()
                .collect()
        };
        let theirs = needs(b);
        needs(a)
            .iter()
            .any(|(x, v)| theirs.iter().any(|(y, w)| x == y && v != w))
    }

    /// `a` and a later `b` never both run in one execution: `a`'s branch arm leaves the unit
    /// after it (a `return` or `RAISE` in that same arm) and `b` is outside the arm.
    /// Also when that arm is a helper's and `b` is the helper's too (a `return Ok(..)` in a
    /// helper walked in place leaves the helper, not its caller).
    pub fn leaves_between(&self, a: &Step, b: &Step) -> bool {
        let leaves = |e: &Exit| {
            e.kind == ExitKind::Return
                && e.seq > a.seq
                && e.seq < b.seq
                && e.branch[..] == a.branch[..]
        };
        !a.branch.is_empty()
            && !b.branch.starts_with(&a.branch)
            && (self.exits_between(a.seq, b.seq).any(leaves)
                || self
                    .frame_exits
                    .iter()
                    .any(|(e, until)| b.seq < *until && leaves(e)))
    }

    /// `a`'s call fails when its statement returns no row (see [`Host::required`]) and that
    /// error leaves before `b`: out of the unit, or out of a frame (`async` block, helper)
    /// that `b` is in. With no row, `b` does not run.
    pub fn fails_before(&self, a: &Step, b: &Step) -> bool {
        let owned = |e: &Exit| e.owner == Some(a.seq) && e.kind == ExitKind::Propagate;
        a.host().required
            && (self.exits.iter().any(owned)
                || self
                    .frame_exits
                    .iter()
                    .any(|(e, until)| owned(e) && e.seq < b.seq && b.seq < *until))
    }

    /// `a` and `b` never both run in one execution: alternative arms, or an arm that leaves
    /// after the earlier of the two.
    pub fn apart(&self, a: &Step, b: &Step) -> bool {
        let (first, second) = if a.seq <= b.seq { (a, b) } else { (b, a) };
        self.exclusive(&a.branch, &b.branch) || self.leaves_between(first, second)
    }

    /// Exits strictly between two positions in program order.
    pub fn exits_between(&self, from: usize, to: usize) -> impl Iterator<Item = &Exit> {
        self.exits
            .iter()
            .filter(move |e| e.seq > from && e.seq < to)
    }
}
