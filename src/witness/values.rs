//! Values a witness's statements can use: literals of a column's type (built-in, or the first
//! label of the run's enum), and the kind of value a literal is.

use sqlparser::ast::{Statement, UserDefinedTypeRepresentation};

use super::Witness;
use super::setup::{last_part, parse};
use crate::model::*;

/// The run's `CREATE TYPE .. AS ENUM` of type `ty`, and its first label as a literal.
pub(super) fn enum_type(program: &Program, ty: &str) -> Option<(String, String)> {
    if builtin(ty, 1).is_some() {
        return None;
    }
    let want = ty.rsplit('.').next()?.trim_matches('"');
    for s in program
        .units
        .iter()
        .flat_map(|u| u.transactions.iter().flat_map(|t| &t.steps))
    {
        let text = program.files[s.span.file].text();
        let sql = text.get(s.span.start()..s.span.end()).unwrap_or("").trim();
        if !sql
            .get(..11)
            .is_some_and(|h| h.eq_ignore_ascii_case("create type"))
        {
            continue;
        }
        let sql = format!("{};", sql.trim_end_matches(';'));
        if let Some(Statement::CreateType {
            name,
            representation: Some(UserDefinedTypeRepresentation::Enum { labels }),
        }) = parse(&sql)
            && last_part(&name).eq_ignore_ascii_case(want)
            && let Some(first) = labels.first()
        {
            return Some((sql, format!("'{}'", first.value.replace('\'', "''"))));
        }
    }
    None
}

/// A value of type `ty` (row `n`): built-in types, and the run's enum types.
pub(super) fn value(program: &Program, ty: &str, n: usize) -> Option<String> {
    builtin(ty, n).or_else(|| enum_type(program, ty).map(|(_, label)| label))
}

pub(super) fn is_number(ty: &str) -> bool {
    builtin(ty, 1).is_some_and(|v| v.parse::<i64>().is_ok())
}

/// A value of a built-in type, different for each `n` where the type allows.
pub(super) fn builtin(ty: &str, n: usize) -> Option<String> {
    let ty = ty.trim().to_ascii_lowercase();
    if ty.ends_with("[]") {
        return Some("'{}'".into());
    }
    let base = ty.split('(').next().unwrap_or("").trim();
    let v = match base {
        "smallint" | "int" | "integer" | "bigint" | "int2" | "int4" | "int8" | "numeric"
        | "decimal" | "real" | "double precision" | "float" | "float4" | "float8" => n.to_string(),
        "text" | "varchar" | "character varying" | "char" | "character" | "bpchar" | "citext"
        | "name" => format!("'{n}'"),
        "uuid" => format!("'00000000-0000-4000-8000-{n:012}'"),
        "boolean" | "bool" => "false".into(),
        "json" | "jsonb" => "'{}'".into(),
        "bytea" => "''".into(),
        "date" => "current_date".into(),
        "interval" => "'1 day'".into(),
        "inet" | "cidr" => "'127.0.0.1'".into(),
        _ if base.starts_with("timestamp") => "now()".into(),
        _ if base.starts_with("time") => "'00:00'".into(),
        _ => return None,
    };
    Some(v)
}

/// The schema part of a qualified name (none for `public`).
pub(super) fn schema_of(name: &str) -> Option<&str> {
    let (schema, _) = name.rsplit_once('.')?;
    (!schema.eq_ignore_ascii_case("public") && !schema.is_empty()).then_some(schema)
}

/// Add `stmt` to the setup unless it is there already.
pub(super) fn push(w: &mut Witness, stmt: String) {
    if !w.setup.contains(&stmt) {
        w.setup.push(stmt);
    }
}

/// The kind of a declared type, as the inferred tables use them.
pub(super) fn kind_of_type(ty: &str) -> Option<&'static str> {
    match builtin(ty, 1)?.as_str() {
        v if v.starts_with('\'') => Some("text"),
        "false" => Some("boolean"),
        v if v.parse::<i64>().is_ok() => Some("int"),
        _ => None,
    }
}

/// `text` when it is a literal (`7`, `'ada@example.com'`, `true`).
pub(super) fn literal(text: &str) -> Option<String> {
    let t = text.trim();
    let quoted = t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'');
    let plain = t.parse::<f64>().is_ok()
        || t.eq_ignore_ascii_case("true")
        || t.eq_ignore_ascii_case("false");
    (quoted || plain).then(|| t.to_string())
}

pub(super) fn literal_kind(text: &str) -> Option<&'static str> {
    let t = text.trim();
    // Arithmetic on names and whole numbers (`:balance - 10`, `coalesce(last, 0) + 1`).
    let arithmetic = t.chars().any(|c| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_alphanumeric() || " _.:+-*/(),".contains(c))
        && !t.to_ascii_lowercase().contains("now");
    if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') {
        Some("text")
    } else if t.parse::<i64>().is_ok() || arithmetic {
        Some("int")
    } else if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        Some("boolean")
    } else {
        None
    }
}
