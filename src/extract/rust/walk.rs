//! Walking a function body: statements, bindings, branches and expressions, in program order.

use super::calls::{data_of, looks_like_sql, plain_path};
use super::*;

impl<'a, 'w> Walker<'a, 'w> {
    pub(super) fn new(
        ix: &'w Index<'a>,
        front: &'w mut Front,
        shared: &'w mut Shared<'a>,
        file: usize,
    ) -> Self {
        Walker {
            ix,
            front,
            shared,
            file,
            vars: HashMap::new(),
            walkers: vec![
                SessionWalker::unknown(),
                SessionWalker::host(Executor::Pool),
            ],
            sessions: Vec::new(),
            field_sessions: HashMap::new(),
            built: HashMap::new(),
            arm_sql: Vec::new(),
            guarded: HashMap::new(),
            returned: Vec::new(),
            closures: Vec::new(),
            seq: 0,
            message: 0,
            branch: Vec::new(),
            next_branch: 0,
            exits: Vec::new(),
            helper_returns: Vec::new(),
            frames: 0,
            async_tried: false,
            conditions: Vec::new(),
            loops: Vec::new(),
            open_loops: Vec::new(),
            choices: Vec::new(),
            sorted: HashSet::new(),
            ordered: HashMap::new(),
            aliases: HashMap::new(),
            calls: Vec::new(),
            tried: Vec::new(),
            passes_on: true,
            test: false,
            in_async: false,
            borrowed: Vec::new(),
            const_depth: 0,
            depth: 0,
            backends: HashMap::new(),
            last_step: None,
            optional: HashSet::new(),
            stack: Vec::new(),
            types: HashMap::new(),
        }
    }

