//! A witness's setup: the tables its statements use, created on an empty database with what
//! they need first (their schema, the enum types of their columns, the tables their foreign
//! keys name), and rows their constraints accept (every `NOT NULL` column without a default
//! given a value, the parent rows of their foreign keys inserted before them).

use std::collections::BTreeMap;

use sqlparser::ast::{
    ColumnOption, CreateTable, Expr, GeneratedAs, Ident, Statement, TableConstraint,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::Witness;
use super::values::*;
use crate::model::*;
use crate::source::{FileId, Span};

/// A table of the setup.
pub(super) struct Table {
    /// The name the setup and the checks use: schema-qualified when the run's DDL or the
    /// statements are.
    pub name: String,
    /// The columns the steps use, with the kind of value they hold (`int`, `text`, `boolean`).
    pub kinds: Vec<(String, String)>,
    /// Its columns and foreign keys, when its `CREATE TABLE` could be read.
    declared: Option<Declared>,
    /// The file of the statements (whose schema names the tables).
    file: FileId,
}

struct Declared {
    columns: Vec<Column>,
    references: Vec<Reference>,
    primary_key: Vec<String>,
}

struct Column {
    name: String,
    /// As sqlparser prints it, lower case (`uuid`, `character varying(20)`, `billing.plan`).
    ty: String,
    /// `NOT NULL` or in the primary key, with no default, identity or serial type: a row must
    /// give it a value.
    required: bool,
    /// `GENERATED ALWAYS AS IDENTITY`: a row that gives it a value overrides the system value.
    always: bool,
}

struct Reference {
    columns: Vec<String>,
    /// The referenced table as the model names it (the last part of its name).
    table: String,
    /// The referenced columns (none: the referenced table's primary key).
    referred: Vec<String>,
}

/// Parents followed from a table through its foreign keys.
const MAX_DEPTH: usize = 8;

/// The table `table` of the steps, its `CREATE TABLE` (and what that needs) added to the
/// setup: the run's own statement, or one inferred from the steps (types from the literals
/// compared with or stored in each column, and from `params`, the types of a routine's
/// parameters; `int` where nothing tells, said in `assumed`).
pub(super) fn table(
    w: &mut Witness,
    program: &Program,
    steps: &[&Step],
    table: &str,
    params: &[(String, String)],
) -> Result<Table, String> {
    let inferred = infer(steps, table, params);
    let kinds: Vec<(String, String)> = inferred
        .columns
        .iter()
        .map(|(c, k)| (c.clone(), k.unwrap_or("int").to_string()))
        .collect();
    let written = written(program, steps, table);
    let file = steps.first().map_or(0, |s| s.span.file);
    if let Some(span) = declared_at(program, file, table) {
        let (name, declared) = match declare(w, program, file, table, span, 0) {
            Some((name, d)) => (name, Some(d)),
            None => (written, None),
        };
        return Ok(Table {
            name,
            kinds,
            declared,
            file,
        });
    }
    let Inferred {
        columns,
        mut untyped,
        conditions,
    } = inferred;
    if columns.is_empty() {
        return Err(format!(
            "{}: no schema for `{table}` and no columns to infer one from",
            w.at
        ));
    }
    untyped.retain(|c| columns.get(c).is_some_and(Option::is_none));
    if let Some(c) = untyped.first() {
        return Err(format!(
            "{}: no CREATE TABLE for `{table}` in the run, and the type of `{c}` cannot be told from the statements",
            w.at
        ));
    }
    if conditions && columns.values().any(Option::is_none) {
        return Err(format!(
            "{}: no CREATE TABLE for `{table}` in the run, and its conditions need the columns' types",
            w.at
        ));
    }
    let assumed: Vec<&str> = columns
        .iter()
        .filter(|(_, k)| k.is_none())
        .map(|(c, _)| c.as_str())
        .collect();
    if !assumed.is_empty() {
        w.assumed.push(format!(
            "no CREATE TABLE for `{table}` in the run: its columns are inferred from the statements, {} as int",
            assumed.join(", ")
        ));
    }
    if let Some(schema) = schema_of(&written) {
        push(w, format!("CREATE SCHEMA IF NOT EXISTS {schema};"));
    }
    let list: Vec<String> = kinds.iter().map(|(c, k)| format!("{c} {k}")).collect();
    push(w, format!("CREATE TABLE {written} ({});", list.join(", ")));
    Ok(Table {
        name: written,
        kinds,
        declared: None,
        file,
    })
}

/// What the steps say about a table's columns.
struct Inferred {
    /// Each column the steps name, with the type its values tell, if any.
    columns: BTreeMap<String, Option<&'static str>>,
    /// Columns compared with or given a value of a type txlint cannot tell (`now() + ..`).
    untyped: Vec<String>,
    /// Conditions that are not `col = value`: an inferred table could reject the statements.
    conditions: bool,
}

/// The columns of `table` the steps name, typed from the literals compared with or stored in
/// each and from `params`, the types of a routine's parameters.
fn infer(steps: &[&Step], table: &str, params: &[(String, String)]) -> Inferred {
    let mut out = Inferred {
        columns: BTreeMap::new(),
        untyped: Vec::new(),
        conditions: false,
    };
    for s in steps {
        let f = &s.facts;
        if !f.reads.iter().chain(&f.writes).any(|t| t.name == table) {
            continue;
        }
        out.conditions |= f.other_conditions;
        let typed = f
            .filters
            .iter()
            .map(|p| (&p.column, &p.value))
            .chain(f.inserts.iter().map(|(c, o)| (c, o)))
            .chain(f.sets.iter().map(|s| (&s.column, &s.value)));
        for (c, o) in typed {
            let param = params.iter().find(|p| o.text == p.0);
            let kind = literal_kind(&o.text).or_else(|| param.and_then(|p| kind_of_type(&p.1)));
            if kind.is_none() {
                out.untyped.push(c.to_string());
            }
            let e = out.columns.entry(c.to_string()).or_insert(None);
            *e = e.or(kind);
        }
        // Columns, not the unit's variables (`WHERE id = s` reads the parameter `s`).
        for c in f
            .columns
            .iter()
            .filter(|c| *c != "*" && !f.extra().uses.contains(c))
        {
            out.columns.entry(c.to_string()).or_insert(None);
        }
    }
    out
}

/// Where the table is created: by the finding's own file, else as the run's schema has it.
fn declared_at(program: &Program, file: FileId, table: &str) -> Option<Span> {
    let here = program
        .units
        .iter()
        .filter(|u| u.span.file == file && u.kind == UnitKind::Script)
        .flat_map(|u| u.transactions.iter().flat_map(|t| &t.steps))
        .find(|s| {
            s.facts
                .extra()
                .ddl
                .as_ref()
                .is_some_and(|d| d.creates && d.table == table)
        })
        .map(|s| s.span);
    here.or_else(|| program.schema(file).get(table).and_then(|t| t.declared))
}

/// `table` as the steps write it (`billing.wallets`), the model's name when none does.
fn written(program: &Program, steps: &[&Step], table: &str) -> String {
    steps
        .iter()
        .flat_map(|s| s.facts.reads.iter().chain(&s.facts.writes))
        .filter(|t| t.name == table)
        .find_map(|t| {
            let text = program.files[t.span.file].text();
            let name = text.get(t.span.start()..t.span.end())?.trim();
            let plain = name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '"');
            (plain && !name.is_empty()).then(|| name.to_string())
        })
        .unwrap_or_else(|| table.to_string())
}

