//! sea-orm's query builder and active models read as SQL, on the same [`Query`] as diesel's:
//! `posts::Entity::find()`, `find_by_id(k)`, `update_many()`, `delete_many()`,
//! `delete_by_id(k)` start a chain on the entity's table (its model's
//! `#[sea_orm(table_name = "..")]`, else the module's name, as sea-orm's generator names them); `posts::ActiveModel { .. }` and a variable declared
//! `let am: posts::ActiveModel = model.into()` are rows to `update`, `insert`, `save` or
//! `delete`, their `Set(..)` fields the columns written.

use super::diesel::{Column, Cond, Kind, Part, Piece, Query, lower_case};
use super::*;

/// `CreatedAt` -> `created_at`: sea-orm's column enum variants name snake-case columns.
pub(super) fn snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `#[sea_orm(table_name = "users")]` on an entity's model.
pub(super) fn table_name(attrs: &[syn::Attribute]) -> Option<String> {
    let metas: Vec<syn::Meta> = attrs
        .iter()
        .filter(|a| a.path().is_ident("sea_orm"))
        .map(|a| a.meta.clone())
        .collect();
    diesel::nested_value(&metas, "sea_orm", "table_name")
}

/// An entity's model (`#[sea_orm(table_name = "users")] struct Model`) as its table: its
/// fields' columns, its `primary_key` fields and `unique` ones (sea-orm's generator writes them
/// from the database; the migrations win where they say more); and the fields that
/// `column_name` renames, with their columns.
pub(super) fn entity_table(
    s: &syn::ItemStruct,
    table: String,
) -> (TableDdl, Vec<(String, String)>) {
    let mut ddl = TableDdl {
        table,
        schema: None,
        creates: false,
        alters: false,
        columns: Vec::new(),
        primary_key: None,
        unique: Vec::new(),
        partial: Vec::new(),
        predicated: Vec::new(),
        foreign_keys: Vec::new(),
        dropped: Vec::new(),
    };
    let mut key = Vec::new();
    let mut renamed = Vec::new();
    for f in &s.fields {
        let Some(field) = &f.ident else {
            continue;
        };
        let field = field.to_string().trim_start_matches("r#").to_string();
        let metas = diesel::metas(&f.attrs);
        let column = match diesel::nested_value(&metas, "sea_orm", "column_name") {
            Some(c) => {
                renamed.push((field, c.clone()));
                c
            }
            None => field,
        };
        if diesel::flag(&metas, "sea_orm", "primary_key") {
            key.push(column.clone());
        }
        if diesel::flag(&metas, "sea_orm", "unique") {
            ddl.unique.push(vec![column.clone()]);
        }
        ddl.columns.push(column);
    }
    ddl.primary_key = (!key.is_empty()).then_some(key);
    (ddl, renamed)
}

/// The `belongs_to` relations of an entity's `enum Relation`: the parent's module (none: the
/// entity itself), the entity's column and the parent's column it refers to (`#[sea_orm(belongs_to
/// = "super::cake::Entity", from = "Column::CakeId", to = "super::cake::Column::Id")]`).
pub(super) fn belongs_to(e: &syn::ItemEnum) -> Vec<(Option<String>, String, String)> {
    let column = |path: &str| path.rsplit("::").next().map(snake);
    e.variants
        .iter()
        .filter_map(|v| {
            let metas = diesel::metas(&v.attrs);
            let parent = diesel::nested_value(&metas, "sea_orm", "belongs_to")?;
            let from = column(&diesel::nested_value(&metas, "sea_orm", "from")?)?;
            let to = column(&diesel::nested_value(&metas, "sea_orm", "to")?)?;
            let segments: Vec<&str> = parent.split("::").collect();
            let module = match segments.as_slice() {
                [.., m, "Entity"] if *m != "super" && *m != "self" && *m != "crate" => {
                    Some(m.to_string())
                }
                _ => None,
            };
            Some((module, from, to))
        })
        .collect()
}

impl Walker<'_, '_> {
    /// The table of the entity in module `module` (`user::Entity`, `user::ActiveModel`): its
    /// model's `table_name` where the run has the model, else the module's name.
    fn seaorm_table(&self, module: &syn::Ident) -> String {
        let name = module.to_string();
        self.ix.entity_tables.get(&name).cloned().unwrap_or(name)
    }

    /// The column a model's field (or a `Column` variant, in snake case) names in `table`.
    fn seaorm_column_name(&self, table: &str, field: &str) -> String {
        let renamed = self
            .ix
            .entity_columns
            .get(&(table.to_string(), field.to_string()));
        renamed.cloned().unwrap_or_else(|| field.to_string())
    }

