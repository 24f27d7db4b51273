//! Who runs a `.sql` file, told from its name, its folder and its first lines: a migration tool
//! that wraps each file in a transaction, one that does not, or application code that sends the
//! statements of a query file one by one (sqlc). The answer decides the file's `sql.mode` when
//! the configuration does not (`txlint model` shows it).

use std::path::{Path, PathBuf};

use crate::config::SqlMode;
use crate::model::Runner;

/// A file's runner and the mode it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detected {
    pub runner: Runner,
    pub mode: SqlMode,
}

fn found(name: &'static str, evidence: &'static str, migration: bool, mode: SqlMode) -> Detected {
    Detected {
        runner: Runner {
            name,
            evidence,
            migration,
        },
        mode,
    }
}

/// The runner of the `.sql` file at `path` (as found on disk) with text `text`; `sqlc` lists the
/// query paths of sqlc configurations (see [`sqlc_queries`]).
pub fn detect(path: &Path, text: &str, sqlc: &[PathBuf]) -> Option<Detected> {
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    // Both annotations are rare: a search for their marker spares most files two line passes.
    if text.contains("name:") && text.lines().any(is_sqlc_annotation) {
        return Some(found(
            "sqlc query file",
            "`-- name: Query :kind` annotations",
            false,
            SqlMode::Statements,
        ));
    }
    if text.contains("--! ") && text.lines().any(|l| l.trim_start().starts_with("--! ")) {
        return Some(found(
            "cornucopia/clorinde query file",
            "`--! query` annotations",
            false,
            SqlMode::Statements,
        ));
    }
    if sqlc.iter().any(|q| path.starts_with(q)) {
        return Some(found(
            "sqlc query file",
            "listed under `queries` in sqlc.yaml",
            false,
            SqlMode::Statements,
        ));
    }
    // dbmate: `-- migrate:up` (with `transaction:false` to opt out).
    if first.starts_with("-- migrate:up") {
        return Some(if first.contains("transaction:false") {
            found(
                "dbmate migration",
                "`-- migrate:up transaction:false`",
                true,
                SqlMode::Script,
            )
        } else {
            found(
                "dbmate migration",
                "`-- migrate:up`",
                true,
                SqlMode::Transaction,
            )
        });
    }
    let name = path.file_name()?.to_str()?;
    let parent = path.parent();
    let folder = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    // diesel: migrations/<version>_<name>/up.sql (metadata.toml can opt out).
    if matches!(name, "up.sql" | "down.sql")
        && folder(parent.and_then(Path::parent)) == "migrations"
    {
        let opted_out = parent
            .and_then(|d| std::fs::read_to_string(d.join("metadata.toml")).ok())
            .is_some_and(|m| {
                m.lines().any(|l| {
                    let l = l.replace(' ', "");
                    l == "run_in_transaction=false"
                })
            });
        return Some(if opted_out {
            found(
                "diesel migration",
                "`run_in_transaction = false` in metadata.toml",
                true,
                SqlMode::Script,
            )
        } else {
            found(
                "diesel migration",
                "`migrations/<version>_<name>/up.sql`",
                true,
                SqlMode::Transaction,
            )
        });
    }
    // refinery (and Flyway): V<n>__<name>.sql, U<n>__<name>.sql.
    if let Some(rest) = name.strip_prefix('V').or_else(|| name.strip_prefix('U'))
        && let Some((version, _)) = rest.split_once("__")
        && !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == '_')
    {
        return Some(found(
            "refinery migration",
            "`V<version>__<name>.sql`",
            true,
            SqlMode::Transaction,
        ));
    }
    // sqlx: migrations/<version>_<name>.sql, .up.sql, .down.sql (`-- no-transaction` opts
    // out). golang-migrate names its files the same way but does not wrap them: the project
    // around the folder (a Rust crate, a Go module) tells the two apart.
    let versioned = name
        .split_once('_')
        .is_some_and(|(v, _)| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()));
    if versioned && folder(parent) == "migrations" {
        let around = |marker: &str| path.ancestors().skip(2).any(|d| d.join(marker).is_file());
        if around("Cargo.toml") {
            return Some(if first.eq_ignore_ascii_case("-- no-transaction") {
                found(
                    "sqlx migration",
                    "`-- no-transaction` on the first line",
                    true,
                    SqlMode::Script,
                )
            } else {
                found(
                    "sqlx migration",
                    "`migrations/<version>_<name>.sql` in a Rust crate",
                    true,
                    SqlMode::Transaction,
                )
            });
        }
        if around("go.mod") {
            return Some(found(
                "golang-migrate migration",
                "`migrations/<version>_<name>.sql` in a Go module",
                true,
                SqlMode::Script,
            ));
        }
    }
    None
}

/// The evidence a script itself gives: PostgreSQL refuses `LOCK TABLE` outside a transaction
/// block (25P01), so a top-level `LOCK TABLE` proves that a tool runs the file in one.
pub fn wrapped_by_lock_table() -> Detected {
    found(
        "migration runner",
        "a top-level `LOCK TABLE`, which PostgreSQL refuses outside a transaction block (25P01)",
        true,
        SqlMode::Transaction,
    )
}