    pub(super) fn parsed(&self) -> &'a Parsed {
        &self.ix.parsed[self.file]
    }

    /// The parsed file a token is from: this one, or another whose macro an expansion here
    /// copied it from.
    pub(super) fn home(&self, s: proc_macro2::Span) -> &'a Parsed {
        super::home(self.ix.parsed, self.file, s)
    }

    pub(super) fn span(&self, node: &impl Spanned) -> Span {
        let s = node.span();
        self.home(s).span_at(s)
    }

    /// From the start of `from` to the end of `to` (only `from` where they are in two files).
    pub(super) fn span_between(&self, from: proc_macro2::Span, to: proc_macro2::Span) -> Span {
        let p = self.home(from);
        if std::ptr::eq(p, self.home(to)) {
            p.span_between(from, to)
        } else {
            p.span_at(from)
        }
    }

    /// The node's text as written.
    pub(super) fn written(&self, node: &impl Spanned) -> &'a str {
        let s = node.span();
        let p = self.home(s);
        p.text.get(p.range_at(s)).unwrap_or("")
    }

    /// The expression as written (`&mut *tx`), whitespace folded, for messages.
    pub(super) fn source_of(&self, e: &syn::Expr) -> String {
        self.written(e)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub(super) fn next_seq(&mut self) -> usize {
        self.seq += 1;
        self.seq
    }

    pub(super) fn finish(mut self, f: &FnDef) -> Unit {
        let mut transactions: Vec<Transaction> = self
            .walkers
            .drain(..)
            .flat_map(SessionWalker::finish)
            .filter(|t| !t.steps.is_empty())
            .collect();
        transactions.sort_by_key(|t| t.steps[0].seq);
        let mut unit = Unit::new(UnitKind::RustFn, Some(f.name.clone()), f.span);
        unit.unused = f.unused;
        if f.migration {
            unit.runner = Some(crate::model::Runner {
                name: "sea-orm migration",
                evidence: "`impl MigrationTrait for ..`",
                runs: "once per database, by the migrator",
                migration: true,
                called: None,
            });
        }
        unit.transactions = transactions;
        unit.exits = self
            .exits
            .into_iter()
            .filter_map(|(e, frame)| frame.is_none().then_some(e))
            .collect();
        unit.helper_returns = self.helper_returns;
        unit.conditions = self.conditions;
        unit.loops = self.loops;
        unit.sessions = self.sessions;
        unit.choices = self.choices;
        unit.test = f.test;
        unit
    }

    // ---- handles ----

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

    /// Remember the type a `let` gives a plain variable: a struct literal's (`let persist =
    /// NewCrate { .. }`) or the annotation's; forget an older one of the name.
    fn note_type(&mut self, pat: &syn::Pat, init: Option<&syn::Expr>) {
        let (pat, annotated) = match pat {
            syn::Pat::Type(t) => (&*t.pat, types::type_name(&t.ty)),
            p => (p, None),
        };
        let syn::Pat::Ident(p) = pat else {
            return;
        };
        let literal = match init {
            Some(syn::Expr::Struct(s)) => s.path.segments.last().map(|s| s.ident.to_string()),
            // `sqlx::query_as!(Task, ..).fetch_all(..).await?`: rows of `Task`.
            Some(e) => types::row_type(e),
            None => None,
        };
        match annotated.or(literal).filter(|t| t != "Self") {
            Some(t) => self.types.insert(p.ident.to_string(), t.into()),
            None => self.types.remove(&p.ident.to_string()),
        };
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

    // ---- statements ----

    pub(super) fn block(&mut self, block: &syn::Block) {
        self.block_value(block);
    }

    /// Walk a block; the value of its tail expression.
    pub(super) fn block_value(&mut self, block: &syn::Block) -> Value {
        let outer = self.vars.clone();
        let before: HashSet<usize> = self.open_transactions();
        let mut tail = Value::None;
        for stmt in &block.stmts {
            match stmt {
                syn::Stmt::Expr(e, None) => {
                    let v = self.expr(e);
                    tail = self.or_data(v, e);
                }
                _ => self.stmt(stmt),
            }
        }
        // Transactions opened in this block and still open are rolled back when dropped here,
        // unless the block gives them away: its value or a `return` is the handle, or a struct
        // of the run built around it (`Ok(Self { transaction })`).
        let opened: Vec<usize> = self
            .open_transactions()
            .difference(&before)
            .copied()
            .collect();
        let kept = match opened.is_empty() {
            true => HashSet::new(),
            false => self.kept_walkers(&tail),
        };
        for w in opened.iter().filter(|w| !kept.contains(w)) {
            let declared_here = self
                .vars
                .values()
                .any(|v| matches!(v, Value::Handle(h) if h.walker == *w))
                && !outer
                    .values()
                    .any(|v| matches!(v, Value::Handle(h) if h.walker == *w));
            if declared_here {
                self.walkers[*w].end(None);
            }
        }
        // The block's own names go; text built on an outer variable (`{ qb.push(..) }`) stays.
        let mut declared = Vec::new();
        for stmt in &block.stmts {
            if let syn::Stmt::Local(l) = stmt {
                collect_idents(&l.pat, &mut declared);
            }
        }
        let inner = std::mem::replace(&mut self.vars, outer);
        for (name, v) in inner {
            if let (Value::Sql(_), Some(Value::Sql(_))) = (&v, self.vars.get(&name))
                && !declared.contains(&name)
            {
                self.vars.insert(name, v);
            }
        }
        tail
    }

    /// The session walkers of the handles `tail` and the function's `return`s so far give
    /// away, directly or in a struct of the run built around them.
    fn kept_walkers(&self, tail: &Value) -> HashSet<usize> {
        let mut kept = HashSet::new();
        let returned = self.returned.last().into_iter().flatten();
        for v in std::iter::once(tail).chain(returned) {
            match v {
                Value::Handle(h) => {
                    kept.insert(h.walker);
                }
                Value::Object(o) => kept.extend(
                    self.built
                        .iter()
                        .filter(|((owner, _), _)| owner == o)
                        .filter_map(|(_, h)| h.map(|h| h.walker)),
                ),
                _ => {}
            }
        }
        kept
    }

    pub(super) fn open_transactions(&self) -> HashSet<usize> {
        self.vars
            .values()
            .filter_map(|v| match v {
                Value::Handle(h) if h.kind == Executor::Transaction => Some(h.walker),
                _ => None,
            })
            .collect()
    }

    pub(super) fn stmt(&mut self, stmt: &syn::Stmt) {
        match stmt {
            syn::Stmt::Local(local) => {
                let value = match &local.init {
                    Some(init) => {
                        let v = self.expr(&init.expr);
                        // `let Some(row) = row else { return .. }`: the else arm is taken on the
                        // value, and leaves; `let Ok(..) = x else` is taken when `x` failed.
                        if let Some((_, diverge)) = &init.diverge {
                            let from = self.flow_of(&v, &init.expr);
                            let on = On::of_pattern(&local.pat, "Ok");
                            self.in_arm(None, &from, on, |w| {
                                w.expr(diverge);
                                w.exit_as(diverge, None, ExitKind::Return, true, false);
                            });
                        }
                        self.derive_loop_vars(&local.pat, &init.expr);
                        self.note_type(&local.pat, Some(&init.expr));
                        self.note_fields(&local.pat, &init.expr);
                        self.note_alias(&local.pat, Some(&init.expr));
                        if self.sorted_value(&init.expr) {
                            let mut names = Vec::new();
                            collect_idents(&local.pat, &mut names);
                            self.sorted.extend(names);
                        }
                        if orders(&init.expr) {
                            let mut names = Vec::new();
                            collect_idents(&local.pat, &mut names);
                            let sources = used_names(&init.expr);
                            for n in names {
                                self.ordered.insert(n, sources.clone());
                            }
                        }
                        match &local.pat {
                            syn::Pat::Type(t) => self.seaorm_typed(&t.ty, &init.expr),
                            _ => None,
                        }
                        .unwrap_or_else(|| self.or_data(v, &init.expr))
                    }
                    None => Value::None,
                };
                self.bind(&local.pat, value);
            }
            syn::Stmt::Expr(e, _) => {
                self.expr(e);
            }
            syn::Stmt::Macro(m) => {
                self.mac(&m.mac);
            }
            syn::Stmt::Item(_) => {}
        }
    }

    /// `let id = krate.id;`, or an `if`/`match` whose every arm ends in one value (`let id = if
    /// let Some(k) = found { ..; k.id } else { ..; k.id }`): `id` names what that path names, so
    /// a row keyed by either is one row. Any other binding of the name ends its alias (an
    /// inlined helper's parameter rebound in its body is no longer the caller's value).
    fn note_alias(&mut self, pat: &syn::Pat, init: Option<&syn::Expr>) {
        let pat = match pat {
            syn::Pat::Type(t) => &*t.pat,
            p => p,
        };
        let mut names = Vec::new();
        collect_idents(pat, &mut names);
        for n in &names {
            self.aliases.remove(n);
        }
        let (syn::Pat::Ident(id), Some(init)) = (pat, init) else {
            return;
        };
        if id.mutability.is_some() || id.by_ref.is_some() || id.subpat.is_some() {
            return;
        }
        let mut tails = Vec::new();
        if !arm_tails(init, &mut tails) {
            return;
        }
        let mut texts = tails.iter().map(|t| self.text_of(t));
        let Some(first) = texts.next() else {
            return;
        };
        let name = id.ident.to_string();
        if plain_path(&first) && first != name && texts.all(|t| t == first) {
            self.aliases.insert(name, first);
        }
    }

    /// `let rows = ids.iter().map(|id| Row { owner, id: *id }).collect()` (or one `Row { .. }`):
    /// a field every element sets from something other than the closure's parameters has that
    /// value in every row, so `rows.owner` is written as `owner` is. A sea-orm row found by its
    /// primary key (`Entity::find_by_id(k).one(db)`) has that key: `row.id` is `k`.
    fn note_fields(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        let pat = match pat {
            syn::Pat::Type(t) => &*t.pat,
            p => p,
        };
        let syn::Pat::Ident(var) = pat else {
            return;
        };
        let var = var.ident.to_string();
        let prefix = format!("{var}.");
        self.aliases.retain(|k, _| !k.starts_with(&prefix));
        if let Some((key, k)) = self.seaorm_found_key(init) {
            let text = self.text_of(k);
            self.aliases.insert(format!("{var}.{key}"), text);
            return;
        }
        let mut e = init;
        let mut params = Vec::new();
        let lit = loop {
            match e {
                syn::Expr::Struct(s) => break s,
                syn::Expr::Reference(r) => e = &r.expr,
                syn::Expr::Paren(p) => e = &p.expr,
                syn::Expr::MethodCall(m) if m.method == "map" => match m.args.first() {
                    Some(syn::Expr::Closure(c)) => {
                        for input in &c.inputs {
                            collect_idents(input, &mut params);
                        }
                        e = &c.body;
                    }
                    _ => return,
                },
                syn::Expr::MethodCall(m) => e = &m.receiver,
                syn::Expr::Block(b) => match b.block.stmts.last() {
                    Some(syn::Stmt::Expr(tail, None)) => e = tail,
                    _ => return,
                },
                _ => return,
            }
        };
        for f in &lit.fields {
            let syn::Member::Named(name) = &f.member else {
                continue;
            };
            if used_names(&f.expr).iter().any(|n| params.contains(n)) {
                continue;
            }
            let text = self.text_of(&f.expr);
            self.aliases.insert(format!("{var}.{name}"), text);
        }
    }

    /// A value with no meaning of its own is data if it is computed from query results.
    pub(super) fn or_data(&self, v: Value, e: &syn::Expr) -> Value {
        match v {
            Value::None => {
                let flow = self.flow(e);
                if flow.is_empty() {
                    Value::None
                } else {
                    Value::Data(flow)
                }
            }
            v => v,
        }
    }

    /// The steps whose results `e`, which evaluated to `v`, carries: the statements it ran
    /// itself and the variables it uses.
    pub(super) fn flow_of(&self, v: &Value, e: &syn::Expr) -> Flow {
        let mut flow = self.flow(e);
        if let Value::Data(f) = v {
            flow.extend(f.clone());
        }
        flow
    }

    /// The steps whose results the variables used in `e` carry, through the fields it names
    /// (`row.start`, `row.get("start")`).
    pub(super) fn flow(&self, e: &syn::Expr) -> Flow {
        dataflow::of_expr(&self.vars, e)
    }

    /// Names bound in a loop's body from a value computed from the loop's variables
    /// (`let row = map.get(&id)` in `for id in ids`) change with every iteration like them.
    fn derive_loop_vars(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        if self.open_loops.is_empty() {
            return;
        }
        let used = used_names(init);
        for &i in self.open_loops.iter() {
            let Some(lp) = self.loops.get_mut(i) else {
                continue;
            };
            if used.iter().any(|u| lp.vars.contains(u)) {
                let mut names = Vec::new();
                collect_idents(pat, &mut names);
                for n in names {
                    if !lp.vars.contains(&n) {
                        lp.vars.push(n);
                    }
                }
            }
        }
    }

    /// A closure's body. An `async` block that is the closure's result (`|tx| async move {
    /// .. }`, `Box::pin(async move { .. })`) passes its errors on as the closure does.
    pub(super) fn closure_body(&mut self, body: &syn::Expr) -> Value {
        let is_async = |e: &syn::Expr| matches!(e, syn::Expr::Async(_));
        self.async_tried = match body {
            syn::Expr::Call(c) => c.args.len() == 1 && c.args.iter().all(is_async),
            e => is_async(e),
        };
        let v = self.expr(body);
        self.async_tried = false;
        v
    }

    /// Bind a pattern to a value; a type annotation tells the handle kind.
    pub(super) fn bind(&mut self, pat: &syn::Pat, value: Value) {
        // Data spreads to every name of a destructuring pattern.
        if let Value::Data(flow) = &value {
            let mut names = Vec::new();
            collect_idents(pat, &mut names);
            for name in names {
                self.vars.insert(name, Value::Data(flow.clone()));
            }
            return;
        }
        match pat {
            syn::Pat::Ident(p) => {
                let name = p.ident.to_string();
                let value = match value {
                    // A name that can change is not a constant.
                    Value::Bool(_) if p.mutability.is_some() => Value::None,
                    Value::None => match types::of_variable_name(&name) {
                        Some(kind) => Value::Handle(self.handle_of_kind(kind)),
                        None => Value::None,
                    },
                    v => v,
                };
                self.vars.insert(name, value);
            }
            syn::Pat::Type(t) => {
                self.note_sorted(&t.pat, &t.ty);
                let value = match value {
                    Value::None => self.typed(&t.ty).map_or(Value::None, Value::Handle),
                    v => v,
                };
                self.bind(&t.pat, value);
            }
            // `let (client, connection) = tokio_postgres::connect(..)`: the client is first.
            syn::Pat::Tuple(t) => {
                let mut first = Some(value);
                for p in &t.elems {
                    self.bind(p, first.take().unwrap_or_default());
                }
            }
            syn::Pat::Reference(r) => self.bind(&r.pat, value),
            // `let DbConnection(mut conn) = db;`: a newtype's one field is the handle it holds.
            syn::Pat::TupleStruct(t) if t.elems.len() == 1 => {
                let value = match value {
                    Value::Object(owner) if !matches!(t.elems[0], syn::Pat::Rest(_)) => {
                        match self.ix.handle_structs.get(&*owner) {
                            Some(&(kind, dialect)) => {
                                let mut h = self.handle_of_kind(kind);
                                h.dialect = dialect;
                                Value::Handle(h)
                            }
                            None => Value::Object(owner),
                        }
                    }
                    v => v,
                };
                self.bind(&t.elems[0], value)
            }
            _ => {}
        }
    }

    /// Bind a function's parameters: to the caller's handles (`args`) when walked in place,
    /// else by their types.
    /// Bind the parameters: to `args` (and `self` to `receiver`) when walked in place, else by
    /// their types; `owner` is the type of the method's `impl` block.
    pub(super) fn params(
        &mut self,
        sig: &syn::Signature,
        owner: Option<&syn::Type>,
        receiver: Option<Value>,
        args: Option<&[Value]>,
    ) {
        let mut i = 0;
        for input in &sig.inputs {
            let t = match input {
                syn::FnArg::Typed(t) => t,
                syn::FnArg::Receiver(_) => {
                    let value = match (receiver.clone(), owner) {
                        (Some(v), _) => v,
                        (None, Some(ty)) => self.typed_value(sig, ty),
                        (None, None) => Value::None,
                    };
                    self.vars.insert("self".to_string(), value);
                    continue;
                }
            };
            let given = args.and_then(|a| a.get(i)).cloned().unwrap_or_default();
            i += 1;
            let value = match given {
                Value::None => self.typed_value(sig, &t.ty),
                v => v,
            };
            self.note_sorted(&t.pat, &t.ty);
            self.bind(&t.pat, value);
        }
    }

    /// What a parameter of this type holds: a handle, or a struct that holds one.
    fn typed_value(&mut self, sig: &syn::Signature, ty: &syn::Type) -> Value {
        if let Some(h) = self.typed(ty) {
            return Value::Handle(h);
        }
        if let Some(kind) = types::generic_executor(sig, ty) {
            return Value::Handle(self.handle_of_kind(kind));
        }
        if let Some(h) = types::generic_target(sig, ty).and_then(|t| self.typed(t)) {
            return Value::Handle(h);
        }
        match types::type_name(ty) {
            Some(name) if self.ix.handle_structs.contains_key(&name) => Value::Object(name.into()),
            _ => Value::None,
        }
    }

    /// A `BTreeSet`/`BTreeMap` is visited in key order.
    pub(super) fn note_sorted(&mut self, pat: &syn::Pat, ty: &syn::Type) {
        if self.written(ty).contains("BTree")
            && let syn::Pat::Ident(id) = pat
        {
            self.sorted.insert(id.ident.to_string());
        }
    }

    pub(super) fn in_branch<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.in_arm(None, &Flow::new(), On::Value, f)
    }

    /// A new group of alternative arms (`if`/`else`, `match`).
    pub(super) fn choice(&mut self) -> usize {
        self.choices.push(Vec::new());
        self.choices.len() - 1
    }

    /// A branch arm, one of the alternatives of `choice` if given, taken on a condition computed
    /// from the results of the steps in `from` (see [`On`]). Names bound inside do not outlive
    /// it.
    pub(super) fn in_arm<R>(
        &mut self,
        choice: Option<usize>,
        from: &Flow,
        on: On,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        self.next_branch += 1;
        let arm = self.next_branch;
        self.branch.push(arm);
        if let Some(c) = choice {
            self.choices[c].push(arm);
        }
        // An `Option` tells whether a row was found only of rows fetched as one or none.
        let on = match on {
            On::Presence if !from.iter().all(|s| self.optional.contains(&s)) => On::Value,
            on => on,
        };
        if !from.is_empty() {
            self.conditions.push(Condition {
                branch: arm,
                from: from.iter().collect(),
                failed: on == On::Failed,
                presence: on == On::Presence,
            });
        }
        let outer = self.vars.clone();
        let exits = self.exits.len();
        let marks: Vec<_> = self.walkers.iter().map(SessionWalker::mark).collect();
        let r = f(self);
        // An arm that leaves (`return`, a diverging `let .. else`) ends nothing for the code
        // after it: a `tx.rollback()` before its `return` closes the transaction on that
        // path only.
        // A helper's own return leaves the helper's arms, not its caller's.
        let depth = self.frames;
        let leaves = self.exits[exits..].iter().any(|(e, frame)| {
            e.kind == ExitKind::Return
                && e.branch.last() == Some(&arm)
                && frame.is_none_or(|d| d == depth)
        });
        if leaves {
            for (w, m) in self.walkers.iter_mut().zip(marks) {
                w.reopen(m);
            }
        }
        // What the arm built on text it found (a query builder's pushes): the caller of an
        // `if`/`else` keeps each arm's text as an alternative.
        self.arm_sql = self
            .vars
            .iter()
            .filter_map(|(name, v)| match (v, outer.get(name)) {
                (Value::Sql(now), Some(Value::Sql(was))) if now.text != was.text => {
                    Some((name.clone(), now.clone()))
                }
                _ => None,
            })
            .collect();
        self.vars = outer;
        self.branch.pop();
        r
    }

    /// An exit that leaves with an error (`?`, `bail!`, `.ok_or(..)?`).
    pub(super) fn exit(&mut self, node: &impl Spanned, owner: Option<usize>, kind: ExitKind) {
        self.exit_as(node, owner, kind, true, true);
    }

    /// An exit; `error` when it may leave with an error (`?`, `return Err(..)`, `bail!`, a
    /// `return` of something not `Ok`), which a helper's caller passes on when it calls the
    /// helper with `?`. Any other return of a helper, and an error its caller handles, leaves
    /// only the helper. `fails` when it surely leaves with an error.
    pub(super) fn exit_as(
        &mut self,
        node: &impl Spanned,
        owner: Option<usize>,
        kind: ExitKind,
        error: bool,
        fails: bool,
    ) {
        let frame = (self.frames > 0 && !(error && self.passes_on)).then_some(self.frames);
        let seq = self.next_seq();
        let span = self.span(node);
        let exit = Exit {
            seq,
            span,
            owner,
            branch: self.branch.clone(),
            kind,
            fails,
        };
        self.exits.push((exit, frame));
    }

    // ---- expressions ----

    pub(super) fn exprs<'e>(
        &mut self,
        exprs: impl IntoIterator<Item = &'e syn::Expr>,
    ) -> Vec<Value> {
        exprs.into_iter().map(|e| self.expr(e)).collect()
    }

    pub(super) fn expr(&mut self, e: &syn::Expr) -> Value {
        // The depth check before syn bounds this; the guard keeps the walk within the stack
        // whatever the shape.
        if self.depth >= MAX_DEPTH {
            return Value::None;
        }
        self.depth += 1;
        let v = self.expr_inner(e);
        self.depth -= 1;
        v
    }

    fn expr_inner(&mut self, e: &syn::Expr) -> Value {
        use syn::Expr as E;
        match e {
            E::MethodCall(m) => self.method_call(m),
            E::Call(c) => self.call(c),
            E::Macro(m) => self.mac(&m.mac),
            E::Lit(l) => self.literal(&l.lit),
            E::Path(p) => self.path(&p.path),
            E::Field(f) => self.field(f),
            E::Reference(r) => self.expr(&r.expr),
            E::Paren(p) => self.expr(&p.expr),
            E::Group(g) => self.expr(&g.expr),
            E::Await(a) => self.expr(&a.base),
            E::Cast(c) => self.expr(&c.expr),
            E::Unary(u) => match (self.expr(&u.expr), &u.op) {
                (Value::Bool(b), syn::UnOp::Not(_)) => Value::Bool(!b),
                (Value::Bool(_), _) => Value::None,
                (v, _) => v,
            },
            E::Try(t) => {
                let before = self.seq;
                self.async_tried =
                    matches!(&*t.expr, E::Await(a) if matches!(&*a.base, E::Async(_)));
                let site = self.tried_site(&t.expr);
                let v = self.passing_on(site, |w| w.expr(&t.expr));
                let owner = self.last_step.filter(|&s| s > before);
                // `row.ok_or(NotFound)?` leaves on the value; any other `?` when a call failed.
                let kind = match &*t.expr {
                    E::MethodCall(m) if m.method == "ok_or" || m.method == "ok_or_else" => {
                        ExitKind::Return
                    }
                    _ => ExitKind::Propagate,
                };
                if kind == ExitKind::Return {
                    let from = self.flow(&t.expr);
                    self.in_arm(None, &from, On::Presence, |w| {
                        w.exit(&t.question_token, None, kind)
                    });
                } else {
                    self.exit(&t.question_token, owner, kind);
                }
                v
            }
            E::Return(r) => {
                if let Some(x) = &r.expr {
                    // `return helper(conn).await`: its error is passed on, as with `?`.
                    let sites = self.tail_sites(x);
                    let v = self.passing_on(sites, |w| w.expr(x));
                    let v = self.or_data(v, x);
                    if let Some(frame) = self.returned.last_mut() {
                        frame.push(v);
                    }
                }
                let error = !r.expr.as_deref().is_some_and(is_ok_value);
                let fails = r.expr.as_deref().is_some_and(is_err_value);
                self.exit_as(&r.return_token, None, ExitKind::Return, error, fails);
                Value::None
            }
            E::Binary(b) => {
                let (l, r) = (self.expr(&b.left), self.expr(&b.right));
                match (l, r, &b.op) {
                    (Value::Sql(a), Value::Sql(b), syn::BinOp::Add(_)) => Value::Sql(a.concat(b)),
                    _ => Value::None,
                }
            }
            E::If(i) => {
                let v = self.expr(&i.cond);
                // A condition known where the code is walked (`get(conn, id, false)` into `if
                // for_update { " FOR UPDATE" } else { "" }`): only that arm runs.
                if let Value::Bool(b) = v {
                    return match (b, &i.else_branch) {
                        (true, _) => self.block_value(&i.then_branch),
                        (false, Some((_, other))) => self.expr(other),
                        (false, None) => Value::None,
                    };
                }
                let from = self.flow_of(&v, &i.cond);
                // `if let Err(e) = x` is taken when `x` failed; so is the else of `if let Ok(..)`.
                let (pat, data) = match &*i.cond {
                    E::Let(l) => (Some(&*l.pat), self.or_data(v, &l.expr)),
                    _ => (None, Value::None),
                };
                let on = |failed_on| match pat {
                    Some(p) => On::of_pattern(p, failed_on),
                    None if presence_test(&i.cond) => On::Presence,
                    None => On::Value,
                };
                let c = self.choice();
                let backend = backend_test(&i.cond);
                if let (Some(p), E::Let(l)) = (pat, &*i.cond) {
                    self.derive_loop_vars(p, &l.expr);
                }
                let then = self.in_arm(Some(c), &from, on("Err"), |w| {
                    if let Some(p) = pat {
                        w.bind(p, data.clone());
                    }
                    w.with_backend(backend, |w| w.block_value(&i.then_branch))
                });
                let then_sql = std::mem::take(&mut self.arm_sql);
                let Some((_, other)) = &i.else_branch else {
                    return Value::None;
                };
                let other = self.in_arm(Some(c), &from, on("Ok"), |w| {
                    let v = w.expr(other);
                    w.or_data(v, other)
                });
                // `if a { q.push("UPDATE ..") } else { q.push("DELETE ..") }`: both texts go on.
                for (name, b) in std::mem::take(&mut self.arm_sql) {
                    if let Some((_, a)) = then_sql.iter().find(|(n, _)| *n == name) {
                        self.vars.insert(name, Value::Sql(a.clone().or(b)));
                    }
                }
                // `let row = if let Some(r) = found { r.update(tx)? } else { new.insert(tx)? }`:
                // the rows of the arms, not the condition's.
                match (then, other) {
                    (Value::Data(mut a), Value::Data(b)) => {
                        a.extend(b);
                        Value::Data(a)
                    }
                    // `let q = if shared { ".. FOR SHARE" } else { ".. FOR UPDATE" }`.
                    (Value::Sql(a), Value::Sql(b)) => Value::Sql(a.or(b)),
                    _ => Value::None,
                }
            }
            E::Match(m) => {
                let v = self.expr(&m.expr);
                let from = self.flow_of(&v, &m.expr);
                let data = self.or_data(v, &m.expr);
                let c = self.choice();
                let scrutinee = path_name(&m.expr);
                // `match found { Some(row) => row, None => new.insert(tx)? }`: the rows of the
                // arms that give a value, when each gives one computed from the database.
                let mut rows: Option<Flow> = Some(Flow::default());
                // `match kind { Kind::A => "UPDATE ..", Kind::B => "DELETE .." }`: each text.
                let mut texts: Option<Option<Sql>> = Some(None);
                // `match found { Some(row) => .., None => .. }` tests only whether a row was
                // found.
                let presence = m.arms.iter().any(|a| presence_pattern(&a.pat))
                    && m.arms.iter().all(|a| {
                        a.guard.is_none()
                            && (presence_pattern(&a.pat) || matches!(a.pat, syn::Pat::Wild(_)))
                    });
                for arm in &m.arms {
                    self.derive_loop_vars(&arm.pat, &m.expr);
                    let on = match On::of_pattern(&arm.pat, "Err") {
                        On::Failed => On::Failed,
                        _ if presence => On::Presence,
                        _ => On::Value,
                    };
                    let backend = scrutinee.clone().zip(backend_variant(&arm.pat));
                    let v = self.in_arm(Some(c), &from, on, |w| {
                        w.bind(&arm.pat, data.clone());
                        if let Some((_, g)) = &arm.guard {
                            w.expr(g);
                        }
                        let v = w.with_backend(backend, |w| w.expr(&arm.body));
                        w.or_data(v, &arm.body)
                    });
                    texts = match (texts, &v) {
                        (Some(None), Value::Sql(s)) => Some(Some(s.clone())),
                        (Some(Some(a)), Value::Sql(s)) => Some(Some(a.or(s.clone()))),
                        (t, _) if diverges(&arm.body) => t,
                        _ => None,
                    };
                    rows = match (rows, v) {
                        (Some(mut a), Value::Data(b)) => {
                            a.extend(b);
                            Some(a)
                        }
                        (rows, _) if diverges(&arm.body) => rows,
                        _ => None,
                    };
                }
                if let Some(Some(sql)) = texts {
                    return Value::Sql(sql);
                }
                rows.filter(|r| !r.is_empty())
                    .map_or(Value::None, Value::Data)
            }
            E::ForLoop(f) => {
                let v = self.expr(&f.expr);
                // The order the loop visits keys in; the rows of one query, in its order.
                let sorted = self.sorted_collection(&f.expr);
                let from = self.flow_of(&v, &f.expr);
                let query = from.first().filter(|_| from.len() == 1);
                let mut names = Vec::new();
                collect_idents(&f.pat, &mut names);
                let at = self.span(&f.expr);
                // `for row in rows`: each element is data from the collection's rows, of
                // their type (`for task in tasks` of `query_as!(Task, ..)`).
                let rows = (!from.is_empty()).then(|| Value::Data(from.clone()));
                let element = self.local_type(types::collection(&f.expr));
                self.in_branch(|w| {
                    if let Some(rows) = rows {
                        w.bind(&f.pat, rows);
                    }
                    if let (Some(t), syn::Pat::Ident(p)) = (element, &*f.pat) {
                        w.types.insert(p.ident.to_string(), t);
                    }
                    w.open_loops.push(w.loops.len());
                    w.loops.push(Loop {
                        branch: w.next_branch,
                        vars: names,
                        sorted,
                        span: at,
                        query,
                    });
                    w.block(&f.body);
                    w.open_loops.pop();
                });
                Value::None
            }
            E::While(l) => {
                self.expr(&l.cond);
                self.in_branch(|w| w.block(&l.body));
                Value::None
            }
            E::Loop(l) => {
                self.in_branch(|w| w.block(&l.body));
                Value::None
            }
            E::Block(syn::ExprBlock { block, .. }) => self.block_value(block),
            E::Async(syn::ExprAsync { block, .. }) => {
                // `let r = async { .. ? .. }.await; unlock; r`: a `?` or `return` inside leaves
                // the block, not the function, unless the block's result is passed on with `?`.
                let passed_on = self.passes_on;
                self.passes_on &= std::mem::take(&mut self.async_tried);
                self.frames += 1;
                let v = self.block_value(block);
                self.frames -= 1;
                self.passes_on = passed_on;
                v
            }
            E::Unsafe(syn::ExprUnsafe { block, .. })
            | E::TryBlock(syn::ExprTryBlock { block, .. }) => {
                self.block(block);
                Value::None
            }
            E::Closure(c) => {
                // A closure may run any number of times, or not at all.
                self.in_branch(|w| w.closure_body(&c.body));
                Value::None
            }
            E::Let(l) => self.expr(&l.expr),
            E::Assign(a) if self.seaorm_assign(&a.left, &a.right) => Value::None,
            E::Assign(a) => {
                let v = self.expr(&a.right);
                let v = self.or_data(v, &a.right);
                if let E::Path(p) = &*a.left
                    && let Some(id) = p.path.get_ident()
                {
                    self.vars.insert(id.to_string(), v);
                }
                Value::None
            }
            E::Tuple(t) => {
                t.elems.iter().for_each(|e| self.moved_on(e, true));
                let mut vals = self.exprs(&t.elems);
                if vals.is_empty() {
                    Value::None
                } else {
                    vals.swap_remove(0)
                }
            }
            E::Array(a) => {
                self.exprs(&a.elems);
                Value::None
            }
            E::Struct(s) if let Some(v) = self.seaorm_active_model(s) => v,
            E::Struct(s) => {
                // `Counter { id, n }`: data if a field is.
                let owner = self.struct_name(&s.path);
                let mut holds = false;
                let fields: Vec<Value> = s
                    .fields
                    .iter()
                    .map(|f| {
                        self.moved_on(&f.expr, true);
                        let v = self.expr(&f.expr);
                        if let (Some(owner), syn::Member::Named(name), Value::Handle(h)) =
                            (&owner, &f.member, &v)
                        {
                            self.built_field(owner.clone(), name.to_string(), *h);
                            holds = true;
                        }
                        self.or_data(v, &f.expr)
                    })
                    .collect();
                // A struct of the run that holds the handle: its methods reach it through `self`.
                match owner {
                    Some(o) if holds && self.ix.handle_structs.contains_key(&*o) => {
                        Value::Object(o)
                    }
                    _ => data_of(&fields),
                }
            }
            E::Index(i) => {
                self.expr(&i.expr);
                self.expr(&i.index);
                Value::None
            }
            E::Break(b) => {
                if let Some(x) = &b.expr {
                    self.expr(x);
                }
                Value::None
            }
            _ => Value::None,
        }
    }

    pub(super) fn literal(&mut self, lit: &syn::Lit) -> Value {
        let s = match lit {
            syn::Lit::Str(s) => s,
            syn::Lit::Bool(b) => return Value::Bool(b.value),
            _ => return Value::None,
        };
        let at = s.span();
        let p = self.home(at);
        let r = p.range_at(at);
        let Some(text) = p.text.get(r.clone()) else {
            return Value::None;
        };
        match lit::decode(text, r.start + p.shift) {
            Some((text, map)) => Value::Sql(Sql::new(p.id, text, map)),
            None => Value::None,
        }
    }

    pub(super) fn path(&mut self, path: &syn::Path) -> Value {
        let Some(last) = path.segments.last() else {
            return Value::None;
        };
        let name = last.ident.to_string();
        if path.segments.len() == 1
            && let Some(v) = self.vars.get(&name)
        {
            return v.clone();
        }
        if let Some(q) = self.diesel_table(path) {
            return q;
        }
        if let Some(h) = self.static_handle(&name) {
            return Value::Handle(h);
        }
        // A string constant of the innermost block around the use, else of this file's
        // modules (or, if unique, of another file).
        let at = path.span().start();
        let konst = self.ix.const_names.get(&name).and_then(|all| {
            let mine = |i: &&usize| self.ix.consts[**i].0 == self.file;
            let local = all
                .iter()
                .filter(mine)
                .filter_map(|&i| Some((i, self.ix.const_scopes[i]?)))
                .filter(|(_, scope)| super::in_scope(scope, at))
                .max_by_key(|(_, scope)| (scope.0.line, scope.0.column))
                .map(|(i, _)| i);
            let here = local.as_ref().or_else(|| {
                all.iter()
                    .filter(mine)
                    .find(|&&i| self.ix.const_scopes[i].is_none())
            });
            match (here, all.as_slice()) {
                (Some(&i), _) | (None, &[i]) => Some(self.ix.consts[i]),
                _ => None,
            }
        });
        // A constant defined from another: follow a few, never a cycle.
        if let Some((file, expr)) = konst
            && self.const_depth < 8
        {
            let here = std::mem::replace(&mut self.file, file);
            self.const_depth += 1;
            let v = self.sql_only(expr);
            self.const_depth -= 1;
            self.file = here;
            return v;
        }
        Value::None
    }

    /// The SQL value of a constant's expression (or a name of one), without walking anything
    /// else.
    pub(super) fn sql_only(&mut self, e: &syn::Expr) -> Value {
        match e {
            syn::Expr::Lit(l) => self.literal(&l.lit),
            syn::Expr::Macro(m) => self.mac(&m.mac),
            syn::Expr::Reference(r) => self.sql_only(&r.expr),
            syn::Expr::Paren(p) => self.sql_only(&p.expr),
            syn::Expr::Path(p) => match self.path(&p.path) {
                v @ Value::Sql(_) => v,
                _ => Value::None,
            },
            // `LazyLock::new(|| format!(..))`, `Lazy::new(|| { .. })`: built once, on first use.
            syn::Expr::Call(c) if c.args.len() == 1 => match (&*c.func, &c.args[0]) {
                (syn::Expr::Path(p), syn::Expr::Closure(k))
                    if p.path.segments.last().is_some_and(|s| s.ident == "new") =>
                {
                    self.sql_only(&k.body)
                }
                _ => Value::None,
            },
            syn::Expr::Block(b) => match b.block.stmts.last() {
                Some(syn::Stmt::Expr(e, None)) if b.block.stmts.len() == 1 => self.sql_only(e),
                _ => Value::None,
            },
            _ => Value::None,
        }
    }

    /// SQL that struct literals of the run keep in a field of this name (`Queue { claim:
    /// format!("UPDATE {TABLE} ..") }`): the one literal there is, or the one in this file. Read
    /// where it was written, without this function's variables (they are not the ones the
    /// literal saw: a name it used there is a hole here).
    fn field_sql(&mut self, name: &str) -> Value {
        let Some(all) = self.ix.field_values.get(name) else {
            return Value::None;
        };
        let here: Vec<_> = all.iter().filter(|(f, _)| *f == self.file).collect();
        let (file, expr) = match (here.as_slice(), all.as_slice()) {
            (&[&one], _) | (&[], &[one]) => one,
            _ => return Value::None,
        };
        let vars = std::mem::take(&mut self.vars);
        let here = std::mem::replace(&mut self.file, file);
        let v = self.sql_only(expr);
        self.file = here;
        self.vars = vars;
        match v {
            Value::Sql(s) if looks_like_sql(&s.text) => Value::Sql(s),
            _ => Value::None,
        }
    }

    /// A static that holds a handle (`static POOL: Lazy<PgPool>`): one handle per function,
    /// as a field's.
    fn static_handle(&mut self, name: &str) -> Option<Handle> {
        if let Some(h) = self.field_sessions.get(name) {
            return Some(*h);
        }
        let &(kind, dialect, _) = self.ix.statics.get(name)?;
        let mut h = self.handle_of_kind(kind);
        h.dialect = dialect;
        self.field_sessions.insert(name.to_string(), h);
        Some(h)
    }

    /// A lock named as code of any method of its type names it: `self.inner` in a method of
    /// `Controller` is `Controller.inner`.
    pub(super) fn lock_name(&self, e: &syn::Expr) -> crate::model::Name {
        let text: String = self.source_of(e).split_whitespace().collect();
        let owner = self
            .stack
            .last()
            .and_then(|&i| self.ix.fns[i].owner)
            .and_then(types::type_name);
        match (text.strip_prefix("self."), owner) {
            (Some(rest), Some(owner)) => format!("{owner}.{rest}").into(),
            _ => text.into(),
        }
    }

    /// A once-cell static that holds a handle (`POOL` of `static POOL: OnceCell<PgPool>`): its
    /// `get` is the handle itself.
    pub(super) fn is_once_static(&self, e: &syn::Expr) -> bool {
        matches!(e, syn::Expr::Path(p) if p.path.get_ident().is_some_and(|i| {
            let name = i.to_string();
            !self.vars.contains_key(&name)
                && self.ix.statics.get(&name).is_some_and(|s| s.2)
        }))
    }

    /// The struct a literal builds (`PgTx { .. }`, `Self { .. }` in a method of `PgTx`).
    fn struct_name(&self, path: &syn::Path) -> Option<std::rc::Rc<str>> {
        let last = path.segments.last()?.ident.to_string();
        match last.as_str() {
            "Self" => self
                .stack
                .last()
                .and_then(|&i| self.ix.fns[i].owner)
                .and_then(types::type_name)
                .map(Into::into),
            _ => Some(last.into()),
        }
    }

    /// A literal of `owner` puts `h` in `field`; a different handle there before makes the
    /// field no one handle.
    fn built_field(&mut self, owner: std::rc::Rc<str>, field: String, h: Handle) {
        let same = |a: &Handle| a.walker == h.walker && a.session == h.session;
        self.built
            .entry((owner, field))
            .and_modify(|was| {
                if !was.as_ref().is_some_and(same) {
                    *was = None;
                }
            })
            .or_insert(Some(h));
    }

    /// `self.pool`, `state.db`: a handle by the field's declared type, or its name.
    pub(super) fn field(&mut self, f: &syn::ExprField) -> Value {
        let base = self.expr(&f.base);
        let syn::Member::Named(name) = &f.member else {
            return base;
        };
        let v = self.field_of(f, name);
        // `inner.db` of `let inner = self.inner.write().await`: the handle is used under the lock.
        if let (Value::Guard(lock), Value::Handle(h)) = (&base, &v) {
            self.guarded.insert(h.walker, lock.clone());
        }
        v
    }

    fn field_of(&mut self, f: &syn::ExprField, name: &syn::Ident) -> Value {
        let name = name.to_string();
        let of_self = matches!(&*f.base, syn::Expr::Path(p) if p.path.is_ident("self"));
        let owner = self.stack.last().and_then(|&i| self.ix.fns[i].owner);
        // `self.transaction` in a method of a struct whose literal this walk built with a handle.
        if of_self
            && let Some(o) = owner.and_then(types::type_name)
            && let Some(Some(h)) = self.built.get(&(o.into(), name.clone()))
        {
            return Value::Handle(*h);
        }
        if let Some(h) = self.field_sessions.get(&name) {
            return Value::Handle(*h);
        }
        // `self.inner` in a method: the field its own struct declares, when the run has it.
        let own = match of_self {
            true => owner.and_then(|o| self.ix.field_type(o, &name, self.file)),
            false => None,
        };
        let (kind, dialect, shares) = match (own, self.ix.fields.get(&name)) {
            (Some((at, ty)), _) => {
                let found = self.ix.handle_type(ty, at);
                let shares = self.ix.shares_transactions(ty, at);
                (found.map(|f| f.0), found.and_then(|f| f.1), shares)
            }
            (None, Some(&(kind, dialect, shares))) => (Some(kind), dialect, shares),
            (None, None) => (types::of_variable_name(&name), None, false),
        };
        match kind {
            Some(kind) => {
                let mut h = self.handle_of_kind(kind);
                h.dialect = dialect;
                if shares {
                    self.inherit(h);
                }
                self.field_sessions.insert(name, h);
                Value::Handle(h)
            }
            None => self.field_sql(&name),
        }
    }
}

