//! The index of a batch: every function and method of its parsed files (with its owner, test
//! and dialect context), constants, struct fields and the names calls resolve by, collected
//! once before any body is walked.

use super::collect::Collector;
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
    /// The generics of the `impl` block a method is in (`impl<R: Views> Query<R>`).
    pub(super) impl_generics: Option<&'a syn::Generics>,
    /// Marked `#[allow(dead_code)]`, private, and named nowhere else in its file (see
    /// [`Collector::unused`]).
    pub(super) unused: bool,
    /// A migration's `up`/`down` (sea-orm's `MigrationTrait`): applied once per database.
    pub(super) migration: bool,
    /// The trait a default method is written in (`trait Store { fn deposit(&self) { .. } }`).
    pub(super) in_trait: Option<&'a syn::Ident>,
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
    /// Types of the run with an `impl Drop`: a value of one held by a function may be a lease
    /// (see [`super::leases`]).
    pub(super) drops: HashSet<String>,
    /// The types of the run that implement each trait (`impl Accounts for PgAccounts`).
    pub(super) trait_impls: HashMap<String, Vec<String>>,
    /// The traits the run declares.
    pub(super) traits: HashSet<String>,
    /// Trait methods declared without a body (`fn pool(&self) -> &PgPool;`), by name, with the
    /// file: what a default method that calls one gets back.
    pub(super) required: HashMap<String, Vec<(usize, &'a syn::Signature)>>,
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
    /// What [`Index::self_fields`] found, by method name.
    self_reads: std::cell::RefCell<HashMap<String, Option<dataflow::Fields>>>,
}

/// Where a name declared in a block is seen: the block's first and last position.
pub(super) type Scope = (LineColumn, LineColumn);

