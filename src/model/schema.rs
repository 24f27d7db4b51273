//! The schema the repository itself declares: tables, keys and foreign keys from every
//! `CREATE TABLE`, `CREATE UNIQUE INDEX` and `ALTER TABLE ... ADD CONSTRAINT` of the run's SQL
//! (migrations included), applied in file-name order, and the primary keys of the tables host
//! code declares (diesel's `table!`) where the SQL declares none. Rules use it to tell a race
//! that a constraint settles from one it does not.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use super::*;
use crate::source::{FileId, Span};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableInfo {
    pub columns: Vec<String>,
    pub primary_key: Option<Vec<String>>,
    pub unique: Vec<Vec<String>>,
    /// Partial unique keys, with the columns that must be NULL for a row to be covered (see
    /// [`TableDdl::partial`]).
    pub partial: Vec<(Vec<String>, Vec<String>)>,
    /// Partial unique keys on other predicates, with their tests (see
    /// [`TableDdl::predicated`]).
    pub predicated: Vec<(Vec<String>, Vec<String>)>,
    pub foreign_keys: Vec<ForeignKey>,
    /// Where the table is created (the first statement that declared anything of it).
    pub declared: Option<Span>,
}

#[derive(Debug, Default)]
pub struct Schema {
    /// By name: `schema.table` for a table declared in a schema other than `public`.
    pub tables: BTreeMap<String, TableInfo>,
    /// A table's unqualified name, when the run declares no table of that name outside a
    /// schema and one in exactly one: its key (`task` -> `underway.task`).
    short: BTreeMap<String, String>,
    /// Tables only other packages declare (see [`Schemas`]).
    pub borrowed: std::collections::BTreeSet<String>,
}

impl TableInfo {
    /// The unique keys and foreign keys `ddl` declares, each once.
    fn add_keys(&mut self, ddl: &TableDdl) {
        for u in &ddl.unique {
            if !self.unique.contains(u) {
                self.unique.push(u.clone());
            }
        }
        for p in &ddl.partial {
            if !self.partial.contains(p) {
                self.partial.push(p.clone());
            }
        }
        for p in &ddl.predicated {
            if !self.predicated.contains(p) {
                self.predicated.push(p.clone());
            }
        }
        for fk in &ddl.foreign_keys {
            if !self.foreign_keys.contains(fk) {
                self.foreign_keys.push(fk.clone());
            }
        }
    }

    /// `ALTER TABLE table DROP CONSTRAINT name`: the key or foreign key of that name, given or
    /// PostgreSQL's default (`<table>_pkey`, `<table>_<columns>_key`, `<table>_<columns>_fkey`).
    fn drop_constraint(&mut self, table: &str, name: &str) {
        let default =
            |columns: &[String], suffix: &str| format!("{table}_{}_{suffix}", columns.join("_"));
        if name == format!("{table}_pkey") {
            self.primary_key = None;
        }
        self.unique.retain(|u| default(u, "key") != name);
        self.foreign_keys.retain(|fk| match &fk.name {
            Some(given) => given != name,
            None => default(&fk.columns, "fkey") != name,
        });
    }
}

/// The schemas of a run. A run that holds several packages (folders with a `Cargo.toml`,
/// `package.json`, `go.mod`, ...) whose SQL declares tables (two services of a monorepo, each
/// with its migrations) has one schema per package: a file sees the tables of its package and
/// of the packages around it, then those only other packages declare (a library's code on the
/// tables of the service that migrates them); a file whose packages declare none sees them all.
#[derive(Debug, Default)]
pub struct Schemas {
    /// The whole run's schema first, then one per package that declares tables, with the
    /// package's folder.
    list: Vec<(Option<PathBuf>, Schema)>,
    /// By file, the index in `list` of the schema it sees (none listed: the first).
    by_file: Vec<usize>,
}

impl Schemas {
    /// `package`: the package folder of a file (see above).
    pub fn build(
        units: &[Unit],
        declared: &[TableDdl],
        files: usize,
        mut package: impl FnMut(FileId) -> Option<PathBuf>,
    ) -> Schemas {
        let whole = Schema::build(units.iter(), declared);
        let mut packages: Vec<Option<PathBuf>> = Vec::new();
        let mut of_unit: Vec<Option<PathBuf>> = Vec::with_capacity(units.len());
        for u in units {
            let p = package(u.span.file);
            if declares(u) && !packages.contains(&p) {
                packages.push(p.clone());
            }
            of_unit.push(p);
        }
        let mut schemas = Schemas {
            list: vec![(None, whole)],
            by_file: Vec::new(),
        };
        if packages.len() < 2 {
            return schemas;
        }
        let mut chains: Vec<Vec<Option<PathBuf>>> = Vec::new();
        for f in 0..files {
            let p = package(f);
            let chain: Vec<Option<PathBuf>> = packages
                .iter()
                .filter(|d| match (d, &p) {
                    (Some(d), Some(p)) => p.starts_with(d),
                    (None, None) => true,
                    _ => false,
                })
                .cloned()
                .collect();
            if chain.is_empty() {
                schemas.by_file.push(0);
                continue;
            }
            let at = match chains.iter().position(|c| *c == chain) {
                Some(i) => i + 1,
                None => {
                    let mine = units
                        .iter()
                        .zip(&of_unit)
                        .filter(|(_, p)| chain.contains(p))
                        .map(|(u, _)| u);
                    let nearest = chain.iter().flatten().max_by_key(|d| d.as_os_str().len());
                    let mut own = Schema::build(mine, declared);
                    own.fill_from(&schemas.list[0].1);
                    schemas.list.push((nearest.cloned(), own));
                    chains.push(chain);
                    chains.len()
                }
            };
            schemas.by_file.push(at);
        }
        schemas
    }

