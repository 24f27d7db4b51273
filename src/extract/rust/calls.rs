//! Calls that send SQL, build it, open transactions or reach helpers.

use super::walk::{On, backend_name};
use super::*;
use crate::parse::split::stand_in;

impl<'a> Walker<'a, '_> {
    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall) -> Value {
        let name = m.method.to_string();
        let at = self.method_site(m);
        // `conn.transaction(|tx| async move { ... })`, diesel's
        // `conn.build_transaction().serializable().run(|conn| ..)`: the closure runs in a
        // transaction.
        let opened = match name.as_str() {
            "transaction" => Some((&*m.receiver, None)),
            "run" => transaction_builder(&m.receiver),
            _ => None,
        };
        if let Some((conn, isolation)) = opened
            && let Some(syn::Expr::Closure(c)) =
                m.args.iter().find(|a| matches!(a, syn::Expr::Closure(_)))
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
            let outer = self.vars.clone();
            if let Some(p) = c.inputs.first() {
                self.bind(p, Value::Handle(tx));
            }
            // An error in the closure leaves through the call.
            let passed_on = self.passes_on;
            self.passes_on &= self.tried.contains(&at);
            let value = self.closure_body(&c.body);
            self.passes_on = passed_on;
            if !nested {
                self.walkers[tx.walker].end(None);
            }
            self.vars = outer;
            // What the closure gives back (`Ok(row)`) is what the call gives.
            return match value {
                Value::Data(_) => value,
                _ => Value::None,
            };
        }
        let receiver = self.expr(&m.receiver);
        let args = self.exprs(&m.args);
        if let Value::Diesel(q) = receiver {
            return self.diesel_method(q, m, &args);
        }
        if name.starts_with("sort") {
            let base = self.source_of(&m.receiver);
            self.sorted
                .insert(base.trim_start_matches(['&', '*']).to_string());
        }
        let arg_sql = match args.first() {
            Some(Value::Sql(s)) => Some(s.clone()),
            _ => None,
        };
        // client.query("...", &[]), tx.batch_execute("BEGIN; ..."), db.execute(Statement::..).
        // Only SQL is SQL: on a receiver that is not known to be a database handle (an HTTP,
        // GraphQL or metrics client's `.query("{ ... }")`), the text must read as SQL.
        let configured = self.ix.config.rust.query_functions.contains(&name);
        let sink = configured
            || CLIENT_METHODS.contains(&name.as_str())
                && (matches!(receiver, Value::Handle(_))
                    || arg_sql.as_ref().is_some_and(|s| looks_like_sql(&s.text)));
        if let Some(mut sql) = arg_sql.clone()
            && sink
        {
            // sqlx `conn.execute("...")` / `fetch_*("...")` given the string itself (not a
            // `sqlx::query(..)`) send it as one simple-query message.
            let bare = m.args.len() == 1 && !sql.prepared && SQLX_SIMPLE.contains(&name.as_str());
            sql.batch |= bare || BATCH_METHODS.contains(&name.as_str());
            // tokio-postgres parameters: `&[&a, &b]`.
            if let Some(params) = m.args.iter().nth(1) {
                let params = match params {
                    syn::Expr::Reference(r) => &*r.expr,
                    p => p,
                };
                if let syn::Expr::Array(a) = params {
                    for e in &a.elems {
                        let b = self.bound(e);
                        sql.binds.push(b);
                    }
                }
            }
            let handle = self.handle(&receiver, &m.receiver);
            let text = self.source_of(&m.receiver);
            let rows = self.emit(&sql, handle, text, at);
            return self.fetched(&name, rows);
        }
        // A query sent on a database handle with SQL txlint could not read (`client.query(&sql,
        // ..)`, `sqlx::query(&built).execute(pool)`): counted, so silence is not read as a
        // clean bill.
        let on_handle =
            matches!(receiver, Value::Handle(_)) && CLIENT_METHODS.contains(&name.as_str());
        let sent_to_handle = TERMINALS.contains(&name.as_str())
            && matches!(args.first(), Some(Value::Handle(_)))
            && !matches!(receiver, Value::Sql(_));
        if (on_handle && arg_sql.is_none() && !m.args.is_empty()) || sent_to_handle {
            self.front.out.unread_sql.push(at);
        }
        // sqlx::query("...").bind(x).fetch_one(&mut *tx)
        if let Value::Sql(sql) = &receiver
            && TERMINALS.contains(&name.as_str())
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
        match (name.as_str(), &receiver) {
            // Builders and prepared statements carry their SQL to where they run.
            ("prepare" | "prepare_cached" | "prepare_typed", _) if arg_sql.is_some() => {
                Value::Sql(arg_sql.unwrap_or_else(|| unreachable!()))
            }
            (
                "bind_all" | "persistent" | "map" | "try_map" | "as_str" | "to_string" | "to_owned"
                | "into" | "clone" | "build" | "build_query_as" | "build_query_scalar" | "sql",
                Value::Sql(_),
            ) => receiver,
            // Error adapters pass the handle on (`pool.get().await.map_err(..)?`).
            (
                "as_mut" | "as_ref" | "deref_mut" | "deref" | "clone" | "borrow_mut" | "lock"
                | "unwrap" | "expect" | "map_err" | "context" | "with_context" | "wrap_err"
                | "wrap_err_with" | "change_context" | "inspect_err",
                Value::Handle(_),
            ) => receiver,
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
            ("begin" | "transaction" | "start_transaction" | "begin_with", Value::Handle(h)) => {
                Value::Handle(self.begin(*h, at))
            }
            (
                "acquire"
                | "get"
                | "get_owned"
                | "try_acquire"
                | "try_get"
                | "dedicated_connection",
                Value::Handle(h),
            ) if h.kind == Executor::Pool => {
                let mut conn = self.new_session(
                    Executor::PooledConnection,
                    Executor::PooledConnection,
                    Some(at),
                );
                conn.dialect = h.dialect;
                Value::Handle(conn)
            }
            ("commit" | "rollback", Value::Handle(h)) if h.kind == Executor::Transaction => {
                self.walkers[h.walker].end(Some(at));
                Value::None
            }
            // A method of the run on a value that holds a handle (`repo.load(id)` where `Repo`
            // has a pool field; `pool.bump()` with `impl Counters for PgPool`), or a helper
            // method given a handle: walk it in place.
            _ => {
                let given_handle = args.iter().any(|a| matches!(a, Value::Handle(_)));
                let method = match &receiver {
                    Value::Object(owner) => self.ix.method(&name, owner),
                    Value::Handle(_) => self.ix.handle_method(&name),
                    // `persist.create(conn)` on `let persist = NewCrate { .. }`.
                    _ if given_handle => self
                        .local_type(&m.receiver)
                        .and_then(|t| self.ix.method(&name, &t)),
                    _ => None,
                };
                let given = self.passed(&args, m.args.iter());
                let texts = self.arg_texts(m.args.iter());
                let returned = match method {
                    Some(i) => {
                        let this = self.text_of(&m.receiver);
                        self.inline_fn(i, Some((receiver.clone(), this)), &given, &texts, at)
                    }
                    None if given_handle => self.inline(&name, &given, &texts, at),
                    None => Value::None,
                };
                if let Value::Handle(_) = returned {
                    return returned;
                }
                // What the method declares it returns, where its body gave no handle or its
                // receiver's type is not known (`self.storage.conn()`, `state.db.get_pool()`).
                // By name alone only for a getter called without arguments: `map.get(&k)` is
                // not the run's one `get(&self) -> &PgPool`.
                let declared = match method.or_else(|| self.typed_method(&m.receiver, &name)) {
                    Some(i) => self.ix.returned_handle(i),
                    None if m.args.is_empty() => self.ix.returned_by_every(&name, true),
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
                // `rows.first().map(|r| ..)`: data stays data.
                data_of(std::iter::once(&receiver).chain(&args).chain([&returned]))
            }
        }
    }

    /// SQL completed at run time, piece by piece (sqlx `QueryBuilder`, `String::push_str`):
    /// the piece is added to the text, and to the variable the chain starts from
    /// (`qb.push(..).push_bind(x)`). A piece that is not SQL text becomes a hole; a bound value
    /// becomes the next parameter; `push_values(rows, |b, row| ..)` becomes one row of
    /// parameters, one per `push_bind` in the closure. `None` for any other method.
    fn built(
        &mut self,
        name: &str,
        receiver: &Value,
        m: &syn::ExprMethodCall,
        args: &[Value],
    ) -> Option<Value> {
        // Every `.bind(x)` of a chain comes here too: nothing is copied or spanned for it.
        let pushes = matches!(
            name,
            "push" | "push_str" | "push_bind" | "push_values" | "push_tuples" | "separated"
        );
        let (Value::Sql(sql), true) = (receiver, pushes) else {
            return None;
        };
        let dollar = !matches!(self.parsed().dialect, Dialect::Mysql | Dialect::Sqlite);
        let param = |n: usize| {
            if dollar {
                format!("${n}")
            } else {
                "?".to_string()
            }
        };
        let at = self.span(m);
        let mut sql = sql.clone();
        let arg = m.args.first();
        match (name, arg) {
            ("push" | "push_str", Some(e)) => match (args.first(), e) {
                (Some(Value::Sql(piece)), _) => sql = sql.concat(piece.clone()),
                (
                    _,
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Char(c),
                        ..
                    }),
                ) => sql = sql.concat(self.piece(c.value().to_string(), at)),
                _ => {
                    let hole = stand_in(&sql.text, self.source_of(e).len().max(1));
                    sql = sql.concat(self.piece(hole, at));
                }
            },
            ("push_bind", Some(e)) => {
                let b = self.bound(e);
                sql.binds.push(b);
                let p = param(sql.binds.len());
                sql = sql.concat(self.piece(p, at));
            }
            ("push_values" | "push_tuples", Some(rows)) => {
                sql.rows = Some((self.sorted_collection(rows), self.span(rows)));
                let mut row = Vec::new();
                if let Some(syn::Expr::Closure(c)) = m.args.iter().nth(1) {
                    let mut binds = Vec::new();
                    BindCalls(&mut binds).visit_expr(&c.body);
                    for e in binds {
                        let b = self.bound(e);
                        sql.binds.push(b);
                        row.push(param(sql.binds.len()));
                    }
                }
                // `push_values`: `VALUES (..), (..)`; `push_tuples`: `((..), (..))`.
                let text = match name {
                    "push_values" => format!(" VALUES ({})", row.join(", ")),
                    _ => format!(" (({}))", row.join(", ")),
                };
                sql = sql.concat(self.piece(text, at));
            }
            // `separated(", ")` pushes through another value: what it adds is not followed.
            ("separated", _) => {
                sql.template = true;
                self.set_root(&m.receiver, Value::Sql(sql));
                return Some(Value::None);
            }
            _ => return None,
        }
        sql.template = true;
        self.set_root(&m.receiver, Value::Sql(sql.clone()));
        Some(Value::Sql(sql))
    }

    /// Text the code adds (a parameter, a hole), placed at the call that adds it.
    fn piece(&self, text: String, at: Span) -> Sql {
        Sql {
            template: true,
            ..Sql::new(at.file, text, OffsetMap::shifted(at.start()))
        }
    }

    /// The variable a method chain starts from (`qb` in `qb.push(..).push(..)`, `&mut qb`) is
    /// given `value`.
    fn set_root(&mut self, mut e: &syn::Expr, value: Value) {
        loop {
            e = match e {
                syn::Expr::MethodCall(m) => &m.receiver,
                syn::Expr::Reference(r) => &r.expr,
                syn::Expr::Paren(p) => &p.expr,
                syn::Expr::Path(p) => {
                    if let Some(v) = p.path.get_ident().map(|i| i.to_string())
                        && self.vars.contains_key(&v)
                    {
                        self.vars.insert(v, value);
                    }
                    return;
                }
                _ => return,
            };
        }
    }

    pub(super) fn call(&mut self, c: &syn::ExprCall) -> Value {
        let callee = match &*c.func {
            syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        // `f(&mut tx)` where `f` is a closure handed to the function walked in place: its
        // body runs here, on the handles given.
        if let Some(Value::Closure(k)) = callee.as_ref().and_then(|n| self.vars.get(n)).cloned() {
            let args = self.exprs(&c.args);
            return self.run_closure(k, &args);
        }
        // `with_tx(&pool, |tx| Box::pin(async move { .. }))`: a closure handed to a function
        // of the run is held until that function calls it; one it never calls is walked here.
        let of_run = match &*c.func {
            syn::Expr::Path(p) => self.ix.called_path(&p.path, self.file).is_some(),
            _ => false,
        };
        // A connection passed by value to anything but `drop` is handed on (`Ok(Guard::new(
        // id, conn))`, `Some(conn)`); a function of the run walked in place shows its own use
        // of it, but the move happens here all the same.
        let drops = matches!(&*c.func, syn::Expr::Path(p)
            if p.path.segments.last().is_some_and(|s| s.ident == "drop"));
        if !drops {
            c.args.iter().for_each(|a| self.moved_on(a, !of_run));
        }
        let args: Vec<Value> = c
            .args
            .iter()
            .map(|a| match a {
                syn::Expr::Closure(cl) if of_run => self.hold(cl),
                a => self.expr(a),
            })
            .collect();
        let v = self.call_with(c, args.clone());
        for a in &args {
            if let Value::Closure(k) = a
                && !self.closures[*k].ran
            {
                self.in_branch(|w| w.run_closure(*k, &[]));
            }
        }
        v
    }

    /// Hold a closure for the function it is handed to (see [`Value::Closure`]).
    fn hold(&mut self, c: &syn::ExprClosure) -> Value {
        self.closures.push(Held {
            closure: std::rc::Rc::new(c.clone()),
            vars: self.vars.clone(),
            aliases: self.aliases.clone(),
            file: self.file,
            ran: false,
        });
        Value::Closure(self.closures.len() - 1)
    }

    /// Run a held closure's body with its parameters bound to `args`, in the scope and file
    /// it was written in; the value of its body.
    fn run_closure(&mut self, k: usize, args: &[Value]) -> Value {
        let held = &mut self.closures[k];
        held.ran = true;
        let c = held.closure.clone();
        let vars = held.vars.clone();
        let aliases = held.aliases.clone();
        let saved_vars = std::mem::replace(&mut self.vars, vars);
        let saved_aliases = std::mem::replace(&mut self.aliases, aliases);
        let saved_file = std::mem::replace(&mut self.file, held.file);
        for (i, p) in c.inputs.iter().enumerate() {
            self.bind(p, args.get(i).cloned().unwrap_or_default());
        }
        let v = self.closure_body(&c.body);
        let v = self.or_data(v, &c.body);
        self.file = saved_file;
        self.vars = saved_vars;
        self.aliases = saved_aliases;
        v
    }

    fn call_with(&mut self, c: &syn::ExprCall, args: Vec<Value>) -> Value {
        let syn::Expr::Path(p) = &*c.func else {
            self.expr(&c.func);
            return Value::None;
        };
        let segments: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let Some(name) = segments.last().map(String::as_str) else {
            return Value::None;
        };
        let owner = segments.len().checked_sub(2).map(|i| segments[i].as_str());
        // diesel's `TransactionManager::begin_transaction(conn)` (also as `<C as
        // AsyncConnection>::TransactionManager::..`): a transaction on that connection's
        // session, until `commit_transaction` or `rollback_transaction` on it.
        if let Some(Value::Handle(h)) = args.first()
            && h.session.is_some()
            && matches!(
                name,
                "begin_transaction" | "commit_transaction" | "rollback_transaction"
            )
        {
            let at = self.call_span(c);
            let walker = &mut self.walkers[h.walker];
            match name {
                "begin_transaction" => walker.open_host(Some(at), &self.branch),
                _ => walker.end(Some(at)),
            }
            return Value::None;
        }
        if let Some(q) = self
            .diesel_statement(name, &args)
            .or_else(|| self.seaorm_entity(&p.path, c.args.first(), &args))
        {
            return q;
        }
        let first_sql = |i: usize| match args.get(i) {
            Some(Value::Sql(s)) => Some(s.clone()),
            _ => None,
        };
        if BUILDERS.contains(&name)
            && let Some(mut sql) = first_sql(0)
        {
            sql.batch = name == "raw_sql";
            sql.prepared = !sql.batch;
            return Value::Sql(sql);
        }
        if matches!(name, "from_string" | "from_sql_and_values")
            && let Some(mut sql) = first_sql(1)
        {
            sql.prepared = true;
            // `Statement::from_string(DbBackend::Sqlite, ..)`: the backend names the database.
            sql.dialect = c.args.first().and_then(|b| {
                let b = self.source_of(b);
                backend_name(&b).or_else(|| self.backends.get(&b).copied())
            });
            return Value::Sql(sql);
        }
        // `QueryBuilder::new("INSERT INTO t (a, b) ")`: the head of a statement the code
        // completes with `push`, `push_bind` and `push_values` (see `built`). What it ends up
        // as is known only in part, so it is a template: never reported as a syntax error.
        if segments.iter().any(|s| s == "QueryBuilder") {
            return match first_sql(0) {
                Some(mut sql) if matches!(name, "new" | "with_arguments") => {
                    sql.prepared = true;
                    sql.template = true;
                    Value::Sql(sql)
                }
                _ => Value::None,
            };
        }
        // `String::from("SELECT ..")`, `Some(SQL)`: the text passes through if it reads as SQL
        // (`View::new("test_view", pool)` is not).
        if matches!(name, "from" | "new" | "Some" | "Ok")
            && let Some(sql) = first_sql(0)
            && looks_like_sql(&sql.text)
        {
            return Value::Sql(sql);
        }
        if self
            .ix
            .config
            .rust
            .query_functions
            .iter()
            .any(|f| f == name)
            && let Some(Value::Handle(h)) = args.first()
            && let Some(sql) = args.iter().find_map(|a| match a {
                Value::Sql(s) => Some(s.clone()),
                _ => None,
            })
        {
            let h = *h;
            let text = c
                .args
                .first()
                .map(|e| self.source_of(e))
                .unwrap_or_default();
            let at = self.call_span(c);
            self.emit(&sql, h, text, at);
            return Value::None;
        }
        // `sqlx::query(&lock_query(shared))`: a function of the run that builds text (not
        // async, returns `String`, `&str` or `Cow`) gives the SQL it returns for these arguments.
        let local = segments[..segments.len() - 1]
            .iter()
            .all(|s| matches!(s.as_str(), "self" | "Self" | "super" | "crate"));
        if local
            && !args.iter().any(|a| matches!(a, Value::Handle(_)))
            && let Some(i) = self.ix.called(&segments, self.file)
            && self.ix.fns[i].builds_text()
        {
            let at = self.call_span(c);
            let given = self.passed(&args, c.args.iter());
            let texts = self.arg_texts(c.args.iter());
            if let v @ Value::Sql(_) = self.inline_fn(i, None, &given, &texts, at) {
                return v;
            }
        }
        // Constructors: PgPool::connect, PgConnection::connect, tokio_postgres::connect, ...
        if matches!(
            name,
            "connect" | "connect_lazy" | "connect_with" | "establish" | "build" | "create_pool"
        ) {
            let at = self.call_span(c);
            let qualified: Vec<String> = segments[..segments.len() - 1].to_vec();
            let kind = match owner {
                Some("tokio_postgres" | "postgres") => Some(Executor::Connection),
                Some("Database") => Some(Executor::Pool),
                Some(t) => types::of_name(t, &qualified, &self.ix.config.rust),
                None => None,
            };
            let dialect = owner.and_then(|t| dialects::of_type_name(t, &qualified, &[]));
            let handle = match kind {
                Some(Executor::Pool) => self.handle_of_kind(Executor::Pool),
                Some(Executor::Connection) => {
                    self.new_session(Executor::Connection, Executor::Connection, Some(at))
                }
                _ => return Value::None,
            };
            return Value::Handle(Handle { dialect, ..handle });
        }
        if args.iter().any(|a| matches!(a, Value::Handle(_))) {
            let at = self.call_span(c);
            let given = self.passed(&args, c.args.iter());
            let texts = self.arg_texts(c.args.iter());
            let returned = match self.ix.called(&segments, self.file) {
                Some(i) => self.inline_fn(i, None, &given, &texts, at),
                None => Value::None,
            };
            if !matches!(returned, Value::None) {
                return returned;
            }
        }
        // `get_async_db_conn().await?`: a function of the run whose declared type is a handle.
        let declared = match self.ix.called(&segments, self.file) {
            Some(i) => self.ix.returned_handle(i),
            None => self.ix.returned_by_every(name, false),
        };
        if let Some(r) = declared {
            let at = self.call_span(c);
            let text = format!(
                "{}({})",
                segments.join("::"),
                self.arg_texts(c.args.iter()).join(", ")
            );
            return self.declared_handle(r, text, at);
        }
        // `Tx(tx)`: a wrapper of the run around the handle it is given stands for it.
        if self.ix.wrapper(name).is_some()
            && let Some(h) = args.iter().find(|a| matches!(a, Value::Handle(_)))
        {
            return h.clone();
        }
        match name {
            // Box::pin(async move {..}), Ok(x): the value passes through.
            "pin" | "Ok" | "Some" | "from" | "new" => match args.into_iter().next() {
                Some(Value::Sql(s)) if !looks_like_sql(&s.text) => Value::None,
                v => v.unwrap_or_default(),
            },
            _ => data_of(&args),
        }
    }

    /// The call whose error `e?` passes on as it is: `e` past `.await` and conversions that keep
    /// every error an error (`.map_err(Into::into)`, `.context(..)`). None when a conversion
    /// tells a unique violation or a conflict apart (`.map_err(|e| match e { .. 23505 .. })`).
    pub(super) fn tried_site(&self, e: &syn::Expr) -> Option<Span> {
        let mut e = e;
        loop {
            match e {
                syn::Expr::Await(a) => e = &a.base,
                syn::Expr::Paren(p) => e = &p.expr,
                syn::Expr::MethodCall(m) if PASS_ON.iter().any(|p| m.method == p) => {
                    let told_apart = m.args.iter().any(|a| {
                        let text = self.source_of(a).to_ascii_lowercase();
                        ["unique", "23505", "duplicate", "conflict"]
                            .iter()
                            .any(|w| text.contains(w))
                    });
                    if told_apart {
                        return None;
                    }
                    e = &m.receiver;
                }
                syn::Expr::MethodCall(m) => return Some(self.method_site(m)),
                syn::Expr::Call(c) => return Some(self.call_span(c)),
                _ => return None,
            }
        }
    }

    /// Walk `f` with the calls at `sites` passing their error on (see [`Walker::tried`]).
    pub(super) fn passing_on<R>(
        &mut self,
        sites: impl IntoIterator<Item = Span>,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let n = self.tried.len();
        self.tried.extend(sites);
        let r = f(self);
        self.tried.truncate(n);
        r
    }

    /// The calls whose result `e` is when it is a function's value: [`Walker::tried_site`] of
    /// `e`, or of the last expression of each arm when `e` is an `if` (an `else if` chain
    /// included) or a `match`, a few arms deep.
    pub(super) fn tail_sites(&self, e: &syn::Expr) -> Vec<Span> {
        fn last(b: &syn::Block) -> Option<&syn::Expr> {
            match b.stmts.last() {
                Some(syn::Stmt::Expr(e, None)) => Some(e),
                _ => None,
            }
        }
        let mut sites = Vec::new();
        let mut todo = vec![(e, 0)];
        while let Some((e, depth)) = todo.pop() {
            match e {
                _ if depth > 8 => {}
                syn::Expr::If(i) => {
                    todo.extend(last(&i.then_branch).map(|e| (e, depth + 1)));
                    if let Some((_, other)) = &i.else_branch {
                        // An `else if` is one more arm of this choice, not a level deeper.
                        todo.push((other, depth));
                    }
                }
                syn::Expr::Match(m) => todo.extend(m.arms.iter().map(|a| (&*a.body, depth + 1))),
                syn::Expr::Block(b) => todo.extend(last(&b.block).map(|e| (e, depth + 1))),
                e => sites.extend(self.tried_site(e)),
            }
        }
        sites
    }

    /// `method(args)` of a chain, spanned independent of the chain before it.
    pub(super) fn method_site(&self, m: &syn::ExprMethodCall) -> Span {
        self.span_between(m.method.span(), m.paren_token.span.close())
    }

    /// `path(args)`, spanned without printing the arguments.
    fn call_span(&self, c: &syn::ExprCall) -> Span {
        let start = match &*c.func {
            syn::Expr::Path(p) => p
                .path
                .segments
                .first()
                .map_or_else(|| c.paren_token.span.open(), |s| s.ident.span()),
            _ => c.paren_token.span.open(),
        };
        self.span_between(start, c.paren_token.span.close())
    }

    pub(super) fn mac(&mut self, mac: &syn::Macro) -> Value {
        let Some(name) = mac.path.segments.last().map(|s| s.ident.to_string()) else {
            return Value::None;
        };
        let Ok(args) =
            mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        else {
            return Value::None;
        };
        if let Some(&(_, index, is_file)) = MACROS.iter().find(|(n, ..)| *n == name) {
            let Some(arg) = args.iter().nth(index) else {
                return Value::None;
            };
            let v = self.expr(arg);
            self.exprs(args.iter().skip(index + 1));
            let v = match v {
                Value::Sql(s) if is_file => self.query_file(&s.text),
                v => v,
            };
            return match v {
                Value::Sql(mut sql) => {
                    sql.prepared = true;
                    for e in args.iter().skip(index + 1) {
                        let b = self.bound(e);
                        sql.binds.push(b);
                    }
                    Value::Sql(sql)
                }
                v => v,
            };
        }
        match name.as_str() {
            // `bail!(..)` leaves; `ensure!(cond, ..)` leaves unless `cond` holds.
            "bail" => {
                self.exprs(&args);
                self.exit(mac, None, ExitKind::Return);
                Value::None
            }
            "ensure" => {
                self.exprs(&args);
                let from = args.first().map(|c| self.flow(c)).unwrap_or_default();
                self.in_arm(None, &from, On::Value, |w| {
                    w.exit(mac, None, ExitKind::Return)
                });
                Value::None
            }
            "include_str" => match args.first().map(|a| self.expr(a)) {
                Some(Value::Sql(s)) => self.include_str(&s.text),
                _ => Value::None,
            },
            // `indoc!` (and `concatdoc!`, `formatdoc!` below) only strip indentation, which SQL
            // does not see: the literal is the statement, at its place in the source.
            "indoc" => match args.first().map(|a| self.expr(a)) {
                Some(Value::Sql(s)) => Value::Sql(s),
                _ => Value::None,
            },
            "concat" | "concatdoc" => {
                let mut out: Option<Sql> = None;
                for a in &args {
                    match (self.expr(a), out.take()) {
                        (Value::Sql(s), None) => out = Some(s),
                        (Value::Sql(s), Some(o)) => out = Some(o.concat(s)),
                        _ => return Value::None,
                    }
                }
                out.map_or(Value::None, Value::Sql)
            }
            "format" | "formatdoc" => {
                let first = args.first().map(|a| self.expr(a));
                self.exprs(args.iter().skip(1));
                match first {
                    // `format!("SELECT ... {table}")` builds SQL ...
                    Some(Value::Sql(s)) if looks_like_sql(&s.text) => {
                        Value::Sql(self.fill_format(s, &args.iter().skip(1).collect::<Vec<_>>()))
                    }
                    // ... `format!("{}{}", row.name, suffix)` and `format!("{name}")` build
                    // data.
                    _ => {
                        let flow = dataflow::of_macro(&self.vars, mac);
                        if flow.is_empty() {
                            Value::None
                        } else {
                            Value::Data(flow)
                        }
                    }
                }
            }
            _ => {
                // println!, tokio::try_join!(..), vec![..]: walk the arguments.
                self.exprs(&args);
                Value::None
            }
        }
    }

    /// A `format!` string with its placeholders filled: the text of an argument that is SQL
    /// text itself (a `const TABLE: &str`, a variable holding a literal) is put in; any other
    /// argument becomes a hole of underscores (a name txlint does not know). Positions stay
    /// on the source: filled-in text sits on its placeholder.
    pub(super) fn fill_format(&mut self, fmt: Sql, args: &[&syn::Expr]) -> Sql {
        let mut positional = args
            .iter()
            .filter(|a| !matches!(a, syn::Expr::Assign(_)))
            .copied();
        let positional_list: Vec<&syn::Expr> = positional.clone().collect();
        let named = |name: &str| {
            args.iter().find_map(|a| match a {
                syn::Expr::Assign(x) => match &*x.left {
                    syn::Expr::Path(p) if p.path.is_ident(name) => Some(&*x.right),
                    _ => None,
                },
                _ => None,
            })
        };
        let mut edits = Vec::new();
        let mut template = false;
        let mut filled = false;
        let mut choices: Vec<(usize, Vec<String>)> = Vec::new();
        for (range, what) in placeholders(&fmt.text) {
            let name = match what {
                Err(brace) => {
                    edits.push((range, brace.to_string()));
                    continue;
                }
                Ok(name) => name,
            };
            let arg: Option<syn::Expr> = if name.is_empty() {
                positional.next().cloned()
            } else if let Ok(n) = name.parse::<usize>() {
                positional_list.get(n).map(|e| (*e).clone())
            } else {
                named(&name)
                    .cloned()
                    .or_else(|| syn::parse_str::<syn::Expr>(&name).ok())
            };
            let text = match arg.map(|a| self.sql_only(&a)) {
                Some(Value::Sql(v)) if !v.text.contains(['\n', ';']) => {
                    // A hole filled with one of several texts: each combination is an
                    // alternative of the whole (up to `MAX_ALTS`).
                    if !v.alts.is_empty() {
                        let texts = v.alts.iter().map(|a| a.text.clone());
                        choices.push((edits.len(), texts.collect::<Vec<_>>()));
                    }
                    // The text put in may differ between the places the code is walked from
                    // (a helper given `for_update = false` here, `true` there).
                    filled = true;
                    v.text
                }
                _ => {
                    template = true;
                    stand_in(&fmt.text[..range.start], range.len())
                }
            };
            edits.push((range, text));
        }
        let (text, map) = fmt.map.splice(&fmt.text, &edits);
        let mut combos = vec![edits];
        for (k, texts) in choices {
            let more: Vec<_> = combos
                .iter()
                .flat_map(|e| texts.iter().map(move |t| (e, t)))
                .filter(|(_, t)| !t.contains(['\n', ';']))
                .map(|(e, t)| {
                    let mut e = e.clone();
                    e[k].1 = t.clone();
                    e
                })
                .collect();
            combos.extend(more);
            combos.truncate(MAX_ALTS);
        }
        let alts = combos
            .iter()
            .skip(1)
            .map(|e| {
                let (text, map) = fmt.map.splice(&fmt.text, e);
                Sql {
                    text,
                    map,
                    alts: Vec::new(),
                    ..fmt.clone()
                }
            })
            .collect();
        Sql {
            text,
            map,
            template: fmt.template || template,
            chosen: fmt.chosen || filled,
            alts,
            ..fmt
        }
    }

    /// `query_file!("queries/x.sql")`: the file relative to the crate's manifest folder.
    pub(super) fn query_file(&mut self, rel: &str) -> Value {
        let here = &self.parsed().path;
        match here
            .ancestors()
            .skip(1)
            .find(|d| d.join("Cargo.toml").is_file())
        {
            Some(root) => self.sql_file(root.join(rel)),
            None => Value::None,
        }
    }

    /// `include_str!("../queries/x.sql")`: the file relative to the Rust file. Only a SQL file
    /// is SQL (`include_str!("../README.md")` is documentation).
    pub(super) fn include_str(&mut self, rel: &str) -> Value {
        let sql = Path::new(rel).extension().is_some_and(|e| {
            ["sql", "pgsql", "psql"]
                .iter()
                .any(|x| e.eq_ignore_ascii_case(x))
        });
        match self.parsed().path.parent() {
            Some(dir) if sql => self.sql_file(dir.join(rel)),
            _ => Value::None,
        }
    }

    /// A SQL file that Rust code sends: its statements run where the code sends them, so it is
    /// not also read as a script of its own.
    pub(super) fn sql_file(&mut self, path: PathBuf) -> Value {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Value::None;
        };
        // Shown relative to the same folder as the Rust file that names it.
        let p = self.parsed();
        let base = p.path.to_string_lossy();
        let display = match base.strip_suffix(p.display.as_str()) {
            Some(root) => crate::io::display_path(&path, Path::new(root)),
            None => path.to_string_lossy().into_owned(),
        };
        let make = || SourceFile::new(path.clone(), display, text.clone());
        let Some(id) = self.shared.extra.id(self.shared.batch, &path, make) else {
            return Value::None;
        };
        self.front.out.embedded.insert(id);
        Value::Sql(Sql::new(id, text, OffsetMap::shifted(0)))
    }

    /// Whether a collection is visited in sorted order: it was sorted first or is sorted on
    /// the way (`ids.sort()`, `.sorted()`, a `BTreeSet`).
    pub(super) fn sorted_collection(&self, e: &syn::Expr) -> bool {
        let over = self.source_of(e);
        let base = over
            .trim_start_matches(['&', '*'])
            .split(['.', ' '])
            .next()
            .unwrap_or("");
        over.contains("sort") || self.sorted.contains(base)
    }

    /// The handle a value stands for; unknown if it is none.
    pub(super) fn handle(&mut self, v: &Value, e: &syn::Expr) -> Handle {
        match v {
            Value::Handle(h) => *h,
            _ => match types::of_variable_name(&self.source_of(e)) {
                Some(kind) => self.handle_of_kind(kind),
                None => Walker::unknown_handle(),
            },
        }
    }

    /// Arguments as a function walked in place receives them: a value computed from query
    /// results (`n - qty`) is data.
    fn passed<'e>(&self, args: &[Value], exprs: impl Iterator<Item = &'e syn::Expr>) -> Vec<Value> {
        args.iter()
            .zip(exprs)
            .map(|(v, e)| self.or_data(v.clone(), e))
            .collect()
    }

    /// Walk the function `name` in place, its parameters bound to `args` (written `texts` in
    /// the caller's terms); `at` is the call.
    pub(super) fn inline(
        &mut self,
        name: &str,
        args: &[Value],
        texts: &[String],
        at: Span,
    ) -> Value {
        match self.ix.function(name, self.file) {
            Some(i) => self.inline_fn(i, None, args, texts, at),
            None => Value::None,
        }
    }

    /// An expression as the outermost caller writes it (see [`Walker::aliases`]).
    pub(super) fn text_of(&self, e: &syn::Expr) -> String {
        self.resolved(value_text(&self.source_of(e)))
    }

    fn arg_texts<'e>(&self, exprs: impl Iterator<Item = &'e syn::Expr>) -> Vec<String> {
        exprs.map(|e| self.text_of(e)).collect()
    }

    /// `text` with its first name (or its first field: `rows.owner`) replaced by what it stands
    /// for, if it is an alias.
    pub(super) fn resolved(&self, text: String) -> String {
        let end = text.find(['.', '[']).unwrap_or(text.len());
        let field = text[end..]
            .strip_prefix('.')
            .map(|rest| end + 1 + rest.find(['.', '[']).unwrap_or(rest.len()));
        if let Some(f) = field
            && let Some(a) = self.aliases.get(&text[..f])
        {
            return format!("{a}{}", &text[f..]);
        }
        match self.aliases.get(&text[..end]) {
            Some(a) => format!("{a}{}", &text[end..]),
            None => text,
        }
    }

    /// Walk function `i` in place (`self` bound to `receiver`, its parameters to `args`): its
    /// statements join the caller's sessions, and what it returns computed from query results
    /// is data in the caller.
    pub(super) fn inline_fn(
        &mut self,
        i: usize,
        receiver: Option<(Value, String)>,
        args: &[Value],
        texts: &[String],
        at: Span,
    ) -> Value {
        if self.stack.contains(&i) || self.stack.len() > 4 {
            return Value::None;
        }
        // A helper that only skipped test code calls is still analysed on its own.
        if !self.test {
            self.shared.inlined.entry(i).or_default().push(at);
        }
        let f = &self.ix.fns[i];
        let mut aliases: HashMap<String, String> = f
            .sig
            .inputs
            .iter()
            .filter_map(|input| match input {
                syn::FnArg::Typed(t) => Some(&t.pat),
                syn::FnArg::Receiver(_) => None,
            })
            .zip(texts)
            .filter_map(|(pat, text)| match &**pat {
                syn::Pat::Ident(id) if plain_path(text) => {
                    Some((id.ident.to_string(), text.clone()))
                }
                _ => None,
            })
            .collect();
        let (receiver, this) = match receiver {
            Some((v, t)) => (Some(v), Some(t)),
            None => (None, None),
        };
        if let Some(this) = this.filter(|t| plain_path(t)) {
            aliases.insert("self".to_string(), this);
        }
        let saved_aliases = std::mem::replace(&mut self.aliases, aliases);
        let saved_vars = std::mem::take(&mut self.vars);
        let saved_types = std::mem::take(&mut self.types);
        let saved_file = std::mem::replace(&mut self.file, f.file);
        let saved_ordered = std::mem::take(&mut self.ordered);
        self.stack.push(i);
        let passed_on = self.passes_on;
        self.passes_on &= self.tried.contains(&at);
        self.calls.push(at);
        self.frames += 1;
        self.params(f.sig, f.owner, receiver, Some(args));
        let exits = self.exits.len();
        let value = self.body(f.block);
        // Its own `return`s leave it here: the caller's steps follow them, its own do not.
        let depth = self.frames;
        let seq = self.seq;
        let returns = self.exits[exits..]
            .iter()
            .filter(|(e, frame)| e.kind == ExitKind::Return && *frame == Some(depth))
            .map(|(e, _)| (e.clone(), seq));
        self.helper_returns.extend(returns);
        self.frames -= 1;
        self.calls.pop();
        self.passes_on = passed_on;
        self.stack.pop();
        self.file = saved_file;
        self.vars = saved_vars;
        self.types = saved_types;
        self.ordered = saved_ordered;
        self.aliases = saved_aliases;
        value
    }

    /// Walk a function's body (its parameters bound): what it gives its caller. A helper that
    /// returns a handle (`begin_write()` opening a transaction, `pool()` giving a field) gives
    /// the caller that handle, on its session and transaction; otherwise what it returns
    /// (its tail and its `return`s) computed from query results is data.
    pub(super) fn body(&mut self, block: &syn::Block) -> Value {
        self.returned.push(Vec::new());
        self.note_prefix_lists(block);
        // The calls whose result is the function's value (`helper(conn).await` last, also as
        // the last expression of an `if` or `match` arm there) pass their error on, as `?` does.
        let sites = match block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => self.tail_sites(e),
            _ => Vec::new(),
        };
        let tail = self.passing_on(sites, |w| w.block_value(block));
        let mut returned = self.returned.pop().unwrap_or_default();
        returned.push(tail);
        if let Some(h) = returned.iter().find(|v| matches!(v, Value::Handle(_))) {
            return h.clone();
        }
        // A struct of the run built here around a handle (`Ok(Self { transaction })`).
        if let Some(o) = returned.iter().find(|v| matches!(v, Value::Object(_))) {
            return o.clone();
        }
        // Text returned on every path (`fn q(shared: bool) -> String`): each text it may be.
        let texts = returned.iter().map(|v| match v {
            Value::Sql(s) => Some(s.clone()),
            _ => None,
        });
        match texts.collect::<Option<Vec<Sql>>>() {
            Some(all) => all
                .into_iter()
                .reduce(Sql::or)
                .map_or(Value::None, Value::Sql),
            None => data_of(&returned),
        }
    }

    /// A value bound to a statement parameter.
    pub(super) fn bound(&self, e: &syn::Expr) -> Bind {
        let local = value_text(&self.source_of(e));
        let base = local.split(['.', '[']).next().unwrap_or(&local);
        // An element of a sorted collection, or the whole collection bound as an array, as it
        // is, cast (`&ids as &[Uuid]`) or through adapters that keep its order
        // (`ids.iter().copied().collect()`).
        let uncast = match e {
            syn::Expr::Cast(c) => &c.expr,
            _ => e,
        };
        let name = value_text(&self.source_of(uncast));
        let sorted_element = ((name.contains('[') || !name.contains('.'))
            && self
                .sorted
                .contains(name.split(['.', '[']).next().unwrap_or(&name)))
            || self.sorted_value(uncast);
        let sources = self.ordered.get(base).cloned().unwrap_or_default();
        Bind {
            from: self.flow(e),
            ordered: sorted_element || self.ordered.contains_key(base),
            sources,
            text: self.resolved(local.clone()),
        }
    }

    /// The database `sql` sent through `handle` is for: what the code says of the statement
    /// (sea-orm's backend), else of the handle (its type), else of the function (`cfg`
    /// feature), else of the file (configuration, imports, crate).
    /// A statement PostgreSQL cannot run (`?` placeholders, backticks) is not PostgreSQL,
    /// whatever the code around it suggests: a crate for several databases, a file of tests.
    pub(super) fn dialect(&self, sql: &Sql, handle: Handle) -> Dialect {
        let in_fn = self.stack.last().and_then(|&i| self.ix.fns[i].dialect);
        let dialect = sql
            .dialect
            .or(handle.dialect)
            .or(in_fn)
            .unwrap_or(self.parsed().dialect);
        match dialect {
            Dialect::Postgres => dialects::of_text(&sql.text).unwrap_or(dialect),
            _ => dialect,
        }
    }

    /// The rows a call `name` fetched, noted as one or none where it fetches so.
    fn fetched(&mut self, name: &str, rows: Value) -> Value {
        if let Value::Data(f) = &rows
            && OPTIONAL.contains(&name)
        {
            self.optional.extend(f.iter());
        }
        rows
    }

    /// Send `sql` through `handle` by the call at `site`: one step per statement, in the
    /// handle's session walker. The result is the data the statements return.
    pub(super) fn emit(&mut self, sql: &Sql, handle: Handle, via: String, site: Span) -> Value {
        // Texts chosen at run time: one arm each.
        if !sql.alts.is_empty() {
            let c = self.choice();
            let mut results = Flow::new();
            for v in sql.variants() {
                let via = via.clone();
                if let Value::Data(f) = self.in_arm(Some(c), &Flow::new(), On::Value, |w| {
                    w.emit(&v, handle, via, site)
                }) {
                    results.extend(f);
                }
            }
            return Value::Data(results);
        }
        let propagated = self.passes_on && self.tried.contains(&site);
        let dialect = self.dialect(sql, handle);
        let key = (sql.key(), dialect);
        if !self.shared.cache.contains_key(&key) {
            self.front.file = sql.file;
            self.front.dialect = dialect;
            let mut statements = split(&sql.text, dialect, false).statements;
            for s in &mut statements {
                s.template |= sql.template;
            }
            let steps = statements
                .iter()
                .map(|s| {
                    (
                        self.front.step(&sql.text, &sql.map, s, Vec::new()),
                        s.message,
                    )
                })
                .collect();
            self.shared.cache.insert(key, steps);
        }
        let steps = self.shared.cache[&key].clone();
        self.message += 1;
        let mut results = Flow::new();
        for (mut step, _) in steps {
            step.seq = self.next_seq();
            step.session = handle.session;
            step.branch = self.branch.as_slice().into();
            let host = step.host.get_or_insert_with(Box::default);
            host.via = Some(via.as_str().into());
            host.calls = self.calls.as_slice().into();
            host.propagated = propagated;
            host.inputs = sql
                .binds
                .iter()
                .enumerate()
                .map(|(i, b)| Input {
                    param: i + 1,
                    from: b.from.iter().collect(),
                    through: b
                        .from
                        .iter()
                        .filter_map(|s| {
                            Some((s, b.from.fields(s)?.iter().map(|f| f.to_string()).collect()))
                        })
                        .collect(),
                    text: b.text.clone(),
                    ordered: b.ordered,
                    sources: b.sources.clone(),
                })
                .collect();
            // Rows from a collection: a set of keys, locked in the collection's order.
            if let Some((sorted, at)) = sql.rows
                && step.facts.kind == StmtKind::Insert
            {
                step.facts.key_set = true;
                step.facts.ordered |= sorted;
                host.rows = Some(at);
            }
            results.insert(step.seq);
            self.last_step = Some(step.seq);
            // One call is one message unless it sends several statements in a batch.
            if !sql.batch {
                self.message += 1;
            }
            self.walkers[handle.walker].push(step, self.message);
        }
        Value::Data(results)
    }
}