/// `-- name: GetAuthor :one` (sqlc's query annotation).
fn is_sqlc_annotation(line: &str) -> bool {
    let Some(rest) = line.trim_start().strip_prefix("--") else {
        return false;
    };
    let Some(rest) = rest.trim_start().strip_prefix("name:") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    let (Some(_), Some(kind)) = (words.next(), words.next()) else {
        return false;
    };
    matches!(
        kind,
        ":one"
            | ":many"
            | ":exec"
            | ":execrows"
            | ":execresult"
            | ":execlastid"
            | ":batchexec"
            | ":batchmany"
            | ":batchone"
            | ":copyfrom"
    )
}

/// Query paths named by the sqlc configurations (`sqlc.yaml`, `sqlc.yml`, `sqlc.json`) in the
/// folders of `files` and above them: `queries: "db/query"` or a list of such paths, relative to
/// the configuration's folder.
pub fn sqlc_queries(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut folders: Vec<&Path> = files.iter().flat_map(|f| f.ancestors().skip(1)).collect();
    folders.sort();
    folders.dedup();
    let mut out = Vec::new();
    for dir in folders {
        for name in ["sqlc.yaml", "sqlc.yml", "sqlc.json"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
                let queries = if name.ends_with(".json") {
                    json_query_paths(&text)
                } else {
                    query_paths(&text)
                };
                out.extend(queries.into_iter().map(|q| dir.join(q)));
            }
        }
    }
    out
}

/// The values of `"queries"` keys anywhere in a `sqlc.json`.
fn json_query_paths(text: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("queries", serde_json::Value::String(s)) => out.push(s.clone()),
                        ("queries", serde_json::Value::Array(a)) => {
                            out.extend(a.iter().filter_map(|x| x.as_str().map(str::to_string)))
                        }
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str(text) {
        walk(&v, &mut out);
    }
    out.into_iter()
        .map(|q| q.trim_start_matches("./").to_string())
        .collect()
}

/// The values of `queries` keys in a `sqlc.yaml`, read line by line: a scalar on the same
/// line, or the items of a list on the lines that follow.
fn query_paths(text: &str) -> Vec<String> {
    let clean = |s: &str| {
        s.trim()
            .trim_end_matches(',')
            .trim_matches(|c| c == '"' || c == '\'')
            .trim_start_matches("./")
            .to_string()
    };
    let mut out = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let t = line.trim();
        let key = t.strip_prefix("- ").unwrap_or(t);
        if let Some(rest) = key
            .strip_prefix("queries:")
            .or_else(|| key.strip_prefix("\"queries\":"))
        {
            let rest = rest.trim();
            in_list = rest.is_empty() || rest == "[";
            for item in rest.trim_matches(['[', ']']).split(',') {
                if !item.trim().is_empty() {
                    out.push(clean(item));
                }
            }
            continue;
        }
        if in_list {
            if let Some(item) = t.strip_prefix("- ") {
                out.push(clean(item));
            } else if t.starts_with('"') || t.starts_with('\'') {
                out.push(clean(t));
            } else if !t.is_empty() {
                in_list = false;
            }
        }
    }
    out.retain(|q| !q.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(path: &str, text: &str) -> Option<(&'static str, SqlMode)> {
        detect(Path::new(path), text, &[]).map(|d| (d.runner.name, d.mode))
    }

    #[test]
    fn migration_tools_by_name_and_first_line() {
        let t = Some(SqlMode::Transaction);
        let diesel = runner(
            "/x/migrations/2020-06-30-135809_views/up.sql",
            "create table t ();",
        );
        assert_eq!(diesel.map(|d| d.1), t);
        assert_eq!(
            runner("/x/src/migrations/V3__append.sql", "select 1;").map(|d| d.0),
            Some("refinery migration")
        );
        assert_eq!(
            runner(
                "/x/db/20240101_init.sql",
                "-- migrate:up\ncreate table t ();"
            ),
            Some(("dbmate migration", SqlMode::Transaction))
        );
        assert_eq!(
            runner(
                "/x/db/1_init.sql",
                "-- migrate:up transaction:false\nselect 1;"
            ),
            Some(("dbmate migration", SqlMode::Script))
        );
        assert_eq!(runner("/x/queries/users.sql", "select 1;"), None);
    }

    #[test]
    fn sqlc_annotations_and_configuration() {
        assert_eq!(
            runner(
                "/x/q.sql",
                "-- name: GetUser :one\nselect * from users where id = $1;"
            ),
            Some(("sqlc query file", SqlMode::Statements))
        );
        assert_eq!(
            runner("/x/q.sql", "-- name: not an annotation\nselect 1;"),
            None
        );
        assert_eq!(
            query_paths(
                "version: \"2\"\nsql:\n  - engine: postgresql\n    queries: \"db/query/\"\n    schema: db/schema\n"
            ),
            vec!["db/query/"]
        );
        assert_eq!(
            query_paths("sql:\n- queries:\n    - a.sql\n    - './b'\n  schema: s\n"),
            vec!["a.sql", "b"]
        );
        assert_eq!(
            json_query_paths("{\"sql\": [{\"queries\": [\"q1\", \"./q2\"], \"schema\": \"s\"}]}"),
            vec!["q1", "q2"]
        );
    }
}