/// The `INSERT` of a row of `t` with `key`'s values, after the rows of other tables its
/// foreign keys need: the steps' other `int` columns set to `fill`, the other columns a row
/// must give a value of their type (`n` tells rows apart).
pub(super) fn insert_row(
    w: &mut Witness,
    program: &Program,
    t: &Table,
    key: &[(String, String)],
    fill: &str,
    n: usize,
) {
    let mut names: Vec<String> = key.iter().map(|(c, _)| c.clone()).collect();
    let mut values: Vec<String> = key.iter().map(|(_, v)| v.clone()).collect();
    let Some(d) = &t.declared else {
        for (c, ty) in &t.kinds {
            if !names.contains(c) && ty == "int" {
                names.push(c.clone());
                values.push(fill.to_string());
            }
        }
        push(w, insert(&t.name, &names, &values, false, false));
        return;
    };
    for c in &d.columns {
        if names.contains(&c.name) {
            continue;
        }
        let used = t
            .kinds
            .iter()
            .any(|(k, kind)| *k == c.name && kind == "int");
        if used && is_number(&c.ty) {
            names.push(c.name.clone());
            values.push(fill.to_string());
        } else if c.required {
            match value(program, &c.ty, n) {
                Some(v) => {
                    names.push(c.name.clone());
                    values.push(v);
                }
                None => w.assumed.push(format!(
                    "`{}.{}` is required and of type {}, which txlint has no value for: give the setup's rows one",
                    t.name, c.name, c.ty
                )),
            }
        }
    }
    parents(w, program, t.file, d, &names, &values, 0);
    let always = d
        .columns
        .iter()
        .any(|c| c.always && names.contains(&c.name));
    push(w, insert(&t.name, &names, &values, always, false));
}

