//! Which database a text is written for, when the configuration does not say: from a `.sql`
//! file's name, folder and content, from the types and imports of Rust code, and from the
//! database crates a `Cargo.toml` depends on. SQL for another database than PostgreSQL or
//! MySQL is parsed with its own sqlparser dialect, and the core rules leave it alone.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::parse::lex::{Kind, Lexer, Token, is_ident, is_ident_start};
use crate::source::Dialect;

/// The dialect a `.sql` file's path names: `sqlite/`, `queries_mysql/`, `x.sqlite.sql`, ....
pub fn of_path(path: &Path) -> Option<Dialect> {
    // `x.sqlite.sql`, `0001_init.mysql.up.sql`: a word of the file's own name decides first.
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let own = stem
        .split('.')
        .skip(1)
        .find_map(|w| of_word(&w.to_ascii_lowercase()));
    // Then the folder nearest the file.
    own.or_else(|| {
        let mut parts: Vec<String> = Vec::new();
        for folder in path.parent().into_iter().flat_map(Path::components) {
            let name = folder.as_os_str().to_string_lossy().to_ascii_lowercase();
            parts.extend(
                name.split(|c: char| !c.is_ascii_alphanumeric())
                    .map(str::to_string),
            );
        }
        parts.iter().rev().find_map(|p| of_word(p))
    })
}

/// A `.sql` file for CockroachDB, by a folder or name part (`schema/crdb/`, `cockroach/`):
/// CockroachDB runs transactions at SERIALIZABLE unless they say otherwise.
pub fn is_cockroach(path: &Path) -> bool {
    path.iter().any(|part| {
        let part = part.to_string_lossy().to_ascii_lowercase();
        part.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| matches!(w, "cockroach" | "cockroachdb" | "crdb"))
    })
}

fn of_word(w: &str) -> Option<Dialect> {
    Some(match w {
        "sqlite" | "sqlite3" => Dialect::Sqlite,
        "mysql" | "mariadb" => Dialect::Mysql,
        "mssql" | "sqlserver" | "tsql" => Dialect::Mssql,
        "postgres" | "postgresql" | "pg" | "psql" => Dialect::Postgres,
        // Databases with SQL of their own and no rules here: parsed for facts, set aside.
        "clickhouse" | "bigquery" | "bq" | "snowflake" | "duckdb" | "trino" | "cockroach"
        | "cockroachdb" | "crdb" => Dialect::Unknown,
        _ => return None,
    })
}

/// What a `.sql` file's text shows, outside comments and strings: SQLite's `AUTOINCREMENT`,
/// `PRAGMA` and `?1` placeholders; MySQL's `ENGINE=`, `AUTO_INCREMENT` and backticks; SQL
/// Server's `IDENTITY(` and `GO`; ClickHouse's `ENGINE = MergeTree` (and the rest of that
/// family) and `ON CLUSTER`, a database txlint has no rules for; bare `?` placeholders, which
/// PostgreSQL does not have, with nothing else: a database txlint cannot tell.
pub fn of_text(text: &str) -> Option<Dialect> {
    // The head of the file tells; a generated file of millions of statements is not lexed whole.
    let mut end = text.len().min(256 * 1024);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    if !has_signal(text.as_bytes()) {
        return None;
    }
    let mut tokens = Lexer::new(text, Dialect::Postgres, true)
        .filter(|t| !matches!(t.kind, Kind::Comment | Kind::String | Kind::Meta))
        .peekable();
    let (mut numbered, mut bare) = (false, false);
    let mut prev: Option<Token> = None;
    while let Some(tok) = tokens.next() {
        let next = tokens.peek().copied();
        let starts = prev.is_none_or(|p| p.kind == Kind::Semicolon);
        let punct_next = |p: &str| next.is_some_and(|n| n.is_punct(text, p));
        if tok.kind == Kind::Word {
            let w = |word: &str| tok.text(text).eq_ignore_ascii_case(word);
            if w("autoincrement") || (w("pragma") && starts) {
                return Some(Dialect::Sqlite);
            }
            // ClickHouse's `ON CLUSTER name`: not `ON cluster (..)` nor `ON cluster.id`.
            let named = next.is_some_and(|n| matches!(n.kind, Kind::Word | Kind::QuotedIdent));
            let after_on = prev.is_some_and(|p| p.kind == Kind::Word && p.is(text, "on"));
            if w("cluster") && after_on && named {
                return Some(Dialect::Unknown);
            }
            if w("engine") && punct_next("=") {
                // ClickHouse's table engines (`MergeTree()`, `ReplicatedReplacingMergeTree(..)`)
                // are no MySQL storage engine.
                tokens.next();
                let engine = tokens.peek().map_or("", |e| e.text(text));
                let clickhouse = engine.to_ascii_lowercase().ends_with("mergetree");
                return Some(if clickhouse {
                    Dialect::Unknown
                } else {
                    Dialect::Mysql
                });
            }
            if w("auto_increment") {
                return Some(Dialect::Mysql);
            }
            if (w("identity") && punct_next("("))
                || (w("go") && starts && next.is_none_or(|n| n.kind == Kind::Word))
            {
                return Some(Dialect::Mssql);
            }
        }
        if tok.is_punct(text, "`") {
            return Some(Dialect::Mysql);
        }
        if tok.is_punct(text, "?") {
            // A placeholder follows an operator, a comma, a parenthesis or a keyword;
            // PostgreSQL's `?`, `?|`, `?&` jsonb operators sit between two operands.
            let after_operand = prev.is_some_and(|p| {
                matches!(
                    p.kind,
                    Kind::Number | Kind::String | Kind::QuotedIdent | Kind::Param
                ) || (p.kind == Kind::Word && !is_keyword(p.text(text)))
                    || p.is_punct(text, ")")
                    || p.is_punct(text, "]")
            });
            if !after_operand && !punct_next("|") && !punct_next("&") {
                match next {
                    Some(n) if n.kind == Kind::Number && n.start() == tok.end() => numbered = true,
                    _ => bare = true,
                }
            }
        }
        prev = Some(tok);
    }
    if numbered {
        return Some(Dialect::Sqlite);
    }
    bare.then_some(Dialect::Unknown)
}

