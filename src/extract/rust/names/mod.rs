//! The names a run's types go by: `type Conn = Object<AsyncPgConnection>;` aliases, `use
//! deadpool::managed::Object as DeadpoolObject;` renames, the crate a driver's type name is
//! imported from (`use reqwest::Client;` is not tokio-postgres's), the run's own types named
//! like a driver's (`struct Client` of an HTTP API), and the `Deref` targets of its own wrappers
//! (`impl Deref for DbConn { type Target = AsyncPgConnection; }`). A type is resolved through
//! them before its kind is judged, so a project's names for a driver's types are that driver's
//! types, and its own types or another crate's of the same name are not.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use quote::ToTokens;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;

use super::drivers;

/// How many aliases deep a name is followed (`type A = B; type B = A;` stops here), and how
/// many aliases one type expands in all (`type A = (A, A, A, A);` would double each level).
const DEPTH: usize = 8;
const EXPANSIONS: usize = 64;

#[derive(Default)]
pub struct TypeNames<'a> {
    /// Each file's path, to prefer the declarations nearest a use.
    paths: Vec<&'a std::path::Path>,
    /// `type` aliases by name: the file declaring each and the type it stands for.
    aliases: HashMap<String, Vec<(usize, &'a syn::Type)>>,
    /// `use .. as ..` renames and imports of a driver's type name (`use reqwest::Client;`), per
    /// file: the name to the path it stands for (the bare name, imported from the run's own
    /// crates and modules).
    renames: HashMap<(usize, String), syn::Path>,
    /// `impl Deref for W { type Target = T; }`: W's name to T, with the file declaring it.
    targets: HashMap<String, Vec<(usize, &'a syn::Type)>>,
    /// diesel tables imported from their `dsl` module, per file (see [`Dsl`]).
    dsl: Dsl,
    /// `use billing::store::{insert_row, ..}`, per file: a function's (lower-case) name to
    /// the modules of the path it is imported by (`billing`, `store`).
    imports: HashMap<(usize, String), Vec<String>>,
    /// Structs, enums and unions of the run named like a driver's type: written bare and not
    /// imported, the name is the run's own type (`struct Client` of an HTTP API).
    own: HashSet<String>,
}

/// The names a file gives diesel tables through their `dsl` module, in `use` items at the top
/// or in a function's body: `use schema::users::dsl::*` and `use schema::users::dsl::users`
/// name the table `users`; `use schema::users::dsl as u` (or `::dsl` alone) makes `u::users`
/// the table. A name given to two tables names neither.
#[derive(Default)]
struct Dsl {
    /// A bare name of a table: (file, name) to the table.
    tables: HashMap<(usize, String), Vec<String>>,
    /// A name of a table's `dsl` module: (file, name) to the tables it can be the module of.
    modules: HashMap<(usize, String), Vec<String>>,
}

impl<'a> TypeNames<'a> {
    /// Collect the aliases, renames and `Deref` targets of every file (`files[i]` is file `i`).
    /// `declared` tells the modules the run declares (`mod db;`): a `use db::Pool;` of them
    /// imports the run's own item.
    pub fn collect(
        files: impl IntoIterator<Item = (&'a std::path::Path, &'a syn::File)>,
        declared: &dyn Fn(&str) -> bool,
    ) -> Self {
        let mut names = TypeNames::default();
        for (file, (path, ast)) in files.into_iter().enumerate() {
            names.paths.push(path);
            Collect {
                names: &mut names,
                file,
            }
            .visit_file(ast);
        }
        names.localize(declared);
        names
    }

    /// An import from the run's own crates and modules (`use crate::db::Pool as DbPool`, `use
    /// store::Transaction` of a package `store/` of the run) names the item by its name: what
    /// that is, the run's declarations tell (its own type, an alias, a re-exported driver's
    /// type).
    fn localize(&mut self, declared: &dyn Fn(&str) -> bool) {
        let crates: HashSet<String> = self.paths.iter().filter_map(|p| package(p)).collect();
        let local = |first: &str| {
            matches!(first, "crate" | "self" | "super") || declared(first) || crates.contains(first)
        };
        self.renames.retain(|(_, name), path| {
            let (Some(first), Some(last)) = (path.segments.first(), path.segments.last()) else {
                return false;
            };
            if !local(&first.ident.to_string()) {
                return true;
            }
            let last = last.ident.clone();
            let renamed = last != name.as_str();
            *path = syn::Path::from(last);
            renamed
        });
    }

    /// `ty` as the driver names it: aliases expanded and renames undone everywhere inside
    /// (`Arc<Conn>` → `Arc<Object<AsyncPgConnection>>`). Borrowed when nothing changes.
    pub fn resolve<'t>(&self, ty: &'t syn::Type, file: usize) -> Cow<'t, syn::Type> {
        if !self.names_any(ty, file) {
            return Cow::Borrowed(ty);
        }
        let mut out = ty.clone();
        let mut r = Resolve {
            names: self,
            file,
            depth: 0,
            budget: EXPANSIONS,
            changed: false,
        };
        r.visit_type_mut(&mut out);
        if r.changed {
            Cow::Owned(out)
        } else {
            Cow::Borrowed(ty)
        }
    }

    /// The diesel table a path names through an imported `dsl` module (`users` after `use
    /// schema::users::dsl::*`, `u::users` after `use schema::users::dsl as u`), in `file`.
    pub fn dsl_table(&self, path: &syn::Path, file: usize) -> Option<String> {
        // Most runs import no `dsl` module: no name of a path needs a copy then.
        if self.dsl.tables.is_empty() && self.dsl.modules.is_empty() {
            return None;
        }
        let mut segments = path.segments.iter().map(|s| s.ident.to_string());
        let (first, second) = (segments.next()?, segments.next());
        if segments.next().is_some() {
            return None;
        }
        match second {
            None => match self.dsl.tables.get(&(file, first))?.as_slice() {
                [table] => Some(table.clone()),
                _ => None,
            },
            Some(table) => {
                let module = self.dsl.modules.get(&(file, first))?;
                module.contains(&table).then_some(table)
            }
        }
    }

    /// Whether `file` imports the function `name` from a module that `candidate`, a file of
    /// the run, can be: the path's last module is the candidate's (`utils` for `api/utils.rs`
    /// or `utils/mod.rs`, a crate for its `src/lib.rs`) and its other modules and crates name
    /// folders above it, in order (`crate`, `self` and `super` aside). `None` when `file` does not import `name` by a path
    /// with a module in it.
    pub fn imported_from(&self, file: usize, name: &str, candidate: usize) -> Option<bool> {
        let modules = self.imports.get(&(file, name.to_string()))?;
        let path = self.paths.get(candidate)?;
        let mut parts: Vec<String> = path
            .with_extension("")
            .iter()
            .map(|c| c.to_string_lossy().replace('-', "_"))
            .collect();
        // `utils/mod.rs` is `utils`; a crate's `src/lib.rs` is the crate, named by its folder.
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        } else if parts.last().is_some_and(|p| p == "lib" || p == "main") {
            parts.pop();
            if parts.last().is_some_and(|p| p == "src") {
                parts.pop();
            }
        }
        let (last, above) = modules.split_last()?;
        if parts.last() != Some(last) {
            return Some(false);
        }
        let mut folders = parts[..parts.len() - 1].iter();
        Some(above.iter().all(|m| folders.any(|f| f == m)))
    }

    /// Whether a path inside `ty` names an alias or one of `file`'s renames: most types name
    /// neither, and are judged as written without a copy.
    fn names_any(&self, ty: &syn::Type, file: usize) -> bool {
        struct Names<'n, 'a>(&'n TypeNames<'a>, usize, bool);
        impl Visit<'_> for Names<'_, '_> {
            fn visit_path_segment(&mut self, s: &syn::PathSegment) {
                let name = s.ident.to_string();
                self.2 |= self.0.aliases.contains_key(&name)
                    || self.0.own.contains(&name)
                    || self.0.renames.contains_key(&(self.1, name));
                syn::visit::visit_path_segment(self, s);
            }
        }
        let mut found = Names(self, file, false);
        found.visit_type(ty);
        found.2
    }

    /// What the run's type named `name` dereferences to (`impl Deref for DbConn { type Target =
    /// AsyncPgConnection; }`), as written, with the file writing it: the declaration in `file`
    /// first, else the nearest ones if they agree.
    pub fn declared_target(&self, name: &str, file: usize) -> Option<(usize, &'a syn::Type)> {
        self.pick(self.targets.get(name)?, file)
    }
}

