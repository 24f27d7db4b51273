//! Calls that send SQL, build it, open transactions or reach helpers.

use super::emit::data_of;
use super::fncall::held;
use super::syntax::peel_ref;
use super::text::looks_like_sql;
use super::*;

impl<'a> Walker<'a, '_> {
    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall) -> Value {
        let name = m.method.to_string();
        let at = self.method_site(m);
        if let Some(v) = self.closure_transaction(m, &name, at) {
            return v;
        }
        let receiver = self.expr(&m.receiver);
        // deadpool's `conn.interact(|c| ..)`: the closure runs on the receiver's connection, in
        // whatever transaction that is in.
        if let Value::Handle(h) = receiver
            && drivers::is(&name, Role::Lends)
            && let Some(c) = closure_arg(m)
        {
            return self.closure_on(c, h, at);
        }
        // `self.transaction_with(&mut conn, |conn| ..)`: a closure handed to a method of the
        // run is held until that method calls it, as for a function (see [`Walker::call`]).
        let of_run =
            matches!(&receiver, Value::Object(owner) if self.ix.method(&name, owner).is_some());
        let args = self.args_holding(&m.args, of_run);
        let held = held(&args);
        // diesel's `manager.begin_transaction(conn)`, unless the run has a method of that name.
        let v = match (!of_run).then(|| self.transaction_on_argument(&name, &args, at)) {
            Some(Some(v)) => v,
            _ => self.method_value(m, (name, of_run), at, receiver, args),
        };
        self.run_unran(&held);
        v
    }

    /// What a method call gives, its receiver and arguments evaluated.
    fn method_value(
        &mut self,
        m: &syn::ExprMethodCall,
        (name, of_run): (String, bool),
        at: Span,
        receiver: Value,
        args: Vec<Value>,
    ) -> Value {
        if let Value::Diesel(q) = receiver {
            return self.diesel_method(q, m, &args);
        }
        if name == "save_changes"
            && let Some(v) = self.save_changes(m, &args)
        {
            return v;
        }
        // `ids.sort()`: sorted; `rows.push(..)` in a loop over a hash collection: in its order.
        let pushed = matches!(name.as_str(), "push" | "extend") && self.hash_loops > 0;
        if pushed || name.starts_with("sort") {
            let source = self.source_of(&m.receiver);
            let base = source.trim_start_matches(['&', '*']).to_string();
            match pushed {
                true => self.hashed.insert(base),
                false => self.sorted.insert(base),
            };
        }
        let arg_sql = match args.first() {
            Some(Value::Sql(s)) => Some(s.clone()),
            _ => None,
        };
        // client.query("...", &[]), tx.batch_execute("BEGIN; ..."), db.execute(Statement::..).
        // Only SQL is SQL: on a receiver that is not known to be a database handle (an HTTP,
        // GraphQL or metrics client's `.query("{ ... }")`), the text must read as SQL. A method
        // of the run on its own handle-holding type (`db.query_one(sql, ..)` of a wrapper that
        // forwards to its transaction) is walked instead, on the handle it holds.
        let configured = self.ix.config.rust.query_functions.contains(&name);
        // A statement a driver built (`sqlx::query_as(..)`) handed to a handle's method that
        // no driver names (a project's `tx.fetch_one_as(query)` over its own transaction
        // trait): the handle runs it; what else would a handle do with a statement?
        let handed = matches!(receiver, Value::Handle(_))
            && !of_run
            && arg_sql.as_ref().is_some_and(|s| s.prepared)
            && m.args.len() == 1
            && !drivers::is_known(&name);
        let sink = configured
            || handed
            || drivers::is(&name, Role::Sends)
                && !of_run
                && (matches!(receiver, Value::Handle(_))
                    || arg_sql.as_ref().is_some_and(|s| looks_like_sql(&s.text)));
        if let Some(mut sql) = arg_sql.clone()
            && sink
        {
            // sqlx `conn.execute("...")` / `fetch_*("...")` given the string itself (not a
            // `sqlx::query(..)`) send it as one simple-query message.
            let bare =
                m.args.len() == 1 && !sql.prepared && drivers::is(&name, Role::SimpleWhenBare);
            sql.batch |= bare || drivers::is(&name, Role::Script);
            // tokio-postgres parameters: `&[&a, &b]`, or a helper's parameter its caller wrote
            // so.
            match m.args.iter().nth(1).map(peel_ref) {
                Some(syn::Expr::Array(a)) => {
                    for e in &a.elems {
                        let b = self.bound(e);
                        sql.binds.push(b);
                    }
                }
                Some(syn::Expr::Path(p)) => {
                    if let Value::Params(binds) = self.path(&p.path) {
                        sql.binds.extend(binds.iter().cloned());
                    }
                }
                _ => {}
            }
            let handle = self.handle(&receiver, &m.receiver);
            let text = self.source_of(&m.receiver);
            let rows = self.emit(&sql, handle, text, at);
            return self.fetched(&name, rows);
        }
        // A query sent on a database handle with SQL txlint could not read (`client.query(&sql,
        // ..)`, `sqlx::query(&built).execute(pool)`): counted, so silence is not read as a
        // clean bill.
        // Text a function checked alone is given (`Value::Caller`) is its callers' SQL: each
        // caller that walks it in place reads theirs.
        let on_handle = matches!(receiver, Value::Handle(_))
            && drivers::is(&name, Role::Sends)
            && !matches!(args.first(), Some(Value::Caller));
        let sent_to_handle = drivers::is(&name, Role::Runs)
            && matches!(args.first(), Some(Value::Handle(_)))
            && !matches!(receiver, Value::Sql(_) | Value::Caller);
        if (on_handle && arg_sql.is_none() && !m.args.is_empty()) || sent_to_handle {
            self.front.out.unread_sql.push(at);
        }
        // sqlx::query("...").bind(x).fetch_one(&mut *tx)
        if let Value::Sql(sql) = &receiver
            && drivers::is(&name, Role::Runs)
        {
            let (handle, text) = match (args.first(), m.args.first()) {
                (Some(v), Some(e)) => (self.handle(v, e), self.source_of(e)),
                _ => (Walker::unknown_handle(), String::new()),
            };
            let sql = sql.clone();
            let rows = self.emit(&sql, handle, text, at);
            return self.fetched(&name, rows);
        }
        // diesel's `.first(conn).optional()`.
        if name == "optional"
            && let Value::Data(_) = receiver
        {
            return self.fetched(&name, receiver);
        }
        if let Some(built) = self.built(&name, &receiver, m, &args) {
            return built;
        }
        // `.bind(x)` adds to the statement it is called on (taken, not copied: chains are long).
        if name == "bind"
            && let Value::Sql(mut sql) = receiver
        {
            if let Some(e) = m.args.first() {
                let b = self.bound(e);
                sql.binds.push(b);
            }
            return Value::Sql(sql);
        }
        if let Some(sent) = self.migrate_lock(&name, &receiver, m) {
            return sent;
        }
        self.known_method(m, &name, receiver, &args, arg_sql, at)
    }

    /// Methods that pass a statement or a handle on, open or end a transaction, take a
    /// connection or a lock's guard; else a method of the run (see [`Walker::run_method`]).
    fn known_method(
        &mut self,
        m: &syn::ExprMethodCall,
        name: &str,
        receiver: Value,
        args: &[Value],
        arg_sql: Option<Sql>,
        at: Span,
    ) -> Value {
        match (name, &receiver) {
            // Builders and prepared statements carry their SQL to where they run.
            (n, _) if arg_sql.is_some() && drivers::is(n, Role::Prepares) => {
                Value::Sql(arg_sql.unwrap_or_else(|| unreachable!()))
            }
            (n, _)
                if matches!(args.first(), Some(Value::Caller))
                    && drivers::is(n, Role::Prepares) =>
            {
                Value::Caller
            }
            (
                "bind" | "bind_all" | "persistent" | "as_str" | "as_ref" | "to_string" | "to_owned"
                | "into" | "clone",
                Value::Caller,
            ) => receiver,
            (
                "bind_all" | "persistent" | "map" | "try_map" | "as_str" | "to_string" | "to_owned"
                | "into" | "clone" | "build" | "build_query_as" | "build_query_scalar" | "sql",
                Value::Sql(_),
            ) => receiver,
            // Error adapters pass the handle on (`pool.get().await.map_err(..)?`), and so do
            // borrows of it.
            (n, Value::Handle(_))
                if ADAPTERS.contains(&n)
                    || matches!(
                        n,
                        "as_mut" | "as_ref" | "deref_mut" | "deref" | "borrow_mut" | "lock"
                    ) =>
            {
                receiver
            }
            // And the struct of the run that holds one (`PgTx::begin(..).await.map_err(..)?`).
            (n, Value::Object(_)) if ADAPTERS.contains(&n) => receiver,
            // `self.inner.write().await`, `state.lock().unwrap()`: an exclusive lock's guard.
            ("write" | "lock" | "write_owned" | "lock_owned", Value::None | Value::Object(_))
                if m.args.is_empty() =>
            {
                Value::Guard(self.lock_name(&m.receiver))
            }
            ("unwrap" | "expect", Value::Guard(_)) => receiver,
            // `POOL.get()`, `POOL.get_or_init(connect).await` of a `OnceCell<PgPool>`.
            ("get" | "get_or_init" | "get_or_try_init" | "wait", Value::Handle(_))
                if self.is_once_static(&m.receiver) =>
            {
                receiver
            }
            (n, Value::Handle(h)) if drivers::is(n, Role::Begins) => {
                Value::Handle(self.begin(*h, at))
            }
            (n, Value::Handle(h)) if h.kind == Executor::Pool && drivers::is(n, Role::Acquires) => {
                let mut conn = self.new_session(
                    Executor::PooledConnection,
                    Executor::PooledConnection,
                    Some(at),
                );
                conn.dialect = h.dialect;
                Value::Handle(conn)
            }
            (n, Value::Handle(h))
                if h.kind == Executor::Transaction && drivers::is(n, Role::Ends) =>
            {
                self.walkers[h.walker].end(Some(at));
                Value::None
            }
            _ => self.run_method(m, name, receiver, args, at),
        }
    }

    /// `conn.transaction(|tx| async move { .. })`, diesel's
    /// `conn.build_transaction().serializable().run(|conn| ..)`: the closure runs in a
    /// transaction. `None` when the call is not one.
    fn closure_transaction(
        &mut self,
        m: &syn::ExprMethodCall,
        name: &str,
        at: Span,
    ) -> Option<Value> {
        let opened = match name {
            "run" => transaction_builder(&m.receiver),
            n if drivers::is(n, Role::BeginsAround) => Some((&*m.receiver, None)),
            _ => None,
        };
        if let Some((conn, isolation)) = opened
            && let Some(c) = closure_arg(m)
        {
            let parent = match self.expr(conn) {
                Value::Handle(h) => h,
                _ => self.handle_of_kind(Executor::Pool),
            };
            // On a transaction it is a savepoint of that transaction: the closure's statements
            // are the outer transaction's, under its locks.
            let nested = parent.kind == Executor::Transaction;
            let tx = if nested {
                parent
            } else {
                self.begin(parent, at)
            };
            if let Some(isolation) = isolation.filter(|_| !nested) {
                self.walkers[tx.walker].isolate(isolation);
            }
            let value = self.closure_on(c, tx, at);
            if !nested {
                self.walkers[tx.walker].end(None);
            }
            return Some(value);
        }
        None
    }

    /// Walk closure `c` of the call at `at`, its parameter bound to `h`: what it gives back
    /// (`Ok(row)`) is what the call gives.
    fn closure_on(&mut self, c: &syn::ExprClosure, h: Handle, at: Span) -> Value {
        let outer = self.vars.clone();
        if let Some(p) = c.inputs.first() {
            self.bind(p, Value::Handle(h));
        }
        // An error in the closure leaves through the call.
        let passed_on = self.passes_on;
        self.passes_on &= self.tried.contains(&at);
        let value = self.closure_body(&c.body);
        self.passes_on = passed_on;
        self.vars = outer;
        match value {
            Value::Data(_) => value,
            _ => Value::None,
        }
    }

    /// A method of the run on a value that holds a handle (`repo.load(id)` where `Repo` has a
    /// pool field; `pool.bump()` with `impl Counters for PgPool`), or a helper method given a
    /// handle: walked in place. Otherwise what the method declares it returns, a column of
    /// rows, or data passed on.
    fn run_method(
        &mut self,
        m: &syn::ExprMethodCall,
        name: &str,
        receiver: Value,
        args: &[Value],
        at: Span,
    ) -> Value {
        let given_handle = args.iter().any(|a| matches!(a, Value::Handle(_)));
        let method = match &receiver {
            Value::Object(owner) => self
                .ix
                .method(name, owner)
                .or_else(|| self.implemented_method(name, &owner.clone())),
            Value::Handle(_) => self.ix.handle_method(name),
            // `persist.create(conn)` on `let persist = NewCrate { .. }`.
            _ if given_handle => self
                .local_type(&m.receiver)
                .and_then(|t| self.ix.method(name, &t)),
            _ => None,
        };
        let given = self.passed(args, m.args.iter());
        let texts = self.arg_texts(m.args.iter());
        let returned = match method {
            Some(i) => {
                let this = self.text_of(&m.receiver);
                self.inline_fn(i, Some((receiver.clone(), this)), &given, &texts, at)
            }
            None if given_handle => self.inline(name, &given, &texts, at),
            None => Value::None,
        };
        if let Value::Handle(_) = returned {
            return returned;
        }
        // What the method declares it returns, where its body gave no handle or its
        // receiver's type is not known (`self.storage.conn()`, `state.db.get_pool()`).
        // By name alone only for a getter called without arguments: `map.get(&k)` is
        // not the run's one `get(&self) -> &PgPool`.
        let declared = match method.or_else(|| self.typed_method(&m.receiver, name)) {
            Some(i) => self.ix.returned_handle(i),
            None if m.args.is_empty() => self.ix.returned_by_every(name, true).or_else(|| {
                let receiver = syntax::last_name(&m.receiver)?;
                let i = self.ix.method_of_namesake(name, &receiver)?;
                self.ix.returned_handle(i)
            }),
            None => None,
        };
        if let Some(r) = declared {
            let text = format!("{}.{name}()", self.text_of(&m.receiver));
            return self.declared_handle(r, text, at);
        }
        // `row.get("balance")`: that column of the rows.
        if let (Value::Data(f), Some(column)) = (&receiver, dataflow::row_column(m)) {
            return Value::Data(f.clone().field(&column));
        }
        // `host.app_name()`: a method of the run that reads only named fields of `self`.
        let receiver = match receiver {
            Value::Data(f) => match self.ix.self_fields(name) {
                Some(fields) => Value::Data(f.only(&fields)),
                None => Value::Data(f),
            },
            other => other,
        };
        // `rows.first().map(|r| ..)`: data stays data.
        data_of(std::iter::once(&receiver).chain(args).chain([&returned]))
    }
}