/// Whether the text has anything [`of_text`] decides on: a `` ` ``, a `?`, or one of its words
/// (a byte scan; most files have none, and are not lexed).
fn has_signal(b: &[u8]) -> bool {
    const WORDS: [&[u8]; 7] = [
        b"autoincrement",
        b"pragma",
        b"auto_increment",
        b"engine",
        b"identity",
        b"go",
        b"cluster",
    ];
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' || b[i] == b'?' {
            return true;
        }
        // Wherever the lexer may start a word: also after a digit or `$` (`$1go` is `$1`, `go`),
        // never inside a word. Words in comments and strings count too: they only cost a lex.
        if !is_ident_start(b[i]) || (i > 0 && is_ident_start(b[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        let word = &b[start..i];
        if WORDS.iter().any(|w| w.eq_ignore_ascii_case(word)) {
            return true;
        }
    }
    false
}

fn is_keyword(w: &str) -> bool {
    matches!(
        w.to_ascii_lowercase().as_str(),
        "and"
            | "or"
            | "not"
            | "limit"
            | "offset"
            | "when"
            | "then"
            | "else"
            | "by"
            | "select"
            | "values"
            | "set"
            | "in"
            | "like"
            | "is"
            | "where"
            | "between"
            | "return"
    )
}

/// The one database family a Rust file's text names (`rusqlite`, `SqlitePool`, `MySqlPool`,
/// `mysql_async`, `PgPool`, `tokio_postgres`, `tiberius`, ...), if it names exactly one.
pub fn of_rust_text(text: &str) -> Option<Dialect> {
    let mut found = BTreeSet::new();
    for w in text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.len() > 2)
    {
        let d = match w {
            "rusqlite" | "libsql" | "deadpool_sqlite" | "Sqlite" | "SqlitePool"
            | "SqliteConnection" | "SqlitePoolOptions" | "SqliteRow" | "sqlite" => Dialect::Sqlite,
            "mysql_async" | "MySql" | "MySqlPool" | "MySqlConnection" | "MySqlPoolOptions"
            | "MySqlRow" | "MysqlConnection" | "mysql" => Dialect::Mysql,
            "tiberius" | "Mssql" | "MssqlPool" | "MssqlConnection" => Dialect::Mssql,
            "Postgres" | "PgPool" | "PgConnection" | "PgPoolOptions" | "PgRow"
            | "tokio_postgres" | "deadpool_postgres" | "postgres" => Dialect::Postgres,
            _ => continue,
        };
        found.insert(d);
    }
    let mut it = found.into_iter();
    match (it.next(), it.next()) {
        (Some(d), None) => Some(d),
        _ => None,
    }
}

/// `#[cfg(feature = "sqlite")]` (or `"mysql"`, `"postgres"`) on an item: code for that database.
pub fn of_cfg_feature(tokens: &str) -> Option<Dialect> {
    if !tokens.contains("feature") || tokens.contains("not") {
        return None;
    }
    let mut found = BTreeSet::new();
    for lit in tokens.split('"').skip(1).step_by(2) {
        let words = lit
            .to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find_map(of_word);
        found.extend(words);
    }
    let mut it = found.into_iter();
    match (it.next(), it.next()) {
        (Some(d), None) => Some(d),
        _ => None,
    }
}

