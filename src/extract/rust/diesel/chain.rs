//! Reading a chain: the builder steps that make a [`Query`] and the call that runs it.

use super::*;

/// Comparison methods of diesel's expression DSL and the SQL they write.
const COMPARISONS: &[(&str, &str)] = &[
    ("eq", "="),
    ("ne", "<>"),
    ("gt", ">"),
    ("ge", ">="),
    ("lt", "<"),
    ("le", "<="),
    ("eq_any", "= ANY"),
    ("like", "LIKE"),
];

impl Walker<'_, '_> {
    /// `accounts::table` (or `accounts::dsl::accounts`): the start of a chain; also the table
    /// named through an imported `dsl` module (`accounts` after `use
    /// schema::accounts::dsl::*`, `a::accounts` after `use schema::accounts::dsl as a`).
    pub(in crate::extract::rust) fn diesel_table(&mut self, path: &syn::Path) -> Option<Value> {
        let n = path.segments.len();
        if n == 0 {
            return None;
        }
        let seg = |i: usize| &path.segments[i].ident;
        // The table, and where its name is written (`accounts` of `accounts::table`).
        let (table, at) = if n >= 2 && seg(n - 1) == "table" {
            (seg(n - 2).to_string(), seg(n - 2))
        } else if n >= 3 && seg(n - 2) == "dsl" && seg(n - 3) == seg(n - 1) {
            (seg(n - 1).to_string(), seg(n - 1))
        } else {
            (self.ix.names.dsl_table(path, self.file)?, seg(n - 1))
        };
        Some(Value::Diesel(Box::new(Query::new(
            Kind::Select,
            self.diesel_sql_name(&table),
            self.span(at),
        ))))
    }

    /// `diesel::update(q)`, `delete(q)`, `insert_into(q)`.
    pub(in crate::extract::rust) fn diesel_statement(
        &mut self,
        name: &str,
        args: &[Value],
    ) -> Option<Value> {
        let kind = match name {
            "update" => Kind::Update,
            "delete" => Kind::Delete,
            "insert_into" => Kind::Insert,
            _ => return None,
        };
        let Some(Value::Diesel(q)) = args.first() else {
            return None;
        };
        let mut q = q.clone();
        q.kind = kind;
        Some(Value::Diesel(q))
    }

    /// A method of a chain: a builder step, or the call that runs it on a connection.
    pub(in crate::extract::rust) fn diesel_method(
        &mut self,
        mut q: Box<Query>,
        m: &syn::ExprMethodCall,
        args: &[Value],
    ) -> Value {
        let name = m.method.to_string();
        let arg = m.args.first();
        match name.as_str() {
            "count" => {
                q.columns = vec![Column {
                    name: "count(*)".into(),
                    at: self.span(&m.method),
                }];
                // sea-orm's `count(db)` runs the query.
                if arg.is_some() {
                    return self.run_query(&q, m, args);
                }
            }
            "one"
            | "all"
            | "exec"
            | "exec_with_returning"
            | "exec_without_returning"
            | "stream"
            | "first"
            | "get_result"
            | "get_results"
            | "load"
            | "execute"
            | "get_result_async"
            | "load_async"
            | "execute_async"
            | "first_async" => {
                return self.run_query(&q, m, args);
            }
            // An active model written back.
            "update" | "insert" | "save" | "delete" if arg.is_some() => {
                let q = match name.as_str() {
                    "insert" => q.into_insert(),
                    "save" if q.filters.is_empty() => q.into_insert(),
                    "delete" => {
                        q.kind = Kind::Delete;
                        *q
                    }
                    _ => *q,
                };
                return self.run_query(&q, m, args);
            }
            _ if self.locking(&mut q, &name, m) => {}
            _ => self.builder_step(&mut q, &name, m),
        }
        Value::Diesel(q)
    }