impl Walker<'_, '_> {
    /// Walk `f` knowing that the variable holds this database backend (`if backend ==
    /// DbBackend::Sqlite { .. }`).
    fn with_backend<R>(
        &mut self,
        backend: Option<(String, Dialect)>,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let Some((var, d)) = backend else {
            return f(self);
        };
        let outer = self.backends.insert(var.clone(), d);
        let r = f(self);
        match outer {
            Some(o) => self.backends.insert(var, o),
            None => self.backends.remove(&var),
        };
        r
    }
}

/// The database a sea-orm backend value names (`DbBackend::Sqlite`, `DatabaseBackend::MySql`).
pub(super) fn backend_name(text: &str) -> Option<Dialect> {
    match text.rsplit("::").next()?.trim() {
        "Sqlite" => Some(Dialect::Sqlite),
        "MySql" => Some(Dialect::Mysql),
        "Postgres" => Some(Dialect::Postgres),
        _ => None,
    }
}

fn path_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Reference(r) => path_name(&r.expr),
        syn::Expr::Paren(p) => path_name(&p.expr),
        _ => None,
    }
}

/// `x == DbBackend::Sqlite` (either way round): the variable and the database.
fn backend_test(cond: &syn::Expr) -> Option<(String, Dialect)> {
    let syn::Expr::Binary(b) = cond else {
        return None;
    };
    if !matches!(b.op, syn::BinOp::Eq(_)) {
        return None;
    }
    let variant = |e: &syn::Expr| match e {
        syn::Expr::Path(p) if p.path.segments.len() >= 2 => {
            let text: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            backend_name(&text.join("::"))
        }
        _ => None,
    };
    match (
        path_name(&b.left),
        variant(&b.right),
        path_name(&b.right),
        variant(&b.left),
    ) {
        (Some(v), Some(d), ..) | (.., Some(v), Some(d)) => Some((v, d)),
        _ => None,
    }
}

