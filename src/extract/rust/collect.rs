//! Collecting the index: one pass over a batch's syntax trees that records functions,
//! constants, statics, struct fields, diesel's tables and the impls of the run.

use super::index::Scope;
use super::index::*;
use super::*;

pub(super) struct Collector<'a, 'i> {
    pub(super) ix: &'i mut Index<'a>,
    pub(super) file: usize,
    /// Inside `#[cfg(test)]` (a module or an item).
    pub(super) in_test: bool,
    /// Inside `#[cfg(feature = "<database>")]`.
    pub(super) in_dialect: Option<Dialect>,
    /// Inside `impl <type>`, with the `impl`'s generics.
    pub(super) owner: Option<&'a syn::Type>,
    pub(super) impl_generics: Option<&'a syn::Generics>,
    /// The innermost inline `mod` around the item, if any.
    pub(super) module: Option<&'a syn::Ident>,
    /// Inside `impl Trait for Type` (the trait's name): its methods are called through the
    /// trait.
    pub(super) impl_trait: Option<String>,
    /// The innermost block around the item (a function's body): where a `const` in it is seen.
    pub(super) block: Option<Scope>,
    /// The `let`s in scope, innermost last, with the literal or macro each binds (`None` for
    /// any other value): what a struct literal's field set by name (`Self { update_sql }`)
    /// holds.
    pub(super) locals: Vec<(&'a syn::Ident, Option<&'a syn::Expr>)>,
    /// Inside `trait <name>`: its default methods are methods of the types that implement it.
    pub(super) in_trait: Option<&'a syn::Ident>,
}

