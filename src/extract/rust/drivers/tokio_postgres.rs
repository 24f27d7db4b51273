//! tokio-postgres and its blocking twin `postgres`: a `Client` is one dedicated connection; its
//! `Transaction` a type of its own.

use super::{Driver, Methods, Type};
use crate::model::Executor::{Connection, Transaction};
use crate::source::Dialect::Postgres;

pub(super) const TOKIO_POSTGRES: Driver = Driver {
    crates: &[
        ("tokio_postgres", Some(Postgres)),
        ("postgres", Some(Postgres)),
    ],
    types: &[
        Type::of("Client", Connection),
        Type::of("Transaction", Transaction),
    ],
    traits: &["GenericClient"],
    methods: Methods {
        sends: &[
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
            "copy_in",
            "copy_out",
        ],
        scripts: &["batch_execute", "simple_query"],
        one: &["query_one"],
        one_or_none: &["query_opt"],
        prepares: &["prepare", "prepare_typed"],
        begins: &["transaction"],
        ends: &["commit", "rollback"],
        connects: &["connect"],
        ..Methods::NONE
    },
    ..Driver::NONE
};
