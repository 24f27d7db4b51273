//! `txlint schema`: the tables, keys and foreign keys txlint learned from the run's SQL (and
//! the primary keys of diesel's `table!`).

use std::fmt::Write;

use crate::run::Run;

pub fn render(run: &Run) -> String {
    let shown = run.program.schemas.shown();
    let mut out = String::new();
    if shown.iter().all(|(_, s)| s.is_empty()) {
        out += "no tables declared (CREATE TABLE, CREATE UNIQUE INDEX, ALTER TABLE ... ADD CONSTRAINT) in these files\n";
        return out;
    }
    for (package, schema) in shown {
        if shown.len() > 1 {
            let cwd = std::env::current_dir().unwrap_or_default();
            let at = package
                .as_deref()
                .map_or(".".into(), |p| crate::io::display_path(p, &cwd));
            let _ = writeln!(
                out,
                "# package {at}: its tables and those of the packages around it"
            );
        }
        tables(run, schema, &mut out);
        if !schema.borrowed.is_empty() {
            let n = schema.borrowed.len();
            let _ = writeln!(
                out,
                "  (and {n} {} only other packages declare)",
                if n == 1 { "table" } else { "tables" }
            );
        }
    }
    out
}

fn tables(run: &Run, schema: &crate::model::schema::Schema, out: &mut String) {
    let list = |cols: &[String]| format!("({})", cols.join(", "));
    for (name, t) in schema
        .tables
        .iter()
        .filter(|(name, _)| !schema.borrowed.contains(*name))
    {
        let at = t
            .declared
            .map_or("  (diesel table!: primary key only)".into(), |s| {
                let f = &run.program.files[s.file];
                format!("  ({}:{})", f.display, f.line(s.start()))
            });
        let _ = writeln!(out, "{name}{at}");
        if !t.columns.is_empty() {
            let _ = writeln!(out, "  columns: {}", t.columns.join(", "));
        }
        if let Some(pk) = &t.primary_key {
            let _ = writeln!(out, "  primary key: {}", list(pk));
        }
        for u in &t.unique {
            let _ = writeln!(out, "  unique: {}", list(u));
        }
        for (key, nulls) in &t.partial {
            let nulls: Vec<String> = nulls.iter().map(|n| format!("{n} IS NULL")).collect();
            let _ = writeln!(
                out,
                "  unique: {} where {} (partial)",
                list(key),
                nulls.join(" AND ")
            );
        }
        for (key, tests) in &t.predicated {
            let _ = writeln!(
                out,
                "  unique: {} where {} (partial)",
                list(key),
                tests.join(" AND ")
            );
        }
        for fk in &t.foreign_keys {
            let _ = writeln!(
                out,
                "  foreign key: {} -> {} {}",
                list(&fk.columns),
                fk.table,
                list(&fk.referred)
            );
        }
    }
}