/// A `match` arm's `DbBackend::Sqlite` pattern.
fn backend_variant(pat: &syn::Pat) -> Option<Dialect> {
    match pat {
        syn::Pat::Path(p) if p.path.segments.len() >= 2 => {
            let text: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            backend_name(&text.join("::"))
        }
        _ => None,
    }
}

/// What a branch arm is taken on, of the steps its condition is computed from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum On {
    /// What they read.
    Value,
    /// Their failure: an `Err` arm, the else of `if let Ok(..)`.
    Failed,
    /// Only whether they found a row: `if let Some(row)`, `match found { Some(_) => .., None
    /// => .. }`, `row.is_none()`, `rows.is_empty()`, `.ok_or(NotFound)?`.
    Presence,
}

impl On {
    /// The arm of pattern `pat`, taken when its steps failed if `pat` is `failed_on`.
    pub(super) fn of_pattern(pat: &syn::Pat, failed_on: &str) -> On {
        if pattern_is(pat, failed_on) {
            On::Failed
        } else if presence_pattern(pat) {
            On::Presence
        } else {
            On::Value
        }
    }
}

/// `Some(row)`, `Some(_)` or `None`: whether a value is there, not what it is.
pub(super) fn presence_pattern(pat: &syn::Pat) -> bool {
    let bare = |p: &syn::Pat| match p {
        syn::Pat::Wild(_) => true,
        syn::Pat::Ident(i) => i.subpat.is_none(),
        _ => false,
    };
    match pat {
        syn::Pat::TupleStruct(t) => {
            t.path.segments.last().is_some_and(|s| s.ident == "Some") && t.elems.iter().all(bare)
        }
        syn::Pat::Path(p) => p.path.is_ident("None"),
        syn::Pat::Ident(i) => i.ident == "None" && i.subpat.is_none(),
        _ => false,
    }
}

