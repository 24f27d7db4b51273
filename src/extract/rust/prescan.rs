//! A byte scan that decides, before syn sees a file, whether it can matter: a file that names
//! no database crate, handle type, SQL-sending call or SQL keyword sends no SQL and passes no
//! handle on, so it is not parsed (most of a large tree: bindings, tables, generated code).
//!
//! The scan errs on the side of reading: a database crate's name or a suppression comment
//! counts anywhere. Common words count only where they can mean SQL or a handle: a SQL keyword
//! in a string literal (or, for the query builders' `select(..)`, `update(..)`, .. in a call),
//! a handle type's name in code. Doc text and comments do not count for them: generated
//! bindings document a register's "lock bit" or "transaction error" on every page. What the
//! scan must never do is skip a file that sends SQL, holds it in a constant, or hands a handle
//! to a helper; each pattern below is one of those.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use crate::config::RustConfig;

/// SQL keywords a constant holding SQL starts with or a sink is given; they count inside a
/// string literal that is not documentation. Matched as whole words (a `SELECT_ALL` constant
/// is not SQL).
const SQL_WORDS: &[&str] = &[
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
];

/// Of [`SQL_WORDS`], those a query builder calls by name (`update(t)`, `Query::select()`):
/// they count in code too, as a call that is not the function's definition.
const BUILDER_CALLS: &[&str] = &["select", "update", "insert", "delete"];

/// Generic handle type names; they count in code, as whole words (an `IClientSecurity`
/// binding is not a client).
const HANDLE_WORDS: &[&str] = &[
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

fn automaton() -> &'static AhoCorasick {
    static AC: OnceLock<AhoCorasick> = OnceLock::new();
    AC.get_or_init(|| {
        let patterns = SQL_WORDS.iter().chain(HANDLE_WORDS).chain(PIECES);
        AhoCorasick::new(patterns).expect("fixed patterns build")
    })
}

/// The file can send SQL or pass a handle on: syn must read it.
pub fn may_matter(text: &str, cfg: &RustConfig) -> bool {
    scan(text, cfg, false)
}

/// An item of a file that can matter can itself: the same scan, where a common word counts
/// in comments and documentation too. Inside such a file an item that names no handle may
/// still use one through a field (`self.pool`) or a helper of the file; what its comments say
/// is the scan's only hint, and thinning an item away loses more than reading it costs.
pub fn item_may_matter(text: &str, cfg: &RustConfig) -> bool {
    scan(text, cfg, true)
}

fn scan(text: &str, cfg: &RustConfig, anywhere: bool) -> bool {
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
    let bytes = text.as_bytes();
    // The text's regions, worked out only once a common word is met.
    let mut regions: Option<Vec<(usize, Region)>> = None;
    automaton().find_overlapping_iter(bytes).any(|m| {
        let k = m.pattern().as_usize();
        if k >= SQL_WORDS.len() + HANDLE_WORDS.len() {
            return true;
        }
        if word_before(bytes, m.start()) || bytes.get(m.end()).copied().is_some_and(is_ident) {
            return false;
        }
        if anywhere {
            return true;
        }
        let regions = regions.get_or_insert_with(|| lex(bytes));
        let at = regions.partition_point(|(start, _)| *start <= m.start());
        let region = at.checked_sub(1).map_or(Region::Code, |i| regions[i].1);
        match (region, SQL_WORDS.get(k)) {
            (Region::Str, Some(_)) => true,
            (Region::Code, Some(w)) => {
                BUILDER_CALLS.contains(w) && is_call(bytes, m.start(), m.end())
            }
            (Region::Code, None) => true,
            _ => false,
        }
    })
}

/// Whether the word at `start..end` is called (`update(`, `select::<`), not defined (`fn
/// update(`).
fn is_call(bytes: &[u8], start: usize, end: usize) -> bool {
    let rest = bytes.get(end..).unwrap_or_default().trim_ascii_start();
    let head = bytes.get(..start).unwrap_or_default().trim_ascii_end();
    let defined = head.ends_with(b"fn") && !word_before(head, head.len() - 2);
    (rest.starts_with(b"(") || rest.starts_with(b"::<")) && !defined
}

/// What a stretch of Rust text is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Region {
    Code,
    /// A string literal's contents (plain, raw or byte).
    Str,
    /// A comment, or a string literal given to `doc =`.
    Doc,
}