    /// `posts::Entity::find_by_id(k)` and the other chain starts, or none. `args` are the
    /// call's arguments as walked: `insert(am)` inserts the active model `am`'s columns.
    pub(super) fn seaorm_entity(
        &mut self,
        path: &syn::Path,
        first: Option<&syn::Expr>,
        args: &[Value],
    ) -> Option<Value> {
        let s: Vec<&syn::PathSegment> = path.segments.iter().collect();
        let n = s.len();
        if n < 3 || s[n - 2].ident != "Entity" {
            return None;
        }
        let table = &s[n - 3].ident;
        // A module (`posts::Entity`), not a type parameter (`A::Entity` of a generic helper).
        if !lower_case(table) {
            return None;
        }
        let (kind, by_id) = match s[n - 1].ident.to_string().as_str() {
            "find" => (Kind::Select, false),
            "find_by_id" => (Kind::Select, true),
            "update_many" => (Kind::Update, false),
            "delete_many" => (Kind::Delete, false),
            "delete_by_id" => (Kind::Delete, true),
            "insert" | "insert_many" => (Kind::Insert, false),
            _ => return None,
        };
        let mut q = Query::new(kind, self.seaorm_table(table), self.span(table));
        // `insert(am)`: the active model's columns. `insert_many(rows)` and a model txlint
        // did not build insert columns it does not see.
        if s[n - 1].ident == "insert"
            && let Some(Value::Diesel(am)) = args.first()
            && am.kind == Kind::Update
        {
            let mut row = am.clone().into_insert();
            row.table_at = q.table_at;
            q = row;
        }
        if by_id && let Some(k) = first {
            let value = Part::Param(self.bound(k));
            let key = self.ix.primary_key(&q.table).to_string();
            q.filters
                .push(Cond::key_is(&key, value, self.span(&s[n - 1].ident)));
        }
        Some(Value::Diesel(Box::new(q)))
    }

    /// `posts::ActiveModel { id: Set(k), title: Set(t), ..Default::default() }`.
    pub(super) fn seaorm_active_model(&mut self, s: &syn::ExprStruct) -> Option<Value> {
        let segs: Vec<&syn::PathSegment> = s.path.segments.iter().collect();
        let n = segs.len();
        if n < 2 || segs[n - 1].ident != "ActiveModel" {
            return None;
        }
        let table = &segs[n - 2].ident;
        let mut q = Query::new(Kind::Update, self.seaorm_table(table), self.span(table));
        let keys = self.ix.primary_keys(&q.table);
        for f in &s.fields {
            let syn::Member::Named(name) = &f.member else {
                continue;
            };
            let Some(v) = set_value(&f.expr) else {
                continue;
            };
            let value = self.part(v);
            let column = self.seaorm_column_name(&q.table, &name.to_string());
            if keys.contains(&column) {
                q.filters
                    .push(Cond::key_is(&column, value, self.span(name)));
            } else {
                q.sets.push((
                    Column {
                        name: column,
                        at: self.span(name),
                    },
                    value,
                ));
            }
        }
        Some(Value::Diesel(Box::new(q)))
    }