    /// A row lock or its wait policy (diesel's `for_update()`, sea-orm's `lock(..)`).
    fn locking(&self, q: &mut Query, name: &str, m: &syn::ExprMethodCall) -> bool {
        match name {
            "lock_exclusive" | "for_update" => q.lock = Some("FOR UPDATE"),
            "lock_shared" | "for_share" => q.lock = Some("FOR SHARE"),
            "for_no_key_update" => q.lock = Some("FOR NO KEY UPDATE"),
            "for_key_share" => q.lock = Some("FOR KEY SHARE"),
            "skip_locked" => q.wait = Some("SKIP LOCKED"),
            "no_wait" => q.wait = Some("NOWAIT"),
            "lock" | "lock_with_behavior" => {
                let said = |e: Option<&syn::Expr>| e.map(|e| self.source_of(e)).unwrap_or_default();
                let (kind, behavior) = (said(m.args.first()), said(m.args.iter().nth(1)));
                q.lock = Some(match kind.rsplit("::").next() {
                    Some("Share") => "FOR SHARE",
                    Some("NoKeyUpdate") => "FOR NO KEY UPDATE",
                    Some("KeyShare") => "FOR KEY SHARE",
                    _ => "FOR UPDATE",
                });
                q.wait = match behavior.rsplit("::").next() {
                    Some("SkipLocked") => Some("SKIP LOCKED"),
                    Some("Nowait") => Some("NOWAIT"),
                    _ => None,
                };
            }
            _ => return false,
        }
        true
    }

    /// A builder step that does not run the query: filters, columns, values, conflicts. Those
    /// that change nothing txlint reads (`limit`, `offset`, `into_boxed`, `distinct`, joins,
    /// whose other table is not read here) are passed over.
    fn builder_step(&mut self, q: &mut Query, name: &str, m: &syn::ExprMethodCall) {
        let Some(e) = m.args.first() else {
            match name {
                "on_conflict" | "on_conflict_do_nothing" | "do_nothing" => {
                    q.on_conflict = Some("DO NOTHING")
                }
                "do_update" => q.on_conflict = Some("DO UPDATE"),
                _ => {}
            }
            return;
        };
        match name {
            "filter" | "and_filter" => self.conditions(e, &mut q.filters),
            "find" => {
                // `.find(k)` is by the primary key `table!` declares (`id` by default).
                let value = Part::Param(self.bound(e));
                let key = self.ix.primary_key(&q.table).to_string();
                q.filters
                    .push(Cond::key_is(&key, value, self.span(&m.method)));
            }
            "select" => q.columns = self.columns(e),
            "col_expr" => {
                if let (Some(c), Some(v)) = (self.column(e), m.args.iter().nth(1)) {
                    let v = self.seaorm_value(v);
                    q.sets.push((c, v));
                }
            }
            "order" | "order_by" | "then_order_by" => q.order.extend(self.columns(e)),
            "set" => {
                q.sets = self.assignments(e);
                if q.sets.is_empty() {
                    q.sets = self.insertable_values(&q.table, e, Derive::AsChangeset);
                }
            }
            "values" => {
                q.values = self.assignments(e);
                if q.values.is_empty() {
                    q.values = self.insertable_values(&q.table, e, Derive::Insertable);
                }
                // Rows in a hash's order: inserted, and locked on conflict, in an order of
                // their own in each process.
                if self.hash_ordered(e) {
                    q.rows = Some((self.sorted_collection(e), self.span(e)));
                }
            }
            "on_conflict" | "on_conflict_do_nothing" => {
                q.on_conflict = Some("DO NOTHING");
                // diesel names the target (`users::email`, a tuple); sea-orm's
                // `OnConflict::column(..)..` also says what a conflict updates.
                q.conflict_target = self.conflict_columns(e);
                let (target, sets) = self.seaorm_on_conflict(e);
                q.conflict_target.extend(target);
                if !sets.is_empty() {
                    q.on_conflict = Some("DO UPDATE");
                    q.sets = sets;
                }
            }
            "do_nothing" => q.on_conflict = Some("DO NOTHING"),
            "do_update" => q.on_conflict = Some("DO UPDATE"),
            _ => {}
        }
    }