/// The parent rows of the values an `INSERT` step stores (literals only): what its foreign
/// keys need for it to go through.
pub(super) fn parents_of_insert(w: &mut Witness, program: &Program, t: &Table, f: &Facts) {
    let Some(d) = &t.declared else { return };
    let (names, values): (Vec<String>, Vec<String>) = f
        .inserts
        .iter()
        .filter_map(|(c, o)| Some((c.to_string(), literal(&o.text)?)))
        .unzip();
    parents(w, program, t.file, d, &names, &values, 0);
}

/// The parent rows a row of `t` with these values needs.
pub(super) fn parents_of(
    w: &mut Witness,
    program: &Program,
    t: &Table,
    names: &[String],
    values: &[String],
) {
    if let Some(d) = &t.declared {
        parents(w, program, t.file, d, names, values, 0);
    }
}

/// A row in each table a foreign key of `d` names, for the key's values among `names`.
fn parents(
    w: &mut Witness,
    program: &Program,
    file: FileId,
    d: &Declared,
    names: &[String],
    values: &[String],
    depth: usize,
) {
    if depth >= MAX_DEPTH {
        return;
    }
    for r in &d.references {
        let found: Option<Vec<&String>> = r
            .columns
            .iter()
            .map(|c| names.iter().position(|n| n == c).map(|i| &values[i]))
            .collect();
        let Some(found) = found else { continue };
        let Some(span) = program.schema(file).get(&r.table).and_then(|t| t.declared) else {
            continue;
        };
        let Some((name, parent)) = declare(w, program, file, &r.table, span, depth + 1) else {
            continue;
        };
        let referred = match r.referred.is_empty() {
            true => &parent.primary_key,
            false => &r.referred,
        };
        if referred.len() != found.len() {
            continue;
        }
        let mut p_names: Vec<String> = referred.clone();
        let mut p_values: Vec<String> = found.into_iter().cloned().collect();
        for c in &parent.columns {
            if c.required
                && !p_names.contains(&c.name)
                && let Some(v) = value(program, &c.ty, 1)
            {
                p_names.push(c.name.clone());
                p_values.push(v);
            }
        }
        parents(w, program, file, &parent, &p_names, &p_values, depth + 1);
        let always = parent
            .columns
            .iter()
            .any(|c| c.always && p_names.contains(&c.name));
        push(w, insert(&name, &p_names, &p_values, always, true));
    }
}

fn insert(table: &str, names: &[String], values: &[String], always: bool, parent: bool) -> String {
    format!(
        "INSERT INTO {table} ({}){} VALUES ({}){};",
        names.join(", "),
        if always {
            " OVERRIDING SYSTEM VALUE"
        } else {
            ""
        },
        values.join(", "),
        // A parent row two children share is inserted once.
        if parent {
            " ON CONFLICT DO NOTHING"
        } else {
            ""
        }
    )
}