/// The database family a crate talks to, from its `Cargo.toml`: the database crates it depends
/// on and the backends it enables (`sqlx` features, `sea-orm`'s `sqlx-*`, `diesel`'s), when
/// there is exactly one. Cached per manifest.
#[derive(Default)]
pub struct Crates {
    manifests: HashMap<PathBuf, Option<Dialect>>,
}

impl Crates {
    /// The dialect of the crate `path` belongs to (the nearest `Cargo.toml` above it).
    pub fn of(&mut self, path: &Path) -> Option<Dialect> {
        let abs = std::path::absolute(path).ok()?;
        let manifest = abs
            .ancestors()
            .skip(1)
            .map(|d| d.join("Cargo.toml"))
            .find(|m| m.is_file())?;
        if let Some(d) = self.manifests.get(&manifest) {
            return *d;
        }
        let d = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| of_manifest(&t));
        self.manifests.insert(manifest, d);
        d
    }
}

/// The one database family a manifest's dependencies and features name.
pub fn of_manifest(text: &str) -> Option<Dialect> {
    let toml: toml::Table = text.parse().ok()?;
    let mut found = BTreeSet::new();
    let mut note = |s: &str| {
        let s = s.to_ascii_lowercase();
        let d = match s.as_str() {
            "rusqlite" | "libsql" | "deadpool-sqlite" | "sqlite" | "sqlx-sqlite" => Dialect::Sqlite,
            "mysql" | "mysql_async" | "mysql-async" | "sqlx-mysql" => Dialect::Mysql,
            "tiberius" | "mssql" => Dialect::Mssql,
            "postgres" | "tokio-postgres" | "deadpool-postgres" | "bb8-postgres" | "postgresql"
            | "sqlx-postgres" | "pg" => Dialect::Postgres,
            _ => return,
        };
        found.insert(d);
    };
    if let Some(deps) = toml.get("dependencies").and_then(|d| d.as_table()) {
        for (name, spec) in deps {
            note(name);
            let features = spec.get("features").and_then(|f| f.as_array());
            for f in features.into_iter().flatten().filter_map(|f| f.as_str()) {
                note(f);
            }
        }
    }
    if let Some(features) = toml.get("features").and_then(|f| f.as_table()) {
        for values in features.values().filter_map(|v| v.as_array()) {
            for v in values.iter().filter_map(|v| v.as_str()) {
                // `sqlx/sqlite`, `sqlx?/mysql`, `sea-orm?/sqlx-postgres`.
                if let Some((_, feature)) = v.split_once('/') {
                    note(feature);
                }
            }
        }
    }
    let mut it = found.into_iter();
    match (it.next(), it.next()) {
        (Some(d), None) => Some(d),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_databases() {
        assert_eq!(
            of_path(Path::new("src/queries_mysql/a.sql")),
            Some(Dialect::Mysql)
        );
        assert_eq!(
            of_path(Path::new("db/sqlite/init.sql")),
            Some(Dialect::Sqlite)
        );
        assert_eq!(
            of_path(Path::new("db/schema.sqlite.sql")),
            Some(Dialect::Sqlite)
        );
        assert_eq!(
            of_path(Path::new("mysql/queries_postgres/a.sql")),
            Some(Dialect::Postgres),
            "the nearest folder decides"
        );
        assert_eq!(of_path(Path::new("db/migrations/1_init.sql")), None);
        // Migration tools that keep one file per database: the engine before `.up.sql`.
        assert_eq!(
            of_path(Path::new("migrations/0005_identities.mysql.up.sql")),
            Some(Dialect::Mysql)
        );
        assert_eq!(
            of_path(Path::new("migrations/0005_identities.cockroach.down.sql")),
            Some(Dialect::Unknown)
        );
        assert_eq!(
            of_path(Path::new("postgres/0005_identities.sqlite3.up.sql")),
            Some(Dialect::Sqlite),
            "the file's own name before its folders"
        );
        assert_eq!(of_path(Path::new("db/0005_add.up.sql")), None);
        assert_eq!(
            of_path(Path::new("db/clickhouse/migrations/01_keys.sql")),
            Some(Dialect::Unknown)
        );
    }

    #[test]
    fn texts_show_databases() {
        let sqlite = "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT);";
        assert_eq!(of_text(sqlite), Some(Dialect::Sqlite));
        assert_eq!(
            of_text("SELECT * FROM t WHERE id = ?1"),
            Some(Dialect::Sqlite)
        );
        assert_eq!(
            of_text("CREATE TABLE `t` (id int) ENGINE=InnoDB;"),
            Some(Dialect::Mysql)
        );
        assert_eq!(
            of_text("UPDATE t SET a = ? WHERE id = ?"),
            Some(Dialect::Unknown)
        );
        assert_eq!(
            of_text("SELECT data ? 'key', data ?| array['a'] FROM t"),
            None
        );
        assert_eq!(of_text("SELECT * FROM t WHERE id = $1"), None);
        assert_eq!(
            of_text("-- not `mysql`\nSELECT 'AUTOINCREMENT' FROM t;"),
            None
        );
        assert_eq!(of_text("SELECT * FROM t LIMIT ?"), Some(Dialect::Unknown));
    }

    /// ClickHouse's SQL: a table engine of the `MergeTree` family, `ON CLUSTER`. Its `ENGINE =`
    /// is not MySQL's, and a table or column named `cluster` is no ClickHouse.
    #[test]
    fn clickhouse_texts_are_no_mysql() {
        let table = "CREATE TABLE IF NOT EXISTS oximeter.version\n(\n    value UInt64\n)\n\
                     ENGINE = MergeTree()\nORDER BY (value);";
        assert_eq!(of_text(table), Some(Dialect::Unknown));
        let replicated =
            "CREATE TABLE t (a UInt8) ENGINE = ReplicatedReplacingMergeTree('/t', '{r}');";
        assert_eq!(of_text(replicated), Some(Dialect::Unknown));
        let alter =
            "ALTER TABLE oximeter.fields_i64 ON CLUSTER oximeter_cluster ADD COLUMN x UInt64;";
        assert_eq!(of_text(alter), Some(Dialect::Unknown));
        assert_eq!(
            of_text("CREATE TABLE t (a int) ENGINE = MEMORY;"),
            Some(Dialect::Mysql)
        );
        for postgres in [
            "CREATE INDEX i ON cluster (id);",
            "SELECT * FROM node JOIN cluster ON cluster.id = node.cluster_id;",
            "CLUSTER VERBOSE t USING t_pkey;",
        ] {
            assert_eq!(of_text(postgres), None, "{postgres}");
        }
    }

    /// The byte scan before the lexer lets every text through that the lexer decides on.
    #[test]
    fn the_byte_scan_keeps_every_signal() {
        for (text, dialect) in [
            ("CREATE TABLE t (id int IDENTITY(1, 1));", Dialect::Mssql),
            ("SELECT 1;\nGO\nSELECT 2\n", Dialect::Mssql),
            // `$1identity` is lexed as `$1` and `identity`.
            ("SELECT $1identity(1)", Dialect::Mssql),
            ("PRAGMA foreign_keys = ON;", Dialect::Sqlite),
            ("CREATE TABLE t (id int Auto_Increment);", Dialect::Mysql),
            ("CREATE TABLE t (a int) ENGINE = InnoDB;", Dialect::Mysql),
            (
                "ALTER TABLE t ON CLUSTER c DROP COLUMN x;",
                Dialect::Unknown,
            ),
        ] {
            assert!(has_signal(text.as_bytes()), "{text}");
            assert_eq!(of_text(text), Some(dialect), "{text}");
        }
        // Words that merely contain one are not a signal, and such a text is not lexed.
        let plain = "SELECT category, ego, engines FROM gopher WHERE pragmatic;";
        assert!(!has_signal(plain.as_bytes()));
        assert_eq!(of_text(plain), None);
    }

    #[test]
    fn manifests_name_databases() {
        let sqlite = "[dependencies]\nrusqlite = { version = \"0.37\" }\nserde = \"1\"\n";
        assert_eq!(of_manifest(sqlite), Some(Dialect::Sqlite));
        let many = "[dependencies]\nsqlx = \"0.8\"\n[features]\nmysql = [\"sqlx/mysql\"]\nsqlite = [\"sqlx/sqlite\"]\n";
        assert_eq!(of_manifest(many), None);
        let pg = "[dependencies]\nsea-orm = { version = \"2\", features = [\"sqlx-postgres\", \"macros\"] }\n";
        assert_eq!(of_manifest(pg), Some(Dialect::Postgres));
        assert_eq!(
            of_cfg_feature("feature = \"sqlite\""),
            Some(Dialect::Sqlite)
        );
        assert_eq!(of_cfg_feature("not(feature = \"sqlite\")"), None);
    }
}
