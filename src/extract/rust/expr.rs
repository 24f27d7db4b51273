//! Walking expressions: what an expression evaluates to (SQL text, a handle, data), with the
//! calls, literals, paths and fields it is made of.

use super::emit::data_of;
use super::syntax::*;
use super::*;

impl<'a, 'w> Walker<'a, 'w> {
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
            E::Try(t) => self.try_expr(t),
            E::Return(r) => self.return_expr(r),
            E::Binary(b) => {
                let (l, r) = (self.expr(&b.left), self.expr(&b.right));
                if compound(&b.op) {
                    // `row.n += d`: the field's old value and `d`.
                    let mut flow = self.flow(&b.left);
                    flow.extend(self.flow(&b.right));
                    self.note_assigned(&b.left, flow);
                }
                match (l, r, &b.op) {
                    (Value::Sql(a), Value::Sql(b), syn::BinOp::Add(_)) => Value::Sql(a.concat(b)),
                    _ => Value::None,
                }
            }
            E::If(i) => self.if_expr(i),
            E::Match(m) => self.match_expr(m),
            E::ForLoop(f) => self.for_loop(f),
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
                let exits = self.exits.len();
                let v = self.block_value(block);
                self.end_frame(exits);
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
                let flow = match &v {
                    Value::Data(flow) => flow.clone(),
                    _ => Flow::new(),
                };
                self.note_assigned(&a.left, flow);
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
            E::Struct(s) => self.struct_expr(s),
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

    /// A `?`: the value, and an exit taken when what it tries failed.
    fn try_expr(&mut self, t: &syn::ExprTry) -> Value {
        use syn::Expr as E;
        let before = self.seq;
        self.async_tried = matches!(&*t.expr, E::Await(a) if matches!(&*a.base, E::Async(_)));
        let site = self.tried_site(&t.expr);
        let v = self.passing_on(site, |w| w.expr(&t.expr));
        let owner = self.last_step.filter(|&s| s > before);
        // `row.ok_or(NotFound)?` leaves on the value; any other `?` when a call failed.
        let kind = match &*t.expr {
            E::MethodCall(m) if m.method == "ok_or" || m.method == "ok_or_else" => ExitKind::Return,
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

    /// A `return`: its value joins the function's, and the walk leaves.
    fn return_expr(&mut self, r: &syn::ExprReturn) -> Value {
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

    /// An `if`: each arm walked as an alternative; the value both arms give.
    fn if_expr(&mut self, i: &syn::ExprIf) -> Value {
        use syn::Expr as E;
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
        let frame = self.frame();
        self.truths.pending = Some(self.truths.holds(&frame, &i.cond, true));
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
        self.truths.pending = Some(self.truths.holds(&frame, &i.cond, false));
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

    /// A `match`: each arm walked as an alternative; the text or rows the arms give.
    fn match_expr(&mut self, m: &syn::ExprMatch) -> Value {
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
                // An arm that leaves, or gives no row (`Err(NotFound) => Ok(None)`), takes
                // nothing from the rows of the others.
                (rows, _) if diverges(&arm.body) || gives_no_row(&arm.body) => rows,
                _ => None,
            };
        }
        if let Some(Some(sql)) = texts {
            return Value::Sql(sql);
        }
        rows.filter(|r| !r.is_empty())
            .map_or(Value::None, Value::Data)
    }

    /// A `for` loop: its body walked once as a branch, knowing the order it visits keys in.
    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Value {
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
        let hashed = self.hash_ordered(&f.expr);
        self.hash_loops += usize::from(hashed);
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
        self.hash_loops -= usize::from(hashed);
        Value::None
    }

    /// A struct literal: data if a field is; the struct when it holds a handle.
    fn struct_expr(&mut self, s: &syn::ExprStruct) -> Value {
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
                // A struct that holds a handle, kept in this one (`State { db: rw }`).
                holds |= matches!(v, Value::Object(_));
                self.or_data(v, &f.expr)
            })
            .collect();
        // A struct of the run that holds the handle: its methods reach it through `self`.
        match owner {
            Some(o) if holds && self.ix.handle_structs.contains_key(&*o) => Value::Object(o),
            _ => record(s, fields),
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

/// The value of a struct literal whose fields are `fields`: data if one is, with what each
/// named field carries when the literal names them all (no `..rest`).
fn record(s: &syn::ExprStruct, fields: Vec<Value>) -> Value {
    let named: Option<dataflow::Record> = match s.rest {
        Some(_) => None,
        None => s
            .fields
            .iter()
            .zip(&fields)
            .map(|(f, v)| match (&f.member, v) {
                (syn::Member::Named(n), Value::Data(flow)) => {
                    Some((n.to_string().into(), flow.clone()))
                }
                (syn::Member::Named(n), _) => Some((n.to_string().into(), Flow::new())),
                _ => None,
            })
            .collect(),
    };
    match named {
        Some(record) if record.values().any(|f| !f.is_empty()) => Value::Data(Flow::record(record)),
        _ => data_of(&fields),
    }
}

/// `+=`, `-=` and the other operators that assign.
fn compound(op: &syn::BinOp) -> bool {
    use syn::BinOp as B;
    matches!(
        op,
        B::AddAssign(_)
            | B::SubAssign(_)
            | B::MulAssign(_)
            | B::DivAssign(_)
            | B::RemAssign(_)
            | B::BitXorAssign(_)
            | B::BitAndAssign(_)
            | B::BitOrAssign(_)
            | B::ShlAssign(_)
            | B::ShrAssign(_)
    )
}