/// The run's `CREATE TABLE` of `table` (at `span`) in the setup, after its schema, the enum
/// types of its columns and the tables it references; its name as declared and its columns.
/// `None` when the statement cannot be read (it is still added, as written).
fn declare(
    w: &mut Witness,
    program: &Program,
    file: FileId,
    table: &str,
    span: Span,
    depth: usize,
) -> Option<(String, Declared)> {
    let text = program.files[span.file].text();
    let ddl = text.get(span.start()..span.end()).unwrap_or("").trim();
    let stmt = format!("{};", ddl.trim_end_matches(';'));
    let Some(Statement::CreateTable(ct)) = parse(&stmt) else {
        push(w, stmt);
        return None;
    };
    let name = ct.name.to_string();
    let d = declared(&ct);
    if w.setup.contains(&stmt) {
        return Some((name, d));
    }
    if let Some(schema) = schema_of(&name) {
        push(w, format!("CREATE SCHEMA IF NOT EXISTS {schema};"));
    }
    for c in &d.columns {
        if let Some((ddl, _)) = enum_type(program, &c.ty) {
            if let Some(schema) = schema_of(&c.ty) {
                push(w, format!("CREATE SCHEMA IF NOT EXISTS {schema};"));
            }
            push(w, ddl);
        }
    }
    for r in &d.references {
        if r.table == table {
            continue;
        }
        match program.schema(file).get(&r.table).and_then(|t| t.declared) {
            Some(span) if depth < MAX_DEPTH => {
                declare(w, program, file, &r.table, span, depth + 1);
            }
            Some(_) => {}
            None => w.assumed.push(format!(
                "`{name}` references `{}`, which the run does not create: create it before the setup",
                r.table
            )),
        }
    }
    push(w, stmt);
    Some((name, d))
}

pub(super) fn parse(sql: &str) -> Option<Statement> {
    Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .ok()?
        .into_iter()
        .next()
}

/// An identifier as the model names it: folded to lower case unless quoted.
fn fold(i: &Ident) -> String {
    match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_ascii_lowercase(),
    }
}

fn column_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(fold(i)),
        _ => None,
    }
}

pub(super) fn last_part(name: &sqlparser::ast::ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(fold)
        .unwrap_or_default()
}

/// The columns, primary key and foreign keys of a `CREATE TABLE`.
fn declared(ct: &CreateTable) -> Declared {
    let mut d = Declared {
        columns: Vec::new(),
        references: Vec::new(),
        primary_key: Vec::new(),
    };
    let mut not_null = Vec::new();
    for c in &ct.constraints {
        match c {
            TableConstraint::PrimaryKey(pk) => {
                d.primary_key = pk
                    .columns
                    .iter()
                    .filter_map(|c| column_of(&c.column.expr))
                    .collect();
            }
            TableConstraint::ForeignKey(fk) => d.references.push(Reference {
                columns: fk.columns.iter().map(fold).collect(),
                table: last_part(&fk.foreign_table),
                referred: fk.referred_columns.iter().map(fold).collect(),
            }),
            _ => {}
        }
    }
    for col in &ct.columns {
        let name = fold(&col.name);
        let ty = col.data_type.to_string().to_ascii_lowercase();
        let mut defaulted = ty.ends_with("serial") || ty == "serial4" || ty == "serial8";
        let mut always = false;
        for o in &col.options {
            match &o.option {
                ColumnOption::NotNull => not_null.push(name.clone()),
                ColumnOption::PrimaryKey(_) => d.primary_key = vec![name.clone()],
                ColumnOption::Default(_) => defaulted = true,
                ColumnOption::Generated {
                    generated_as,
                    generation_expr,
                    ..
                } => {
                    defaulted = true;
                    always = generation_expr.is_none() && *generated_as == GeneratedAs::Always;
                }
                ColumnOption::ForeignKey(fk) => d.references.push(Reference {
                    columns: vec![name.clone()],
                    table: last_part(&fk.foreign_table),
                    referred: fk.referred_columns.iter().map(fold).collect(),
                }),
                _ => {}
            }
        }
        d.columns.push(Column {
            required: !defaulted,
            name,
            ty,
            always,
        });
    }
    for c in &mut d.columns {
        c.required &= not_null.contains(&c.name) || d.primary_key.contains(&c.name);
    }
    d
}
