//! Grouping the statements of one session into transactions: `BEGIN ... COMMIT` blocks,
//! autocommit statements, simple-query messages, or a transaction opened by host code.

use crate::config::SqlMode;
use crate::model::*;
use crate::source::Span;

/// Walks the statements sent on one session and groups them into transactions.
pub struct SessionWalker {
    mode: SqlMode,
    /// What host code sends the statements through.
    executor: Executor,
    done: Vec<Transaction>,
    /// The open explicit transaction (or the file's, in transaction mode).
    open: Option<Transaction>,
    /// Session default isolation (`SET SESSION CHARACTERISTICS ...`); none: the database's.
    session_isolation: Option<Isolation>,
    /// MySQL `SET TRANSACTION ...` outside a transaction applies to the next one.
    next_isolation: Option<Isolation>,
    /// The simple-query message of the last autocommit statement.
    last_message: Option<usize>,
}

impl SessionWalker {
    /// A `.sql` file run the way `sql.mode` says.
    pub fn script(mode: SqlMode) -> Self {
        let open = (mode == SqlMode::Transaction)
            .then(|| Transaction::new(Scope::File, Executor::Session, Isolation::ReadCommitted));
        SessionWalker {
            mode,
            executor: Executor::Session,
            done: Vec::new(),
            open,
            session_isolation: None,
            next_isolation: None,
            last_message: None,
        }
    }

    /// A session of host code, reached through `executor`: autocommit unless the SQL opens a
    /// transaction.
    pub fn host(executor: Executor) -> Self {
        SessionWalker {
            executor,
            ..SessionWalker::script(SqlMode::Script)
        }
    }

    /// The open transaction was opened under an exclusive in-process lock (see
    /// [`Transaction::guard`]).
    pub fn set_guard(&mut self, lock: crate::model::Name) {
        if let Some(tx) = &mut self.open {
            tx.set_guard(lock);
        }
    }

    /// A transaction opened by host code (`pool.begin()` within the branch arms `within`, or
    /// by the caller when `begin` is `None`): everything sent runs inside it.
    pub fn host_transaction(begin: Option<Span>, within: &[usize]) -> Self {
        let mut walker = SessionWalker::host(Executor::Transaction);
        walker.open_host(begin, within);
        walker
    }

    /// Host code opens a transaction on this session by a call of the driver rather than a
    /// statement (diesel's `TransactionManager::begin_transaction(conn)`), within the branch
    /// arms `within`; one already open stays (a nested begin is a savepoint).
    pub fn open_host(&mut self, begin: Option<Span>, within: &[usize]) {
        if self.open.is_some() {
            return;
        }
        let mut tx = transaction(
            Scope::Explicit,
            Executor::Transaction,
            self.session_isolation,
        );
        tx.set_begin(begin);
        tx.set_opened_within(within);
        self.open = Some(tx);
        self.last_message = None;
    }

    /// Host code sets the open transaction's isolation level when it opens it (diesel's
    /// `build_transaction().serializable()`).
    pub fn isolate(&mut self, isolation: Isolation) {
        if let Some(tx) = &mut self.open {
            tx.isolation = isolation;
            tx.isolation_set = true;
        }
    }

    /// Host code ends the open transaction (`tx.commit()`).
    pub fn end(&mut self, end: Option<Span>) {
        if let Some(mut tx) = self.open.take() {
            tx.set_end(end);
            self.done.push(tx);
        }
        self.last_message = None;
    }

    /// Where the transaction still open was opened (`None` inside: by the caller, or by SQL),
    /// if one is open.
    pub fn open_at(&self) -> Option<Option<Span>> {
        self.open.as_ref().map(Transaction::begin)
    }

    /// The `seq` of the first step of the transaction still open, if it has one.
    pub fn open_since(&self) -> Option<usize> {
        self.open.as_ref()?.steps.first().map(|s| s.seq)
    }

    /// Where the session stands: whether a transaction is open, and how many have ended.
    pub fn mark(&self) -> (bool, usize) {
        (self.open.is_some(), self.done.len())
    }

    /// Back to `mark` after a branch arm that leaves the function: a transaction the arm
    /// ended (`tx.rollback()` before its `return`) is still open for the code after the arm.
    pub fn reopen(&mut self, (was_open, done): (bool, usize)) {
        if was_open && self.open.is_none() && self.done.len() == done + 1 {
            self.open = self.done.pop();
            if let Some(tx) = &mut self.open {
                tx.set_end(None);
            }
        }
    }

