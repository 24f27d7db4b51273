//! sqlc configurations (`sqlc.yaml`, `sqlc.yml`, `sqlc.json`): which paths hold query files that
//! application code sends one statement at a time, and the database each is written for
//! (`engine: postgresql | mysql | sqlite`).

use std::path::{Path, PathBuf};

use crate::source::Dialect;

/// One `sql:` entry's paths (queries and schema), relative to the configuration's folder made
/// absolute, with the engine it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    pub queries: Vec<PathBuf>,
    pub schema: Vec<PathBuf>,
    pub engine: Option<Dialect>,
}

/// Every sqlc configuration in the folders of `files` and above them.
#[derive(Clone, Debug, Default)]
pub struct Sqlc {
    pub entries: Vec<Paths>,
}

impl Sqlc {
    pub fn find(files: &[PathBuf]) -> Sqlc {
        let mut folders: Vec<&Path> = files.iter().flat_map(|f| f.ancestors().skip(1)).collect();
        folders.sort();
        folders.dedup();
        let mut entries = Vec::new();
        for dir in folders {
            for name in ["sqlc.yaml", "sqlc.yml", "sqlc.json"] {
                let Ok(text) = std::fs::read_to_string(dir.join(name)) else {
                    continue;
                };
                let found = if name.ends_with(".json") {
                    json_entries(&text)
                } else {
                    yaml_entries(&text)
                };
                entries.extend(found.into_iter().map(|e| Paths {
                    queries: e.queries.iter().map(|q| dir.join(q)).collect(),
                    schema: e.schema.iter().map(|q| dir.join(q)).collect(),
                    engine: e.engine,
                }));
            }
        }
        Sqlc { entries }
    }

    /// `path` is one of the query files sqlc generates code for.
    pub fn is_query_file(&self, path: &Path) -> bool {
        self.entries
            .iter()
            .any(|e| e.queries.iter().any(|q| path.starts_with(q)))
    }

    /// The engine the configuration names for `path` (a query or schema file), if any.
    pub fn engine(&self, path: &Path) -> Option<Dialect> {
        self.entries.iter().find_map(|e| {
            e.queries
                .iter()
                .chain(&e.schema)
                .any(|q| path.starts_with(q))
                .then_some(e.engine)
                .flatten()
        })
    }
}

/// An entry as written: paths relative to the configuration.
#[derive(Debug, Default, PartialEq, Eq)]
struct Entry {
    queries: Vec<String>,
    schema: Vec<String>,
    engine: Option<Dialect>,
}

fn engine(name: &str) -> Option<Dialect> {
    match name
        .trim()
        .trim_matches(['"', '\''])
        .to_ascii_lowercase()
        .as_str()
    {
        "postgresql" | "postgres" => Some(Dialect::Postgres),
        "mysql" => Some(Dialect::Mysql),
        "sqlite" => Some(Dialect::Sqlite),
        _ => None,
    }
}

fn clean(s: &str) -> String {
    s.trim()
        .trim_end_matches(',')
        .trim_matches(|c| c == '"' || c == '\'')
        .trim_start_matches("./")
        .to_string()
}