/// A condition that asks only whether something was found: `x.is_some()`, `x.is_none()`,
/// `rows.is_empty()`, negated or not.
fn presence_test(cond: &syn::Expr) -> bool {
    match cond {
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => presence_test(&u.expr),
        syn::Expr::Paren(p) => presence_test(&p.expr),
        syn::Expr::MethodCall(m) => {
            m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "is_some" | "is_none" | "is_empty"
                )
        }
        _ => false,
    }
}

/// The pattern is `Name(..)` (`Err(e)`, `Ok(_)`, `Some(row)`), possibly qualified.
pub(super) fn pattern_is(pat: &syn::Pat, name: &str) -> bool {
    match pat {
        syn::Pat::TupleStruct(t) => t.path.segments.last().is_some_and(|s| s.ident == name),
        syn::Pat::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == name),
        syn::Pat::Ident(p) => p.subpat.as_ref().is_some_and(|(_, s)| pattern_is(s, name)),
        _ => false,
    }
}

/// The expression puts keys in order: `a.min(b)`, `cmp::max(a, b)`, or a pair swapped on a
/// comparison (`if a < b { (a, b) } else { (b, a) }`).
pub(super) fn orders(e: &syn::Expr) -> bool {
    struct Finds(bool);
    impl<'a> Visit<'a> for Finds {
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            self.0 |= matches!(m.method.to_string().as_str(), "min" | "max" | "minmax");
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func {
                self.0 |= p
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "min" || s.ident == "max");
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let swapped = match e {
        syn::Expr::If(i) => {
            let compares = matches!(&*i.cond, syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::Lt(_) | syn::BinOp::Le(_) | syn::BinOp::Gt(_) | syn::BinOp::Ge(_)));
            let tail = |b: &syn::Block| match b.stmts.last() {
                Some(syn::Stmt::Expr(syn::Expr::Tuple(t), None)) if t.elems.len() == 2 => {
                    Some(t.elems.iter().map(quote_path).collect::<Vec<_>>())
                }
                _ => None,
            };
            let other = match &i.else_branch {
                Some((_, e)) => match &**e {
                    syn::Expr::Block(b) => tail(&b.block),
                    _ => None,
                },
                None => None,
            };
            match (tail(&i.then_branch), other) {
                (Some(a), Some(b)) => compares && a.len() == 2 && a[0] == b[1] && a[1] == b[0],
                _ => false,
            }
        }
        _ => false,
    };
    let mut f = Finds(false);
    f.visit_expr(e);
    swapped || f.0
}

