//! What diesel's macros and derives say of the schema: `table!`, `joinable!`,
//! `#[derive(Insertable)]` rows and their attributes.

use super::*;

/// A `#[derive(Insertable)]` or `#[derive(AsChangeset)]` struct: the table it writes and, per
/// field, its column.
#[derive(Clone, Debug)]
pub(in crate::extract::rust) struct Insertable {
    table: String,
    /// (field, column): the same name unless `#[diesel(column_name = ..)]` says otherwise.
    columns: Vec<(String, String)>,
    /// `Insertable`: `.values(&row)` inserts its columns.
    inserts: bool,
    /// `AsChangeset`: `.set(&row)` sets its columns but the primary key's.
    changes: bool,
}

/// Which derive a `.values(..)` or `.set(..)` argument needs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::extract::rust) enum Derive {
    Insertable,
    AsChangeset,
}

impl Insertable {
    fn has(&self, d: Derive) -> bool {
        match d {
            Derive::Insertable => self.inserts,
            Derive::AsChangeset => self.changes,
        }
    }
}

/// `#[derive(Insertable)] #[diesel(table_name = tasks)] struct NewTask { .. }` (also diesel
/// 1's `#[table_name = "tasks"]`, and either inside `#[cfg_attr(feature = "..", ..)]`), or
/// `#[derive(AsChangeset)]`. Without a table name diesel would guess one from the struct's
/// name; txlint does not guess.
pub(in crate::extract::rust) fn insertable(s: &syn::ItemStruct) -> Option<Insertable> {
    let attrs = metas(&s.attrs);
    let derived = |name: &str| {
        attrs.iter().any(|m| {
            let mut found = false;
            if let syn::Meta::List(l) = m
                && l.path.is_ident("derive")
            {
                let _ = l.parse_nested_meta(|m| {
                    found |= m.path.segments.last().is_some_and(|l| l.ident == name);
                    Ok(())
                });
            }
            found
        })
    };
    let (inserts, changes) = (derived("Insertable"), derived("AsChangeset"));
    if !inserts && !changes {
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
    Some(Insertable {
        table,
        columns,
        inserts,
        changes,
    })
}

/// Each attribute's content but doc comments; a `cfg_attr(<predicate>, a, b)` gives `a` and
/// `b` (txlint reads code under every feature).
pub(in crate::extract::rust) fn metas(attrs: &[syn::Attribute]) -> Vec<syn::Meta> {
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
pub(in crate::extract::rust) fn nested_value(
    metas: &[syn::Meta],
    attr: &str,
    key: &str,
) -> Option<String> {
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
pub(in crate::extract::rust) fn flag(metas: &[syn::Meta], attr: &str, flag: &str) -> bool {
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
    pub(super) fn diesel_sql_name(&self, rust: &str) -> String {
        self.ix
            .tables
            .get(rust)
            .map_or_else(|| rust.to_string(), |d| d.table.clone())
    }

    /// The run's struct `name` deriving `derive`, when it writes `table`.
    fn insertable_into(&self, name: &str, table: &str, derive: Derive) -> Option<&Insertable> {
        self.ix
            .insertables
            .get(name)
            .filter(|r| r.has(derive) && self.diesel_sql_name(&r.table) == table)
    }

    /// The run's one struct deriving `derive` for `table`; none when there are several.
    fn only_insertable_into(&self, table: &str, derive: Derive) -> Option<&Insertable> {
        let mut rows = self
            .ix
            .insertables
            .values()
            .filter(|r| r.has(derive) && self.diesel_sql_name(&r.table) == table);
        match (rows.next(), rows.next()) {
            (Some(row), None) => Some(row),
            _ => None,
        }
    }

    /// `.values(&row)` with a `#[derive(Insertable)]` row: its columns. A struct literal gives
    /// each field's value; a variable `row` gives `row.<field>`, of the struct its type names,
    /// or else of the run's one insertable struct for the table (with several, none: txlint
    /// cannot tell which).
    pub(super) fn insertable_values(
        &mut self,
        table: &str,
        e: &syn::Expr,
        derive: Derive,
    ) -> Vec<(Column, Part)> {
        let mut values = self.struct_values(table, e, derive);
        // A changeset leaves the primary key out (diesel's `AsChangeset` does).
        if derive == Derive::AsChangeset {
            let keys = self.ix.primary_keys(table);
            values.retain(|(c, _)| !keys.contains(&c.name));
        }
        values
    }

    /// `row.save_changes(conn)` (diesel's `SaveChangesDsl`) of a `#[derive(AsChangeset)]` row:
    /// `UPDATE <its table> SET <the fields assigned since it was read> WHERE <key> =
    /// row.<key>`. None when the code assigned none of them (what it writes back is what it
    /// read), or the row is of no changeset txlint knows.
    pub(in crate::extract::rust) fn save_changes(
        &mut self,
        m: &syn::ExprMethodCall,
        args: &[Value],
    ) -> Option<Value> {
        let mut e = &*m.receiver;
        while let syn::Expr::Reference(r) = e {
            e = &r.expr;
        }
        let syn::Expr::Path(p) = e else {
            return None;
        };
        let var = p.path.get_ident()?;
        // `row.save_changes::<Row>(conn)`, else the type the code gives `row`.
        let named = m.turbofish.as_ref().and_then(|t| match t.args.first()? {
            syn::GenericArgument::Type(syn::Type::Path(t)) => {
                Some(t.path.segments.last()?.ident.to_string())
            }
            _ => None,
        });
        let ty = named.or_else(|| self.local_type(e).map(|t| t.to_string()))?;
        let row = self.ix.insertables.get(&ty).filter(|r| r.changes)?.clone();
        let table = self.diesel_sql_name(&row.table);
        let sets = self.insertable_values(&table, e, Derive::AsChangeset);
        if sets.is_empty() {
            return None;
        }
        let (from, at) = (self.flow(e), self.span(var));
        let mut q = Query::new(Kind::Update, table.clone(), at);
        for key in self.ix.primary_keys(&table) {
            let field = row
                .columns
                .iter()
                .find(|(_, column)| *column == key)
                .map_or(key.as_str(), |(field, _)| field.as_str());
            let bind = Bind {
                from: from.clone().field(field),
                text: self.resolved(format!("{var}.{field}")),
                ordered: false,
                sources: Vec::new(),
            };
            q.filters.push(Cond::key_is(&key, Part::Param(bind), at));
        }
        q.sets = sets;
        Some(self.run_query(&q, m, args))
    }

    fn struct_values(&mut self, table: &str, e: &syn::Expr, derive: Derive) -> Vec<(Column, Part)> {
        let mut e = e;
        while let syn::Expr::Reference(r) = e {
            e = &r.expr;
        }
        if let syn::Expr::Struct(s) = e {
            let Some(row) = s
                .path
                .segments
                .last()
                .and_then(|l| self.insertable_into(&l.ident.to_string(), table, derive))
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
                    // A changeset's field copied from a row (`name: old.name.clone()`) writes
                    // back what was read: no value computed here.
                    if derive == Derive::AsChangeset && copied(&f.expr, name) {
                        continue;
                    }
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
        // The variable's own type when the code names it (`row: &NewTask`, `self` in `impl
        // NewTask`, `let row = NewTask { .. }`), else the table's one insertable struct.
        let named = self
            .local_type(e)
            .and_then(|t| self.insertable_into(&t, table, derive));
        let only = || self.only_insertable_into(table, derive);
        let Some(row) = named.or_else(only).cloned() else {
            return Vec::new();
        };
        let from = self.flow(e);
        let at = self.span(var);
        row.columns
            .iter()
            .filter_map(|(field, column)| {
                let text = self.resolved(format!("{var}.{field}"));
                let from = match self.assigned.get(&text) {
                    Some(flow) => flow.clone(),
                    // A field of a changeset that the code did not assign is written back as
                    // it was read: its column has no value computed here.
                    None if derive == Derive::AsChangeset => return None,
                    None => from.clone().field(field),
                };
                let bind = Bind {
                    from,
                    text,
                    ordered: false,
                    sources: Vec::new(),
                };
                let column = Column {
                    name: column.clone(),
                    at,
                };
                Some((column, Part::Param(bind)))
            })
            .collect()
    }
}

/// `e` is field `field` of some value, as it is (`old.name`, `&old.name`, `old.name.clone()`).
fn copied(e: &syn::Expr, field: &syn::Ident) -> bool {
    match e {
        syn::Expr::Reference(r) => copied(&r.expr, field),
        syn::Expr::MethodCall(m)
            if m.args.is_empty()
                && ["clone", "to_owned", "to_string"]
                    .iter()
                    .any(|c| m.method == c) =>
        {
            copied(&m.receiver, field)
        }
        syn::Expr::Field(f) => matches!(&f.member, syn::Member::Named(n) if n == field),
        _ => false,
    }
}

/// `joinable!(posts -> users (author_id))`: the child table, the parent table (Rust names) and
/// the child's column that refers to the parent's primary key. Nothing for another shape.
pub(in crate::extract::rust) fn joinable_macro(
    tokens: proc_macro2::TokenStream,
) -> Option<[String; 3]> {
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
pub(in crate::extract::rust) fn table_macro(
    tokens: proc_macro2::TokenStream,
) -> Vec<(String, TableDdl)> {
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
