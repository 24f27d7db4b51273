//! The keys DDL declares: primary keys, unique constraints and indexes (partial ones with
//! their predicate), foreign keys, from `CREATE TABLE`, `ALTER TABLE` and `CREATE UNIQUE INDEX`.

use super::*;

/// Keys of a table constraint into `ddl`.
fn constraint(c: &TableConstraint, ddl: &mut TableDdl) {
    match c {
        TableConstraint::PrimaryKey(pk) => {
            ddl.primary_key = Some(
                pk.columns
                    .iter()
                    .filter_map(|c| column_name(&c.column.expr))
                    .collect(),
            );
        }
        TableConstraint::Unique(u) => {
            ddl.unique.push(
                u.columns
                    .iter()
                    .filter_map(|c| column_name(&c.column.expr))
                    .collect(),
            );
        }
        TableConstraint::ForeignKey(fk) => ddl.foreign_keys.push(ForeignKey {
            name: fk.name.as_ref().map(name),
            columns: ident_list(&fk.columns),
            table: table_name(&fk.foreign_table),
            referred: ident_list(&fk.referred_columns),
        }),
        _ => {}
    }
}

/// The columns a partial index's `WHERE` requires to be NULL, when that is all it requires.
fn null_columns(w: &Expr) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    and_parts(w, &mut parts);
    parts
        .into_iter()
        .map(|p| match p {
            Expr::IsNull(e) => column_name(e),
            _ => None,
        })
        .collect()
}

pub(super) fn ddl(stmt: &Statement) -> Option<TableDdl> {
    match stmt {
        Statement::CreateTable(t) => {
            let mut ddl = TableDdl {
                table: table_name(&t.name),
                schema: qualifier(&t.name),
                creates: true,
                ..TableDdl::default()
            };
            for col in &t.columns {
                let c = name(&col.name);
                ddl.columns.push(c.clone());
                for o in &col.options {
                    match &o.option {
                        ColumnOption::PrimaryKey(_) => ddl.primary_key = Some(vec![c.clone()]),
                        ColumnOption::Unique(_) => ddl.unique.push(vec![c.clone()]),
                        ColumnOption::ForeignKey(fk) => ddl.foreign_keys.push(ForeignKey {
                            name: o.name.as_ref().map(name),
                            columns: vec![c.clone()],
                            table: table_name(&fk.foreign_table),
                            referred: ident_list(&fk.referred_columns),
                        }),
                        _ => {}
                    }
                }
            }
            for c in &t.constraints {
                constraint(c, &mut ddl);
            }
            Some(ddl)
        }
        Statement::CreateIndex(i) if i.unique => {
            // A key on an expression (`lower(email)`) is no key on the column.
            let key: Option<Vec<String>> = i
                .columns
                .iter()
                .map(|c| column_name(&c.column.expr))
                .collect();
            let mut ddl = TableDdl {
                table: table_name(&i.table_name),
                schema: qualifier(&i.table_name),
                ..TableDdl::default()
            };
            match (key, &i.predicate) {
                (Some(key), None) => ddl.unique.push(key),
                (Some(key), Some(w)) => match null_columns(w) {
                    Some(nulls) => ddl.partial.push((key, nulls)),
                    None => {
                        let mut parts = Vec::new();
                        predicates::and_parts(w, &mut parts);
                        let tests = predicates::all_tests(w);
                        if !tests.is_empty() && tests.len() == parts.len() {
                            ddl.predicated.push((key, tests));
                        }
                    }
                },
                (None, _) => {}
            }
            Some(ddl)
        }
        Statement::AlterTable(a) => {
            let mut ddl = TableDdl {
                table: table_name(&a.name),
                schema: qualifier(&a.name),
                alters: true,
                ..TableDdl::default()
            };
            for op in &a.operations {
                match op {
                    AlterTableOperation::AddConstraint { constraint: c, .. } => {
                        constraint(c, &mut ddl)
                    }
                    AlterTableOperation::DropConstraint { name: n, .. } => {
                        ddl.dropped.push(name(n))
                    }
                    _ => {}
                }
            }
            Some(ddl)
        }
        _ => None,
    }
}