/// `Ok(..)` or `Some(..)`: a value returned as success.
/// An arm body that gives no value: it leaves (`return`, `continue`, `break`, `bail!(..)`,
/// `panic!(..)`, `unreachable!()`), directly or as a block's last statement.
fn diverges(e: &syn::Expr) -> bool {
    let leaves = |m: &syn::Macro| {
        m.path.segments.last().is_some_and(|s| {
            matches!(
                s.ident.to_string().as_str(),
                "bail" | "panic" | "unreachable" | "todo" | "unimplemented"
            )
        })
    };
    match e {
        syn::Expr::Return(_) | syn::Expr::Continue(_) | syn::Expr::Break(_) => true,
        syn::Expr::Macro(m) => leaves(&m.mac),
        syn::Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(e, _)) => diverges(e),
            Some(syn::Stmt::Macro(m)) => leaves(&m.mac),
            _ => false,
        },
        _ => false,
    }
}

/// `Err(..)`, `Err(..).into()`, `Err(e.into())`: a value that is an error.
fn is_err_value(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Call(c) => matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("Err")),
        syn::Expr::Paren(p) => is_err_value(&p.expr),
        syn::Expr::MethodCall(m) if m.method == "into" => is_err_value(&m.receiver),
        _ => false,
    }
}

fn is_ok_value(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Call(c) => {
            matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("Ok") || p.path.is_ident("Some"))
        }
        syn::Expr::Paren(p) => is_ok_value(&p.expr),
        _ => false,
    }
}

