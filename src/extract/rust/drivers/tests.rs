use super::*;

fn path(p: &str) -> Vec<String> {
    p.split("::").map(String::from).collect()
}

#[test]
fn a_type_name_means_one_thing_whichever_table_lists_it() {
    for a in ALL.iter().flat_map(|d| d.types) {
        for b in ALL.iter().flat_map(|d| d.types) {
            if a.name == b.name && a.from.is_empty() && b.from.is_empty() {
                assert!(a.kind == b.kind, "{} has two kinds", a.name);
                let both = a.dialect.zip(b.dialect);
                assert!(
                    both.is_none_or(|(x, y)| x == y),
                    "{} has two databases",
                    a.name
                );
            }
        }
    }
    let crates: Vec<_> = ALL.iter().flat_map(|d| d.crates).collect();
    for (c, d) in &crates {
        assert!(
            crates.iter().all(|(o, e)| o != c || e == d),
            "crate {c} twice"
        );
    }
}

#[test]
fn generic_names_count_only_through_their_crate() {
    let cfg = RustConfig::default();
    let kind = |p: &str| {
        let q = path(p);
        kind_of(q.last().unwrap(), &q, &cfg)
    };
    assert_eq!(
        kind("deadpool_postgres::Client"),
        Some(Executor::PooledConnection)
    );
    assert_eq!(kind("tokio_postgres::Client"), Some(Executor::Connection));
    assert_eq!(kind("Client"), Some(Executor::Connection));
    assert_eq!(kind("rusqlite::Connection"), Some(Executor::Connection));
    assert_eq!(kind("Connection"), None);
    assert_eq!(kind("mysql_async::Conn"), Some(Executor::Connection));
    assert_eq!(kind("Conn"), None);
    assert_eq!(kind("sea_orm::DatabaseConnection"), Some(Executor::Pool));
    assert_eq!(kind("sqlx::PgTransaction"), Some(Executor::Transaction));
    assert_eq!(kind("HttpClientPool"), None);
    assert_eq!(kind("diesel::r2d2::Pool"), Some(Executor::Pool));
    assert_eq!(kind("sqlx_core::pool::Pool"), Some(Executor::Pool));
    assert_eq!(
        kind("deadpool_postgres::Transaction"),
        Some(Executor::Transaction)
    );
    // Another crate's, or the run's own module's: not a driver's.
    for other in [
        "reqwest::Client",
        "jobserver::Client",
        "inner::Pool",
        "self::pool::Pool",
    ] {
        assert_eq!(kind(other), None, "{other}");
    }
    // A generic's associated type, as a bare name.
    assert_eq!(kind("C::Transaction"), Some(Executor::Transaction));
    assert_eq!(kind("Self::Pool"), Some(Executor::Pool));
    // A name that tells its database is the driver's through any path.
    assert_eq!(kind("super::db::PgPool"), Some(Executor::Pool));
    assert!(names_a_type("Client") && !names_a_type("Regex"));
    let own = RustConfig {
        connection_types: vec!["db::Conn".into()],
        ..RustConfig::default()
    };
    assert_eq!(
        kind_of("Conn", &path("db::Conn"), &own),
        Some(Executor::Connection)
    );
}

#[test]
fn the_database_comes_from_the_crate_the_name_or_an_argument() {
    let of = |p: &str, args: &[&str]| {
        let q = path(p);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        dialect_of(q.last().unwrap(), &q, &args)
    };
    assert_eq!(of("rusqlite::Connection", &[]), Some(Dialect::Sqlite));
    assert_eq!(of("tokio_postgres::Client", &[]), Some(Dialect::Postgres));
    assert_eq!(of("sqlx::Pool", &["Sqlite"]), Some(Dialect::Sqlite));
    assert_eq!(of("MySqlTransaction", &[]), Some(Dialect::Mysql));
    assert_eq!(of("AnyPool", &[]), Some(Dialect::Unknown));
    assert_eq!(of("sqlx::Pool", &[]), None);
    assert_eq!(of("Client", &[]), None);
}

#[test]
fn methods_have_the_roles_their_drivers_give_them() {
    assert!(is("fetch_one", Role::Sends) && is("fetch_one", Role::Runs));
    assert!(is("fetch_one", Role::One) && !is("fetch_one", Role::OneOrNone));
    assert!(is("batch_execute", Role::Script) && !is("query", Role::Script));
    assert!(is("execute", Role::SimpleWhenBare) && !is("query", Role::SimpleWhenBare));
    assert!(is("start_transaction", Role::Begins) && is("transaction", Role::BeginsAround));
    assert!(is("get_owned", Role::Acquires) && !is("get_owned", Role::Sends));
    assert!(is("interact", Role::Lends) && !is("transaction", Role::Lends));
    assert!(is("run", Role::Lends) && !is("run", Role::Sends));
    assert!(is("sql_query", Role::Starts) && is("establish", Role::Connects));
    assert!(!is("send", Role::Sends) && !is("unknown", Role::Begins));
    assert!(is_known("commit") && is_known("get_owned") && !is_known("fetch_one_as"));
    assert_eq!(sql_macro("query_as"), Some((1, false)));
    assert_eq!(sql_macro("query_file"), Some((0, true)));
    assert_eq!(sql_macro("format"), None);
}

#[test]
fn a_struct_of_rockets_database_attribute_is_a_pool() {
    let attrs = |src: &str| syn::parse_str::<syn::ItemStruct>(src).map(|s| s.attrs);
    let rocket = attrs("#[database(\"bank\")] struct Db(diesel::PgConnection);");
    assert!(rocket.is_ok_and(|a| pools_what_it_holds(&a)));
    let derived = attrs("#[derive(Database)] #[database(\"bank\")] struct Db(sqlx::PgPool);");
    assert!(derived.is_ok_and(|a| pools_what_it_holds(&a)));
    let other = attrs("#[derive(Debug)] #[serde(rename = \"database\")] struct Db(PgPool);");
    assert!(other.is_ok_and(|a| !pools_what_it_holds(&a)));
}

#[test]
fn sharing_and_traits() {
    assert!(shares("PgConnection") == Shares::Always);
    assert!(shares("PooledConnection") == Shares::Borrowed);
    assert!(shares("PoolConnection") == Shares::No && shares("Client") == Shares::No);
    assert!(is_manager("AsyncDieselConnectionManager") && !is_manager("Manager"));
    assert!(is_executor_trait("GenericClient") && is_executor_trait("SqliteExecutor"));
    assert!(!is_executor_trait("Iterator"));
}
