//! diesel's query builder read as SQL. A chain that starts at `<table>::table` (or
//! `diesel::update|delete|insert_into(..)`) is collected as a [`Query`] and, at the call that
//! runs it on a connection (`.first(conn)`, `.load(conn)`, `.execute(conn)`, ...), written out
//! as the statement diesel sends and emitted like a SQL string: same steps, same rules. The
//! statement points at the chain; table and column names in it point at their paths.

use super::*;

/// A builder chain, as far as it has been read.
#[derive(Clone, Debug)]
pub(super) struct Query {
    pub(super) kind: Kind,
    pub(super) table: String,
    /// The table's name in the host (`accounts` of `accounts::table`).
    pub(super) table_at: Span,
    /// `WHERE` conjuncts.
    pub(super) filters: Vec<Cond>,
    /// `SET` items (an `UPDATE`, or `ON CONFLICT .. DO UPDATE`).
    pub(super) sets: Vec<(Column, Part)>,
    /// Columns of an `INSERT` and their values.
    values: Vec<(Column, Part)>,
    /// The select list (`*` when not narrowed).
    pub(super) columns: Vec<Column>,
    order: Vec<Column>,
    pub(super) lock: Option<&'static str>,
    pub(super) wait: Option<&'static str>,
    on_conflict: Option<&'static str>,
    /// The conflict target's columns (`ON CONFLICT (email)`), where the code names them.
    conflict_target: Vec<Column>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Select,
    Update,
    Delete,
    Insert,
}

/// A column as written: its name and where (the last segment of `accounts::balance`).
#[derive(Clone, Debug)]
pub(super) struct Column {
    pub(super) name: String,
    pub(super) at: Span,
}

/// A value in the statement: a host value bound to a parameter, or SQL computed from columns
/// (`accounts::balance + 1`) whose host values are parameters too.
#[derive(Clone, Debug)]
pub(super) enum Part {
    Param(Bind),
    Sql(Vec<Piece>),
}

#[derive(Clone, Debug)]
pub(super) enum Piece {
    Text(String),
    Column(Column),
    Param(Bind),
}

#[derive(Clone, Debug)]
pub(super) struct Cond {
    pub(super) column: Column,
    pub(super) op: &'static str,
    pub(super) value: Option<Part>,
}

impl Cond {
    /// `<key> = <value>`: a row by its primary key (`.find(k)`, `find_by_id(k)`, an active
    /// model's key), written where `at` is.
    pub(super) fn key_is(key: &str, value: Part, at: Span) -> Self {
        Cond {
            column: Column {
                name: key.into(),
                at,
            },
            op: "=",
            value: Some(value),
        }
    }
}

/// A module or column name (`accounts`, `balance`), not a type or a variant (`Status::Done`,
/// a generic `A::Entity`).
pub(super) fn lower_case(i: &syn::Ident) -> bool {
    !i.to_string().starts_with(|c: char| c.is_uppercase())
}

/// The SQL being written, with where each byte of it is in the host.
struct Writer<'b> {
    text: String,
    map: OffsetMap,
    /// Where text with no place of its own points: the chain.
    at: Span,
    binds: &'b mut Vec<Bind>,
    /// The last thing written was a name: the next byte maps to the end of its host span.
    after_name: bool,
}

impl Writer<'_> {
    fn text(&mut self, s: &str) {
        for (i, _) in s.char_indices() {
            if i == 0 && std::mem::take(&mut self.after_name) {
                continue;
            }
            self.map.push(self.text.len() + i, self.at.start());
        }
        self.text.push_str(s);
    }
    fn column(&mut self, c: &Column) {
        // A name from another file (a macro's argument, its body elsewhere) is placed at the
        // chain.
        let at = if c.at.file == self.at.file {
            c.at
        } else {
            self.at
        };
        self.map.push(self.text.len(), at.start());
        self.text.push_str(&c.name);
        // A name whose host text is not the name (`count(*)` for `.count()`) ends there.
        self.after_name = at.end() - at.start() == c.name.len();
    }
    fn param(&mut self, b: &Bind) {
        self.binds.push(b.clone());
        let p = format!("${}", self.binds.len());
        self.text(&p);
    }
    fn part(&mut self, p: &Part) {
        match p {
            Part::Param(b) => self.param(b),
            Part::Sql(pieces) => {
                for piece in pieces {
                    match piece {
                        Piece::Text(t) => self.text(t),
                        Piece::Column(c) => self.column(c),
                        Piece::Param(b) => self.param(b),
                    }
                }
            }
        }
    }
}

