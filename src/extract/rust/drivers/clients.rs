//! The SQLite, MySQL and SQL Server clients: rusqlite, libsql, mysql and mysql_async,
//! tiberius. Their generic type names (`Connection`, `Conn`) count only through their crate.

use super::{Driver, Methods, Type};
use crate::model::Executor::Connection;
use crate::source::Dialect::{Mssql, Mysql, Sqlite};

pub(super) const RUSQLITE: Driver = Driver {
    crates: &[("rusqlite", Some(Sqlite))],
    types: &[Type::of("Connection", Connection).from(&["rusqlite"])],
    methods: Methods {
        prepares: &["prepare", "prepare_cached"],
        begins: &["transaction"],
        ends: &["commit", "rollback"],
        ..Methods::NONE
    },
    ..Driver::NONE
};

pub(super) const LIBSQL: Driver = Driver {
    crates: &[("libsql", Some(Sqlite))],
    types: &[Type::of("Connection", Connection).from(&["libsql"])],
    ..Driver::NONE
};

pub(super) const MYSQL: Driver = Driver {
    crates: &[("mysql_async", Some(Mysql)), ("mysql", Some(Mysql))],
    types: &[Type::of("Conn", Connection).from(&["mysql_async", "mysql"])],
    methods: Methods {
        begins: &["start_transaction"],
        ends: &["commit", "rollback"],
        ..Methods::NONE
    },
    ..Driver::NONE
};

pub(super) const TIBERIUS: Driver = Driver {
    crates: &[("tiberius", Some(Mssql))],
    ..Driver::NONE
};