    /// Run `q` on the connection the call `m` is given: the statement, written out and emitted.
    pub(in crate::extract::rust) fn run_query(
        &mut self,
        q: &Query,
        m: &syn::ExprMethodCall,
        args: &[Value],
    ) -> Value {
        let (handle, via) = match (args.first(), m.args.first()) {
            (Some(v), Some(e)) => (self.handle(v, e), self.source_of(e)),
            _ => (Walker::unknown_handle(), String::new()),
        };
        let at = self.span(m);
        let (text, map, binds) = q.write(at);
        self.front.out.generated.push((at, text.clone()));
        let sql = Sql {
            prepared: true,
            binds,
            rows: q.rows,
            // A chain written once can build other statements in other calls of its function
            // (a changeset writes the fields each caller assigned).
            chosen: true,
            ..Sql::new(at.file, text, map)
        };
        let site = self.method_site(m);
        let rows = self.emit(&sql, handle, via, site);
        self.note_required(&m.method.to_string(), &rows);
        rows
    }

    /// `a.eq(x)`, `a.eq(x).and(b.gt(y))`, `a.is_null().or(a.le(t))`: `WHERE` conjuncts. Anything
    /// else is left out (it only narrows the rows), and so is a disjunction with a part left
    /// out (it narrows them less than written).
    fn conditions(&mut self, e: &syn::Expr, out: &mut Vec<Cond>) {
        let syn::Expr::MethodCall(m) = e else {
            return;
        };
        let name = m.method.to_string();
        if name == "and"
            && let Some(other) = m.args.first()
        {
            self.conditions(&m.receiver, out);
            self.conditions(other, out);
            return;
        }
        if name == "or"
            && let Some(other) = m.args.first()
        {
            let (mut first, mut second) = (Vec::new(), Vec::new());
            self.conditions(&m.receiver, &mut first);
            self.conditions(other, &mut second);
            if let ([_], [_]) = (&first[..], &second[..])
                && let (Some(mut c), Some(mut d)) = (first.pop(), second.pop())
            {
                let mut rest = std::mem::take(&mut d.or);
                c.or.push(d);
                c.or.append(&mut rest);
                out.push(c);
            }
            return;
        }
        let Some(column) = self.column_or_bare(&m.receiver) else {
            return;
        };
        if let Some(&(_, op)) = COMPARISONS.iter().find(|(n, _)| *n == name) {
            let value = m.args.first().map(|v| self.part(v));
            out.push(Cond {
                column,
                op,
                value,
                or: Vec::new(),
            });
        } else if name == "is_null" || name == "is_not_null" {
            let op = if name == "is_null" {
                "IS NULL"
            } else {
                "IS NOT NULL"
            };
            out.push(Cond {
                column,
                op,
                value: None,
                or: Vec::new(),
            });
        }
    }