impl Query {
    pub(super) fn new(kind: Kind, table: String, table_at: Span) -> Self {
        Query {
            kind,
            table,
            table_at,
            filters: Vec::new(),
            sets: Vec::new(),
            values: Vec::new(),
            columns: Vec::new(),
            order: Vec::new(),
            lock: None,
            wait: None,
            on_conflict: None,
            conflict_target: Vec::new(),
        }
    }

    /// An `INSERT` of these columns (an `UPDATE`'s `SET` items become its values).
    pub(super) fn into_insert(mut self) -> Self {
        self.kind = Kind::Insert;
        self.values = std::mem::take(&mut self.sets);
        self.values.extend(
            self.filters
                .drain(..)
                .filter_map(|c| c.value.map(|v| (c.column, v))),
        );
        self
    }

    fn write(&self, at: Span) -> (String, OffsetMap, Vec<Bind>) {
        let mut binds = Vec::new();
        let mut w = Writer {
            text: String::new(),
            map: OffsetMap::shifted(at.start()),
            at,
            binds: &mut binds,
            after_name: false,
        };
        // A `#[sql_name]` may be any identifier (`"quote'table"`): quoted unless plain.
        let plain = self
            .table
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
        let table = Column {
            name: if plain {
                self.table.clone()
            } else {
                format!("\"{}\"", self.table.replace('"', "\"\""))
            },
            at: self.table_at,
        };
        match self.kind {
            Kind::Select => {
                w.text("SELECT ");
                if self.columns.is_empty() {
                    w.text("*");
                }
                for (i, c) in self.columns.iter().enumerate() {
                    if i > 0 {
                        w.text(", ");
                    }
                    w.column(c);
                }
                w.text(" FROM ");
                w.column(&table);
            }
            Kind::Update => {
                w.text("UPDATE ");
                w.column(&table);
                w.text(" SET ");
                self.assignments(&mut w, &self.sets);
            }
            Kind::Delete => {
                w.text("DELETE FROM ");
                w.column(&table);
            }
            Kind::Insert => {
                w.text("INSERT INTO ");
                w.column(&table);
                if self.values.is_empty() {
                    // `.values(&new_row)`: columns txlint does not see.
                    w.text(" DEFAULT VALUES");
                }
                w.text(if self.values.is_empty() { "" } else { " (" });
                for (i, (c, _)) in self.values.iter().enumerate() {
                    if i > 0 {
                        w.text(", ");
                    }
                    w.column(c);
                }
                if !self.values.is_empty() {
                    w.text(") VALUES (");
                    for (i, (_, v)) in self.values.iter().enumerate() {
                        if i > 0 {
                            w.text(", ");
                        }
                        w.part(v);
                    }
                    w.text(")");
                }
                if let Some(what) = self.on_conflict {
                    w.text(" ON CONFLICT ");
                    for (i, c) in self.conflict_target.iter().enumerate() {
                        w.text(if i == 0 { "(" } else { ", " });
                        w.column(c);
                    }
                    if !self.conflict_target.is_empty() {
                        w.text(") ");
                    }
                    w.text(what);
                    if what == "DO UPDATE" {
                        w.text(" SET ");
                        self.assignments(&mut w, &self.sets);
                    }
                }
            }
        }
        for (i, c) in self.filters.iter().enumerate() {
            w.text(if i == 0 { " WHERE " } else { " AND " });
            w.column(&c.column);
            w.text(&format!(" {}", c.op));
            if let Some(v) = &c.value {
                w.text(" ");
                let any = c.op == "= ANY";
                if any {
                    w.text("(");
                }
                w.part(v);
                if any {
                    w.text(")");
                }
            }
        }
        for (i, c) in self.order.iter().enumerate() {
            w.text(if i == 0 { " ORDER BY " } else { ", " });
            w.column(c);
        }
        if let Some(lock) = self.lock {
            w.text(&format!(" {lock}"));
            if let Some(wait) = self.wait {
                w.text(&format!(" {wait}"));
            }
        }
        let (text, mut map) = (w.text, w.map);
        // The statement ends where the chain does.
        map.push(text.len(), at.end());
        (text, map, binds)
    }

