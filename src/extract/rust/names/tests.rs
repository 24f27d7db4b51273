use super::*;

fn names(files: &[(&str, &str)]) -> Vec<(std::path::PathBuf, syn::File)> {
    let parse = |(p, f): &(&str, &str)| (p.into(), syn::parse_file(f).unwrap());
    files.iter().map(parse).collect()
}

fn collect(files: &[(std::path::PathBuf, syn::File)]) -> TypeNames<'_> {
    TypeNames::collect(files.iter().map(|(p, f)| (p.as_path(), f)), &|m| {
        m == "models"
    })
}

fn text(t: &syn::Type) -> String {
    t.to_token_stream().to_string().replace(' ', "")
}

#[test]
fn aliases_and_renames_resolve_to_the_drivers_types() {
    let files = names(&[
        (
            "a/src/db.rs",
            "use deadpool::managed::Object as DeadpoolObject; type Conn = DeadpoolObject<AsyncPgConnection>;",
        ),
        (
            "b/src/lib.rs",
            "use sqlx::Transaction as Tx; type Pool = sqlx::Pool<Postgres>;",
        ),
    ]);
    let n = collect(&files);
    let ty: syn::Type = syn::parse_str("Arc<Conn>").unwrap();
    assert_eq!(
        text(&n.resolve(&ty, 0)),
        "Arc<deadpool::managed::Object<AsyncPgConnection>>"
    );
    // The other file's alias, the only one of its name; its renames are its own.
    let ty: syn::Type = syn::parse_str("&mut Conn").unwrap();
    assert_eq!(
        text(&n.resolve(&ty, 1)),
        "&mutdeadpool::managed::Object<AsyncPgConnection>"
    );
    let ty: syn::Type = syn::parse_str("Tx<'static, Postgres>").unwrap();
    assert_eq!(
        text(&n.resolve(&ty, 1)),
        "sqlx::Transaction<'static,Postgres>"
    );
    assert!(matches!(n.resolve(&ty, 0), Cow::Borrowed(_)));
    // A name for itself stays.
    let ty: syn::Type = syn::parse_str("Pool").unwrap();
    assert!(matches!(n.resolve(&ty, 1), Cow::Borrowed(_)));
}

#[test]
fn a_generic_name_imported_from_its_driver_keeps_the_crate() {
    let files = names(&[
        ("a.rs", "use rocket_db_pools::{Connection, Database};"),
        (
            "b.rs",
            "use diesel::Connection; use deadpool_postgres::Client;",
        ),
    ]);
    let n = collect(&files);
    let ty: syn::Type = syn::parse_str("Connection<Bank>").unwrap();
    assert_eq!(
        text(&n.resolve(&ty, 0)),
        "rocket_db_pools::Connection<Bank>"
    );
    // diesel's `Connection` (a trait) keeps its crate too: no driver's row names it so.
    assert_eq!(text(&n.resolve(&ty, 1)), "diesel::Connection<Bank>");
    let ty: syn::Type = syn::parse_str("Client").unwrap();
    assert_eq!(text(&n.resolve(&ty, 1)), "deadpool_postgres::Client");
    let ty: syn::Type = syn::parse_str("Database").unwrap();
    assert!(matches!(n.resolve(&ty, 0), Cow::Borrowed(_)));
}

