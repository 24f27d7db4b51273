//! The handles a function body works with: of a type, of a kind, inherited from a caller;
//! the sessions they run on, moved on, and the transactions they begin.

use super::*;

impl Walker<'_, '_> {
    pub(super) fn unknown_handle() -> Handle {
        Handle {
            kind: Executor::Unknown,
            walker: UNKNOWN,
            session: None,
            dialect: None,
        }
    }

    /// A handle of the kind and database a type names (`&SqlitePool`), or none.
    pub(super) fn typed(&mut self, ty: &syn::Type) -> Option<Handle> {
        let (kind, dialect) = self.ix.handle_type(ty, self.file)?;
        let mut h = self.handle_of_kind(kind);
        h.dialect = dialect;
        if self.ix.shares_transactions(ty, self.file) {
            self.inherit(h);
        }
        Some(h)
    }

    /// The type of a local variable the code named (see [`Walker::types`]).
    pub(super) fn local_type(&self, e: &syn::Expr) -> Option<std::rc::Rc<str>> {
        match e {
            syn::Expr::Reference(r) => self.local_type(&r.expr),
            syn::Expr::Paren(p) => self.local_type(&p.expr),
            syn::Expr::Path(p) => self.types.get(&p.path.get_ident()?.to_string()).cloned(),
            _ => None,
        }
    }

    /// `h` came from the caller as a type its transactions are too (see [`Session::inherited`]).
    pub(super) fn inherit(&mut self, h: Handle) {
        if let Some(s) = h.session.and_then(|s| self.sessions.get_mut(s)) {
            s.inherited = true;
        }
    }

    /// A handle of `kind` that this function does not know the origin of (a parameter, a field).
    pub(super) fn handle_of_kind(&mut self, kind: Executor) -> Handle {
        match kind {
            Executor::Pool => Handle {
                kind,
                walker: POOL,
                session: None,
                dialect: None,
            },
            Executor::Connection | Executor::PooledConnection => {
                self.new_session(kind, Executor::Unknown, None)
            }
            Executor::Transaction => {
                let session = self.session(Executor::Unknown, None);
                self.walkers
                    .push(SessionWalker::host_transaction(None, &[]));
                Handle {
                    kind,
                    walker: self.walkers.len() - 1,
                    session: Some(session),
                    dialect: None,
                }
            }
            _ => Walker::unknown_handle(),
        }
    }

    pub(super) fn session(&mut self, kind: Executor, acquired: Option<Span>) -> usize {
        let id = self.sessions.len();
        self.sessions.push(Session {
            id,
            kind,
            acquired,
            inherited: false,
            handed_on: false,
            handed_on_at: None,
            in_async: self.in_async,
        });
        id
    }

    /// `e` moves a connection on by value (a bare variable holding a handle): a session this
    /// function acquired is handed on (`handed`: to an owner not walked here); in an `async`
    /// function, any session's first move is recorded (see [`Session::handed_on_at`]).
    pub(super) fn moved_on(&mut self, e: &syn::Expr, handed: bool) {
        let syn::Expr::Path(p) = e else {
            return;
        };
        let Some(name) = p.path.get_ident().map(|i| i.to_string()) else {
            return;
        };
        // In a helper walked in place, the name is the helper's parameter: a borrow of the
        // caller's connection, not the connection itself.
        let owned = !self.borrowed.contains(&name);
        let (seq, in_async) = (self.seq, self.in_async && owned && self.calls.is_empty());
        if let Some(Value::Handle(h)) = self.vars.get(&name)
            && let Some(s) = h.session.and_then(|id| self.sessions.get_mut(id))
        {
            s.handed_on |= handed && s.acquired.is_some();
            if in_async {
                s.handed_on_at.get_or_insert(seq);
            }
        }
    }

    /// A connection handle on a new session; `origin` is the session's kind for the rules
    /// (pooled or dedicated).
    pub(super) fn new_session(
        &mut self,
        kind: Executor,
        origin: Executor,
        acquired: Option<Span>,
    ) -> Handle {
        let session = self.session(origin, acquired);
        self.walkers.push(SessionWalker::host(kind));
        Handle {
            kind,
            walker: self.walkers.len() - 1,
            session: Some(session),
            dialect: None,
        }
    }

    /// `x.begin()`: a transaction on `parent`'s session, or on a new pooled session.
    pub(super) fn begin(&mut self, parent: Handle, at: Span) -> Handle {
        let session = match (parent.kind, parent.session) {
            (Executor::Pool, _) | (_, None) => self.session(Executor::PooledConnection, Some(at)),
            (_, Some(s)) => s,
        };
        self.walkers
            .push(SessionWalker::host_transaction(Some(at), &self.branch));
        if let (Some(lock), Some(w)) = (self.guarded.get(&parent.walker), self.walkers.last_mut()) {
            w.set_guard(lock.clone());
        }
        Handle {
            kind: Executor::Transaction,
            walker: self.walkers.len() - 1,
            session: Some(session),
            dialect: parent.dialect,
        }
    }
}