    /// `a.eq(x)` or a tuple of them: `SET`/`VALUES` items.
    fn assignments(&mut self, e: &syn::Expr) -> Vec<(Column, Part)> {
        match e {
            syn::Expr::Tuple(t) => t.elems.iter().flat_map(|x| self.assignments(x)).collect(),
            syn::Expr::Reference(r) => self.assignments(&r.expr),
            syn::Expr::Paren(p) => self.assignments(&p.expr),
            syn::Expr::MethodCall(m) if m.method == "eq" => {
                match (self.column_or_bare(&m.receiver), m.args.first()) {
                    (Some(c), Some(v)) => vec![(c, self.part(v))],
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// A column or a tuple of columns (`select((a::x, a::y))`, `order(a::x.desc())`).
    fn columns(&mut self, e: &syn::Expr) -> Vec<Column> {
        match e {
            syn::Expr::Tuple(t) => t.elems.iter().flat_map(|x| self.columns(x)).collect(),
            syn::Expr::Paren(p) => self.columns(&p.expr),
            syn::Expr::MethodCall(m) if matches!(m.method.to_string().as_str(), "desc" | "asc") => {
                self.columns(&m.receiver)
            }
            // `.select(1.into_sql::<Integer>())`: a constant, one per row (`SELECT 1`).
            syn::Expr::MethodCall(m) if m.method == "into_sql" => match &*m.receiver {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) => vec![Column {
                    name: i.base10_digits().to_string(),
                    at: self.span(e),
                }],
                _ => Vec::new(),
            },
            // `dsl::max(t::n)`, `count(t::id)`: an aggregate of a column.
            syn::Expr::Call(c) => match (&*c.func, c.args.first()) {
                (syn::Expr::Path(f), Some(arg)) => {
                    let f = f.path.segments.last().map(|s| s.ident.to_string());
                    match (f.as_deref(), self.column(arg)) {
                        (Some(f @ ("max" | "min" | "sum" | "avg" | "count")), Some(col)) => {
                            vec![Column {
                                name: format!("{f}({})", col.name),
                                at: self.span(c),
                            }]
                        }
                        _ => Vec::new(),
                    }
                }
                _ => Vec::new(),
            },
            e => self.column(e).into_iter().collect(),
        }
    }

    /// The conflict target: columns, also imported bare (`use schema::t::dsl::*;
    /// .on_conflict((version_id, date))`), where nothing but a column can be.
    fn conflict_columns(&mut self, e: &syn::Expr) -> Vec<Column> {
        match e {
            syn::Expr::Tuple(t) => t
                .elems
                .iter()
                .flat_map(|x| self.conflict_columns(x))
                .collect(),
            syn::Expr::Paren(p) => self.conflict_columns(&p.expr),
            e => self.column_or_bare(e).into_iter().collect(),
        }
    }

    /// `accounts::balance`: a path whose last two segments are lower case (a table module and
    /// its column; `Status::Done` is not one), the last not `table`.
    fn column(&mut self, e: &syn::Expr) -> Option<Column> {
        if let Some(c) = self.seaorm_column(e) {
            return Some(c);
        }
        let syn::Expr::Path(p) = e else {
            return None;
        };
        let n = p.path.segments.len();
        let last = &p.path.segments.last()?.ident;
        if n < 2
            || last == "table"
            || !lower_case(last)
            || !lower_case(&p.path.segments[n - 2].ident)
        {
            return None;
        }
        Some(Column {
            name: last.to_string(),
            at: self.span(last),
        })
    }

    /// A column where only a column can be (what `.eq(..)` is called on): also one imported
    /// bare (`use schema::posts::dsl::*; score.eq(..)`), unless it is a variable here.
    fn column_or_bare(&mut self, e: &syn::Expr) -> Option<Column> {
        if let syn::Expr::Path(p) = e
            && let Some(id) = p.path.get_ident()
            && !self.vars.contains_key(&id.to_string())
            && lower_case(id)
        {
            return Some(Column {
                name: id.to_string(),
                at: self.span(id),
            });
        }
        self.column(e)
    }

    /// A value: SQL over columns (`accounts::balance + 1`) or a host value (a parameter).
    pub(in crate::extract::rust) fn part(&mut self, e: &syn::Expr) -> Part {
        // `Set(None)`, `.eq(None)`: Rust's `None` is sent as SQL `NULL`, which a partial
        // unique index (`WHERE stopped_at IS NULL`) and a trigger's `WHEN` can tell.
        if matches!(e, syn::Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "None"))
        {
            return Part::Sql(vec![Piece::Text("NULL".into())]);
        }
        if self.mentions_column(e) {
            let mut pieces = Vec::new();
            self.pieces(e, &mut pieces);
            Part::Sql(pieces)
        } else {
            Part::Param(self.bound(e))
        }
    }

    fn mentions_column(&mut self, e: &syn::Expr) -> bool {
        match e {
            syn::Expr::Path(_) => self.column(e).is_some(),
            syn::Expr::Binary(b) => self.mentions_column(&b.left) || self.mentions_column(&b.right),
            syn::Expr::Paren(p) => self.mentions_column(&p.expr),
            _ => false,
        }
    }

    fn pieces(&mut self, e: &syn::Expr, out: &mut Vec<Piece>) {
        match e {
            syn::Expr::Binary(b) => {
                self.pieces(&b.left, out);
                let op = match b.op {
                    syn::BinOp::Add(_) => " + ",
                    syn::BinOp::Sub(_) => " - ",
                    syn::BinOp::Mul(_) => " * ",
                    syn::BinOp::Div(_) => " / ",
                    _ => " ? ",
                };
                out.push(Piece::Text(op.into()));
                self.pieces(&b.right, out);
            }
            syn::Expr::Paren(p) => {
                out.push(Piece::Text("(".into()));
                self.pieces(&p.expr, out);
                out.push(Piece::Text(")".into()));
            }
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => out.push(Piece::Text(i.base10_digits().into())),
            e => match self.column(e) {
                Some(c) => out.push(Piece::Column(c)),
                None => out.push(Piece::Param(self.bound(e))),
            },
        }
    }
}