    /// The schema the statements of `file` see.
    pub fn of(&self, file: FileId) -> &Schema {
        let at = self.by_file.get(file).copied().unwrap_or(0);
        &self.list[at].1
    }

    /// The schemas to show: the whole run's, or one per package with that package's folder.
    pub fn shown(&self) -> &[(Option<PathBuf>, Schema)] {
        match self.list.len() {
            1 => &self.list,
            _ => &self.list[1..],
        }
    }
}

/// A script or query file that declares a table.
fn declares(u: &Unit) -> bool {
    matches!(u.kind, UnitKind::Script | UnitKind::QueryFile)
        && u.transactions
            .iter()
            .flat_map(|t| &t.steps)
            .any(|s| s.facts.extra().ddl.is_some())
}

impl Schema {
    pub fn build<'u>(units: impl Iterator<Item = &'u Unit>, declared: &[TableDdl]) -> Schema {
        let mut schema = Schema::default();
        // Scripts and query files first; then the DDL host code sends (`CREATE TABLE IF NOT
        // EXISTS ..` run at start-up), for the tables no script declares: where both do, the
        // migrations are the schema (host DDL is often an old path they replaced).
        let (files, host): (Vec<&Unit>, Vec<&Unit>) =
            units.partition(|u| matches!(u.kind, UnitKind::Script | UnitKind::QueryFile));
        for (step, ddl) in ddl_steps(&files) {
            schema.declare(step, ddl);
        }
        let scripted: HashSet<String> = schema
            .tables
            .iter()
            .filter(|(_, t)| t.declared.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for (step, ddl) in ddl_steps(&host) {
            if !scripted.contains(&schema.key(ddl)) {
                schema.declare(step, ddl);
            }
        }
        // diesel's `table!` and sea-orm's entities are generated from the database (or written
        // to match it): they tell the primary key (diesel's `joinable!` a foreign key, sea-orm
        // a column's `unique`), not every unique constraint, and the migrations win where they
        // say more. They are not a `CREATE TABLE` (a witness cannot run them), so `declared`
        // stays with the SQL.
        for ddl in declared {
            let key = schema.key(ddl);
            let t = schema.tables.entry(key).or_default();
            if t.columns.is_empty() {
                t.columns.clone_from(&ddl.columns);
            }
            if t.primary_key.is_none() {
                t.primary_key.clone_from(&ddl.primary_key);
            }
            t.add_keys(ddl);
        }
        schema.index();
        schema
    }

    /// What the DDL statement `step` (`ddl`) says of its table.
    fn declare(&mut self, step: &Step, ddl: &TableDdl) {
        let key = self.key(ddl);
        let t = self.tables.entry(key).or_default();
        if ddl.creates {
            *t = TableInfo {
                columns: ddl.columns.clone(),
                ..TableInfo::default()
            };
            t.declared = Some(step.span);
        }
        t.declared.get_or_insert(step.span);
        // `DROP CONSTRAINT k, ADD CONSTRAINT k ..`: the drop comes first.
        for n in &ddl.dropped {
            t.drop_constraint(&ddl.table, n);
        }
        if ddl.primary_key.is_some() {
            t.primary_key.clone_from(&ddl.primary_key);
        }
        t.add_keys(ddl);
    }

    /// Tables `other` declares and this schema does not.
    fn fill_from(&mut self, other: &Schema) {
        for (k, t) in &other.tables {
            if !self.tables.contains_key(k) {
                self.tables.insert(k.clone(), t.clone());
                self.borrowed.insert(k.clone());
            }
        }
        self.index();
    }

    /// The unqualified names of the tables declared in one schema only.
    fn index(&mut self) {
        let schema = self;
        let mut short: BTreeMap<String, Option<String>> = BTreeMap::new();
        for key in schema.tables.keys() {
            if let Some((_, name)) = key.rsplit_once('.') {
                short
                    .entry(name.to_string())
                    .and_modify(|k| *k = None)
                    .or_insert_with(|| Some(key.clone()));
            }
        }
        schema.short = short
            .into_iter()
            .filter_map(|(name, key)| Some((name, key?)))
            .filter(|(name, _)| !schema.tables.contains_key(name))
            .collect();
    }

    /// The key of the table a DDL statement names: qualified when it names a schema; an
    /// unqualified `CREATE TABLE` is a table outside a schema, other unqualified names the
    /// table of that name outside a schema, else the one table of that name in a schema (the
    /// search path is not followed).
    fn key(&self, ddl: &TableDdl) -> String {
        if let Some(s) = &ddl.schema {
            return format!("{s}.{}", ddl.table);
        }
        if ddl.creates || self.tables.contains_key(&ddl.table) {
            return ddl.table.clone();
        }
        let mut qualified = self
            .tables
            .keys()
            .filter(|k| k.rsplit_once('.').is_some_and(|(_, n)| n == ddl.table));
        match (qualified.next(), qualified.next()) {
            (Some(k), None) => k.clone(),
            _ => ddl.table.clone(),
        }
    }

    /// The table a statement names by `table` (its last name part): the one of that name
    /// outside a schema, else the one table of that name in a schema.
    pub fn get(&self, table: &str) -> Option<&TableInfo> {
        self.tables
            .get(table)
            .or_else(|| self.tables.get(self.short.get(table)?))
    }

    /// The run's SQL declares the table, so its unique constraints are known: a key missing
    /// there is missing. A table known only from diesel's `table!` or a sea-orm entity has the
    /// keys those list, which need not be all of them.
    pub fn declares(&self, table: &str) -> bool {
        self.get(table).is_some_and(|t| t.declared.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// A unique constraint (or the primary key) whose columns are all among `columns`: rows
    /// with equal values there cannot both exist.
    pub fn unique_within<C: AsRef<str>>(&self, table: &str, columns: &[C]) -> Option<Vec<String>> {
        let t = self.get(table)?;
        t.primary_key
            .iter()
            .chain(&t.unique)
            .find(|key| within(key, columns))
            .cloned()
    }

    /// As [`Schema::unique_within`], for a row written with values for `set` (columns given a
    /// value that is not NULL) after a check that made `tests`: also a partial key that covers
    /// such a row (`WHERE deleted_at IS NULL` when `deleted_at` is not among them); a partial key
    /// the row falls outside of settles nothing for it. A partial key on another predicate
    /// settles it when the check made every test of that predicate (`.. AND is_verified IS
    /// TRUE` against `WHERE is_verified IS TRUE`): the rows the check looks for are the index's;
    /// also a test the row written passes for certain (`passes`: a constant it writes).
    pub fn unique_within_row<C: AsRef<str>, T: AsRef<str>>(
        &self,
        table: &str,
        columns: &[C],
        set: &[&str],
        tests: &[T],
        passes: &dyn Fn(&str) -> bool,
    ) -> Option<Vec<String>> {
        self.unique_within(table, columns).or_else(|| {
            let t = self.get(table)?;
            let nulls = t.partial.iter().find(|(key, nulls)| {
                within(key, columns) && !nulls.iter().any(|n| set.contains(&n.as_str()))
            });
            let tested = || {
                t.predicated.iter().find(|(key, wants)| {
                    within(key, columns)
                        && wants
                            .iter()
                            .all(|w| tests.iter().any(|t| t.as_ref() == w) || passes(w))
                })
            };
            nulls.or_else(tested).map(|(key, _)| key.clone())
        })
    }

    /// `column` is part of the primary key or of a unique constraint of `table`.
    pub fn in_unique_key(&self, table: &str, column: &str) -> bool {
        self.get(table).is_some_and(|t| {
            t.primary_key
                .iter()
                .chain(&t.unique)
                .any(|key| key.iter().any(|k| k == column))
        })
    }

    /// The foreign key from `child` to `parent`, if declared.
    pub fn foreign_key(&self, child: &str, parent: &str) -> Option<&ForeignKey> {
        self.get(child)?
            .foreign_keys
            .iter()
            .find(|f| f.table == parent)
    }
}

/// `key` is a key, and all its columns are among `columns`.
fn within<C: AsRef<str>>(key: &[String], columns: &[C]) -> bool {
    !key.is_empty() && key.iter().all(|k| columns.iter().any(|c| c.as_ref() == k))
}

/// The DDL statements of `units`, in order.
fn ddl_steps<'u>(units: &[&'u Unit]) -> impl Iterator<Item = (&'u Step, &'u TableDdl)> {
    units
        .iter()
        .flat_map(|u| u.transactions.iter().flat_map(|t| &t.steps))
        .filter_map(|s| Some((s, &**s.facts.extra().ddl.as_ref()?)))
}