/// `at` is inside `scope`.
pub(super) fn in_scope(scope: &Scope, at: LineColumn) -> bool {
    let key = |p: LineColumn| (p.line, p.column);
    key(scope.0) <= key(at) && key(at) <= key(scope.1)
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
            self_reads: Default::default(),
            derefs: HashSet::new(),
            drops: HashSet::new(),
            trait_impls: HashMap::new(),
            traits: HashSet::new(),
            required: HashMap::new(),
            names: names::TypeNames::collect(
                parsed.iter().map(|p| (p.path.as_path(), &p.ast)),
                &|m| modules.declares(m),
            ),
            field_values: HashMap::new(),
        };
        for (file, p) in parsed.iter().enumerate() {
            Collector {
                ix: &mut ix,
                file,
                in_test: false,
                in_dialect: None,
                owner: None,
                impl_generics: None,
                module: None,
                impl_trait: None,
                block: None,
                locals: Vec::new(),
                in_trait: None,
            }
            .visit_file(&p.ast);
        }
        ix.nest_handle_structs();
        ix.signature_dialects();
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

    /// A struct with a field of a struct that holds a handle holds it too (`struct State {
    /// db: ReadWrite }` around `struct ReadWrite { write_pool: PgPool }`), to any depth; so
    /// does one with a field of a generic type whose bounds on the struct name a trait such a
    /// struct implements.
    fn nest_handle_structs(&mut self) {
        loop {
            let mut found = Vec::new();
            for (name, defs) in &self.structs {
                if self.handle_structs.contains_key(name) {
                    continue;
                }
                let inner = defs.iter().find_map(|(_, s)| {
                    s.fields.iter().find_map(|f| {
                        let t = types::type_name(&f.ty)?;
                        self.handle_structs.get(&t).copied()
                    })
                });
                // `struct Query<R: Views> { views: Arc<R> }`, a type of the run implementing
                // `Views` holding one.
                let inner = inner.or_else(|| {
                    defs.iter().find_map(|(_, s)| {
                        s.fields.iter().find_map(|f| {
                            let traits = generics::field_traits(&f.ty, [&s.generics]);
                            let (_, impls) = self.implementors(&traits)?;
                            impls
                                .iter()
                                .find_map(|i| self.handle_structs.get(i).copied())
                        })
                    })
                });
                found.extend(inner.map(|h| (name.clone(), h)));
            }
            if found.is_empty() {
                return;
            }
            self.handle_structs.extend(found);
        }
    }

    /// A function no `cfg` feature gives a database, whose `impl` or parameters name one
    /// through a type argument that is a struct of the run holding a handle of it (`impl
    /// Repo<SqlitePool>`, `tx: &mut Labelled<SqlitePool>`, the run's own `struct SqlitePool {
    /// pool: sqlx::SqlitePool }`): that database, if they name only one.
    fn signature_dialects(&mut self) {
        for f in &mut self.fns {
            if f.dialect.is_some() {
                continue;
            }
            let params = f.sig.inputs.iter().filter_map(|a| match a {
                syn::FnArg::Typed(t) => Some(&*t.ty),
                syn::FnArg::Receiver(_) => None,
            });
            let named: std::collections::BTreeSet<Dialect> = f
                .owner
                .into_iter()
                .chain(params)
                .flat_map(types::type_args)
                .filter_map(|a| self.handle_structs.get(&types::type_name(a)?)?.1)
                .collect();
            if named.len() == 1 {
                f.dialect = named.first().copied();
            }
        }
    }

    /// The struct of the run a field of `owner` is declared as, when that struct holds a
    /// handle (`state.read_write` of `struct State { read_write: ReadWrite }`) and is not a
    /// handle itself (a wrapper that derefs to one: see [`Index::handle_type`]).
    pub(super) fn handle_struct_field(&self, owner: &str, field: &str) -> Option<String> {
        let defs = self.structs.get(owner)?;
        let (file, f) = defs.iter().find_map(|(file, s)| {
            let f = s
                .fields
                .iter()
                .find(|f| f.ident.as_ref().is_some_and(|i| i == field))?;
            Some((*file, f))
        })?;
        if self.handle_type(&f.ty, file).is_some() {
            return None;
        }
        types::type_name(&f.ty).filter(|t| self.handle_structs.contains_key(t))
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
        self.field_decl(owner, field, file)
            .map(|(at, _, ty)| (at, ty))
    }

    /// [`Index::field_type`], with the struct declaring the field.
    pub(super) fn field_decl(
        &self,
        owner: &syn::Type,
        field: &str,
        file: usize,
    ) -> Option<(usize, &'a syn::ItemStruct, &'a syn::Type)> {
        let all = self.structs.get(&types::type_name(owner)?)?;
        let &(at, s) = match all.as_slice() {
            [one] => one,
            many => many.iter().find(|(f, _)| *f == file)?,
        };
        s.fields
            .iter()
            .find(|f| f.ident.as_ref().is_some_and(|i| i == field))
            .map(|f| (at, s, &f.ty))
    }

    /// The types of the run implementing one of `traits` that hold a handle: of the first of
    /// `traits` that has any.
    pub(super) fn implementors<'t>(&self, traits: &'t [String]) -> Option<(&'t str, &[String])> {
        traits.iter().find_map(|t| {
            let impls = self.trait_impls.get(t)?;
            (impls.iter().any(|i| self.handle_structs.contains_key(i)))
                .then_some((t.as_str(), impls.as_slice()))
        })
    }

    /// The function a call names: one in the caller's file first, else the only one anywhere.
    /// The method `name` of the type named `owner` (`impl Repo { fn load(&self) }`).
    pub(super) fn method(&self, name: &str, owner: &str) -> Option<usize> {
        let methods = self.by_name.get(name)?.iter().copied();
        let mut methods = methods.filter(|&i| self.fns[i].sig.receiver().is_some());
        let own =
            |&i: &usize| self.fns[i].owner.and_then(types::type_name).as_deref() == Some(owner);
        // Else the default of a trait `owner` implements (or is: `self` in a default method).
        let default = |&i: &usize| {
            self.fns[i].in_trait.is_some_and(|t| {
                t == owner
                    || (self.trait_impls.get(&t.to_string()))
                        .is_some_and(|types| types.iter().any(|ty| ty == owner))
            })
        };
        methods.clone().find(own).or_else(|| methods.find(default))
    }

    /// `self.name(..)` in a default method of trait `owner`, `name` declared in no body of
    /// the trait (a required method, also of a supertrait): the methods `name` of the types
    /// implementing `owner`, grouped by the `impl`'s type as written (`Migrator<Postgres>`,
    /// `Migrator<MySql>`: one generic type implemented once per database), in index order.
    /// Test code's only for a test's walk.
    pub(super) fn implemented(&self, name: &str, owner: &str, test: bool) -> Vec<(String, usize)> {
        let (Some(types), Some(methods)) = (self.trait_impls.get(owner), self.by_name.get(name))
        else {
            return Vec::new();
        };
        let mut out: Vec<(String, usize)> = Vec::new();
        for &i in methods {
            let f = &self.fns[i];
            let Some(ty) = f.owner else { continue };
            let of_implementor = types::type_name(ty).is_some_and(|n| types.contains(&n));
            if f.sig.receiver().is_none() || !of_implementor || (f.test && !test) {
                continue;
            }
            let written = quote::ToTokens::to_token_stream(ty).to_string();
            if !out.iter().any(|(w, _)| *w == written) {
                out.push((written, i));
            }
        }
        out
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
            // `Type::f`: of several functions named `f`, those of `impl Type` (a `Row::insert`
            // is not the repository's `insert` of another type).
            let owner = &path[path.len() - 2];
            let owned: Vec<usize> = self
                .by_name
                .get(name)?
                .iter()
                .copied()
                .filter(|&i| {
                    let of = self.fns[i].owner.and_then(types::type_name);
                    of.as_deref() == Some(owner.as_str())
                })
                .collect();
            return match owned.is_empty() {
                true => self.function(name, file),
                false => self.choose(&owned, file),
            };
        }
        let free: Vec<usize> = self
            .by_name
            .get(name)?
            .iter()
            .copied()
            .filter(|&i| self.fns[i].owner.is_none() && self.fns[i].sig.receiver().is_none())
            .collect();
        self.choose(&free, file).or_else(|| {
            // Of several in other files, the one the file's `use` imports.
            let mut imported = free
                .iter()
                .filter(|&&i| self.names.imported_from(file, name, self.fns[i].file) == Some(true));
            match (imported.next(), imported.next()) {
                (Some(&i), None) => Some(i),
                _ => None,
            }
        })
    }
}

