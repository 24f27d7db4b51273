//! The schema the repository itself declares: tables, keys and foreign keys from every
//! `CREATE TABLE`, `CREATE UNIQUE INDEX` and `ALTER TABLE ... ADD CONSTRAINT` of the run's SQL
//! (migrations included), applied in file-name order, and the primary keys of the tables host
//! code declares (diesel's `table!`) where the SQL declares none. Rules use it to tell a race
//! that a constraint settles from one it does not.

use std::collections::BTreeMap;

use super::*;
use crate::source::Span;

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
    pub tables: BTreeMap<String, TableInfo>,
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

impl Schema {
    pub fn build(units: &[Unit], declared: &[TableDdl]) -> Schema {
        let mut schema = Schema::default();
        for unit in units
            .iter()
            .filter(|u| matches!(u.kind, UnitKind::Script | UnitKind::QueryFile))
        {
            for step in unit.transactions.iter().flat_map(|t| &t.steps) {
                let Some(ddl) = &step.facts.extra().ddl else {
                    continue;
                };
                let t = schema.tables.entry(ddl.table.clone()).or_default();
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
        }
        // diesel's `table!` and sea-orm's entities are generated from the database (or written
        // to match it): they tell the primary key (diesel's `joinable!` a foreign key, sea-orm
        // a column's `unique`), not every unique constraint, and the migrations win where they
        // say more. They are not a `CREATE TABLE` (a witness cannot run them), so `declared`
        // stays with the SQL.
        for ddl in declared {
            let t = schema.tables.entry(ddl.table.clone()).or_default();
            if t.columns.is_empty() {
                t.columns.clone_from(&ddl.columns);
            }
            if t.primary_key.is_none() {
                t.primary_key.clone_from(&ddl.primary_key);
            }
            t.add_keys(ddl);
        }
        schema
    }

    /// The run's SQL declares the table, so its unique constraints are known: a key missing
    /// there is missing. A table known only from diesel's `table!` or a sea-orm entity has the
    /// keys those list, which need not be all of them.
    pub fn declares(&self, table: &str) -> bool {
        self.tables.get(table).is_some_and(|t| t.declared.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// A unique constraint (or the primary key) whose columns are all among `columns`: rows
    /// with equal values there cannot both exist.
    pub fn unique_within<C: AsRef<str>>(&self, table: &str, columns: &[C]) -> Option<Vec<String>> {
        let t = self.tables.get(table)?;
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
    /// TRUE` against `WHERE is_verified IS TRUE`): the rows the check looks for are the index's.
    pub fn unique_within_row<C: AsRef<str>, T: AsRef<str>>(
        &self,
        table: &str,
        columns: &[C],
        set: &[&str],
        tests: &[T],
    ) -> Option<Vec<String>> {
        self.unique_within(table, columns).or_else(|| {
            let t = self.tables.get(table)?;
            let nulls = t.partial.iter().find(|(key, nulls)| {
                within(key, columns) && !nulls.iter().any(|n| set.contains(&n.as_str()))
            });
            let tested = || {
                t.predicated.iter().find(|(key, wants)| {
                    within(key, columns)
                        && wants.iter().all(|w| tests.iter().any(|t| t.as_ref() == w))
                })
            };
            nulls.or_else(tested).map(|(key, _)| key.clone())
        })
    }

    /// `column` is part of the primary key or of a unique constraint of `table`.
    pub fn in_unique_key(&self, table: &str, column: &str) -> bool {
        self.tables.get(table).is_some_and(|t| {
            t.primary_key
                .iter()
                .chain(&t.unique)
                .any(|key| key.iter().any(|k| k == column))
        })
    }

    /// The foreign key from `child` to `parent`, if declared.
    pub fn foreign_key(&self, child: &str, parent: &str) -> Option<&ForeignKey> {
        self.tables
            .get(child)?
            .foreign_keys
            .iter()
            .find(|f| f.table == parent)
    }
}

/// `key` is a key, and all its columns are among `columns`.
fn within<C: AsRef<str>>(key: &[String], columns: &[C]) -> bool {
    !key.is_empty() && key.iter().all(|k| columns.iter().any(|c| c.as_ref() == k))
}
