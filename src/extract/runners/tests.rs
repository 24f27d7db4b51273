use super::*;

fn runner(path: &str, text: &str) -> Option<(&'static str, SqlMode)> {
    detect(
        Path::new(path),
        text,
        &Sqlc::default(),
        &ImageInit::default(),
    )
    .map(|d| (d.runner.name, d.mode))
}

const TX: Option<SqlMode> = Some(SqlMode::Transaction);
const SCRIPT: Option<SqlMode> = Some(SqlMode::Script);

#[test]
fn migration_tools_by_name_and_first_line() {
    let mode = |p: &str, t: &str| runner(p, t).map(|d| d.1);
    let name = |p: &str, t: &str| runner(p, t).map(|d| d.0);
    assert_eq!(
        runner(
            "/x/migrations/2020-06-30-135809_views/up.sql",
            "create table t ();"
        ),
        Some(("diesel migration", SqlMode::Transaction))
    );
    assert_eq!(
        name("/x/src/migrations/V3__append.sql", "select 1;"),
        Some("Flyway/refinery migration")
    );
    assert_eq!(
        name("/x/db/R__views.sql", "select 1;"),
        Some("Flyway/refinery migration")
    );
    assert_eq!(
        runner(
            "/x/db/20240101_init.sql",
            "-- migrate:up\ncreate table t ();"
        ),
        Some(("dbmate migration", SqlMode::Transaction))
    );
    assert_eq!(
        mode(
            "/x/db/1_init.sql",
            "-- migrate:up transaction:false\nselect 1;"
        ),
        SCRIPT
    );
    assert_eq!(runner("/x/queries/users.sql", "select 1;"), None);
    assert_eq!(runner("/x/schema.sql", "create table t ();"), None);
}

#[test]
fn goose_wraps_each_file_unless_told_not_to() {
    let up = "-- +goose Up\n-- +goose StatementBegin\nLOCK TABLE t;\n-- +goose StatementEnd\n-- +goose Down\nselect 1;\n";
    assert_eq!(
        runner("/x/migrations/20240101_a.sql", up),
        Some(("goose migration", SqlMode::Transaction))
    );
    let no_tx = "-- +goose NO TRANSACTION\n-- +goose up\nCREATE INDEX CONCURRENTLY i ON t (a);\n";
    assert_eq!(
        runner("/x/migrations/20240101_a.sql", no_tx),
        Some(("goose migration", SqlMode::Script))
    );
}

#[test]
fn tools_with_their_own_markers() {
    let name = |p: &str, t: &str| runner(p, t).map(|d| d.0);
    let mode = |p: &str, t: &str| runner(p, t).map(|d| d.1);
    let lb = "--liquibase formatted sql\n--changeset me:1\ncreate table t ();";
    assert_eq!(
        name("/x/db/changes.sql", lb),
        Some("Liquibase formatted SQL")
    );
    assert_eq!(mode("/x/db/changes.sql", lb), TX);
    let lb_out = "-- liquibase formatted sql\n--changeset me:1 runInTransaction:false\nselect 1;";
    assert_eq!(mode("/x/db/changes.sql", lb_out), SCRIPT);
    let tern = "create table t ();\n---- create above / drop below ----\ndrop table t;";
    assert_eq!(name("/x/db/001_t.sql", tern), Some("tern migration"));
    let graphile = "--! Previous: sha1:abc\n--! Hash: sha1:def\n\ncreate table t ();";
    assert_eq!(
        name("/x/db/000001.sql", graphile),
        Some("graphile-migrate migration")
    );
    assert_eq!(
        mode("/x/migrations/current.sql", "--! no-transaction\nselect 1;"),
        SCRIPT
    );
    assert_eq!(
        name("/x/q.sql", "--! get_user\nselect 1;"),
        Some("cornucopia/clorinde query file")
    );
}

#[test]
fn folders_and_names_of_migration_tools() {
    let name = |p: &str| runner(p, "create table t ();").map(|d| d.0);
    assert_eq!(
        name("/x/prisma/migrations/20240205120648_init/migration.sql"),
        Some("Prisma migration")
    );
    assert_eq!(
        name("/x/supabase/migrations/20251031133803_flows.sql"),
        Some("Supabase migration")
    );
    assert_eq!(
        name("/x/db/migrations/000005_unique.up.sql"),
        Some("golang-migrate migration")
    );
    assert_eq!(
        runner("/x/db/migration/main/005_unique.down.sql", "select 1;").map(|d| d.1),
        TX,
        "golang-migrate sends a file as one message: an implicit transaction"
    );
    assert_eq!(
        name("/x/db/migrations/0007_backfill.sql"),
        Some("migration")
    );
    assert_eq!(
        runner("/x/db/migrations/0007_backfill.sql", "select 1;").map(|d| d.1),
        SCRIPT
    );
    assert_eq!(name("/x/db/migrations/schema.sql"), None);
    assert_eq!(name("/x/db/migrations/v2.sql"), None);
}

#[test]
fn query_files_sent_by_application_code() {
    assert_eq!(
        runner(
            "/x/q.sql",
            "-- name: GetUser :one\nselect * from users where id = $1;"
        ),
        Some(("sqlc query file", SqlMode::Statements))
    );
    assert_eq!(
        runner(
            "/x/queries.sql",
            "-- name: get-user\nselect 1;\n\n-- name: add-user\ninsert into u values (1);"
        ),
        Some(("named-query file", SqlMode::Statements))
    );
    assert_eq!(
        runner("/x/q.sql", "-- :name get-user :? :1\nselect 1;").map(|d| d.0),
        Some("named-query file")
    );
    assert_eq!(
        runner("/x/q.sql", "-- name: not an annotation\nselect 1;"),
        None
    );
}

#[test]
fn versions_and_flyway_names() {
    for v in [
        "1_init.sql",
        "0001_a.sql",
        "20240101120000_x.sql",
        "2020-06-30-135809_views",
        "005_x.up.sql",
    ] {
        assert!(versioned(v), "{v}");
    }
    for n in ["schema.sql", "v2.sql", "1.sql", "init_1.sql"] {
        assert!(!versioned(n), "{n}");
    }
    assert!(flyway("V1.2_3__x.sql"));
    assert!(!flyway("Views__x.sql"));
}

/// Every tool of the table is recognised by some file and named in the configuration page
/// (the page's table is the documentation of this one).
#[test]
fn the_table_is_documented() {
    let doc = include_str!("../../../docs/configuration.md");
    for tool in TOOLS {
        assert!(
            doc.contains(&format!("| {} |", tool.name)),
            "{} missing from docs/configuration.md",
            tool.name
        );
    }
}