    /// Statements of code txlint cannot place: each its own transaction of unknown scope.
    pub fn unknown() -> Self {
        SessionWalker {
            executor: Executor::Unknown,
            ..SessionWalker::script(SqlMode::Statements)
        }
    }

    /// Room for `n` more transactions (a script's statements, read at once: each is at most
    /// one transaction, and the list is not grown to twice their number).
    pub fn reserve(&mut self, n: usize) {
        self.done.reserve_exact(n);
    }

    /// Add a statement; `message` numbers the simple-query message it is sent in.
    pub fn push(&mut self, step: Step, message: usize) {
        match self.mode {
            SqlMode::Statements => {
                let mut tx =
                    Transaction::new(Scope::Unknown, Executor::Unknown, Isolation::ReadCommitted);
                tx.steps = smallvec::smallvec![step];
                self.done.push(tx);
                return;
            }
            SqlMode::Transaction => {
                // The file is one transaction; its own BEGIN/COMMIT are not steps.
                if !matches!(
                    step.facts.extra().tx.as_ref(),
                    Some(TxControl::Begin { .. } | TxControl::Commit | TxControl::Rollback)
                ) && let Some(open) = self.open.as_mut()
                {
                    open.steps.push(step);
                }
                return;
            }
            SqlMode::Script => {}
        }
        match step.facts.extra().tx.as_ref() {
            Some(TxControl::Begin { isolation }) => {
                if self.open.is_none() {
                    let iso = isolation
                        .or(self.next_isolation.take())
                        .or(self.session_isolation);
                    let mut tx = transaction(Scope::Explicit, self.executor, iso);
                    tx.set_begin(Some(step.span));
                    self.open = Some(tx);
                }
                self.last_message = None;
                return;
            }
            Some(TxControl::Commit | TxControl::Rollback | TxControl::PrepareTransaction) => {
                if let Some(mut tx) = self.open.take() {
                    tx.set_end(Some(step.span));
                    self.done.push(tx);
                }
                self.last_message = None;
                return;
            }
            Some(TxControl::SetIsolation {
                isolation,
                session: false,
            }) => match self.open.as_mut() {
                Some(tx) => (tx.isolation, tx.isolation_set) = (*isolation, true),
                None => self.next_isolation = Some(*isolation),
            },
            _ => {}
        }
        // A session default applies from the next transaction on.
        let session_default = match step.facts.extra().tx.as_ref() {
            Some(TxControl::SetIsolation {
                isolation,
                session: true,
            }) => Some(*isolation),
            _ => None,
        };
        match self.open.as_mut() {
            Some(tx) => tx.steps.push(step),
            None => self.autocommit(step, message),
        }
        if let Some(isolation) = session_default {
            self.session_isolation = Some(isolation);
        }
    }

    fn autocommit(&mut self, step: Step, message: usize) {
        if self.last_message == Some(message)
            && let Some(last) = self.done.last_mut()
        {
            last.scope = Scope::Message;
            last.steps.push(step);
            return;
        }
        let mut tx = transaction(Scope::Autocommit, self.executor, self.session_isolation);
        // Most autocommit transactions are one statement, kept inline.
        tx.steps = smallvec::smallvec![step];
        self.done.push(tx);
        self.last_message = Some(message);
    }

    pub fn finish(mut self) -> Vec<Transaction> {
        // A transaction still open at the end of the file is rolled back when psql exits; its
        // locks were still held by all its statements.
        if let Some(tx) = self.open.take() {
            self.done.push(tx);
        }
        for tx in &mut self.done {
            tx.steps.shrink_to_fit();
        }
        self.done.shrink_to_fit();
        self.done
    }
}

/// A transaction at the isolation level the code set, if it set one; else at READ COMMITTED
/// until the database's default is known (see [`Program::default_isolation`]).
fn transaction(scope: Scope, executor: Executor, set: Option<Isolation>) -> Transaction {
    let mut tx = Transaction::new(scope, executor, set.unwrap_or(Isolation::ReadCommitted));
    tx.isolation_set = set.is_some();
    tx
}
