//! A byte scan that decides, before syn sees a file, whether it can matter: a file that names
//! no database crate, handle type, SQL-sending call or SQL keyword sends no SQL and passes no
//! handle on, so it is not parsed (most of a large tree: bindings, tables, generated code).
//!
//! The scan errs on the side of reading: a word in a comment is enough. What it must never do
//! is skip a file that sends SQL, holds it in a constant, or hands a handle to a helper; each
//! pattern below is one of those.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use crate::config::RustConfig;

/// Matched as whole words (a `SELECT_ALL` constant is not SQL, an `IClientSecurity` binding is
/// not a client): SQL keywords a constant holding SQL starts with or a sink is given, and the
/// generic handle type names.
const WORDS: &[&str] = &[
    "SELECT",
    "UPDATE",
    "INSERT",
    "DELETE",
    "MERGE",
    "WITH",
    "LOCK",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "select",
    "update",
    "insert",
    "delete",
    "lock",
    "execute",
    "Pool",
    "Client",
    "Connection",
    "Transaction",
    "Executor",
    "Acquire",
    "Statement",
];

/// Anywhere: crates that send SQL, specific handle types and traits, SQL-sending calls and
/// macros, transaction calls, advisory locks, suppression comments.
const PIECES: &[&str] = &[
    "sqlx",
    "postgres",
    "diesel",
    "sea_orm",
    "rusqlite",
    "libsql",
    "mysql",
    "deadpool",
    "bb8::",
    "bb8_",
    "PgPool",
    "MySqlPool",
    "SqlitePool",
    "AnyPool",
    "PgConnection",
    "MySqlConnection",
    "MysqlConnection",
    "SqliteConnection",
    "AnyConnection",
    "PoolConnection",
    "PooledConnection",
    "DatabaseConnection",
    "DatabaseTransaction",
    "PgExecutor",
    "MySqlExecutor",
    "SqliteExecutor",
    "GenericClient",
    "ConnectionTrait",
    "TransactionTrait",
    "QueryBuilder",
    ".query",
    "query(",
    "query!",
    "query_as",
    "query_scalar",
    "query_file",
    "sql_query",
    "raw_sql",
    ".execute",
    "batch_execute",
    ".fetch",
    ".begin(",
    ".transaction(",
    "pg_advisory",
    "txlint",
];

fn automaton() -> &'static (AhoCorasick, usize) {
    static AC: OnceLock<(AhoCorasick, usize)> = OnceLock::new();
    AC.get_or_init(|| {
        let patterns: Vec<&str> = WORDS.iter().chain(PIECES).copied().collect();
        let ac = AhoCorasick::new(patterns).expect("fixed patterns build");
        (ac, WORDS.len())
    })
}

/// The file can send SQL or pass a handle on: syn must read it.
pub fn may_matter(text: &str, cfg: &RustConfig) -> bool {
    let configured = cfg
        .pool_types
        .iter()
        .chain(&cfg.connection_types)
        .chain(&cfg.transaction_types)
        .chain(&cfg.query_functions);
    for name in configured {
        if !name.is_empty() && text.contains(name.rsplit("::").next().unwrap_or(name)) {
            return true;
        }
    }
    let (ac, words) = automaton();
    let bytes = text.as_bytes();
    let word = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    ac.find_overlapping_iter(bytes).any(|m| {
        m.pattern().as_usize() >= *words
            || (!word(m.start().checked_sub(1).and_then(|i| bytes.get(i)))
                && !word(bytes.get(m.end())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matters(text: &str) -> bool {
        may_matter(text, &RustConfig::default())
    }

    #[test]
    fn files_that_can_send_sql_are_read() {
        assert!(matters("fn f(p: &PgPool) {}"));
        assert!(matters("const Q: &str = \"\n  SELECT n FROM t\";"));
        assert!(matters("let q = r#\"update t set n = 1\"#;"));
        assert!(matters("async fn f(tx: &mut Transaction<'_, Postgres>) {}"));
        assert!(matters("fn f<E: Executor>(e: E) {}"));
        assert!(matters("client.execute(&stmt, &[]).await"));
        assert!(matters("c.query_one(\"SELECT 1\", &[]).await"));
        assert!(matters("fn f(c: &tokio_postgres::Client) {}"));
        assert!(matters("fn f(c: &mut Connection) {}"));
        assert!(matters("let mut tx = db.begin().await?;"));
        assert!(matters("// txlint-disable-next-line lost-update"));
        let cfg = RustConfig {
            pool_types: vec!["app::Db".into()],
            ..RustConfig::default()
        };
        assert!(may_matter("fn f(db: &Db) {}", &cfg));
    }

    #[test]
    fn files_that_cannot_are_not() {
        assert!(!matters("fn add(a: u32, b: u32) -> u32 { a + b }"));
        assert!(!matters(
            "pub const MENU_SELECTED: u32 = 4; pub const SELECT_ALL: u32 = 5;"
        ));
        assert!(!matters("let updated = map.insert_many(x); // unlocked"));
        assert!(!matters("static TABLE: [u8; 4] = [0xbb, 0x8a, 0, 1];"));
        // Generated bindings: handle-like names inside longer identifiers.
        assert!(!matters(
            "pub struct INetworkConnection(IUnknown); pub fn ShellExecuteW(); impl IClientSecurity {}"
        ));
    }
}