/// The entries of a `sqlc.json`: every object with a `queries` key, at any depth.
fn json_entries(text: &str) -> Vec<Entry> {
    fn strings(v: &serde_json::Value) -> Vec<String> {
        match v {
            serde_json::Value::String(s) => vec![clean(s)],
            serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).map(clean).collect(),
            _ => Vec::new(),
        }
    }
    fn walk(v: &serde_json::Value, out: &mut Vec<Entry>) {
        match v {
            serde_json::Value::Object(m) if m.contains_key("queries") => out.push(Entry {
                queries: m.get("queries").map(strings).unwrap_or_default(),
                schema: m.get("schema").map(strings).unwrap_or_default(),
                engine: m.get("engine").and_then(|e| e.as_str()).and_then(engine),
            }),
            serde_json::Value::Object(m) => m.values().for_each(|x| walk(x, out)),
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str(text) {
        walk(&v, &mut out);
    }
    out
}

/// The entries of a `sqlc.yaml`, read line by line: each `- ` item of a list holds `engine`,
/// `queries` and `schema` keys, each a scalar on its line or a list on the lines that follow
/// (`- a.sql` items, or a flow list `[a, b]`). Version 1 files have no engine.
fn yaml_entries(text: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    // The indentation of the current entry's keys, and the list a key opened.
    let mut entry_indent: Option<usize> = None;
    let mut list: Option<(usize, bool)> = None; // (indent of its key, queries?)
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if let Some((key_indent, queries)) = list {
            if let Some(item) = t.strip_prefix("- ").filter(|_| indent >= key_indent) {
                if let Some(e) = out.last_mut() {
                    let v = if queries {
                        &mut e.queries
                    } else {
                        &mut e.schema
                    };
                    v.push(clean(item));
                }
                continue;
            }
            list = None;
        }
        // `- engine: x` starts an entry; `key: value` at the entry's indentation belongs to it.
        let (key_line, key_indent) = match t.strip_prefix("- ") {
            Some(rest) => {
                out.push(Entry::default());
                entry_indent = Some(indent + 2);
                (rest.trim_start(), indent + 2)
            }
            None => (t, indent),
        };
        let Some((key, value)) = key_line.split_once(':') else {
            continue;
        };
        let key = key.trim().trim_matches('"');
        if !matches!(key, "engine" | "queries" | "schema") {
            continue;
        }
        if entry_indent != Some(key_indent) || out.is_empty() {
            out.push(Entry::default());
            entry_indent = Some(key_indent);
        }
        let Some(e) = out.last_mut() else { continue };
        let value = value.trim();
        match key {
            "engine" => e.engine = engine(value),
            _ => {
                let target = if key == "queries" {
                    &mut e.queries
                } else {
                    &mut e.schema
                };
                if value.is_empty() {
                    list = Some((key_indent, key == "queries"));
                } else {
                    target.extend(
                        value
                            .trim_matches(['[', ']'])
                            .split(',')
                            .map(clean)
                            .filter(|s| !s.is_empty()),
                    );
                }
            }
        }
    }
    out.retain(|e| !e.queries.is_empty() || !e.schema.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_entries_with_engines_and_lists() {
        let text = "version: \"2\"\nsql:\n  - engine: \"postgresql\"\n    queries: \"db/query/\"\n    schema: db/schema\n  - schema:\n      - lite/schema.sql\n    queries:\n      - lite/a.sql\n      - './lite/b.sql'\n    engine: sqlite\n";
        let e = yaml_entries(text);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].queries, vec!["db/query/"]);
        assert_eq!(e[0].schema, vec!["db/schema"]);
        assert_eq!(e[0].engine, Some(Dialect::Postgres));
        assert_eq!(e[1].queries, vec!["lite/a.sql", "lite/b.sql"]);
        assert_eq!(e[1].schema, vec!["lite/schema.sql"]);
        assert_eq!(e[1].engine, Some(Dialect::Sqlite));
    }

    #[test]
    fn yaml_version_one_and_flow_lists() {
        let text = "version: \"1\"\npackages:\n  - name: db\n    path: internal/db\n    queries: [\"q1.sql\", q2.sql]\n    schema: \"schema.sql\"\n";
        let e = yaml_entries(text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].queries, vec!["q1.sql", "q2.sql"]);
        assert_eq!(e[0].engine, None);
    }

    #[test]
    fn json_entries_with_engines() {
        let e = json_entries(
            "{\"sql\": [{\"engine\": \"mysql\", \"queries\": [\"q1\", \"./q2\"], \"schema\": \"s\"}]}",
        );
        assert_eq!(
            e,
            vec![Entry {
                queries: vec!["q1".into(), "q2".into()],
                schema: vec!["s".into()],
                engine: Some(Dialect::Mysql),
            }]
        );
    }

    #[test]
    fn paths_resolve_under_their_configuration() {
        let sqlc = Sqlc {
            entries: vec![Paths {
                queries: vec![PathBuf::from("/p/lite/q")],
                schema: vec![PathBuf::from("/p/lite/schema.sql")],
                engine: Some(Dialect::Sqlite),
            }],
        };
        assert!(sqlc.is_query_file(Path::new("/p/lite/q/jobs.sql")));
        assert!(!sqlc.is_query_file(Path::new("/p/lite/schema.sql")));
        assert_eq!(
            sqlc.engine(Path::new("/p/lite/schema.sql")),
            Some(Dialect::Sqlite)
        );
        assert_eq!(sqlc.engine(Path::new("/p/pg/q.sql")), None);
    }
}