impl<'a> Visit<'a> for Collector<'a, '_> {
    fn visit_block(&mut self, b: &'a syn::Block) {
        let span = b.brace_token.span.join();
        let outer = self.block.replace((span.start(), span.end()));
        let scope = self.locals.len();
        syn::visit::visit_block(self, b);
        self.locals.truncate(scope);
        self.block = outer;
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        let owner = self.owner.take();
        let generics = self.impl_generics.take();
        let unused = self.unused(&f.vis, &f.attrs, &f.sig.ident);
        self.nested(&f.attrs, |c| {
            c.add(&f.sig, &f.block, f);
            c.mark_unused(unused);
            syn::visit::visit_item_fn(c, f)
        });
        self.owner = owner;
        self.impl_generics = generics;
    }
    fn visit_item_struct(&mut self, s: &'a syn::ItemStruct) {
        let file = self.file;
        if let Some(mut handle) = s.fields.iter().find_map(|f| self.ix.kind_of(&f.ty, file)) {
            // Rocket's `#[database("..")]` (rocket_sync_db_pools, rocket_contrib, rocket_db_pools)
            // makes the struct a pool of what it holds, its request guard one connection of it.
            if drivers::pools_what_it_holds(&s.attrs) {
                self.ix.derefs.insert(s.ident.to_string());
                if handle.0 != Executor::Pool {
                    handle.0 = Executor::PooledConnection;
                }
            }
            self.ix.handle_structs.insert(s.ident.to_string(), handle);
        }
        if matches!(s.fields, syn::Fields::Named(_)) {
            let here = (self.file, s);
            self.ix
                .structs
                .entry(s.ident.to_string())
                .or_default()
                .push(here);
        }
        if let Some(row) = diesel::insertable(s) {
            self.ix.insertables.insert(s.ident.to_string(), row);
        }
        if let Some(table) = seaorm::table_name(&s.attrs) {
            if let Some(m) = self.entity_module().filter(|m| *m != table) {
                self.ix.entity_tables.insert(m, table.clone());
            }
            let (ddl, renamed) = seaorm::entity_table(s, table);
            for (field, column) in renamed {
                let key = (ddl.table.clone(), field);
                self.ix.entity_columns.insert(key, column);
            }
            self.ix.tables.entry(ddl.table.clone()).or_insert(ddl);
        }
        syn::visit::visit_item_struct(self, s);
    }
    fn visit_item_enum(&mut self, e: &'a syn::ItemEnum) {
        if e.ident == "Relation"
            && let Some(module) = self.entity_module()
        {
            for (parent, from, to) in seaorm::belongs_to(e) {
                let parent = parent.unwrap_or_else(|| module.clone());
                self.ix.relations.push([module.clone(), parent, from, to]);
            }
        }
        syn::visit::visit_item_enum(self, e);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        let unused = self.unused(&f.vis, &f.attrs, &f.sig.ident);
        // sea-orm's `impl MigrationTrait for Migration { async fn up(..) }`: run once, by the
        // migrator.
        let migration = self.impl_trait.as_deref() == Some("MigrationTrait")
            && matches!(f.sig.ident.to_string().as_str(), "up" | "down");
        self.nested(&f.attrs, |c| {
            c.add(&f.sig, &f.block, f);
            c.mark_unused(unused);
            if let Some(d) = c.ix.fns.last_mut() {
                d.migration = migration;
            }
            syn::visit::visit_impl_item_fn(c, f)
        });
    }
    fn visit_item_trait(&mut self, t: &'a syn::ItemTrait) {
        self.ix.traits.insert(t.ident.to_string());
        let outer = self.in_trait.replace(&t.ident);
        // A default method's generics in scope are the trait's, as an impl's are its block's.
        let generics = self.impl_generics.replace(&t.generics);
        syn::visit::visit_item_trait(self, t);
        self.in_trait = outer;
        self.impl_generics = generics;
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        self.nested(&f.attrs, |c| {
            match &f.default {
                Some(block) => {
                    c.add(&f.sig, block, f);
                    if let Some(d) = c.ix.fns.last_mut() {
                        d.in_trait = c.in_trait;
                    }
                }
                None => {
                    let name = f.sig.ident.to_string();
                    c.ix.required
                        .entry(name)
                        .or_default()
                        .push((c.file, &f.sig));
                }
            }
            syn::visit::visit_trait_item_fn(c, f)
        });
    }
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string());
        if name.as_deref() == Some("table") {
            for (rust, t) in diesel::table_macro(m.tokens.clone()) {
                self.ix.tables.insert(rust, t);
            }
        }
        if name.as_deref() == Some("lazy_static") {
            for s in lazy_statics(m.tokens.clone()) {
                self.handle_static(&s.ident, &s.ty);
            }
        }
        if name.as_deref() == Some("joinable")
            && let Some(j) = diesel::joinable_macro(m.tokens.clone())
        {
            self.ix.joinables.push(j);
        }
        syn::visit::visit_macro(self, m);
    }
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        let outer = self.module.replace(&m.ident);
        self.nested(&m.attrs, |c| syn::visit::visit_item_mod(c, m));
        self.module = outer;
    }
    fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
        let name = i.trait_.as_ref().and_then(|(_, t, _)| t.segments.last());
        let implements =
            |traits: &[&str]| name.is_some_and(|s| traits.iter().any(|t| s.ident == t));
        if let Some(ty) = types::type_name(&i.self_ty) {
            if implements(&["Deref", "DerefMut", "AsRef", "AsMut"]) {
                self.ix.derefs.insert(ty);
            } else if implements(&["Drop"]) {
                self.ix.drops.insert(ty);
            } else if let Some(t) = name {
                let impls = self.ix.trait_impls.entry(t.ident.to_string()).or_default();
                if !impls.contains(&ty) {
                    impls.push(ty);
                }
            }
        }
        let outer = self.owner.replace(&i.self_ty);
        let generics = self.impl_generics.replace(&i.generics);
        let in_trait = std::mem::replace(&mut self.impl_trait, name.map(|s| s.ident.to_string()));
        self.nested(&i.attrs, |c| syn::visit::visit_item_impl(c, i));
        self.owner = outer;
        self.impl_generics = generics;
        self.impl_trait = in_trait;
    }
    fn visit_item_const(&mut self, c: &'a syn::ItemConst) {
        self.constant(&c.ident, &c.ty, &c.expr);
    }
    fn visit_item_static(&mut self, s: &'a syn::ItemStatic) {
        self.constant(&s.ident, &s.ty, &s.expr);
        self.handle_static(&s.ident, &s.ty);
    }
    fn visit_local(&mut self, l: &'a syn::Local) {
        syn::visit::visit_local(self, l);
        if let syn::Pat::Ident(p) = &l.pat {
            let text = l.init.as_ref().map(|i| &*i.expr).filter(|e| is_text(e));
            self.locals.push((&p.ident, text));
        }
    }
    fn visit_expr_struct(&mut self, s: &'a syn::ExprStruct) {
        for f in &s.fields {
            // A literal or a macro; or a variable bound to one (`Self { update_sql }`).
            let value = match &f.expr {
                e if is_text(e) => Some(e),
                syn::Expr::Path(p) => p.path.get_ident().and_then(|v| {
                    let local = self.locals.iter().rev().find(|(name, _)| *name == v);
                    local.and_then(|&(_, e)| e)
                }),
                _ => None,
            };
            if let syn::Member::Named(name) = &f.member
                && let Some(value) = value
            {
                let at = (self.file, value);
                self.ix
                    .field_values
                    .entry(name.to_string())
                    .or_default()
                    .push(at);
            }
        }
        syn::visit::visit_expr_struct(self, s);
    }
    fn visit_field(&mut self, f: &'a syn::Field) {
        if let Some(name) = &f.ident
            && let Some((kind, dialect)) = self.ix.kind_of(&f.ty, self.file)
        {
            let shares = self.ix.shares_transactions(&f.ty, self.file);
            self.ix
                .fields
                .insert(name.to_string(), (kind, dialect, shares));
        }
    }
}

/// A literal or a macro (`format!`, `concat!`): what a field of SQL is set to.
fn is_text(e: &syn::Expr) -> bool {
    matches!(e, syn::Expr::Lit(_) | syn::Expr::Macro(_))
}

/// How often `word` occurs in `text` as a whole identifier.
pub(super) fn words(text: &str, word: &str) -> usize {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word)
        .filter(|(at, _)| {
            !ident(text[..*at].chars().next_back())
                && !ident(text[at + word.len()..].chars().next())
        })
        .count()
}

