//! sqlx: pools, pooled and dedicated connections, transactions of PostgreSQL, MySQL, SQLite
//! (and `Any`); the `Executor` methods, the `query*` functions and macros.

use super::{Driver, Methods, Shares, Type};
use crate::model::Executor::{Connection, Pool, PooledConnection, Transaction};
use crate::source::Dialect::{Mssql, Mysql, Postgres, Sqlite, Unknown};

/// `Executor` methods, on a handle given a statement (`pool.fetch_one(query)`) or, alone, a
/// bare string (`conn.execute("SET ..")`); on a statement given the handle, they run it.
const EXECUTOR: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
];

pub(super) const SQLX: Driver = Driver {
    crates: &[
        ("sqlx", None),
        ("sqlx_core", None),
        ("sqlx_postgres", Some(Postgres)),
        ("sqlx_mysql", Some(Mysql)),
        ("sqlx_sqlite", Some(Sqlite)),
    ],
    types: &[
        Type::of("Pool", Pool),
        Type::of("PgPool", Pool).on(Postgres),
        Type::of("MySqlPool", Pool).on(Mysql),
        Type::of("SqlitePool", Pool).on(Sqlite),
        Type::of("MssqlPool", Pool).on(Mssql),
        Type::of("AnyPool", Pool).on(Unknown),
        Type::of("PoolConnection", PooledConnection),
        Type::of("PgConnection", Connection)
            .on(Postgres)
            .sharing(Shares::Always),
        Type::of("MySqlConnection", Connection)
            .on(Mysql)
            .sharing(Shares::Always),
        Type::of("SqliteConnection", Connection)
            .on(Sqlite)
            .sharing(Shares::Always),
        Type::of("MssqlConnection", Connection).on(Mssql),
        Type::of("AnyConnection", Connection)
            .on(Unknown)
            .sharing(Shares::Always),
        Type::of("Transaction", Transaction),
        // `PgTransaction<'c>` is `Transaction<'c, Postgres>`.
        Type::of("PgTransaction", Transaction).on(Postgres),
        Type::of("MySqlTransaction", Transaction).on(Mysql),
        Type::of("SqliteTransaction", Transaction).on(Sqlite),
    ],
    databases: &[
        ("Postgres", Postgres),
        ("MySql", Mysql),
        ("Sqlite", Sqlite),
        ("Mssql", Mssql),
        ("Any", Unknown),
    ],
    traits: &[
        "Executor",
        "PgExecutor",
        "MySqlExecutor",
        "SqliteExecutor",
        "Acquire",
    ],
    methods: Methods {
        sends: EXECUTOR,
        simple_when_bare: EXECUTOR,
        runs: EXECUTOR,
        one: &["fetch_one"],
        one_or_none: &["fetch_optional"],
        starts: &[
            "query",
            "query_as",
            "query_scalar",
            "query_with",
            "query_as_with",
            "query_scalar_with",
            "raw_sql",
        ],
        begins: &["begin", "begin_with"],
        begins_around: &["transaction"],
        ends: &["commit", "rollback"],
        acquires: &["acquire", "try_acquire"],
        connects: &["connect", "connect_lazy", "connect_with"],
        ..Methods::NONE
    },
    associated: &[("Database", "Connection", Connection)],
    macros: &[
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
    ],
    ..Driver::NONE
};