    /// `let mut am: posts::ActiveModel = model.into();`: the row `model` was read from.
    pub(super) fn seaorm_typed(&mut self, ty: &syn::Type, init: &syn::Expr) -> Option<Value> {
        let syn::Type::Path(p) = ty else {
            return None;
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        let n = segs.len();
        if n < 2 || segs[n - 1].ident != "ActiveModel" {
            return None;
        }
        let table = &segs[n - 2].ident;
        let mut base = init;
        while let syn::Expr::MethodCall(m) = base
            && matches!(
                m.method.to_string().as_str(),
                "into" | "into_active_model" | "clone"
            )
        {
            base = &m.receiver;
        }
        let mut q = Query::new(Kind::Update, self.seaorm_table(table), self.span(table));
        let key = self.ix.primary_key(&q.table).to_string();
        if let Some((_, k)) = self.seaorm_found_key(base) {
            let value = self.bound(k);
            q.filters
                .push(Cond::key_is(&key, Part::Param(value), self.span(init)));
            return Some(Value::Diesel(Box::new(q)));
        }
        // The row's own key values, every column of a composite key (`model.org_id`,
        // `model.incident_id`).
        for key in self.ix.primary_keys(&q.table) {
            let mut value = self.bound(base);
            value.text = self.resolved(format!("{}.{key}", value.text));
            q.filters
                .push(Cond::key_is(&key, Part::Param(value), self.span(init)));
        }
        Some(Value::Diesel(Box::new(q)))
    }

    /// `posts::Entity::find_by_id(k).one(db).await?`, or `.filter(posts::Column::Id.eq(k))`
    /// before `.one(db)` (also through `.ok_or(..)?`, `.unwrap()`, `.expect(..)`): the row
    /// whose primary key is `k`. Its key column, and `k`.
    pub(super) fn seaorm_found_key<'e>(
        &mut self,
        e: &'e syn::Expr,
    ) -> Option<(String, &'e syn::Expr)> {
        let mut e = e;
        loop {
            match e {
                syn::Expr::Try(t) => e = &t.expr,
                syn::Expr::Await(a) => e = &a.base,
                syn::Expr::Paren(p) => e = &p.expr,
                syn::Expr::MethodCall(m)
                    if matches!(
                        m.method.to_string().as_str(),
                        "ok_or" | "ok_or_else" | "unwrap" | "expect" | "context" | "map_err"
                    ) =>
                {
                    e = &m.receiver
                }
                syn::Expr::MethodCall(m) if m.method == "one" => break,
                _ => return None,
            }
        }
        let mut found = None;
        while let syn::Expr::MethodCall(m) = e {
            if m.method == "filter"
                && let Some(syn::Expr::MethodCall(eq)) = m.args.first()
                && eq.method == "eq"
                && let Some(column) = self.seaorm_column(&eq.receiver)
                && let syn::Expr::Path(p) = &*eq.receiver
                && let Some(module) = p.path.segments.iter().rev().nth(2)
                && column.name == self.ix.primary_key(&self.seaorm_table(&module.ident))
            {
                found = eq.args.first().map(|k| (column.name, k));
            }
            e = &m.receiver;
        }
        let syn::Expr::Call(c) = e else {
            return None;
        };
        let syn::Expr::Path(f) = &*c.func else {
            return None;
        };
        let segs: Vec<&syn::PathSegment> = f.path.segments.iter().collect();
        let n = segs.len();
        let module = segs.get(n.checked_sub(3)?)?;
        let table = self.seaorm_table(&module.ident);
        match segs[n - 1].ident.to_string().as_str() {
            "find_by_id" => {
                let key = self.ix.primary_key(&table).to_string();
                c.args.first().map(|k| (key, k))
            }
            "find" => found,
            _ => None,
        }
    }

    /// `am.title = Set(t)` on an active model held in `am`.
    pub(super) fn seaorm_assign(&mut self, left: &syn::Expr, right: &syn::Expr) -> bool {
        let syn::Expr::Field(f) = left else {
            return false;
        };
        let (syn::Expr::Path(base), syn::Member::Named(name)) = (&*f.base, &f.member) else {
            return false;
        };
        let Some(var) = base.path.get_ident().map(|i| i.to_string()) else {
            return false;
        };
        let (Some(Value::Diesel(_)), Some(v)) = (self.vars.get(&var), set_value(right)) else {
            return false;
        };
        let value = self.part(v);
        let at = self.span(name);
        let table = match self.vars.get(&var) {
            Some(Value::Diesel(q)) => q.table.clone(),
            _ => return false,
        };
        let column = self.seaorm_column_name(&table, &name.to_string());
        if let Some(Value::Diesel(q)) = self.vars.get_mut(&var) {
            q.sets.retain(|(c, _)| c.name != column);
            q.sets.push((Column { name: column, at }, value));
        }
        true
    }

