//! Calls of functions by path (`f(..)`, `Type::f(..)`): closures handed on, statements built
//! from arguments, functions of the run walked in place, handles a function returns.

use super::emit::data_of;
use super::syntax::backend_name;
use super::text::looks_like_sql;
use super::*;

impl<'a> Walker<'a, '_> {
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
        let args = self.args_holding(&c.args, of_run);
        let held = held(&args);
        let v = self.call_with(c, args);
        self.run_unran(&held);
        v
    }

    /// The values of a call's arguments; with `hold`, its closures held (see [`Walker::hold`]).
    pub(super) fn args_holding<'e>(
        &mut self,
        args: impl IntoIterator<Item = &'e syn::Expr>,
        hold: bool,
    ) -> Vec<Value> {
        args.into_iter()
            .map(|a| match a {
                syn::Expr::Closure(cl) if hold => self.hold(cl),
                a => self.expr(a),
            })
            .collect()
    }

    /// Held closures the function they were handed to never called: walked here, as a branch.
    pub(super) fn run_unran(&mut self, held: &[usize]) {
        for &k in held {
            if !self.closures[k].ran {
                self.in_branch(|w| w.run_closure(k, &[]));
            }
        }
    }

    /// Hold a closure for the function it is handed to (see [`Value::Closure`]).
    pub(super) fn hold(&mut self, c: &syn::ExprClosure) -> Value {
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
        if let Some(v) = self
            .transaction_on_argument(name, &args, self.call_span(c))
            .or_else(|| self.statement_call(c, p, &segments, name, &args))
            .or_else(|| self.query_function(c, name, &args))
        {
            return v;
        }
        // The function of the run the path names, resolved once for the readings below.
        let callee = self.ix.called(&segments, self.file);
        if let Some(v) = self
            .built_text(c, &segments, callee, &args)
            .or_else(|| self.constructor(c, &segments, name))
            .or_else(|| self.walked_in_place(c, callee, &args))
            .or_else(|| self.returned_handle(c, &segments, name, callee, &args))
        {
            return v;
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

    /// diesel's `TransactionManager::begin_transaction(conn)` (also as `<C as
    /// AsyncConnection>::TransactionManager::..`, or on the manager: `conn.transaction_manager()
    /// .begin_transaction(conn)`): a transaction on that connection's session, until
    /// `commit_transaction` or `rollback_transaction` on it. `None` when `name` does neither to
    /// a handle given first.
    pub(super) fn transaction_on_argument(
        &mut self,
        name: &str,
        args: &[Value],
        at: Span,
    ) -> Option<Value> {
        let begins = drivers::is(name, Role::BeginsOnArgument);
        if let Some(Value::Handle(h)) = args.first()
            && h.session.is_some()
            && (begins || drivers::is(name, Role::EndsOnArgument))
        {
            let walker = &mut self.walkers[h.walker];
            match begins {
                true => walker.open_host(Some(at), &self.branch),
                false => walker.end(Some(at)),
            }
            return Some(Value::None);
        }
        None
    }

    /// A function the configuration names as sending its SQL argument on its handle
    /// (`rust.query_functions`).
    fn query_function(&mut self, c: &syn::ExprCall, name: &str, args: &[Value]) -> Option<Value> {
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
            return Some(Value::None);
        }
        None
    }

    /// `sqlx::query(&lock_query(shared))`: a function of the run that builds text (not async,
    /// returns `String`, `&str` or `Cow`) gives the SQL it returns for these arguments.
    fn built_text(
        &mut self,
        c: &syn::ExprCall,
        segments: &[String],
        callee: Option<usize>,
        args: &[Value],
    ) -> Option<Value> {
        let local = segments[..segments.len() - 1]
            .iter()
            .all(|s| matches!(s.as_str(), "self" | "Self" | "super" | "crate"));
        if local
            && !args.iter().any(|a| matches!(a, Value::Handle(_)))
            && let Some(i) = callee
            && self.ix.fns[i].builds_text()
        {
            let at = self.call_span(c);
            let given = self.passed(args, c.args.iter());
            let texts = self.arg_texts(c.args.iter());
            if let v @ Value::Sql(_) = self.inline_fn(i, None, &given, &texts, at) {
                return Some(v);
            }
        }
        None
    }

    /// Given a handle, or a struct of the run that holds one (`begin_write(state.clone())`):
    /// a function of the run walked in place, on the caller's handles.
    fn walked_in_place(
        &mut self,
        c: &syn::ExprCall,
        callee: Option<usize>,
        args: &[Value],
    ) -> Option<Value> {
        if args
            .iter()
            .any(|a| matches!(a, Value::Handle(_) | Value::Object(_)))
        {
            let at = self.call_span(c);
            let given = self.passed(args, c.args.iter());
            let texts = self.arg_texts(c.args.iter());
            let returned = match callee {
                Some(i) => self.inline_fn(i, None, &given, &texts, at),
                None => Value::None,
            };
            if !matches!(returned, Value::None) {
                return Some(returned);
            }
        }
        None
    }

    /// `get_async_db_conn().await?`: a function of the run whose declared type is a handle;
    /// `Tx(tx)`: a wrapper of the run around the handle it is given stands for it.
    fn returned_handle(
        &mut self,
        c: &syn::ExprCall,
        segments: &[String],
        name: &str,
        callee: Option<usize>,
        args: &[Value],
    ) -> Option<Value> {
        let declared = match callee {
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
            return Some(self.declared_handle(r, text, at));
        }
        if self.ix.wrapper(name).is_some()
            && let Some(h) = args.iter().find(|a| matches!(a, Value::Handle(_)))
        {
            return Some(h.clone());
        }
        None
    }

    /// A call that makes a statement from its arguments: diesel's and sea-orm's, sqlx's
    /// `query(..)` and kin, sea-orm's `Statement::from_string`, `QueryBuilder::new`, and
    /// `String::from` of SQL text. `None` for any other call.
    fn statement_call(
        &mut self,
        c: &syn::ExprCall,
        p: &syn::ExprPath,
        segments: &[String],
        name: &str,
        args: &[Value],
    ) -> Option<Value> {
        if let Some(q) = self
            .diesel_statement(name, args)
            .or_else(|| self.seaorm_entity(&p.path, c.args.first(), args))
        {
            return Some(q);
        }
        let first_sql = |i: usize| match args.get(i) {
            Some(Value::Sql(s)) => Some(s.clone()),
            _ => None,
        };
        if drivers::is(name, Role::Starts) {
            match args.first() {
                Some(Value::Sql(s)) => {
                    let mut sql = s.clone();
                    sql.batch = name == "raw_sql";
                    sql.prepared = !sql.batch;
                    return Some(Value::Sql(sql));
                }
                // `sqlx::query(sql)` of a function checked alone that is given `sql`.
                Some(Value::Caller) => return Some(Value::Caller),
                _ => {}
            }
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
            return Some(Value::Sql(sql));
        }
        // `QueryBuilder::new("INSERT INTO t (a, b) ")`: the head of a statement the code
        // completes with `push`, `push_bind` and `push_values` (see `built`). What it ends up
        // as is known only in part, so it is a template: never reported as a syntax error.
        if segments.iter().any(|s| s == "QueryBuilder") {
            return Some(match first_sql(0) {
                Some(mut sql) if matches!(name, "new" | "with_arguments") => {
                    sql.prepared = true;
                    sql.template = true;
                    Value::Sql(sql)
                }
                _ => Value::None,
            });
        }
        // `String::from("SELECT ..")`, `Some(SQL)`: the text passes through if it reads as SQL
        // (`View::new("test_view", pool)` is not).
        if matches!(name, "from" | "new" | "Some" | "Ok")
            && let Some(sql) = first_sql(0)
            && looks_like_sql(&sql.text)
        {
            return Some(Value::Sql(sql));
        }
        None
    }

    /// Constructors: `PgPool::connect`, `PgConnection::connect`, `tokio_postgres::connect`, ..:
    /// the handle they make. `None` for any other call.
    fn constructor(&mut self, c: &syn::ExprCall, segments: &[String], name: &str) -> Option<Value> {
        let owner = segments.len().checked_sub(2).map(|i| segments[i].as_str());
        if !drivers::is(name, Role::Connects) {
            return None;
        }
        let at = self.call_span(c);
        let qualified: Vec<String> = segments[..segments.len() - 1].to_vec();
        let kind = match owner {
            Some("tokio_postgres" | "postgres") => Some(Executor::Connection),
            Some("Database") => Some(Executor::Pool),
            Some(t) => drivers::kind_of(t, &qualified, &self.ix.config.rust),
            None => None,
        };
        let dialect = owner.and_then(|t| drivers::dialect_of(t, &qualified, &[]));
        let handle = match kind {
            Some(Executor::Pool) => self.handle_of_kind(Executor::Pool),
            Some(Executor::Connection) => {
                self.new_session(Executor::Connection, Executor::Connection, Some(at))
            }
            _ => return Some(Value::None),
        };
        Some(Value::Handle(Handle { dialect, ..handle }))
    }
}

/// The closures among a call's arguments (see [`Walker::hold`]).
pub(super) fn held(args: &[Value]) -> Vec<usize> {
    let closure = |a: &Value| match a {
        Value::Closure(k) => Some(*k),
        _ => None,
    };
    args.iter().filter_map(closure).collect()
}