impl<'a> TypeNames<'a> {
    /// The declaration of a name to use from `file`: its own, else those of the files nearest
    /// it (the longest common folder: its crate's own `type Conn` before another crate's), if
    /// they agree. Two of one file that disagree are one per build (`#[cfg(feature =
    /// "postgres")] type Conn = PgConnection;` and `#[cfg(not(..))] type Conn =
    /// SqliteConnection;`): neither is used.
    fn pick(&self, all: &[(usize, &'a syn::Type)], file: usize) -> Option<(usize, &'a syn::Type)> {
        let text = |t: &syn::Type| t.to_token_stream().to_string();
        let mut own = all.iter().filter(|(f, _)| *f == file);
        if let Some(first) = own.next() {
            let want = text(first.1);
            return own.all(|(_, t)| text(t) == want).then_some(*first);
        }
        let near = |f: usize| match (self.paths.get(f), self.paths.get(file)) {
            (Some(a), Some(b)) => a
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
                .zip(b.parent().into_iter().flat_map(|p| p.components()))
                .take_while(|(x, y)| x == y)
                .count(),
            _ => 0,
        };
        let best = all.iter().map(|(f, _)| near(*f)).max()?;
        let mut nearest = all.iter().filter(|(f, _)| near(*f) == best);
        let first = nearest.next()?;
        let want = text(first.1);
        nearest.all(|(_, t)| text(t) == want).then_some(*first)
    }
}

struct Collect<'n, 'a> {
    names: &'n mut TypeNames<'a>,
    file: usize,
}

impl<'a> Visit<'a> for Collect<'_, 'a> {
    fn visit_item_type(&mut self, t: &'a syn::ItemType) {
        let at = (self.file, &*t.ty);
        let name = t.ident.to_string();
        self.names.aliases.entry(name).or_default().push(at);
    }
    fn visit_item_struct(&mut self, s: &'a syn::ItemStruct) {
        self.own_type(&s.ident);
    }
    fn visit_item_enum(&mut self, e: &'a syn::ItemEnum) {
        self.own_type(&e.ident);
    }
    fn visit_item_union(&mut self, u: &'a syn::ItemUnion) {
        self.own_type(&u.ident);
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        self.use_tree(&u.tree, &mut Vec::new(), true);
    }
    fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
        let derefs = i.trait_.as_ref().and_then(|(_, t, _)| t.segments.last());
        if derefs.is_some_and(|s| s.ident == "Deref")
            && let syn::Type::Path(p) = &*i.self_ty
            && let Some(owner) = p.path.segments.last()
        {
            for item in &i.items {
                if let syn::ImplItem::Type(t) = item
                    && t.ident == "Target"
                {
                    let at = (self.file, &t.ty);
                    let name = owner.ident.to_string();
                    self.names.targets.entry(name).or_default().push(at);
                }
            }
        }
        syn::visit::visit_item_impl(self, i);
    }
    // Function bodies declare no names other files use, and are most of a file: only the
    // diesel `dsl` imports at their top are read.
    fn visit_block(&mut self, b: &'a syn::Block) {
        for stmt in &b.stmts {
            if let syn::Stmt::Item(syn::Item::Use(u)) = stmt {
                self.use_tree(&u.tree, &mut Vec::new(), false);
            }
        }
    }
}

/// The crate a file of the run belongs to, by the folder its `src/` is in (`crates/app-store/src/db.rs`:
/// `app_store`).
fn package(path: &std::path::Path) -> Option<String> {
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    let src = parts.iter().rposition(|p| p == "src")?;
    let dir = parts.get(src.checked_sub(1)?)?;
    Some(dir.replace('-', "_"))
}

/// The path `prefix::name` of a `use` tree's leaf.
fn path_to(prefix: &[syn::Ident], name: &syn::Ident) -> syn::Path {
    let segments = prefix.iter().chain([name]).cloned();
    syn::Path {
        leading_colon: None,
        segments: segments.map(syn::PathSegment::from).collect(),
    }
}

impl Collect<'_, '_> {
    /// A type of the run named like a driver's (`struct Client`, `struct Pool<T, F>`).
    fn own_type(&mut self, name: &syn::Ident) {
        let name = name.to_string();
        if drivers::names_a_type(&name) {
            self.names.own.insert(name);
        }
    }