impl Index<'_> {
    /// The fields of `self` that the run's methods named `name` read, when every one of them
    /// reads `self` only through named fields (see [`dataflow::self_fields`]); `None` when one
    /// uses `self` otherwise, or the run has no such method (one of a library says nothing).
    pub(super) fn self_fields(&self, name: &str) -> Option<dataflow::Fields> {
        if let Some(known) = self.self_reads.borrow().get(name) {
            return known.clone();
        }
        let read = || {
            let mut out = dataflow::Fields::new();
            for &i in self.by_name.get(name)? {
                let f = &self.fns[i];
                f.sig.receiver()?;
                out.extend(dataflow::self_fields(f.block)?);
            }
            Some(out)
        };
        let out = read();
        let cache = &mut self.self_reads.borrow_mut();
        cache.insert(name.to_string(), out.clone());
        out
    }
}

impl Index<'_> {
    /// The tables diesel's `table!` and sea-orm's entities declare, with the foreign keys of
    /// `joinable!` and `belongs_to` relations.
    pub(super) fn declared_tables(&self) -> Vec<TableDdl> {
        let mut declared: Vec<TableDdl> = self.tables.values().cloned().collect();
        // `joinable!(child -> parent (column))`: a foreign key to the parent's primary key.
        for [child, parent, column] in &self.joinables {
            let (Some(c), Some(p)) = (self.tables.get(child), self.tables.get(parent)) else {
                continue;
            };
            let fk = ForeignKey {
                name: None,
                columns: vec![column.clone()],
                table: p.table.clone(),
                referred: p.primary_key.clone().unwrap_or_default(),
            };
            if let Some(d) = declared.iter_mut().find(|d| d.table == c.table)
                && !d.foreign_keys.contains(&fk)
            {
                d.foreign_keys.push(fk);
            }
        }
        // sea-orm's `#[sea_orm(belongs_to = "super::parent::Entity", from = .., to = ..)]`.
        let table_of = |module: &str| {
            let t = self
                .entity_tables
                .get(module)
                .map_or(module, String::as_str);
            t.to_string()
        };
        for [child, parent, from, to] in &self.relations {
            let fk = ForeignKey {
                name: None,
                columns: vec![from.clone()],
                table: table_of(parent),
                referred: vec![to.clone()],
            };
            let child = table_of(child);
            if let Some(d) = declared.iter_mut().find(|d| d.table == child)
                && !d.foreign_keys.contains(&fk)
            {
                d.foreign_keys.push(fk);
            }
        }
        declared.sort_by(|a, b| a.table.cmp(&b.table));
        declared
    }
}
