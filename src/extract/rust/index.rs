//! The index of a batch: every function and method of its parsed files (with its owner, test
//! and dialect context), constants, struct fields and the names calls resolve by, collected
//! once before any body is walked.

use super::*;

/// A function body to walk.
pub(super) struct FnDef<'a> {
    pub(super) file: usize,
    pub(super) name: String,
    /// `#[test]`, `#[tokio::test]`, ..., or inside `#[cfg(test)]`.
    pub(super) test: bool,
    /// Inside `#[cfg(feature = "sqlite")]` (or another database's feature).
    pub(super) dialect: Option<Dialect>,
    pub(super) sig: &'a syn::Signature,
    pub(super) block: &'a syn::Block,
    pub(super) span: Span,
    /// The type of the `impl` block a method is in (`impl Repo`, `impl Trait for PgPool`).
    pub(super) owner: Option<&'a syn::Type>,
    /// Marked `#[allow(dead_code)]`, private, and named nowhere else in its file (see
    /// [`Collector::unused`]).
    pub(super) unused: bool,
    /// A migration's `up`/`down` (sea-orm's `MigrationTrait`): applied once per database.
    pub(super) migration: bool,
}

impl FnDef<'_> {
    /// A plain function returning text (`fn lock_query(shared: bool) -> String`): what it
    /// returns may be SQL its callers send.
    pub(super) fn builds_text(&self) -> bool {
        self.sig.asyncness.is_none()
            && matches!(&self.sig.output, syn::ReturnType::Type(_, t) if mentions_text(t))
    }
}