/// The plain names an expression uses (`a`, `b` in `if a < b { (a, b) } else { (b, a) }`).
fn used_names(e: &syn::Expr) -> Vec<String> {
    struct Names(Vec<String>);
    impl<'a> Visit<'a> for Names {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                let n = id.to_string();
                if !self.0.contains(&n) {
                    self.0.push(n);
                }
            }
        }
    }
    let mut n = Names(Vec::new());
    n.visit_expr(e);
    n.0
}

/// A path expression's name (`a`, `x.id`), for comparing the elements of swapped pairs.
fn quote_path(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Named(n) => Some(format!("{}.{n}", quote_path(&f.base)?)),
            syn::Member::Unnamed(i) => Some(format!("{}.{}", quote_path(&f.base)?, i.index)),
        },
        syn::Expr::Reference(r) => quote_path(&r.expr),
        _ => None,
    }
}

/// Names bound by a pattern.
fn collect_idents(pat: &syn::Pat, out: &mut Vec<String>) {
    struct Idents<'o>(&'o mut Vec<String>);
    impl<'a> Visit<'a> for Idents<'_> {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.to_string());
        }
    }
    Idents(out).visit_pat(pat);
}

/// The expressions whose value `e` takes: `e` itself, or the tail of every arm of an `if` (with
/// its `else`) or `match`, through blocks. False when an arm has no tail value.
fn arm_tails<'e>(e: &'e syn::Expr, out: &mut Vec<&'e syn::Expr>) -> bool {
    match e {
        syn::Expr::If(i) => match &i.else_branch {
            Some((_, other)) => block_tail(&i.then_branch, out) && arm_tails(other, out),
            None => false,
        },
        syn::Expr::Match(m) => !m.arms.is_empty() && m.arms.iter().all(|a| arm_tails(&a.body, out)),
        syn::Expr::Block(b) if b.label.is_none() => block_tail(&b.block, out),
        syn::Expr::Paren(p) => arm_tails(&p.expr, out),
        // An arm that leaves gives the binding no value.
        syn::Expr::Return(_) | syn::Expr::Break(_) | syn::Expr::Continue(_) => true,
        _ => {
            out.push(e);
            true
        }
    }
}

fn block_tail<'e>(b: &'e syn::Block, out: &mut Vec<&'e syn::Expr>) -> bool {
    match b.stmts.last() {
        Some(syn::Stmt::Expr(tail, None)) => arm_tails(tail, out),
        _ => false,
    }
}