    /// `OnConflict::column(c).do_nothing()`, `::columns([..])`, `.update_column(c)`,
    /// `.update_columns([..])`, `.value(c, expr)`: the conflict target and the `SET` items of
    /// `DO UPDATE` (none: `DO NOTHING`).
    pub(super) fn seaorm_on_conflict(
        &mut self,
        e: &syn::Expr,
    ) -> (Vec<Column>, Vec<(Column, Part)>) {
        // The chain's calls, last first, down to its root.
        let mut calls = Vec::new();
        let mut root = e;
        while let syn::Expr::MethodCall(m) = root {
            calls.push(m);
            root = &m.receiver;
        }
        let target = match root {
            syn::Expr::Call(c) if matches!(callee(c).as_deref(), Some("column" | "columns")) => c
                .args
                .first()
                .map(|a| self.seaorm_columns(a))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut sets = Vec::new();
        for m in calls.into_iter().rev() {
            let arg = m.args.first();
            match m.method.to_string().as_str() {
                "update_column" | "update_columns" => {
                    for c in arg.map(|a| self.seaorm_columns(a)).unwrap_or_default() {
                        let excluded = Part::Sql(vec![
                            Piece::Text("EXCLUDED.".into()),
                            Piece::Column(c.clone()),
                        ]);
                        sets.push((c, excluded));
                    }
                }
                "value" => {
                    if let (Some(c), Some(v)) = (
                        arg.and_then(|a| self.seaorm_column(a)),
                        m.args.iter().nth(1),
                    ) {
                        let v = self.seaorm_value(v);
                        sets.push((c, v));
                    }
                }
                _ => {}
            }
        }
        (target, sets)
    }

    /// `posts::Column::Score`, `[a, b]`, `vec![a, b]`: columns named in a list.
    fn seaorm_columns(&mut self, e: &syn::Expr) -> Vec<Column> {
        match e {
            syn::Expr::Array(a) => a
                .elems
                .iter()
                .filter_map(|x| self.seaorm_column(x))
                .collect(),
            syn::Expr::Reference(r) => self.seaorm_columns(&r.expr),
            syn::Expr::Macro(m) => m
                .mac
                .parse_body_with(
                    syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
                )
                .map(|list| list.iter().filter_map(|x| self.seaorm_column(x)).collect())
                .unwrap_or_default(),
            e => self.seaorm_column(e).into_iter().collect(),
        }
    }

    /// `Expr::col(posts::Column::Score).add(1)`, `Expr::value(v)`: a `col_expr` value.
    pub(super) fn seaorm_value(&mut self, e: &syn::Expr) -> Part {
        let mut pieces = Vec::new();
        self.seaorm_pieces(e, &mut pieces);
        match pieces.as_slice() {
            [Piece::Param(b)] => Part::Param(b.clone()),
            _ => Part::Sql(pieces),
        }
    }

    fn seaorm_pieces(&mut self, e: &syn::Expr, out: &mut Vec<Piece>) {
        match e {
            syn::Expr::MethodCall(m)
                if m.args.len() == 1
                    && matches!(m.method.to_string().as_str(), "add" | "sub" | "mul" | "div") =>
            {
                self.seaorm_pieces(&m.receiver, out);
                let op = match m.method.to_string().as_str() {
                    "add" => " + ",
                    "sub" => " - ",
                    "mul" => " * ",
                    _ => " / ",
                };
                out.push(Piece::Text(op.into()));
                self.seaorm_pieces(&m.args[0], out);
            }
            syn::Expr::Call(c) if c.args.len() == 1 => {
                match (callee(c).as_deref(), self.seaorm_column(&c.args[0])) {
                    (Some("col"), Some(col)) => out.push(Piece::Column(col)),
                    _ => out.push(Piece::Param(self.bound(&c.args[0]))),
                }
            }
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => out.push(Piece::Text(i.base10_digits().into())),
            e => out.push(Piece::Param(self.bound(e))),
        }
    }

    /// `posts::Column::CreatedAt` (or `Column::CreatedAt`): the column `created_at`.
    pub(super) fn seaorm_column(&mut self, e: &syn::Expr) -> Option<Column> {
        let syn::Expr::Path(p) = e else {
            return None;
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        let n = segs.len();
        if n < 2 || segs[n - 2].ident != "Column" {
            return None;
        }
        let last = &segs[n - 1].ident;
        let field = snake(&last.to_string());
        // `posts::Column::X` names its entity's module; a bare `Column::X` does not.
        let name = match n.checked_sub(3).map(|i| &segs[i].ident) {
            Some(module) if lower_case(module) => {
                let table = self.seaorm_table(module);
                self.seaorm_column_name(&table, &field)
            }
            _ => field,
        };
        Some(Column {
            name,
            at: self.span(last),
        })
    }
}

/// The name a call calls (`column` of `OnConflict::column(c)`), when it names a path.
fn callee(c: &syn::ExprCall) -> Option<String> {
    match &*c.func {
        syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

/// `Set(v)`, `ActiveValue::Set(v)`, `Unchanged(v)`: the value; `NotSet` and others: none.
fn set_value(e: &syn::Expr) -> Option<&syn::Expr> {
    let syn::Expr::Call(c) = e else {
        return None;
    };
    let syn::Expr::Path(p) = &*c.func else {
        return None;
    };
    let last = p.path.segments.last()?.ident.to_string();
    match (last.as_str(), c.args.first()) {
        ("Set" | "Unchanged", Some(v)) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn snake_case_columns() {
        assert_eq!(super::snake("CreatedAt"), "created_at");
        assert_eq!(super::snake("Id"), "id");
    }
}