/// The regions of a text as (start, region) pairs in order. A light lexer: comments (nested
/// block comments too), plain, byte and raw string literals, and character literals told from
/// lifetimes; what it cannot tell it leaves as code, which counts more words, not fewer.
fn lex(bytes: &[u8]) -> Vec<(usize, Region)> {
    let mut out = vec![(0, Region::Code)];
    let mut i = 0;
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    while i < bytes.len() {
        let start = i;
        let (region, end) = match (at(i), at(i + 1)) {
            (b'/', b'/') => (Region::Doc, line_end(bytes, i)),
            (b'/', b'*') => (Region::Doc, block_comment_end(bytes, i)),
            (b'"', _) => (string_region(bytes, i), plain_string_end(bytes, i + 1)),
            (b'b', b'"') if !word_before(bytes, i) => (Region::Str, plain_string_end(bytes, i + 2)),
            (b'r' | b'b', _) if !word_before(bytes, i) => match raw_string_end(bytes, i) {
                Some(end) => (string_region(bytes, i), end),
                None => (Region::Code, i + 1),
            },
            (b'\'', _) => (Region::Code, char_literal_end(bytes, i)),
            _ => (Region::Code, i + 1),
        };
        if region != Region::Code {
            out.push((start, region));
            out.push((end, Region::Code));
        }
        i = end.max(i + 1);
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The byte before `i` continues an identifier.
fn word_before(bytes: &[u8], i: usize) -> bool {
    i.checked_sub(1)
        .and_then(|j| bytes.get(j))
        .copied()
        .is_some_and(is_ident)
}

/// A string literal starting at `i` is documentation when it is given to `doc =`.
fn string_region(bytes: &[u8], i: usize) -> Region {
    let head = bytes.get(..i).unwrap_or_default().trim_ascii_end();
    let Some(head) = head.strip_suffix(b"=") else {
        return Region::Str;
    };
    let head = head.trim_ascii_end();
    if head.ends_with(b"doc") && !word_before(head, head.len() - 3) {
        Region::Doc
    } else {
        Region::Str
    }
}

fn line_end(bytes: &[u8], i: usize) -> usize {
    bytes[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(bytes.len(), |n| i + n)
}

fn block_comment_end(bytes: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The end (past the closing quote) of a string whose contents start at `i`.
fn plain_string_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The end of a raw string (`r"..."`, `r#"..."#`, `br".."`) starting at `i`, if one does.
fn raw_string_end(bytes: &[u8], i: usize) -> Option<usize> {
    let mut j = i + usize::from(bytes[i] == b'b');
    if bytes.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = bytes[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if bytes.get(j) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = j + 1;
    Some(
        bytes[body..]
            .windows(close.len())
            .position(|w| w == close.as_slice())
            .map_or(bytes.len(), |n| body + n + close.len()),
    )
}

/// Past a character literal at `i` (`'a'`, `'\''`, `'é'`), or just past the quote of a
/// lifetime or label (`'a`).
fn char_literal_end(bytes: &[u8], i: usize) -> usize {
    if bytes.get(i + 1) == Some(&b'\\') {
        return bytes
            .get(i + 3..)
            .and_then(|r| r.iter().position(|&c| c == b'\''))
            .map_or(i + 1, |n| i + 3 + n + 1);
    }
    let width = match bytes.get(i + 1) {
        Some(c) if *c < 0x80 => 1,
        Some(c) if *c >= 0xf0 => 4,
        Some(c) if *c >= 0xe0 => 3,
        Some(_) => 2,
        None => return i + 1,
    };
    if bytes.get(i + 1 + width) == Some(&b'\'') {
        i + 2 + width
    } else {
        i + 1
    }
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

    #[test]
    fn words_count_only_where_they_can_mean_sql_or_a_handle() {
        // Generated register bindings: the words are documentation, a method's name.
        assert!(!matters(
            "#[doc = \"Port x lock bit y\"] pub struct LCKR; /// Transaction error\n\
             pub fn update(self) -> &'a mut W { self }"
        ));
        assert!(!matters(
            "// select the update path\nfn f() {} /* a Client /* nested */ Pool */"
        ));
        assert!(!matters(
            "let s = \"the Connection pool\"; m.lock().unwrap();"
        ));
        // SQL in a string over several lines, in a raw string, in a byte string.
        assert!(matters("let q = \"\n    update t\n    set n = 1\";"));
        assert!(matters(
            "let q = r##\"with a as (select 1) select * from a\"##;"
        ));
        assert!(matters("let q = b\"delete from t\";"));
        // A query builder's call, and a handle type in code.
        assert!(matters("let q = update(users).set(n.eq(1));"));
        assert!(matters("let q = Query::select::<T>();"));
        assert!(matters("fn f(c: &Client) {}"));
        // A string given to `doc` is not SQL, another after it is.
        assert!(matters("#[doc = \"x\"] const Q: &str = \"SELECT 1\";"));
        // A character literal holding a quote does not start a string.
        assert!(matters("let c = '\"'; let p: Pool = p;"));
        assert!(matters("fn f<'a>(c: &'a Client) {}"));
        assert!(!matters("let c = '\"'; let s = 1; // \" Pool"));
    }

    /// Inside a file that matters, an item reaching its handle through a field keeps the old
    /// hint: the word in its comment.
    #[test]
    fn an_item_of_a_file_that_matters_counts_its_comments() {
        let item = "// update the row\nasync fn f(&self) { let c = self.db.get().await?; helper(&c).await }";
        assert!(item_may_matter(item, &RustConfig::default()));
        assert!(!matters(item));
    }
}