#[test]
fn a_drivers_name_the_run_gives_its_own_type_is_the_runs() {
    let files = names(&[
        (
            "api.rs",
            "pub struct Client { http: reqwest::Client } enum Transaction { Debit }",
        ),
        ("db.rs", "use tokio_postgres::{Client, Transaction};"),
        ("jobs.rs", "use jobserver::Client;"),
        ("pg.rs", "use super::db::{Client, Pool};"),
    ]);
    let n = collect(&files);
    let ty = |s: &str| syn::parse_str::<syn::Type>(s).unwrap();
    // The run's own: its path from the crate's root (`crate` `::` name).
    let own = |name: &str| ["crate", name].join("::");
    assert_eq!(
        text(&n.resolve(&ty("&Client"), 0)),
        format!("&{}", own("Client"))
    );
    assert_eq!(text(&n.resolve(&ty("Transaction"), 0)), own("Transaction"));
    assert_eq!(text(&n.resolve(&ty("Client"), 1)), "tokio_postgres::Client");
    assert_eq!(
        text(&n.resolve(&ty("Transaction<'_>"), 1)),
        "tokio_postgres::Transaction<'_>"
    );
    assert_eq!(text(&n.resolve(&ty("Client"), 2)), "jobserver::Client");
    // An import names a path's first segment, not its last.
    assert!(matches!(n.resolve(&ty("db::Client"), 2), Cow::Borrowed(_)));
    // From the run's own modules: its own type where it has one of that name, else a
    // re-export perhaps, the name as written.
    assert_eq!(text(&n.resolve(&ty("Client"), 3)), own("Client"));
    assert!(matches!(n.resolve(&ty("Pool"), 3), Cow::Borrowed(_)));
}

#[test]
fn an_import_from_the_runs_own_crates_and_modules_names_the_item_by_its_name() {
    let files = names(&[
        ("crates/app-store/src/lib.rs", "pub use sqlx::Transaction;"),
        (
            "crates/api/src/db.rs",
            "use app_store::Transaction; use self::pool::Pool as DbPool; \
             use models::Client as Api; use models::Object;",
        ),
        ("crates/api/src/models.rs", "pub struct Client;"),
    ]);
    let n = collect(&files);
    let ty = |s: &str| syn::parse_str::<syn::Type>(s).unwrap();
    // Not `app_store::Transaction`: the package's re-export, judged by its name.
    assert!(matches!(
        n.resolve(&ty("Transaction<'_, Postgres>"), 1),
        Cow::Borrowed(_)
    ));
    assert_eq!(text(&n.resolve(&ty("DbPool"), 1)), "Pool");
    // `models` is a module of the run (declared), its `Client` the run's own.
    assert_eq!(
        text(&n.resolve(&ty("Api"), 1)),
        ["crate", "Client"].join("::")
    );
    assert!(matches!(n.resolve(&ty("Object"), 1), Cow::Borrowed(_)));
    // Written through a path, or a name no driver has: as written.
    assert!(matches!(n.resolve(&ty("api::Client"), 0), Cow::Borrowed(_)));
    assert!(matches!(n.resolve(&ty("Debit"), 0), Cow::Borrowed(_)));
}

#[test]
fn the_nearest_declaration_is_used_and_disagreeing_ones_are_not() {
    let files = names(&[
        (
            "pg/src/pool.rs",
            "type Conn = PgConnection; type A = B; type B = A;",
        ),
        ("lite/src/pool.rs", "type Conn = SqliteConnection;"),
        ("lite/src/db/mod.rs", "fn f() {}"),
        ("main.rs", "fn g() {}"),
    ]);
    let n = collect(&files);
    let conn: syn::Type = syn::parse_str("Conn").unwrap();
    assert_eq!(text(&n.resolve(&conn, 1)), "SqliteConnection");
    assert_eq!(text(&n.resolve(&conn, 2)), "SqliteConnection");
    assert!(matches!(n.resolve(&conn, 3), Cow::Borrowed(_)));
    let a: syn::Type = syn::parse_str("A").unwrap();
    assert_eq!(text(&n.resolve(&a, 0)), "A");
}

#[test]
fn one_file_declaring_an_alias_per_build_gives_none() {
    let files = names(&[(
        "src/db.rs",
        "#[cfg(not(feature = \"postgres\"))] type Backend = SqliteConnection; \
         #[cfg(feature = \"postgres\")] type Backend = PgConnection; \
         type Same = PgPool; type Same = PgPool;",
    )]);
    let n = collect(&files);
    let backend: syn::Type = syn::parse_str("Backend").unwrap();
    assert!(matches!(n.resolve(&backend, 0), Cow::Borrowed(_)));
    let same: syn::Type = syn::parse_str("Same").unwrap();
    assert_eq!(text(&n.resolve(&same, 0)), "PgPool");
}

