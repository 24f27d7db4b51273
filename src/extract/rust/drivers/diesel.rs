//! diesel and diesel-async: connections only (no pool or transaction type of their own; a
//! transaction is a closure run on the connection, which the closure is handed). Its query
//! builder is read by `extract::rust::diesel`.

use super::{Driver, Methods, Shares, Type};
use crate::model::Executor::Connection;
use crate::source::Dialect::{Mysql, Postgres, Sqlite};

pub(super) const DIESEL: Driver = Driver {
    crates: &[("diesel", None), ("diesel_async", None)],
    types: &[
        Type::of("PgConnection", Connection)
            .on(Postgres)
            .sharing(Shares::Always),
        Type::of("MysqlConnection", Connection)
            .on(Mysql)
            .sharing(Shares::Always),
        Type::of("SqliteConnection", Connection)
            .on(Sqlite)
            .sharing(Shares::Always),
        Type::of("AsyncPgConnection", Connection)
            .on(Postgres)
            .sharing(Shares::Always),
        Type::of("AsyncMysqlConnection", Connection)
            .on(Mysql)
            .sharing(Shares::Always),
    ],
    managers: &["ConnectionManager", "AsyncDieselConnectionManager"],
    traits: &["Connection"],
    methods: Methods {
        runs: &["execute", "load", "get_result", "get_results", "first"],
        one: &["first", "get_result", "first_async", "get_result_async"],
        one_or_none: &["optional"],
        starts: &["sql_query"],
        begins_around: &["transaction"],
        // `TransactionManager`'s, called by path (`AnsiTransactionManager::begin_transaction(
        // conn)`) or on the manager (`conn.transaction_manager().begin_transaction(conn)`).
        begins_on_argument: &["begin_transaction", "begin_transaction_sql"],
        ends_on_argument: &["commit_transaction", "rollback_transaction"],
        connects: &["establish"],
        ..Methods::NONE
    },
    ..Driver::NONE
};
