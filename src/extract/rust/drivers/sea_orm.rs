//! sea-orm: a `DatabaseConnection` is a pool; `begin` gives a `DatabaseTransaction`. Its
//! entities and query builder are read by `extract::rust::seaorm`.

use super::{Driver, Methods, Type};
use crate::model::Executor::{Pool, Transaction};

pub(super) const SEA_ORM: Driver = Driver {
    crates: &[("sea_orm", None)],
    types: &[
        Type::of("DatabaseConnection", Pool),
        Type::of("DatabaseTransaction", Transaction),
    ],
    traits: &["ConnectionTrait", "TransactionTrait"],
    methods: Methods {
        sends: &["execute", "execute_unprepared", "query_one", "query_all"],
        scripts: &["execute_unprepared"],
        runs: &["one", "all"],
        one_or_none: &["one"],
        begins: &["begin"],
        begins_around: &["transaction"],
        ends: &["commit", "rollback"],
        connects: &["connect"],
        ..Methods::NONE
    },
    ..Driver::NONE
};