    fn assignments(&self, w: &mut Writer, sets: &[(Column, Part)]) {
        // `.set(&changeset)`: columns txlint does not see, written as a hole (see
        // [`crate::model::is_hole`]) so the statement still reads as an `UPDATE` of these rows.
        if sets.is_empty() {
            w.text("___ = ___");
        }
        for (i, (c, v)) in sets.iter().enumerate() {
            if i > 0 {
                w.text(", ");
            }
            w.column(c);
            w.text(" = ");
            w.part(v);
        }
    }
}

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
    /// `accounts::table`: the start of a chain.
    pub(super) fn diesel_table(&mut self, path: &syn::Path) -> Option<Value> {
        let n = path.segments.len();
        if n < 2 || path.segments[n - 1].ident != "table" {
            return None;
        }
        let t = &path.segments[n - 2].ident;
        Some(Value::Diesel(Box::new(Query::new(
            Kind::Select,
            self.diesel_sql_name(&t.to_string()),
            self.span(t),
        ))))
    }

    /// `diesel::update(q)`, `delete(q)`, `insert_into(q)`.
    pub(super) fn diesel_statement(&mut self, name: &str, args: &[Value]) -> Option<Value> {
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
    pub(super) fn diesel_method(
        &mut self,
        mut q: Box<Query>,
        m: &syn::ExprMethodCall,
        args: &[Value],
    ) -> Value {
        let name = m.method.to_string();
        let arg = m.args.first();
        match name.as_str() {
            "filter" | "and_filter" => {
                if let Some(e) = arg {
                    self.conditions(e, &mut q.filters);
                }
            }
            "find" => {
                if let Some(e) = arg {
                    // `.find(k)` is by the primary key `table!` declares (`id` by default).
                    let value = Part::Param(self.bound(e));
                    let key = self.ix.primary_key(&q.table).to_string();
                    q.filters
                        .push(Cond::key_is(&key, value, self.span(&m.method)));
                }
            }
            "select" => {
                if let Some(e) = arg {
                    q.columns = self.columns(e);
                }
            }
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
            // sea-orm.
            "lock_exclusive" => q.lock = Some("FOR UPDATE"),
            "lock_shared" => q.lock = Some("FOR SHARE"),
            "lock" | "lock_with_behavior" => {
                let said = |e: Option<&syn::Expr>| e.map(|e| self.source_of(e)).unwrap_or_default();
                let (kind, behavior) = (said(arg), said(m.args.iter().nth(1)));
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
            "col_expr" => {
                if let (Some(c), Some(v)) = (arg.and_then(|e| self.column(e)), m.args.iter().nth(1))
                {
                    let v = self.seaorm_value(v);
                    q.sets.push((c, v));
                }
            }
            "one"
            | "all"
            | "exec"
            | "exec_with_returning"
            | "exec_without_returning"
            | "stream" => {
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
            "order" | "order_by" | "then_order_by" => {
                if let Some(e) = arg {
                    q.order.extend(self.columns(e));
                }
            }
            "set" => {
                if let Some(e) = arg {
                    q.sets = self.assignments(e);
                }
            }
            "values" => {
                if let Some(e) = arg {
                    q.values = self.assignments(e);
                    if q.values.is_empty() {
                        q.values = self.insertable_values(&q.table, e);
                    }
                }
            }
            "for_update" => q.lock = Some("FOR UPDATE"),
            "for_no_key_update" => q.lock = Some("FOR NO KEY UPDATE"),
            "for_share" => q.lock = Some("FOR SHARE"),
            "for_key_share" => q.lock = Some("FOR KEY SHARE"),
            "skip_locked" => q.wait = Some("SKIP LOCKED"),
            "no_wait" => q.wait = Some("NOWAIT"),
            "on_conflict" | "on_conflict_do_nothing" => {
                q.on_conflict = Some("DO NOTHING");
                if let Some(e) = arg {
                    // diesel names the target (`users::email`, a tuple); sea-orm's
                    // `OnConflict::column(..)..` also says what a conflict updates.
                    q.conflict_target = self.columns(e);
                    let (target, sets) = self.seaorm_on_conflict(e);
                    q.conflict_target.extend(target);
                    if !sets.is_empty() {
                        q.on_conflict = Some("DO UPDATE");
                        q.sets = sets;
                    }
                }
            }
            "do_nothing" => q.on_conflict = Some("DO NOTHING"),
            "do_update" => q.on_conflict = Some("DO UPDATE"),
            "first" | "get_result" | "get_results" | "load" | "execute" | "get_result_async"
            | "load_async" | "execute_async" | "first_async" => {
                return self.run_query(&q, m, args);
            }
            // Builders that change nothing txlint reads: `limit`, `offset`, `into_boxed`,
            // `distinct`, joins (their other table is not read here).
            _ => {}
        }
        Value::Diesel(q)
    }

    /// Run `q` on the connection the call `m` is given: the statement, written out and emitted.
    pub(super) fn run_query(
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
            ..Sql::new(at.file, text, map)
        };
        let site = self.method_site(m);
        self.emit(&sql, handle, via, site)
    }

    /// `a.eq(x)`, `a.eq(x).and(b.gt(y))`: `WHERE` conjuncts. Anything else is left out (it
    /// only narrows the rows).
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
        let Some(column) = self.column_or_bare(&m.receiver) else {
            return;
        };
        if let Some(&(_, op)) = COMPARISONS.iter().find(|(n, _)| *n == name) {
            let value = m.args.first().map(|v| self.part(v));
            out.push(Cond { column, op, value });
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
    pub(super) fn part(&mut self, e: &syn::Expr) -> Part {
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

/// A `#[derive(Insertable)]` struct: the table it inserts into and, per field, its column.
#[derive(Clone, Debug)]
pub(super) struct Insertable {
    table: String,
    /// (field, column): the same name unless `#[diesel(column_name = ..)]` says otherwise.
    columns: Vec<(String, String)>,
}

/// `#[derive(Insertable)] #[diesel(table_name = tasks)] struct NewTask { .. }` (also diesel
/// 1's `#[table_name = "tasks"]`, and either inside `#[cfg_attr(feature = "..", ..)]`).
/// Without a table name diesel would guess one from the struct's name; txlint does not guess.
pub(super) fn insertable(s: &syn::ItemStruct) -> Option<Insertable> {
    let attrs = metas(&s.attrs);
    let derived = attrs.iter().any(|m| {
        let mut found = false;
        if let syn::Meta::List(l) = m
            && l.path.is_ident("derive")
        {
            let _ = l.parse_nested_meta(|m| {
                found |= m
                    .path
                    .segments
                    .last()
                    .is_some_and(|l| l.ident == "Insertable");
                Ok(())
            });
        }
        found
    });
    if !derived {
        return None;
    }
    let table = diesel_name(&attrs, "table_name")?;
    let mut columns = Vec::new();
    for f in &s.fields {
        let field = f.ident.as_ref()?;
        let field_attrs = metas(&f.attrs);
        if flag(&field_attrs, "diesel", "skip_insertion") || flag(&field_attrs, "diesel", "embed") {
            continue;
        }
        let column = diesel_name(&field_attrs, "column_name").unwrap_or_else(|| field.to_string());
        columns.push((field.to_string(), column));
    }
    Some(Insertable { table, columns })
}

/// Each attribute's content but doc comments; a `cfg_attr(<predicate>, a, b)` gives `a` and
/// `b` (txlint reads code under every feature).
pub(super) fn metas(attrs: &[syn::Attribute]) -> Vec<syn::Meta> {
    let mut out = Vec::new();
    for a in attrs.iter().filter(|a| !a.path().is_ident("doc")) {
        match &a.meta {
            syn::Meta::List(l) if l.path.is_ident("cfg_attr") => {
                let parser =
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated;
                if let Ok(inner) = l.parse_args_with(parser) {
                    out.extend(inner.into_iter().skip(1));
                }
            }
            m => out.push(m.clone()),
        }
    }
    out
}

/// The value of `diesel(<key> = path)` (its last segment) or `<key> = "name"`.
fn diesel_name(metas: &[syn::Meta], key: &str) -> Option<String> {
    let mut name = None;
    for m in metas {
        if let syn::Meta::NameValue(nv) = m
            && nv.path.is_ident(key)
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            name = Some(s.value());
        }
    }
    name.or_else(|| nested_value(metas, "diesel", key))
}

/// The value of `<attr>(.., <key> = "name" | path, ..)`: the string, or the path's last
/// segment; the last such item wins.
pub(super) fn nested_value(metas: &[syn::Meta], attr: &str, key: &str) -> Option<String> {
    let mut name = None;
    for m in metas {
        let syn::Meta::List(l) = m else {
            continue;
        };
        if !l.path.is_ident(attr) {
            continue;
        }
        let _ = l.parse_nested_meta(|m| {
            if !m.path.is_ident(key) {
                return skip_meta(&m);
            }
            let value = m.value()?;
            name = Some(if value.peek(syn::LitStr) {
                value.parse::<syn::LitStr>()?.value()
            } else {
                let p: syn::Path = value.parse()?;
                p.segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default()
            });
            Ok(())
        });
    }
    name.filter(|n| !n.is_empty())
}

/// `<attr>(<flag>)` on a field (`diesel(skip_insertion)`, `sea_orm(primary_key)`).
pub(super) fn flag(metas: &[syn::Meta], attr: &str, flag: &str) -> bool {
    let mut found = false;
    for m in metas {
        if let syn::Meta::List(l) = m
            && l.path.is_ident(attr)
        {
            let _ = l.parse_nested_meta(|m| {
                found |= m.path.is_ident(flag);
                skip_meta(&m)
            });
        }
    }
    found
}

/// Step over the value of a nested item txlint does not read (`= expr`, `(..)`).
fn skip_meta(m: &syn::meta::ParseNestedMeta) -> syn::Result<()> {
    if m.input.peek(syn::Token![=]) {
        let _: syn::Expr = m.value()?.parse()?;
    } else if m.input.peek(syn::token::Paren) {
        m.parse_nested_meta(|_| Ok(()))?;
    }
    Ok(())
}

impl Walker<'_, '_> {
    /// The SQL name of the table diesel code calls `rust` (`table!`'s `#[sql_name = ".."]`).
    fn diesel_sql_name(&self, rust: &str) -> String {
        self.ix
            .tables
            .get(rust)
            .map_or_else(|| rust.to_string(), |d| d.table.clone())
    }

    /// `.values(&row)` with a `#[derive(Insertable)]` row: its columns. A struct literal gives
    /// each field's value; a variable `row` gives `row.<field>` (the run's one insertable
    /// struct for the table; with several, none: txlint cannot tell which).
    fn insertable_values(&mut self, table: &str, e: &syn::Expr) -> Vec<(Column, Part)> {
        let mut e = e;
        while let syn::Expr::Reference(r) = e {
            e = &r.expr;
        }
        if let syn::Expr::Struct(s) = e {
            let Some(row) = s
                .path
                .segments
                .last()
                .and_then(|l| self.ix.insertables.get(&l.ident.to_string()))
                .filter(|r| self.diesel_sql_name(&r.table) == table)
                .cloned()
            else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for f in &s.fields {
                let syn::Member::Named(name) = &f.member else {
                    continue;
                };
                if let Some((_, column)) = row.columns.iter().find(|(field, _)| name == field) {
                    let value = self.part(&f.expr);
                    out.push((
                        Column {
                            name: column.clone(),
                            at: self.span(name),
                        },
                        value,
                    ));
                }
            }
            return out;
        }
        let syn::Expr::Path(p) = e else {
            return Vec::new();
        };
        let Some(var) = p.path.get_ident() else {
            return Vec::new();
        };
        let mut rows = self
            .ix
            .insertables
            .values()
            .filter(|r| self.diesel_sql_name(&r.table) == table);
        let (Some(row), None) = (rows.next(), rows.next()) else {
            return Vec::new();
        };
        let row = row.clone();
        let from = self.flow(e);
        let at = self.span(var);
        row.columns
            .iter()
            .map(|(field, column)| {
                let bind = Bind {
                    from: from.clone(),
                    text: self.resolved(format!("{var}.{field}")),
                    ordered: false,
                    sources: Vec::new(),
                };
                (
                    Column {
                        name: column.clone(),
                        at,
                    },
                    Part::Param(bind),
                )
            })
            .collect()
    }
}

/// `joinable!(posts -> users (author_id))`: the child table, the parent table (Rust names) and
/// the child's column that refers to the parent's primary key. Nothing for another shape.
pub(super) fn joinable_macro(tokens: proc_macro2::TokenStream) -> Option<[String; 3]> {
    use proc_macro2::{Delimiter, TokenTree};
    let t: Vec<TokenTree> = tokens.into_iter().collect();
    match t.as_slice() {
        [
            TokenTree::Ident(child),
            TokenTree::Punct(dash),
            TokenTree::Punct(gt),
            TokenTree::Ident(parent),
            TokenTree::Group(g),
        ] if dash.as_char() == '-'
            && gt.as_char() == '>'
            && g.delimiter() == Delimiter::Parenthesis =>
        {
            let column = match g.stream().into_iter().collect::<Vec<_>>().as_slice() {
                [TokenTree::Ident(c)] => c.to_string(),
                _ => return None,
            };
            Some([child.to_string(), parent.to_string(), column])
        }
        _ => None,
    }
}

/// `diesel::table! { users (id) { id -> Int8, name -> Text, } }`: each table's Rust name and,
/// as a table the run declares, its SQL name, primary key (`id` when the macro names none) and
/// columns. A `#[sql_name = ".."]` names the table (or a column) in SQL; `schema.users` keeps
/// `users`.
/// Nothing when the tokens are not that shape.
pub(super) fn table_macro(tokens: proc_macro2::TokenStream) -> Vec<(String, TableDdl)> {
    use proc_macro2::{Delimiter, TokenTree};
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut sql_name: Option<String> = None;
    let mut name: Option<String> = None;
    let mut key: Option<Vec<String>> = None;
    while i < tokens.len() {
        match &tokens[i] {
            // `#[sql_name = "x"]` and other attributes of the table.
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = tokens.get(i + 1) {
                    sql_name = attr_sql_name(g.stream()).or(sql_name);
                }
                i += 2;
            }
            TokenTree::Ident(id) => {
                name = Some(id.to_string());
                i += 1;
            }
            TokenTree::Punct(p) if p.as_char() == '.' => i += 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => {
                key = Some(
                    g.stream()
                        .into_iter()
                        .filter_map(|t| match t {
                            TokenTree::Ident(id) => Some(id.to_string()),
                            _ => None,
                        })
                        .collect(),
                );
                i += 1;
            }
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let Some(table) = name.take() else {
                    return Vec::new();
                };
                out.push((
                    table.clone(),
                    TableDdl {
                        table: sql_name.take().unwrap_or(table),
                        schema: None,
                        creates: false,
                        alters: false,
                        columns: table_columns(g.stream()),
                        primary_key: Some(key.take().unwrap_or_else(|| vec!["id".into()])),
                        unique: Vec::new(),
                        partial: Vec::new(),
                        predicated: Vec::new(),
                        foreign_keys: Vec::new(),
                        dropped: Vec::new(),
                    },
                ));
                i += 1;
            }
            _ => return Vec::new(),
        }
    }
    out
}

/// `col -> Type,` items of a `table!` body (a column's `#[sql_name]` gives its SQL name).
fn table_columns(body: proc_macro2::TokenStream) -> Vec<String> {
    use proc_macro2::TokenTree;
    let mut columns = Vec::new();
    let mut sql_name = None;
    let mut expect_name = true;
    let mut tokens = body.into_iter();
    while let Some(t) = tokens.next() {
        match t {
            TokenTree::Punct(p) if p.as_char() == '#' && expect_name => {
                if let Some(TokenTree::Group(g)) = tokens.next() {
                    sql_name = attr_sql_name(g.stream()).or(sql_name);
                }
            }
            TokenTree::Ident(id) if expect_name => {
                columns.push(sql_name.take().unwrap_or_else(|| id.to_string()));
                expect_name = false;
            }
            TokenTree::Punct(p) if p.as_char() == ',' => expect_name = true,
            _ => {}
        }
    }
    columns
}

/// `sql_name = "x"` inside an attribute's brackets.
fn attr_sql_name(attr: proc_macro2::TokenStream) -> Option<String> {
    let meta: syn::Meta = syn::parse2(attr).ok()?;
    let syn::Meta::NameValue(nv) = meta else {
        return None;
    };
    let syn::Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(s),
        ..
    }) = nv.value
    else {
        return None;
    };
    nv.path.is_ident("sql_name").then(|| s.value())
}
