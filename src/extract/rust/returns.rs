//! Handles a call gives back by the declared return type of the function it calls, where
//! walking the function found none: `fn conn(&mut self) -> &mut PgConnection` (the field it
//! hands out), `async fn get_conn() -> Result<AsyncPgPoolConnection>` (a connection taken from
//! a global pool), a method whose receiver's type is not known but whose every declaration in
//! the run returns one kind of handle.

use super::{Executor, Index, Value, Walker, types};
use crate::source::{Dialect, Span};

/// What a function's declared type says it returns: kind, database, and whether the handle's
/// transactions may be the caller's (see [`types::shares_transactions`]).
type Returned = (Executor, Option<Dialect>, bool);

impl Index<'_> {
    /// The handle function `i` returns by its declared type, through `Result`, `Option`
    /// (also a project's `DbResult<T>`) and `impl Future<Output = ..>`. `None` for a generic
    /// executor, which says nothing of the kind.
    pub(super) fn returned_handle(&self, i: usize) -> Option<Returned> {
        let f = &self.fns[i];
        self.declared_return(f.sig, f.file)
    }

    /// The handle a signature of `file` declares it returns (see [`Index::returned_handle`]).
    fn declared_return(&self, sig: &syn::Signature, file: usize) -> Option<Returned> {
        let syn::ReturnType::Type(_, ty) = &sig.output else {
            return None;
        };
        let ty = types::returned(ty);
        let (kind, dialect) = self.handle_type(ty, file)?;
        (kind != Executor::Unknown).then(|| (kind, dialect, self.shares_transactions(ty, file)))
    }

    /// The handle every function named `name` of the run returns (methods only, for a
    /// method call), when they agree on its kind: a receiver whose type txlint does not know
    /// (`state.db.get_pool()`), or one function per database behind `cfg` features (whose
    /// database is then not known).
    pub(super) fn returned_by_every(&self, name: &str, method: bool) -> Option<Returned> {
        let bodies = self.by_name.get(name).into_iter().flatten();
        let bodies = bodies.map(|&i| (self.fns[i].sig, self.fns[i].file));
        // A trait's required method (`fn pool(&self) -> &PgPool;`) declares it too.
        let required = self.required.get(name).into_iter().flatten();
        let mut kinds =
            bodies
                .chain(required.map(|&(file, sig)| (sig, file)))
                .map(|(sig, file)| {
                    (sig.receiver().is_some() == method)
                        .then(|| self.declared_return(sig, file))
                        .flatten()
                });
        let (kind, dialect, shares) = kinds.next()??;
        let mut same_db = true;
        for k in kinds {
            let (k, d, s) = k?;
            if (k, s) != (kind, shares) {
                return None;
            }
            same_db &= d == dialect;
        }
        Some((kind, dialect.filter(|_| same_db), shares))
    }

    /// The method `name` of the one type that `receiver`, a variable or field whose type is
    /// not known, is named after (`connection.inner()` on a `Connection` when a `Transaction`
    /// has an `inner` too): code often calls a value after its type.
    pub(super) fn method_of_namesake(&self, name: &str, receiver: &str) -> Option<usize> {
        let mut of_namesake = self.by_name.get(name)?.iter().copied().filter(|&i| {
            let f = &self.fns[i];
            f.sig.receiver().is_some()
                && f.owner
                    .and_then(types::type_name)
                    .is_some_and(|t| super::seaorm::snake(&t) == receiver)
        });
        match (of_namesake.next(), of_namesake.next()) {
            (Some(i), None) => Some(i),
            _ => None,
        }
    }
}

impl Walker<'_, '_> {
    /// The method `name` of the type the code declares `receiver` to be: a local's or a
    /// parameter's (`let s: Storage`), or a field of `self` by its struct (`self.storage`
    /// with `storage: &'a mut Connection<'c>`).
    pub(super) fn typed_method(&self, receiver: &syn::Expr, name: &str) -> Option<usize> {
        let ty = match receiver {
            syn::Expr::Field(f) if matches!(&*f.base, syn::Expr::Path(p) if p.path.is_ident("self")) =>
            {
                let syn::Member::Named(field) = &f.member else {
                    return None;
                };
                let owner = self.stack.last().and_then(|&i| self.ix.fns[i].owner)?;
                let (at, ty) = self.ix.field_type(owner, &field.to_string(), self.file)?;
                types::type_name(&self.ix.names.resolve(ty, at))?
            }
            e => self.local_type(e)?.to_string(),
        };
        self.ix.method(name, &ty)
    }

    /// The handle a call (`text`, at `at`) gives back by what its function declares: a pool;
    /// a connection whose transactions are the caller's, one per call text in a function
    /// (`self.conn()` twice is one session); else a connection taken at the call.
    pub(super) fn declared_handle(&mut self, returned: Returned, text: String, at: Span) -> Value {
        let (kind, dialect, shares) = returned;
        if let Some(h) = self.field_sessions.get(&text) {
            return Value::Handle(*h);
        }
        let mut h = match kind {
            Executor::Connection | Executor::PooledConnection if !shares => {
                self.new_session(kind, kind, Some(at))
            }
            _ => self.handle_of_kind(kind),
        };
        h.dialect = dialect;
        if shares && kind != Executor::Pool {
            self.inherit(h);
            self.field_sessions.insert(text, h);
        }
        Value::Handle(h)
    }
}