/// Whether a text reads as SQL: its first word, past comments and parentheses, starts a
/// statement.
pub(super) fn looks_like_sql(text: &str) -> bool {
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    let first = rest
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.as_str(),
        "select"
            | "insert"
            | "update"
            | "delete"
            | "with"
            | "merge"
            | "lock"
            | "begin"
            | "start"
            | "commit"
            | "rollback"
            | "set"
            | "call"
            | "create"
            | "alter"
            | "drop"
            | "truncate"
            | "values"
            | "table"
            | "do"
            | "savepoint"
            | "release"
            | "copy"
            | "explain"
            | "pragma"
            | "replace"
            | "upsert"
            | "vacuum"
            | "analyze"
            | "grant"
            | "revoke"
            | "comment"
            | "refresh"
            | "listen"
            | "notify"
            | "unlisten"
            | "prepare"
            | "execute"
            | "deallocate"
            | "reset"
            | "show"
            | "declare"
            | "fetch"
            | "close"
            | "discard"
            | "reindex"
            | "cluster"
            | "abort"
            | "end"
    )
}

/// Data computed from any of `values` (the union of their flows), or nothing.
pub(super) fn data_of<'v>(values: impl IntoIterator<Item = &'v Value>) -> Value {
    let mut flow = Flow::new();
    for v in values {
        if let Value::Data(f) = v {
            flow.extend(f.clone());
        }
    }
    if flow.is_empty() {
        Value::None
    } else {
        Value::Data(flow)
    }
}