#[test]
fn an_alias_that_multiplies_itself_expands_a_bounded_number_of_times() {
    let files = names(&[("src/lib.rs", "type A = (A, A, A, A, A, A, A, A);")]);
    let n = collect(&files);
    let a: syn::Type = syn::parse_str("A").unwrap();
    let expanded = text(&n.resolve(&a, 0));
    // Each expansion writes eight names; without the budget there would be 8^8.
    assert!(
        expanded.matches('A').count() <= 8 * EXPANSIONS,
        "{}",
        expanded.len()
    );
}

#[test]
fn deref_targets() {
    let files = names(&[(
        "src/db.rs",
        "type Inner = AsyncPgConnection; enum DbConn { A(Box<Inner>) } impl Deref for DbConn { type Target = Inner; fn deref(&self) -> &Inner { todo!() } }",
    )]);
    let n = collect(&files);
    let (at, t) = n.declared_target("DbConn", 0).unwrap();
    assert_eq!(text(&n.resolve(t, at)), "AsyncPgConnection");
    assert!(n.declared_target("Other", 0).is_none());
}

#[test]
fn diesel_tables_are_named_through_their_dsl_modules() {
    let files = names(&[
        (
            "src/a.rs",
            "use schema::users::dsl::*; use schema::posts::dsl as p; \
             use schema::tags::dsl::{tags as t, name};",
        ),
        (
            "src/b.rs",
            "fn f() { use schema::users::dsl; } fn g() { use schema::posts::dsl; } \
             use schema::{a::dsl::*, b::dsl::a as shared};",
        ),
    ]);
    let n = collect(&files);
    let table = |text: &str, file| n.dsl_table(&syn::parse_str(text).unwrap(), file);
    assert_eq!(table("users", 0).as_deref(), Some("users"));
    assert_eq!(table("p::posts", 0).as_deref(), Some("posts"));
    assert_eq!(table("t", 0).as_deref(), Some("tags"));
    // A column, another module's table, and another file's imports name no table.
    assert_eq!(table("name", 0), None);
    assert_eq!(table("p::users", 0), None);
    assert_eq!(table("users", 1), None);
    // `dsl` imported in two bodies is the module of either table; its path says which.
    assert_eq!(table("dsl::users", 1).as_deref(), Some("users"));
    assert_eq!(table("dsl::posts", 1).as_deref(), Some("posts"));
    // `a` is `a`'s table by the glob; `shared` too, by its rename of `b::dsl::a`: a
    // column of `b` named like the table, so not a table.
    assert_eq!(table("a", 1).as_deref(), Some("a"));
    assert_eq!(table("shared", 1), None);
}

#[test]
fn a_function_is_imported_from_the_file_its_path_names() {
    let files = names(&[
        (
            "svc/src/handlers.rs",
            "use self::routes::dimension::{utils::{debit, other}, x::y}; use super::credit;",
        ),
        ("svc/src/routes/dimension/utils.rs", ""),
        ("core/src/utils.rs", ""),
        ("svc/src/routes/dimension/utils/mod.rs", ""),
        ("svc-core/src/lib.rs", ""),
        ("svc/src/other.rs", "use svc_core::debit;"),
    ]);
    let n = collect(&files);
    assert_eq!(n.imported_from(0, "debit", 1), Some(true));
    assert_eq!(
        n.imported_from(0, "debit", 2),
        Some(false),
        "not under routes/dimension"
    );
    assert_eq!(
        n.imported_from(0, "debit", 3),
        Some(true),
        "a `mod.rs` is its folder"
    );
    assert_eq!(
        n.imported_from(0, "credit", 1),
        None,
        "`super` names no module"
    );
    assert_eq!(n.imported_from(0, "absent", 1), None);
    assert_eq!(
        n.imported_from(5, "debit", 4),
        Some(true),
        "a crate's `lib.rs`, `-` as `_`"
    );
}