/// The statics of a `lazy_static! { static ref NAME: Type = ..; }` block, read as plain
/// statics (without `ref`); none when the block does not parse so.
pub(super) fn lazy_statics(tokens: proc_macro2::TokenStream) -> Vec<syn::ItemStatic> {
    let mut plain = Vec::new();
    let mut after_static = false;
    for t in tokens {
        let is_ref = matches!(&t, proc_macro2::TokenTree::Ident(i) if i == "ref");
        if !(after_static && is_ref) {
            after_static = matches!(&t, proc_macro2::TokenTree::Ident(i) if i == "static");
            plain.push(t);
        }
    }
    let file: syn::File = match syn::parse2(plain.into_iter().collect()) {
        Ok(f) => f,
        Err(_) => return Vec::new(),
    };
    file.items
        .into_iter()
        .filter_map(|i| match i {
            syn::Item::Static(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// `#[cfg(feature = "sqlite")]`: code for one database.
pub(super) fn cfg_dialect(attrs: &[syn::Attribute]) -> Option<Dialect> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::List(l) if a.path().is_ident("cfg") => {
            dialects::of_cfg_feature(&l.tokens.to_string())
        }
        _ => None,
    })
}

impl<'a> Collector<'a, '_> {
    /// A constant or static whose type can hold text (`&str`, `String`, `Cow<str>`, arrays and
    /// wrappers of them): the others (numbers, bindings' GUIDs) never hold SQL.
    pub(super) fn constant(&mut self, name: &syn::Ident, ty: &syn::Type, expr: &'a syn::Expr) {
        if mentions_text(ty) {
            let i = self.ix.consts.len();
            self.ix.consts.push((self.file, expr));
            self.ix.const_scopes.push(self.block);
            self.ix
                .const_names
                .entry(name.to_string())
                .or_default()
                .push(i);
        }
    }

    /// The module an entity of this place is in: the inline `mod`, else the file's (`user.rs`,
    /// `user/mod.rs`).
    pub(super) fn entity_module(&self) -> Option<String> {
        if let Some(m) = self.module {
            return Some(m.to_string());
        }
        let file = &self.ix.parsed[self.file].path;
        match file.file_stem().and_then(|f| f.to_str()) {
            Some("mod") => file
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|d| d.to_str())
                .map(str::to_string),
            stem => stem.map(str::to_string),
        }
    }

    /// A private function (not a trait's method) its authors mark `#[allow(dead_code)]` whose
    /// name its file never mentions again: kept, but nothing runs it (a private item is seen
    /// only in its module).
    pub(super) fn unused(
        &self,
        vis: &syn::Visibility,
        attrs: &[syn::Attribute],
        name: &syn::Ident,
    ) -> bool {
        let allows_dead = attrs.iter().any(|a| {
            a.path().is_ident("allow")
                && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().contains("dead_code"))
        });
        matches!(vis, syn::Visibility::Inherited)
            && self.impl_trait.is_none()
            && allows_dead
            && words(&self.ix.parsed[self.file].text, &name.to_string()) == 1
    }

    /// Set [`FnDef::unused`] on the function just added.
    pub(super) fn mark_unused(&mut self, unused: bool) {
        if let Some(f) = self.ix.fns.last_mut() {
            f.unused = unused;
        }
    }

    /// A static that holds a database handle: indexed by name.
    pub(super) fn handle_static(&mut self, name: &syn::Ident, ty: &syn::Type) {
        if let Some((kind, dialect)) = self.ix.kind_of(ty, self.file) {
            let once = types::is_once_cell(ty);
            self.ix
                .statics
                .insert(name.to_string(), (kind, dialect, once));
        }
    }

    /// Visit an item with the test and database context its attributes add.
    pub(super) fn nested(&mut self, attrs: &[syn::Attribute], f: impl FnOnce(&mut Self)) {
        let test = self.in_test || is_test(attrs);
        let dialect = cfg_dialect(attrs).or(self.in_dialect);
        let outer = (
            std::mem::replace(&mut self.in_test, test),
            std::mem::replace(&mut self.in_dialect, dialect),
        );
        f(self);
        (self.in_test, self.in_dialect) = outer;
    }

    pub(super) fn add(
        &mut self,
        sig: &'a syn::Signature,
        block: &'a syn::Block,
        node: &impl Spanned,
    ) {
        let p = &self.ix.parsed[self.file];
        let at = node.span();
        let i = self.ix.fns.len();
        self.ix.fns.push(FnDef {
            file: self.file,
            name: sig.ident.to_string(),
            test: self.in_test || self.ix.config.is_test_path(&p.path),
            dialect: self.in_dialect,
            sig,
            block,
            span: home(self.ix.parsed, self.file, at).span_at(at),
            owner: self.owner,
            impl_generics: self.impl_generics,
            unused: false,
            migration: false,
            in_trait: None,
        });
        self.ix
            .by_name
            .entry(sig.ident.to_string())
            .or_default()
            .push(i);
    }
}