/// The placeholders of a `format!` string: byte range, and what names the argument (`""` for
/// the next positional one, a number, or a name). `{{` and `}}` come as ranges to replace with
/// one brace (`Some('{')`).
pub(super) fn placeholders(s: &str) -> Vec<(std::ops::Range<usize>, Result<String, char>)> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'{', Some(b'{')) | (b'}', Some(b'}')) => {
                out.push((i..i + 2, Err(b[i] as char)));
                i += 2;
            }
            (b'{', _) => {
                let end = s[i..].find('}').map_or(s.len(), |j| i + j + 1);
                let inner = &s[i + 1..end.saturating_sub(1).max(i + 1)];
                let name = inner.split(':').next().unwrap_or("").trim().to_string();
                out.push((i..end, Ok(name)));
                i = end;
            }
            _ => i += 1,
        }
    }
    out
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

/// The values a `push_values` closure binds (`b.push_bind(x)`), in order.
struct BindCalls<'e, 'v>(&'v mut Vec<&'e syn::Expr>);

impl<'e> syn::visit::Visit<'e> for BindCalls<'e, '_> {
    fn visit_expr_method_call(&mut self, m: &'e syn::ExprMethodCall) {
        // The receiver first: `b.push_bind(x).push_bind(y)` binds `x` before `y`.
        self.visit_expr(&m.receiver);
        if m.method == "push_bind"
            && let Some(e) = m.args.first()
        {
            self.0.push(e);
        }
        for a in &m.args {
            self.visit_expr(a);
        }
    }
}

/// `a`, `a.b.c`, `self.id`: a value that names itself, safe to stand for a parameter.
pub(super) fn plain_path(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
}
