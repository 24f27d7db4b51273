//! Connection pools: deadpool (and deadpool-postgres, -diesel, -sqlite), bb8, r2d2. A pool
//! hands out a pooled connection, one session returned to the pool with its state.

use super::{Driver, Methods, Shares, Type};
use crate::model::Executor::{Pool, PooledConnection, Transaction};
use crate::source::Dialect::{Postgres, Sqlite};

pub(super) const DEADPOOL: Driver = Driver {
    crates: &[
        ("deadpool", None),
        ("deadpool_postgres", Some(Postgres)),
        ("deadpool_sqlite", Some(Sqlite)),
        ("deadpool_diesel", None),
    ],
    types: &[
        Type::of("Pool", Pool),
        Type::of("Object", PooledConnection).sharing(Shares::Borrowed),
        // deadpool_postgres::Client is a pooled tokio_postgres::Client.
        Type::of("Client", PooledConnection).from(&["deadpool_postgres"]),
        // deadpool_postgres::Transaction is tokio_postgres's, on a pooled client.
        Type::of("Transaction", Transaction).from(&["deadpool_postgres"]),
    ],
    methods: Methods {
        acquires: &["get", "try_get"],
        prepares: &["prepare_cached"],
        // deadpool-diesel's and deadpool-sqlite's `Object::interact(|conn| ..)`: the closure
        // runs on the pooled connection.
        lends: &["interact"],
        connects: &["create_pool", "build"],
        ..Methods::NONE
    },
    ..Driver::NONE
};

pub(super) const BB8: Driver = Driver {
    crates: &[("bb8", None), ("bb8_postgres", Some(Postgres))],
    types: &[
        Type::of("Pool", Pool),
        Type::of("PooledConnection", PooledConnection).sharing(Shares::Borrowed),
    ],
    methods: Methods {
        acquires: &["get", "get_owned", "dedicated_connection"],
        connects: &["build"],
        ..Methods::NONE
    },
    ..Driver::NONE
};

pub(super) const R2D2: Driver = Driver {
    crates: &[("r2d2", None), ("r2d2_postgres", Some(Postgres))],
    types: &[
        Type::of("Pool", Pool),
        Type::of("PooledConnection", PooledConnection).sharing(Shares::Borrowed),
    ],
    methods: Methods {
        acquires: &["get", "try_get"],
        connects: &["build"],
        ..Methods::NONE
    },
    ..Driver::NONE
};

/// Rocket's database pools: `#[database("..")]` on a struct holding a connection type
/// (rocket_sync_db_pools, rocket_contrib 0.4) or a pool (rocket_db_pools) makes a pool of it; a
/// handler's guard holds one connection of it (the struct itself, or rocket_db_pools'
/// `Connection<Db>`).
pub(super) const ROCKET: Driver = Driver {
    crates: &[
        ("rocket_sync_db_pools", None),
        ("rocket_contrib", None),
        ("rocket_db_pools", None),
    ],
    types: &[Type::of("Connection", PooledConnection).from(&["rocket_db_pools"])],
    methods: Methods {
        // `db.run(|conn| ..)`: the closure runs on the guard's connection.
        lends: &["run"],
        ..Methods::NONE
    },
    pool_attributes: &["database"],
    ..Driver::NONE
};
