//! What the drivers' APIs mean, as data: which methods send SQL, which build it, which
//! end a chain, which macros hold it.

/// Methods that send the SQL given as their first argument on their receiver.
pub(super) const CLIENT_METHODS: &[&str] = &[
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "query_typed",
    "query_typed_raw",
    "execute",
    "execute_raw",
    "batch_execute",
    "simple_query",
    "execute_unprepared",
    "query_all",
    "copy_in",
    "copy_out",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
    "execute_many",
];
/// Of those, the ones that send a whole script in one simple-query message.
pub(super) const BATCH_METHODS: &[&str] = &["batch_execute", "simple_query", "execute_unprepared"];
/// sqlx `Executor` methods: given a bare string (one argument, not a `sqlx::query(..)`), they
/// send it with the simple-query protocol (`Execute for &str` has no arguments).
pub(super) const SQLX_SIMPLE: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
];
/// Methods whose result is one row or none, as an `Option`.
/// Methods that fail when the statement returns no row.
pub(super) const REQUIRED: &[&str] = &[
    "fetch_one",
    "query_one",
    "first",
    "get_result",
    "first_async",
    "get_result_async",
];

pub(super) const OPTIONAL: &[&str] = &["fetch_optional", "query_opt", "optional", "one"];
/// Builder methods that run the query on the executor given as their argument.
pub(super) const TERMINALS: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
    "load",
    "get_result",
    "get_results",
    "first",
    "one",
    "all",
];
/// Conversions that keep an error an error, between a call and the `?` that passes it on.
pub(super) const PASS_ON: &[&str] = &[
    "map_err",
    "context",
    "with_context",
    "wrap_err",
    "wrap_err_with",
    "map",
    "err_into",
    "change_context",
    "attach_printable",
];
/// Functions that start a query builder from SQL (sqlx, diesel).
pub(super) const BUILDERS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_with",
    "query_as_with",
    "query_scalar_with",
    "raw_sql",
    "sql_query",
];
/// sqlx query macros: (name, index of the SQL argument, SQL is a file path).
pub(super) const MACROS: &[(&str, usize, bool)] = &[
    ("query", 0, false),
    ("query_unchecked", 0, false),
    ("query_scalar", 0, false),
    ("query_scalar_unchecked", 0, false),
    ("query_as", 1, false),
    ("query_as_unchecked", 1, false),
    ("query_file", 0, true),
    ("query_file_unchecked", 0, true),
    ("query_file_scalar", 0, true),
    ("query_file_scalar_unchecked", 0, true),
    ("query_file_as", 1, true),
    ("query_file_as_unchecked", 1, true),
];