    /// Record what a `use` tree names: its renames (`use a::B as C`, when `renames`: a file's
    /// own items, not a function body's) and its diesel `dsl` imports (see [`Dsl`]).
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<syn::Ident>, renames: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.clone());
                self.use_tree(&p.tree, prefix, renames);
                prefix.pop();
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix, renames);
                }
            }
            leaf => {
                if let syn::UseTree::Rename(r) = leaf
                    && renames
                    && r.ident != r.rename
                    && r.ident != "self"
                {
                    let key = (self.file, r.rename.to_string());
                    self.names.renames.insert(key, path_to(prefix, &r.ident));
                }
                if let syn::UseTree::Name(n) = leaf
                    && renames
                {
                    self.import(&n.ident, prefix);
                    // `use rocket_db_pools::Connection;`, `use reqwest::Client;`: a name a
                    // driver's type has keeps the crate it comes from in this file.
                    let name = n.ident.to_string();
                    if !prefix.is_empty() && drivers::names_a_type(&name) {
                        let key = (self.file, name);
                        self.names.renames.insert(key, path_to(prefix, &n.ident));
                    }
                }
                self.dsl_import(leaf, prefix);
            }
        }
    }

    /// `use a::b::f`: a function's (lower-case) name imported by a path with modules in it
    /// (see [`TypeNames::imported_from`]).
    fn import(&mut self, name: &syn::Ident, prefix: &[syn::Ident]) {
        let modules: Vec<String> = prefix
            .iter()
            .map(ToString::to_string)
            .filter(|m| !matches!(m.as_str(), "crate" | "self" | "super"))
            .collect();
        let name = name.to_string();
        if !modules.is_empty() && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            self.names.imports.insert((self.file, name), modules);
        }
    }

    /// What the last item of a `use` path names of diesel's `dsl` modules (see [`Dsl`]).
    fn dsl_import(&mut self, leaf: &syn::UseTree, prefix: &[syn::Ident]) {
        // The table whose `dsl` module `prefix` ends in (`schema::users::dsl` → `users`).
        let table = match prefix {
            [.., t, d] if d == "dsl" => Some(t.to_string()),
            _ => None,
        };
        let file = self.file;
        let dsl = &mut self.names.dsl;
        match leaf {
            syn::UseTree::Glob(_) => {
                if let Some(t) = table {
                    push(&mut dsl.tables, (file, t.clone()), t);
                }
            }
            syn::UseTree::Name(n) => match table {
                Some(t) if n.ident == t => push(&mut dsl.tables, (file, t.clone()), t),
                Some(_) => {}
                None if n.ident == "dsl" => {
                    if let Some(t) = prefix.last() {
                        push(&mut dsl.modules, (file, "dsl".into()), t.to_string());
                    }
                }
                None => {}
            },
            syn::UseTree::Rename(r) => match table {
                Some(t) if r.ident == t => push(&mut dsl.tables, (file, r.rename.to_string()), t),
                Some(_) => {}
                None if r.ident == "dsl" => {
                    if let Some(t) = prefix.last() {
                        push(
                            &mut dsl.modules,
                            (file, r.rename.to_string()),
                            t.to_string(),
                        );
                    }
                }
                None => {}
            },
            syn::UseTree::Path(_) | syn::UseTree::Group(_) => {}
        }
    }
}