/// diesel's transaction builder, `conn.build_transaction().serializable().run(..)`: the
/// connection it starts from and the isolation level it sets last (`None`: the server's
/// default). `None` when `e` is not such a builder.
fn transaction_builder(e: &syn::Expr) -> Option<(&syn::Expr, Option<Isolation>)> {
    let mut isolation = None;
    let mut e = e;
    loop {
        let syn::Expr::MethodCall(m) = e else {
            return None;
        };
        // Walking the chain from its end: the first level met is the one set last.
        let level = match m.method.to_string().as_str() {
            "build_transaction" => return Some((&m.receiver, isolation)),
            "serializable" => Some(Isolation::Serializable),
            "repeatable_read" => Some(Isolation::RepeatableRead),
            "read_committed" => Some(Isolation::ReadCommitted),
            "read_only" | "read_write" | "deferrable" | "not_deferrable" => None,
            _ => return None,
        };
        isolation = isolation.or(level);
        e = &m.receiver;
    }
}

/// Methods that give back the value they are called on, or its `Ok`: a handle or a struct
/// that holds one passes through them.
const ADAPTERS: &[&str] = &[
    "clone",
    "unwrap",
    "expect",
    "map_err",
    "context",
    "with_context",
    "wrap_err",
    "wrap_err_with",
    "change_context",
    "inspect_err",
];

/// The closure a method call is given (`conn.transaction(|tx| ..)`), if any.
fn closure_arg(m: &syn::ExprMethodCall) -> Option<&syn::ExprClosure> {
    m.args.iter().find_map(|a| match a {
        syn::Expr::Closure(c) => Some(c),
        _ => None,
    })
}