/// What the whole run's Rust code declares: functions, string constants, struct fields that
/// hold database handles.
pub(super) struct Index<'a> {
    pub(super) parsed: &'a [Parsed],
    pub(super) config: &'a Config,
    pub(super) fns: Vec<FnDef<'a>>,
    pub(super) by_name: HashMap<String, Vec<usize>>,
    /// String constants and statics (by the file they are in), in file order.
    pub(super) consts: Vec<(usize, &'a syn::Expr)>,
    /// Indices into `consts` by name.
    pub(super) const_names: HashMap<String, Vec<usize>>,
    /// For each of `consts`, the block it is declared in (none: a module's).
    pub(super) const_scopes: Vec<Option<Scope>>,
    /// Handle fields by name, whatever struct they are of: kind, database, and whether
    /// transactions are of the type too (used where the struct is not known).
    pub(super) fields: HashMap<String, (Executor, Option<Dialect>, bool)>,
    /// The run's structs with named fields, by name (and file): `self.field` is typed by the
    /// method's own struct.
    pub(super) structs: HashMap<String, Vec<(usize, &'a syn::ItemStruct)>>,
    /// Statics that hold a handle (`static POOL: OnceCell<PgPool>`, `lazy_static!`'s `static
    /// ref`), by name: kind, database, and whether it is a once-cell (its `get` is the handle).
    pub(super) statics: HashMap<String, (Executor, Option<Dialect>, bool)>,
    /// Structs with a field that holds a handle (see [`Value::Object`]), with that handle's
    /// kind and database.
    pub(super) handle_structs: HashMap<String, (Executor, Option<Dialect>)>,
    /// The run's type aliases, `use .. as ..` renames and `Deref` targets.
    pub(super) names: names::TypeNames<'a>,
    /// Structs with a `Deref`, `DerefMut`, `AsRef` or `AsMut` impl: one of them that holds a
    /// handle stands for it (see [`Index::wrapper`]).
    pub(super) derefs: HashSet<String>,
    /// What struct literals put in a field, by field name (`Queue { claim: format!(..) }`):
    /// SQL built once and kept in a field, read where a method uses `self.claim`.
    pub(super) field_values: HashMap<String, Vec<(usize, &'a syn::Expr)>>,
    /// sea-orm entities whose table is not named after their module: the module (`user`, from
    /// `mod user` or `user.rs`) and its model's `#[sea_orm(table_name = "users")]`.
    pub(super) entity_tables: HashMap<String, String>,
    /// sea-orm model fields renamed by `#[sea_orm(column_name = "..")]`: (table, field) to
    /// the column.
    pub(super) entity_columns: HashMap<(String, String), String>,
    /// diesel `#[derive(Insertable)]` structs with a `#[diesel(table_name = ..)]`, by name.
    pub(super) insertables: HashMap<String, diesel::Insertable>,
    /// Tables declared in Rust: by diesel's `table!` (by their Rust name) and by sea-orm
    /// entities' models (by their table's name).
    pub(super) tables: std::collections::BTreeMap<String, TableDdl>,
    /// diesel's `joinable!(child -> parent (column))`, by Rust names.
    pub(super) joinables: Vec<[String; 3]>,
    /// sea-orm's `belongs_to` relations: child module, parent module, the child's column and
    /// the parent's it refers to.
    pub(super) relations: Vec<[String; 4]>,
}

struct Collector<'a, 'i> {
    pub(super) ix: &'i mut Index<'a>,
    pub(super) file: usize,
    /// Inside `#[cfg(test)]` (a module or an item).
    pub(super) in_test: bool,
    /// Inside `#[cfg(feature = "<database>")]`.
    pub(super) in_dialect: Option<Dialect>,
    /// Inside `impl <type>`.
    pub(super) owner: Option<&'a syn::Type>,
    /// The innermost inline `mod` around the item, if any.
    pub(super) module: Option<&'a syn::Ident>,
    /// Inside `impl Trait for Type` (the trait's name): its methods are called through the
    /// trait.
    pub(super) impl_trait: Option<String>,
    /// The innermost block around the item (a function's body): where a `const` in it is seen.
    pub(super) block: Option<Scope>,
}

/// Where a name declared in a block is seen: the block's first and last position.
type Scope = (LineColumn, LineColumn);

/// `at` is inside `scope`.
pub(super) fn in_scope(scope: &Scope, at: LineColumn) -> bool {
    let key = |p: LineColumn| (p.line, p.column);
    key(scope.0) <= key(at) && key(at) <= key(scope.1)
}

impl<'a> Visit<'a> for Collector<'a, '_> {
    fn visit_block(&mut self, b: &'a syn::Block) {
        let span = b.brace_token.span.join();
        let outer = self.block.replace((span.start(), span.end()));
        syn::visit::visit_block(self, b);
        self.block = outer;
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        let owner = self.owner.take();
        let unused = self.unused(&f.vis, &f.attrs, &f.sig.ident);
        self.nested(&f.attrs, |c| {
            c.add(&f.sig, &f.block, f);
            c.mark_unused(unused);
            syn::visit::visit_item_fn(c, f)
        });
        self.owner = owner;
    }
    fn visit_item_struct(&mut self, s: &'a syn::ItemStruct) {
        let file = self.file;
        if let Some(handle) = s.fields.iter().find_map(|f| self.ix.kind_of(&f.ty, file)) {
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
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        self.nested(&f.attrs, |c| {
            if let Some(block) = &f.default {
                c.add(&f.sig, block, f);
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
        let derefs = i.trait_.as_ref().and_then(|(_, t, _)| t.segments.last());
        if derefs.is_some_and(|s| {
            matches!(
                s.ident.to_string().as_str(),
                "Deref" | "DerefMut" | "AsRef" | "AsMut"
            )
        }) && let Some(name) = types::type_name(&i.self_ty)
        {
            self.ix.derefs.insert(name);
        }
        let outer = self.owner.replace(&i.self_ty);
        let name = i.trait_.as_ref().and_then(|(_, t, _)| t.segments.last());
        let in_trait = std::mem::replace(&mut self.impl_trait, name.map(|s| s.ident.to_string()));
        self.nested(&i.attrs, |c| syn::visit::visit_item_impl(c, i));
        self.owner = outer;
        self.impl_trait = in_trait;
    }
    fn visit_item_const(&mut self, c: &'a syn::ItemConst) {
        self.constant(&c.ident, &c.ty, &c.expr);
    }
    fn visit_item_static(&mut self, s: &'a syn::ItemStatic) {
        self.constant(&s.ident, &s.ty, &s.expr);
        self.handle_static(&s.ident, &s.ty);
    }
    fn visit_expr_struct(&mut self, s: &'a syn::ExprStruct) {
        for f in &s.fields {
            if let syn::Member::Named(name) = &f.member
                && matches!(f.expr, syn::Expr::Lit(_) | syn::Expr::Macro(_))
            {
                let at = (self.file, &f.expr);
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

/// How often `word` occurs in `text` as a whole identifier.
fn words(text: &str, word: &str) -> usize {
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
fn lazy_statics(tokens: proc_macro2::TokenStream) -> Vec<syn::ItemStatic> {
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
fn cfg_dialect(attrs: &[syn::Attribute]) -> Option<Dialect> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::List(l) if a.path().is_ident("cfg") => {
            dialects::of_cfg_feature(&l.tokens.to_string())
        }
        _ => None,
    })
}

/// `#[test]`, `#[tokio::test]`, `#[sqlx::test]`, `#[rstest]`, `#[test_case(..)]`, `#[bench]`,
/// or a test configuration (see [`modules::cfg_is_test`]).
pub(super) fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        let last = path.segments.last().map(|s| s.ident.to_string());
        match last.as_deref() {
            Some("test" | "rstest" | "test_case" | "bench") => true,
            Some("cfg") if path.segments.len() == 1 => {
                let syn::Meta::List(list) = &a.meta else {
                    return false;
                };
                modules::cfg_is_test(&list.tokens.to_string())
            }
            _ => false,
        }
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
            unused: false,
            migration: false,
        });
        self.ix
            .by_name
            .entry(sig.ident.to_string())
            .or_default()
            .push(i);
    }
}

impl<'a> Index<'a> {
    pub(super) fn build(
        parsed: &'a [Parsed],
        config: &'a Config,
        modules: &modules::Modules,
    ) -> Self {
        let mut ix = Index {
            parsed,
            config,
            fns: Vec::new(),
            by_name: HashMap::new(),
            consts: Vec::new(),
            const_names: HashMap::new(),
            const_scopes: Vec::new(),
            fields: HashMap::new(),
            structs: HashMap::new(),
            statics: HashMap::new(),
            handle_structs: HashMap::new(),
            entity_tables: HashMap::new(),
            entity_columns: HashMap::new(),
            insertables: HashMap::new(),
            tables: std::collections::BTreeMap::new(),
            joinables: Vec::new(),
            relations: Vec::new(),
            derefs: HashSet::new(),
            names: names::TypeNames::collect(parsed.iter().map(|p| (p.path.as_path(), &p.ast))),
            field_values: HashMap::new(),
        };
        for (file, p) in parsed.iter().enumerate() {
            Collector {
                ix: &mut ix,
                file,
                in_test: false,
                in_dialect: None,
                owner: None,
                module: None,
                impl_trait: None,
                block: None,
            }
            .visit_file(&p.ast);
        }
        let mut packages = modules::Packages::default();
        let dead: Vec<bool> = parsed
            .iter()
            .map(|p| modules.uncompiled(&p.path, &mut packages))
            .collect();
        let tests: Vec<bool> = parsed
            .iter()
            .map(|p| modules.test_only(&p.path, &mut packages))
            .collect();
        for f in &mut ix.fns {
            f.unused |= dead.get(f.file).copied().unwrap_or(false);
            f.test |= tests.get(f.file).copied().unwrap_or(false);
        }
        ix
    }

    /// The declared type of field `field` of the struct `owner` names (`impl Tx { .. self.inner
    /// }`): the struct in `file`, else the only one of that name in the run. `None`: no such
    /// struct, or it has no such field.
    pub(super) fn field_type(
        &self,
        owner: &syn::Type,
        field: &str,
        file: usize,
    ) -> Option<(usize, &'a syn::Type)> {
        let all = self.structs.get(&types::type_name(owner)?)?;
        let (at, s) = match all.as_slice() {
            [one] => one,
            many => many.iter().find(|(f, _)| *f == file)?,
        };
        s.fields
            .iter()
            .find(|f| f.ident.as_ref().is_some_and(|i| i == field))
            .map(|f| (*at, &f.ty))
    }

    /// The function a call names: one in the caller's file first, else the only one anywhere.
    /// The method `name` of the type named `owner` (`impl Repo { fn load(&self) }`).
    pub(super) fn method(&self, name: &str, owner: &str) -> Option<usize> {
        self.by_name.get(name)?.iter().copied().find(|&i| {
            let f = &self.fns[i];
            f.sig.receiver().is_some()
                && f.owner.and_then(types::type_name).as_deref() == Some(owner)
        })
    }

    /// The method `name` implemented on a handle type (`impl Counters for PgPool`) or on a
    /// wrapper of one (`impl Tx { fn commit(self) }`).
    pub(super) fn handle_method(&self, name: &str) -> Option<usize> {
        self.by_name.get(name)?.iter().copied().find(|&i| {
            let f = &self.fns[i];
            f.sig.receiver().is_some()
                && f.owner
                    .is_some_and(|t| self.handle_type(t, f.file).is_some())
        })
    }

    /// The kind and database of a type of `file`, through the run's names for the driver's
    /// types (`type Conn = Object<AsyncPgConnection>`). `None`: not a handle type.
    pub(super) fn kind_of(
        &self,
        ty: &syn::Type,
        file: usize,
    ) -> Option<(Executor, Option<Dialect>)> {
        self.judged(&self.names.resolve(ty, file))
    }

    /// The kind and database of a type already resolved through the run's names.
    pub(super) fn judged(&self, ty: &syn::Type) -> Option<(Executor, Option<Dialect>)> {
        let kind = types::of_type(ty, &self.config.rust)?;
        Some((kind, types::dialect_of_type(ty)))
    }

    /// A type of `file` the driver's transactions are too (see [`types::shares_transactions`]),
    /// or a wrapper of the run that derefs to one (`impl Deref for PermittedConnection { type
    /// Target = AsyncPgConnection; }`).
    /// The name as written counts as much as what it resolves to: a project's own
    /// `type AsyncPgConnection = Object<..>` is still handed the driver's transactions.
    pub(super) fn shares_transactions(&self, ty: &syn::Type, file: usize) -> bool {
        let resolved = self.names.resolve(ty, file);
        types::shares_transactions(ty)
            || types::shares_transactions(&resolved)
            || types::type_name(&resolved)
                .and_then(|n| self.names.declared_target(&n, file))
                .is_some_and(|(at, t)| {
                    types::shares_transactions(t)
                        || types::shares_transactions(&self.names.resolve(t, at))
                })
    }

    /// The kind and database of a handle type, or of a wrapper of the run around one: a
    /// struct that holds one and derefs, or a type whose `Deref` target is one.
    pub(super) fn handle_type(
        &self,
        ty: &syn::Type,
        file: usize,
    ) -> Option<(Executor, Option<Dialect>)> {
        let resolved = self.names.resolve(ty, file);
        if let Some(found) = self.judged(&resolved) {
            return Some(found);
        }
        let name = types::type_name(&resolved)?;
        self.wrapper(&name).or_else(|| {
            let (at, target) = self.names.declared_target(&name, file)?;
            self.kind_of(target, at)
        })
    }

    /// A struct of the run that stands for the handle it holds (`struct Tx(Transaction<'static,
    /// Postgres>)` with `impl Deref for Tx`): that handle's kind and database.
    pub(super) fn wrapper(&self, name: &str) -> Option<(Executor, Option<Dialect>)> {
        self.derefs
            .contains(name)
            .then(|| self.handle_structs.get(name).copied())
            .flatten()
    }

    /// The one-column primary key of `table` as Rust declares it (`table!`, a sea-orm entity's
    /// model), else `id`.
    /// Every column of the table's primary key (`#[sea_orm(primary_key)]` on two fields is one
    /// composite key), else `id`.
    pub(super) fn primary_keys(&self, table: &str) -> Vec<String> {
        let declared = self.tables.values().find(|d| d.table == table);
        match declared.and_then(|d| d.primary_key.clone()) {
            Some(keys) if !keys.is_empty() => keys,
            _ => vec!["id".to_string()],
        }
    }

    pub(super) fn primary_key(&self, table: &str) -> &str {
        let declared = self.tables.values().find(|d| d.table == table);
        match declared.and_then(|d| d.primary_key.as_deref()) {
            Some([key]) => key,
            _ => "id",
        }
    }

    pub(super) fn function(&self, name: &str, file: usize) -> Option<usize> {
        self.choose(self.by_name.get(name)?, file)
    }

    /// Of functions of one name, the one in `file`, else the only one.
    pub(super) fn choose(&self, candidates: &[usize], file: usize) -> Option<usize> {
        candidates
            .iter()
            .copied()
            .find(|&i| self.fns[i].file == file)
            .or_else(|| (candidates.len() == 1).then(|| candidates[0]))
    }

    /// The function a path call names: `Self::f(..)` and `Type::f(..)` an associated one (see
    /// [`Index::function`]); a bare or module path (`f(..)`, `db::f(..)`) a free function,
    /// never a method of the same name (inside `impl Db { fn insert(&self) }`, `insert(&mut
    /// tx)` calls the free `insert`).
    pub(super) fn called_path(&self, path: &syn::Path, file: usize) -> Option<usize> {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.called(&segments, file)
    }

    /// [`Index::called_path`] of a path already split into its segments.
    pub(super) fn called(&self, path: &[String], file: usize) -> Option<usize> {
        let name = path.last()?;
        let by_type = path.len() >= 2 && {
            let q = &path[path.len() - 2];
            q == "Self" || q.starts_with(|c: char| c.is_ascii_uppercase())
        };
        if by_type {
            return self.function(name, file);
        }
        let free: Vec<usize> = self
            .by_name
            .get(name)?
            .iter()
            .copied()
            .filter(|&i| self.fns[i].owner.is_none() && self.fns[i].sig.receiver().is_none())
            .collect();
        self.choose(&free, file)
    }
}