/// Add `t` to what `key` can name, once.
fn push(map: &mut HashMap<(usize, String), Vec<String>>, key: (usize, String), t: String) {
    let all = map.entry(key).or_default();
    if !all.contains(&t) {
        all.push(t);
    }
}

struct Resolve<'n, 'a> {
    names: &'n TypeNames<'a>,
    file: usize,
    depth: usize,
    /// Aliases this resolution may still expand.
    budget: usize,
    changed: bool,
}

impl Resolve<'_, '_> {
    /// `path` as the file's imports and the run's own types name it: a path starting with a
    /// name the file imports starts with what it imports (`Pooled<T>` after `use
    /// deadpool::managed::Object as Pooled`, `Client` after `use tokio_postgres::Client`); a
    /// bare name of a type of the run is the run's (`crate::Client`). `None`: as written.
    fn imported(&self, path: &syn::Path) -> Option<syn::Path> {
        let first = path.segments.first()?;
        let name = first.ident.to_string();
        let rest = path.segments.iter().skip(1).cloned();
        let (mut out, renamed) = match self.names.renames.get(&(self.file, name)) {
            Some(full) => {
                let mut out = full.clone();
                if let Some(l) = out.segments.last_mut() {
                    l.arguments = first.arguments.clone();
                }
                out.segments.extend(rest);
                (out, true)
            }
            None => (path.clone(), false),
        };
        let own = match out.segments.first() {
            Some(only) if out.segments.len() == 1 => {
                self.names.own.contains(&only.ident.to_string())
            }
            _ => false,
        };
        if own {
            out.segments.insert(0, quote::format_ident!("crate").into());
        }
        (own || renamed).then_some(out)
    }
}

impl VisitMut for Resolve<'_, '_> {
    fn visit_type_mut(&mut self, ty: &mut syn::Type) {
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && self.depth < DEPTH
            && self.budget > 0
            && let Some(last) = p.path.segments.last()
        {
            let name = last.ident.to_string();
            let alias = self.names.aliases.get(&name).and_then(|all| {
                let (at, aliased) = self.names.pick(all, self.file)?;
                // `type Pool = sqlx::Pool<Postgres>`: a name for itself is no alias.
                let same = matches!(aliased, syn::Type::Path(a) if a.path.segments.last().is_some_and(|s| s.ident == name));
                (!same).then_some((at, aliased))
            });
            if let Some((at, aliased)) = alias {
                *ty = aliased.clone();
                self.changed = true;
                self.budget -= 1;
                let (file, depth) = (self.file, self.depth);
                self.file = at;
                self.depth += 1;
                self.visit_type_mut(ty);
                self.file = file;
                self.depth = depth;
                return;
            }
            if let Some(path) = self.imported(&p.path) {
                p.path = path;
                self.changed = true;
            }
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }
}

#[cfg(test)]
mod tests;
