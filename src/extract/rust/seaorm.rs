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

impl Walker<'_, '_> {
    /// The table of the entity in module `module` (`user::Entity`, `user::ActiveModel`): its
    /// model's `table_name` where the run has the model, else the module's name.
    fn seaorm_table(&self, module: &syn::Ident) -> String {
        let name = module.to_string();
        self.ix.entity_tables.get(&name).cloned().unwrap_or(name)
    }

    /// `posts::Entity::find_by_id(k)` and the other chain starts, or none.
    pub(super) fn seaorm_entity(
        &mut self,
        path: &syn::Path,
        first: Option<&syn::Expr>,
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
            _ => return None,
        };
        let mut q = Query::new(kind, self.seaorm_table(table), self.span(table));
        if by_id && let Some(k) = first {
            let key = Part::Param(self.bound(k));
            q.filters.push(Cond::id_is(key, self.span(&s[n - 1].ident)));
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
        for f in &s.fields {
            let syn::Member::Named(name) = &f.member else {
                continue;
            };
            let Some(v) = set_value(&f.expr) else {
                continue;
            };
            let value = self.part(v);
            if name == "id" {
                q.filters.push(Cond::id_is(value, self.span(name)));
            } else {
                q.sets.push((
                    Column {
                        name: name.to_string(),
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
        let mut key = self.bound(base);
        key.text = format!("{}.id", key.text);
        let mut q = Query::new(Kind::Update, self.seaorm_table(table), self.span(table));
        q.filters
            .push(Cond::id_is(Part::Param(key), self.span(init)));
        Some(Value::Diesel(Box::new(q)))
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
        if let Some(Value::Diesel(q)) = self.vars.get_mut(&var) {
            q.sets.retain(|(c, _)| c.name != *name.to_string());
            q.sets.push((
                Column {
                    name: name.to_string(),
                    at,
                },
                value,
            ));
        }
        true
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
                let f = match &*c.func {
                    syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                    _ => None,
                };
                match (f.as_deref(), self.seaorm_column(&c.args[0])) {
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
        Some(Column {
            name: snake(&last.to_string()),
            at: self.span(last),
        })
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
