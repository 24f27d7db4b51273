//! The Rust front-end's model: which executor, session and transaction each statement gets.

use txlint::config::Config;
use txlint::model::{Executor, Isolation, Scope, Step, Transaction, Unit};

fn units(src: &str, toml: &str) -> Vec<Unit> {
    let config = Config::parse(toml).expect("config");
    txlint::check_source("lib.rs", src, &config).program.units
}

fn unit<'u>(units: &'u [Unit], name: &str) -> &'u Unit {
    units
        .iter()
        .find(|u| u.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no unit {name}"))
}

/// (scope, executor, number of steps) of each transaction, in program order.
fn shape(u: &Unit) -> Vec<(Scope, Executor, usize)> {
    u.transactions
        .iter()
        .map(|t| (t.scope, t.executor, t.steps.len()))
        .collect()
}

/// (name, why) of each unit set aside.
fn skipped(run: &txlint::Run) -> Vec<(&str, txlint::model::Skip)> {
    run.program
        .skipped
        .iter()
        .map(|(u, why)| (u.name.as_deref().unwrap_or(""), *why))
        .collect()
}

fn steps(u: &Unit) -> Vec<(&Transaction, &Step)> {
    u.transactions
        .iter()
        .flat_map(|t| t.steps.iter().map(move |s| (t, s)))
        .collect()
}

#[test]
fn executors_from_types_constructors_and_methods() {
    let src = r#"
async fn f(pool: &PgPool, client: &tokio_postgres::Client, e: impl sqlx::PgExecutor<'_>) {
    sqlx::query("SELECT 1").execute(pool).await;
    client.query("SELECT 2", &[]).await;
    sqlx::query("SELECT 3").execute(e).await;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SELECT 4").execute(&mut *conn).await;
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SELECT 5").execute(&mut *tx).await;
    sqlx::query("SELECT 6").execute(tx.as_mut()).await;
    tx.commit().await;
    sqlx::query("SELECT 7").execute(&mut *conn).await;
    something_else.run("SELECT 8").await;
}
"#;
    let u = units(src, "");
    let f = unit(&u, "f");
    use Executor::*;
    use Scope::*;
    assert_eq!(
        shape(f),
        vec![
            (Autocommit, Pool, 1),
            (Autocommit, Connection, 1),
            (Scope::Unknown, Executor::Unknown, 1),
            (Autocommit, PooledConnection, 1),
            (Explicit, Transaction, 2),
            (Autocommit, PooledConnection, 1),
        ]
    );
    // The transaction runs on the acquired connection's session.
    let s = steps(f);
    assert_eq!(s[3].1.session, s[4].1.session);
    assert_eq!(s[4].1.session, s[6].1.session);
    assert_ne!(s[0].1.session, s[3].1.session);
    assert_eq!(s[4].1.host().via.as_deref(), Some("&mut *tx"));
    let tx = &f.transactions[4];
    assert!(tx.begin().is_some() && tx.end().is_some());
}

#[test]
fn helpers_join_the_callers_transaction_and_are_not_units_of_their_own() {
    let src = r#"
async fn helper(conn: &mut PgConnection) {
    sqlx::query("UPDATE a SET x = 1").execute(conn).await;
}
async fn caller(pool: &PgPool) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT 1").execute(&mut *tx).await;
    helper(&mut tx).await;
    self.helper2(&mut *tx).await;
    tx.commit().await;
}
impl X {
    async fn helper2(&self, conn: &mut PgConnection) {
        sqlx::query("UPDATE b SET x = 1").execute(conn).await;
    }
}
async fn lonely(conn: &mut PgConnection) {
    sqlx::query("UPDATE c SET x = 1").execute(conn).await;
}
"#;
    let u = units(src, "");
    assert!(
        u.iter()
            .all(|u| u.name.as_deref() != Some("helper") && u.name.as_deref() != Some("helper2"))
    );
    let caller = unit(&u, "caller");
    assert_eq!(
        shape(caller),
        vec![(Scope::Explicit, Executor::Transaction, 3)]
    );
    let tables: Vec<_> = caller.transactions[0]
        .steps
        .iter()
        .flat_map(|s| &s.facts.writes)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(tables, vec!["a", "b"]);
    assert_eq!(
        shape(unit(&u, "lonely")),
        vec![(Scope::Autocommit, Executor::Connection, 1)]
    );
}

#[test]
fn transactions_end_at_scope_end_and_closures_run_in_them() {
    let src = r#"
async fn f(pool: &PgPool) {
    {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut *tx).await;
    }
    sqlx::query("SELECT 2").execute(pool).await;
    pool.transaction(|txn| Box::pin(async move {
        sqlx::query("SELECT 3").execute(&mut **txn).await;
        sqlx::query("SELECT 4").execute(&mut **txn).await;
    })).await;
}
"#;
    let u = units(src, "");
    use Executor::*;
    use Scope::*;
    assert_eq!(
        shape(unit(&u, "f")),
        vec![
            (Explicit, Transaction, 1),
            (Autocommit, Pool, 1),
            (Explicit, Transaction, 2)
        ]
    );
}

/// A transaction ended in an arm that leaves (`tx.rollback()` then `return`, in an `if` or a
/// diverging `let .. else`) is still open for the code after the arm.
#[test]
fn a_rollback_before_a_return_ends_the_transaction_on_that_path_only() {
    let src = r#"
async fn f(pool: &PgPool, id: i64) -> sqlx::Result<()> {
    let mut tx = pool.begin().await?;
    let n: Option<i64> = sqlx::query_scalar("SELECT n FROM t WHERE id = $1").bind(id).fetch_optional(&mut *tx).await?;
    let Some(n) = n else {
        tx.rollback().await?;
        return Ok(());
    };
    if n > 5 {
        tx.commit().await?;
        return Ok(());
    }
    sqlx::query("UPDATE t SET m = 1 WHERE id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await
}
"#;
    let u = units(src, "");
    use Executor::*;
    use Scope::*;
    assert_eq!(shape(unit(&u, "f")), vec![(Explicit, Transaction, 2)]);
}

#[test]
fn sql_in_batches_and_sql_level_transactions() {
    let src = r#"
async fn f(client: &Client) {
    client.batch_execute("SELECT 1; SELECT 2").await;
    client.execute("BEGIN", &[]).await;
    client.execute("SELECT 3", &[]).await;
    client.execute("COMMIT", &[]).await;
}
"#;
    let u = units(src, "");
    assert_eq!(
        shape(unit(&u, "f")),
        vec![
            (Scope::Message, Executor::Connection, 2),
            (Scope::Explicit, Executor::Connection, 1)
        ]
    );
}

#[test]
fn exits_and_branches_are_recorded() {
    let src = r#"
async fn f(pool: &PgPool, ok: bool) -> sqlx::Result<()> {
    sqlx::query("SELECT 1").execute(pool).await?;
    if ok {
        sqlx::query("SELECT 2").execute(pool).await?;
        return Ok(());
    }
    Ok(())
}
"#;
    let u = units(src, "");
    let f = unit(&u, "f");
    let s = steps(f);
    assert!(s[0].1.branch.is_empty());
    assert_eq!(s[1].1.branch.len(), 1);
    // `?` after step 1 (owned by it), `?` after step 2 (owned), `return`.
    let owners: Vec<_> = f.exits.iter().map(|e| e.owner).collect();
    assert_eq!(owners, vec![Some(s[0].1.seq), Some(s[1].1.seq), None]);
    assert_eq!(f.exits[2].branch[..], s[1].1.branch[..]);
}

#[test]
fn user_wrappers_from_config() {
    let src = r#"
async fn f(db: &Db, store: &Store) {
    db.run_sql("SELECT pg_advisory_xact_lock(1)").await;
    run_sql(store, "SELECT 2").await;
}
"#;
    let toml = "[rust]\npool_types = [\"Db\"]\nconnection_types = [\"Store\"]\nquery_functions = [\"run_sql\"]\n";
    let u = units(src, toml);
    assert_eq!(
        shape(unit(&u, "f")),
        vec![
            (Scope::Autocommit, Executor::Pool, 1),
            (Scope::Autocommit, Executor::Connection, 1)
        ]
    );
    // Without the configuration, neither call is understood as sending SQL: `f` sends
    // nothing, so it is no unit.
    assert!(
        !units(src, "")
            .iter()
            .any(|u| u.name.as_deref() == Some("f"))
    );
}

#[test]
fn query_file_reads_relative_to_the_manifest() {
    let dir = std::env::temp_dir().join(format!("txlint-query-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("queries")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    std::fs::write(
        dir.join("queries/lock.sql"),
        "-- a query file\nSELECT * FROM jobs\nWHERE id = $1 FOR UPDATE\n",
    )
    .unwrap();
    let rs = "async fn f(pool: &PgPool) {\n    sqlx::query_file!(\"queries/lock.sql\", 1).fetch_one(pool).await;\n}\n";
    std::fs::write(dir.join("src/lib.rs"), rs).unwrap();
    let run = txlint::check_paths(&[dir.join("src/lib.rs")], &dir, &Config::default());
    let d: Vec<_> = run
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.rule,
                run.program.files[d.span.file].display.clone(),
                run.program.files[d.span.file].line_col(d.span.start()).line,
            )
        })
        .collect();
    assert_eq!(
        d,
        vec![(
            "xact-lock-outside-transaction",
            "queries/lock.sql".to_string(),
            3
        )]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn alternatives_failed_arms_exit_kinds_and_call_sites() {
    let src = r#"
async fn f(pool: &PgPool, up: bool) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    if up {
        sqlx::query("UPDATE a SET n = 1").execute(&mut *conn).await?;
    } else {
        sqlx::query("UPDATE b SET n = 1").execute(&mut *conn).await?;
    }
    let lock = sqlx::query("SELECT pg_advisory_lock(1)").execute(&mut *conn).await;
    if let Err(e) = lock {
        return Err(e.into());
    }
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM c").fetch_one(&mut *conn).await?;
    anyhow::ensure!(n < 3, "too many");
    helper(&mut conn).await;
    Ok(())
}
async fn helper(conn: &mut PoolConnection<Postgres>) {
    sqlx::query("UPDATE d SET n = 1").execute(&mut **conn).await;
}
"#;
    let u = units(src, "");
    let f = unit(&u, "f");
    let s = steps(f);
    let (a, b) = (&s[0].1, &s[1].1);
    assert!(
        f.exclusive(&a.branch, &b.branch),
        "if/else arms exclude each other"
    );
    let lock = &s[2].1;
    // `if let Err(e) = lock` is taken when the lock statement failed.
    let failed: Vec<_> = f.conditions.iter().filter(|c| c.failed).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].from, vec![lock.seq]);
    // `?` propagates; `return` and `ensure!` leave on a decision, the latter on the count.
    use txlint::model::ExitKind::*;
    let kinds: Vec<_> = f.exits.iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&Propagate) && kinds.iter().filter(|k| **k == Return).count() == 2);
    let count = &s[3].1;
    let ensure = f.exits.iter().rfind(|e| e.kind == Return).unwrap();
    assert!(
        f.conditions
            .iter()
            .any(|c| ensure.branch.contains(&c.branch) && c.from.contains(&count.seq))
    );
    // The helper's statement is reached through the call in `f`.
    let d = &s[4].1;
    assert_eq!(d.facts.writes[0].name, "d");
    assert_eq!(d.host().calls.len(), 1);
    assert!(a.host().calls.is_empty());
}

#[test]
fn a_bare_string_to_sqlx_is_one_simple_query_message() {
    let src = r#"
async fn f(conn: &mut PgConnection) {
    conn.execute("SELECT pg_advisory_xact_lock(1); UPDATE a SET n = 1").await;
    sqlx::query("SELECT pg_advisory_xact_lock(2)").execute(&mut *conn).await;
    sqlx::query("UPDATE b SET n = 1").execute(&mut *conn).await;
}
"#;
    let u = units(src, "");
    assert_eq!(
        shape(unit(&u, "f")),
        vec![
            (Scope::Message, Executor::Connection, 2),
            (Scope::Autocommit, Executor::Connection, 1),
            (Scope::Autocommit, Executor::Connection, 1),
        ]
    );
}

#[test]
fn test_code_is_set_aside() {
    let src = r#"
async fn helper(pool: &PgPool) {
    sqlx::query("UPDATE a SET n = 1").execute(pool).await;
}
#[tokio::test]
async fn t() {
    helper(&pool()).await;
    sqlx::query("SELECT n FROM a").fetch_one(&pool()).await;
}
#[cfg(test)]
mod tests {
    async fn setup(pool: &PgPool) {
        sqlx::query("UPDATE b SET n = 1").execute(pool).await;
    }
}
"#;
    let run = txlint::check_source("lib.rs", src, &Config::default());
    // The helper only a test calls is analysed on its own; the test code is set aside.
    let names: Vec<_> = run
        .program
        .units
        .iter()
        .filter_map(|u| u.name.as_deref())
        .collect();
    assert_eq!(names, vec!["helper"]);
    let skipped: Vec<_> = run
        .program
        .skipped
        .iter()
        .map(|(u, why)| (u.name.as_deref(), *why))
        .collect();
    assert_eq!(
        skipped,
        vec![
            (Some("t"), txlint::model::Skip::Test),
            (Some("setup"), txlint::model::Skip::Test)
        ]
    );
    let config = Config::parse("include_tests = true").unwrap();
    let run = txlint::check_source("lib.rs", src, &config);
    assert!(run.program.skipped.is_empty());
}

#[test]
fn statements_for_other_databases_are_set_aside_with_their_dialect() {
    use txlint::model::Skip;
    use txlint::source::Dialect;
    let src = r#"
async fn lite(pool: &sqlx::SqlitePool) {
    sqlx::query("UPDATE t SET n = ?1").execute(pool).await;
}
async fn pg(pool: &sqlx::PgPool) {
    sqlx::query("UPDATE t SET n = $1").execute(pool).await;
}
async fn mixed(lite: &sqlx::SqlitePool, pg: &sqlx::PgPool) {
    sqlx::query("UPDATE a SET n = 1").execute(lite).await;
    sqlx::query("UPDATE b SET n = 1").execute(pg).await;
}
"#;
    let run = txlint::check_source("lib.rs", src, &Config::default());
    let kept: Vec<_> = run
        .program
        .units
        .iter()
        .map(|u| (u.name.as_deref().unwrap(), steps(u).len()))
        .collect();
    assert_eq!(kept, vec![("pg", 1), ("mixed", 1)]);
    let skipped = skipped(&run);
    assert_eq!(
        skipped,
        vec![
            ("lite", Skip::Dialect(Dialect::Sqlite)),
            ("mixed", Skip::Dialect(Dialect::Sqlite))
        ]
    );
    // `[[overrides]] dialect` applies to Rust files: their untyped handles send that SQL.
    let untyped =
        "async fn f(pool: &Db) { sqlx::query(\"UPDATE t SET n = ?\").execute(pool).await; }";
    let config = Config::parse(
        "[rust]\npool_types = [\"Db\"]\n[[overrides]]\npaths = [\"legacy/**\"]\ndialect = \"mysql\"\n",
    )
    .unwrap();
    let run = txlint::check_source("legacy/db.rs", untyped, &config);
    let step = &run.program.units[0].transactions[0].steps[0];
    assert_eq!(step.facts.dialect, Dialect::Mysql);
    assert!(step.facts.parsed, "`?` parses as MySQL");
    assert!(run.diagnostics.is_empty(), "{:#?}", run.diagnostics);
}

#[test]
fn only_sql_files_included_with_include_str_are_sql() {
    // Paths are relative to the Rust file: `lib.rs` here is at the repository root, beside
    // README.md (Markdown, not SQL) and the fixtures.
    let src = r#"
async fn docs(pool: &PgPool) {
    sqlx::query(include_str!("README.md")).execute(pool).await;
}
async fn query(pool: &PgPool) {
    sqlx::query(include_str!("fixtures/lost-update/script.sql")).execute(pool).await;
}
"#;
    let u = units(src, "");
    // A function that sends nothing is not a unit at all.
    assert!(!u.iter().any(|u| u.name.as_deref() == Some("docs")));
    assert!(!steps(unit(&u, "query")).is_empty());
}

#[test]
fn large_files_keep_the_items_that_can_send_sql() {
    // Over 64 KB, a file keeps only the items that can matter; what they name must stay: a
    // text constant defined from another (no SQL words of its own), a method among others in
    // an `impl` block, a function in an inline module.
    let mut src = String::new();
    for i in 0..3000 {
        src.push_str(&format!("pub struct Filler{i}(pub u32);\n"));
    }
    src.push_str(
        r#"
const BASE_READ: &str = "SELECT n FROM counters WHERE id = $1";
const READ: &str = BASE_READ;
struct Store;
impl Store {
    fn pad(&self) -> u32 { 1 }
    async fn bump(&self, pool: &PgPool) {
        sqlx::query(READ).fetch_one(pool).await;
    }
    fn pad2(&self) -> u32 { 2 }
}
mod inner {
    pub fn pad() {}
    pub async fn reset(pool: &PgPool) {
        sqlx::query("UPDATE counters SET n = 0").execute(pool).await;
    }
}
"#,
    );
    assert!(src.len() > 64 * 1024);
    let u = units(&src, "");
    let read: Vec<_> = steps(unit(&u, "bump"))
        .iter()
        .flat_map(|(_, s)| s.facts.reads.iter().map(|t| t.name.clone()))
        .collect();
    assert_eq!(read, vec!["counters".to_string()]);
    let reset = steps(unit(&u, "reset"));
    assert_eq!(reset.len(), 1);
    assert!(reset[0].1.facts.modifies);
}

/// diesel chains become the statements diesel sends: kind, tables, filters, `SET` items,
/// locking clauses, conflict handling, aggregates.
#[test]
fn diesel_query_builder_statements() {
    let src = r#"
fn f(conn: &mut PgConnection, ids: Vec<i64>, id: i64, n: i64) {
    jobs::table
        .filter(jobs::state.eq("queued").and(jobs::id.eq_any(&ids)))
        .order(jobs::id)
        .for_update()
        .skip_locked()
        .load::<Job>(conn);
    diesel::update(jobs::table.find(id))
        .set((jobs::state.eq("done"), jobs::attempts.eq(jobs::attempts + 1)))
        .execute(conn);
    jobs::table.select(diesel::dsl::max(jobs::id)).first::<Option<i64>>(conn);
    diesel::insert_into(jobs::table)
        .values((jobs::id.eq(n), jobs::state.eq("new")))
        .on_conflict(jobs::id)
        .do_nothing()
        .execute(conn);
    diesel::delete(jobs::table.filter(jobs::id.eq(id))).execute(conn);
}
"#;
    let units = units(src, "");
    let s = steps(unit(&units, "f"));
    let facts: Vec<_> = s.iter().map(|(_, st)| &st.facts).collect();
    assert_eq!(facts.len(), 5);
    let claim = facts[0];
    assert_eq!(claim.kind, txlint::model::StmtKind::Select);
    assert_eq!(claim.row_locks.len(), 1);
    assert_eq!(claim.row_locks[0].clause, "FOR UPDATE SKIP LOCKED");
    assert!(claim.ordered && claim.key_set, "ORDER BY and = ANY");
    let update = facts[1];
    let sets: Vec<_> = update
        .sets
        .iter()
        .map(|s| {
            (
                s.column.as_str(),
                s.value.idents.iter().map(|i| i.as_str()).collect(),
            )
        })
        .collect();
    let expected: [(&str, Vec<&str>); 2] = [("state", vec![]), ("attempts", vec!["attempts"])];
    assert_eq!(
        sets, expected,
        "a host value is a parameter, `attempts + 1` is computed in SQL"
    );
    assert_eq!(update.filters[0].column, "id");
    assert_eq!(facts[2].extra().aggregates[..], ["max".to_string()]);
    assert!(facts[3].on_conflict);
    assert_eq!(facts[4].kind, txlint::model::StmtKind::Delete);
    // Every statement points into the chain that builds it.
    for (_, st) in &s {
        assert!(
            src[st.span.range()].contains("jobs"),
            "{:?}",
            &src[st.span.range()]
        );
    }
}

#[test]
fn diesel_transaction_builder_opens_a_transaction_at_the_level_set_last() {
    let src = r#"
use diesel::prelude::*;
diesel::table! { jobs (id) { id -> Int8, n -> Int8, } }
fn default_level(conn: &mut PgConnection) {
    conn.build_transaction().read_write().run(|conn| {
        jobs::table.find(1).select(jobs::n).first::<i64>(conn)
    });
}
fn last_wins(conn: &mut PgConnection) {
    conn.build_transaction().serializable().read_only().repeatable_read().run(|conn| {
        jobs::table.find(1).select(jobs::n).first::<i64>(conn)
    });
}
fn not_a_builder(conn: &mut PgConnection, runner: Runner) {
    runner.serializable().run(|c| c);
    jobs::table.find(1).select(jobs::n).first::<i64>(conn);
}
"#;
    let units = units(src, "");
    let level = |name: &str| {
        let u = unit(&units, name);
        assert_eq!(
            shape(u),
            [(Scope::Explicit, Executor::Transaction, 1)],
            "{name}"
        );
        u.transactions[0].isolation
    };
    assert_eq!(level("default_level"), Isolation::ReadCommitted);
    assert_eq!(level("last_wins"), Isolation::RepeatableRead);
    let plain = unit(&units, "not_a_builder");
    assert_eq!(shape(plain), [(Scope::Autocommit, Executor::Connection, 1)]);
}

/// `.values(&row)` with a `#[derive(Insertable)]` row inserts the struct's columns (renamed by
/// `column_name`, without `skip_insertion` fields); with two insertable structs for the table,
/// those of the struct the variable's declared type names, and none for a variable of unknown
/// type.
#[test]
fn diesel_insertable_rows_insert_their_columns() {
    let src = r#"
#[derive(Insertable)]
#[diesel(table_name = crate::schema::tasks)]
struct NewTask<'a> {
    #[diesel(column_name = uniq_hash)]
    hash: &'a str,
    payload: &'a str,
    #[diesel(skip_insertion)]
    local: i64,
}
#[derive(Debug, Insertable)]
#[table_name = "notes"]
struct NewNote { body: String }
#[derive(Clone)]
#[cfg_attr(feature = "full", derive(Insertable, AsChangeset))]
#[cfg_attr(feature = "full", diesel(table_name = person))]
struct PersonForm { name: String }
#[derive(Insertable)]
#[diesel(table_name = notes)]
struct OtherNote { body: String, author: i64 }
fn f(conn: &mut PgConnection, row: NewTask, h: &str, note: NewNote, form: &PersonForm) {
    diesel::insert_into(tasks::table).values(&row).execute(conn);
    diesel::insert_into(tasks::table).values(&NewTask { hash: h, payload: "p", local: 0 }).execute(conn);
    let unknown = load_note();
    diesel::insert_into(notes::table).values(&unknown).execute(conn);
    diesel::insert_into(notes::table).values(&NewNote { body: h.into() }).execute(conn);
    diesel::insert_into(person::table).values(form).execute(conn);
    diesel::insert_into(notes::table).values(&note).execute(conn);
}
"#;
    let units = units(src, "");
    let s = steps(unit(&units, "f"));
    let inserted: Vec<Vec<&str>> = s
        .iter()
        .map(|(_, st)| st.facts.inserts.iter().map(|(c, _)| c.as_str()).collect())
        .collect();
    assert_eq!(
        inserted,
        [
            vec!["uniq_hash", "payload"],
            vec!["uniq_hash", "payload"],
            vec![],
            vec!["body"],
            vec!["name"],
            vec!["body"],
        ]
    );
    let row = s[0].1.host();
    let texts: Vec<&str> = row.inputs.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts, ["row.hash", "row.payload"]);
}

/// diesel's `table!`: `.find(k)` is by the declared primary key (`id` when none is named), a
/// `#[sql_name]` table is written by its SQL name, and the run's schema gets the primary key
/// (but is not taken to list every unique constraint).
#[test]
fn diesel_table_macro_primary_keys_and_sql_names() {
    let src = r#"
diesel::table! { profiles (user_id) { user_id -> Int8, credit -> Int8, } }
diesel::table! { plain { id -> Int8, n -> Nullable<Array<Int4>>, } }
diesel::table! {
    #[sql_name = "audit_log"]
    public.audit (a, b) {
        a -> Int8,
        #[sql_name = "when"]
        at -> Timestamptz,
    }
}
fn f(conn: &mut PgConnection, k: i64) {
    profiles::table.find(k).first::<Profile>(conn);
    plain::table.find(k).first::<Plain>(conn);
    audit::table.select(audit::a).load::<i64>(conn);
}
"#;
    let config = Config::parse("").expect("config");
    let run = txlint::check_source("lib.rs", src, &config);
    let s = steps(unit(&run.program.units, "f"));
    let keys: Vec<&str> = s
        .iter()
        .take(2)
        .map(|(_, st)| st.facts.filters[0].column.as_str())
        .collect();
    assert_eq!(keys, ["user_id", "id"]);
    assert_eq!(s[2].1.facts.reads[0].name, "audit_log");
    let schema = run.program.schema(0);
    let pk = |t: &str| schema.tables[t].primary_key.clone();
    assert_eq!(pk("profiles"), Some(vec!["user_id".to_string()]));
    assert_eq!(pk("plain"), Some(vec!["id".to_string()]));
    assert_eq!(
        pk("audit_log"),
        Some(vec!["a".to_string(), "b".to_string()])
    );
    assert_eq!(schema.tables["audit_log"].columns, ["a", "when"]);
    assert_eq!(schema.tables["plain"].columns, ["id", "n"]);
    assert!(
        !schema.declares("profiles"),
        "table! lists no unique constraints"
    );
}

/// A `#[sql_name]` that is not a plain identifier is quoted, so the statement still parses.
#[test]
fn diesel_sql_names_are_quoted_where_needed() {
    let src = r#"
diesel::table! { #[sql_name = "quote'table"] quote_table (id) { id -> Int4, } }
diesel::table! { #[sql_name = "Mixed"] mixed (id) { id -> Int4, } }
fn f(conn: &mut PgConnection) {
    quote_table::table.select(quote_table::id).load::<i32>(conn);
    mixed::table.select(mixed::id).load::<i32>(conn);
}
"#;
    let units = units(src, "");
    let s = steps(unit(&units, "f"));
    let read: Vec<(bool, &str)> = s
        .iter()
        .map(|(_, st)| (st.facts.parsed, st.facts.reads[0].name.as_str()))
        .collect();
    assert_eq!(read, [(true, "quote'table"), (true, "Mixed")]);
}

/// A file over 64 KB is cut into items and each is parsed only if it can matter: constants in
/// a module and at the top, a `static` initialised with a struct literal, `use` lists, a
/// `const fn` and inner attributes are read as in a small file, and an item syn cannot parse
/// (a 2015-edition bare trait object) that cannot matter does not turn the file to the token
/// fallback, where the executor would not be known.
#[test]
fn large_files_are_read_item_by_item() {
    let code = r#"#![allow(dead_code)]
use std::sync::{Arc, Mutex};
const READ: &str = "SELECT n FROM counters WHERE id = $1";
struct Queries { claim: &'static str }
static QUERIES: Queries = Queries { claim: "x" };
const fn answer() -> u32 { 42 }
mod inner {
    pub const CLAIM: &str = "UPDATE jobs SET state = 'running' WHERE id = $1";
}
async fn claim(pool: &PgPool) {
    sqlx::query(inner::CLAIM).execute(pool).await;
}
async fn read(pool: &PgPool) {
    sqlx::query(READ).fetch_one(pool).await;
}
"#;
    let filler: String = (0..1500)
        .map(|i| format!("pub struct Binding{i}(u32);\nimpl Binding{i} {{ pub fn get(&self) -> u32 {{ self.0 }} }}\n"))
        .collect();
    let old_syntax =
        "fn validator(&self) -> Option<&std::rc::Rc<Fn(String) -> Result<(), String>>> { None }\n";
    let large = format!("{code}{filler}{old_syntax}");
    assert!(large.len() > 64 * 1024);
    use Executor::*;
    use Scope::*;
    for src in [code.to_string(), large] {
        let u = units(&src, "");
        assert_eq!(shape(unit(&u, "claim")), vec![(Autocommit, Pool, 1)]);
        assert_eq!(shape(unit(&u, "read")), vec![(Autocommit, Pool, 1)]);
    }
}

/// A sea-orm entity's model gives its table's primary key (`find_by_id`, an active model's
/// key field), `unique` columns and `column_name` renames; `Entity::insert(am)` inserts the
/// active model's columns (the fields set, then the key), and `OnConflict` is written as the
/// `ON CONFLICT` clause it builds.
#[test]
fn seaorm_entity_keys_inserts_and_on_conflict() {
    let src = r#"
pub mod profiles {
    #[derive(Clone, Debug, DeriveEntityModel)]
    #[sea_orm(table_name = "user_profiles")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub user_id: i64,
        #[sea_orm(unique, column_name = "handle_text")]
        pub handle: String,
        pub credit: i64,
    }
}
async fn f(db: &DatabaseConnection, k: i64, h: String) -> Result<(), DbErr> {
    let p = profiles::Entity::find_by_id(k).one(db).await?.unwrap();
    let mut am: profiles::ActiveModel = p.into();
    am.credit = Set(5);
    am.update(db).await?;
    let row = profiles::ActiveModel { user_id: Set(k), handle: Set(h.clone()), ..Default::default() };
    profiles::Entity::insert(row)
        .on_conflict(OnConflict::column(profiles::Column::UserId).update_columns([profiles::Column::Handle, profiles::Column::Credit]).to_owned())
        .exec(db)
        .await?;
    let other = profiles::ActiveModel { user_id: Set(k), handle: Set(h), ..Default::default() };
    profiles::Entity::insert(other)
        .on_conflict(OnConflict::column(profiles::Column::Handle).do_nothing().to_owned())
        .exec(db)
        .await?;
    Ok(())
}
"#;
    let config = Config::parse("").expect("config");
    let run = txlint::check_source("lib.rs", src, &config);
    let s = steps(unit(&run.program.units, "f"));
    let generated = &run.program.generated;
    let texts: Vec<&str> = s
        .iter()
        .map(|(_, st)| generated[&st.span].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "SELECT * FROM user_profiles WHERE user_id = $1",
            "UPDATE user_profiles SET credit = $1 WHERE user_id = $2",
            "INSERT INTO user_profiles (handle_text, user_id) VALUES ($1, $2) ON CONFLICT (user_id) DO UPDATE SET handle_text = EXCLUDED.handle_text, credit = EXCLUDED.credit",
            "INSERT INTO user_profiles (handle_text, user_id) VALUES ($1, $2) ON CONFLICT (handle_text) DO NOTHING",
        ]
    );
    assert!(s[2].1.facts.on_conflict && s[3].1.facts.on_conflict);
    let t = &run.program.schema(0).tables["user_profiles"];
    assert_eq!(t.primary_key, Some(vec!["user_id".to_string()]));
    assert_eq!(t.unique, [vec!["handle_text".to_string()]]);
    assert_eq!(t.columns, ["user_id", "handle_text", "credit"]);
    assert!(
        !run.program.schema(0).declares("user_profiles"),
        "an entity lists only the keys its generator saw"
    );
}

/// diesel's `joinable!(child -> parent (column))` is a foreign key from the child's column to
/// the parent's primary key, in SQL names; one naming a table the run does not declare is
/// left out.
#[test]
fn diesel_joinable_is_a_foreign_key() {
    let src = r#"
diesel::table! { users (user_id) { user_id -> Int8, } }
diesel::table! { #[sql_name = "blog_posts"] posts (id) { id -> Int8, author -> Int8, } }
diesel::joinable!(posts -> users (author));
diesel::joinable!(comments -> posts (post_id));
fn f(conn: &mut PgConnection, k: i64) {
    posts::table.find(k).first::<Post>(conn);
}
"#;
    let config = Config::parse("").expect("config");
    let run = txlint::check_source("lib.rs", src, &config);
    let fk = run.program.schema(0).foreign_key("blog_posts", "users");
    assert_eq!(
        fk.map(|f| (f.columns.clone(), f.referred.clone())),
        Some((vec!["author".to_string()], vec!["user_id".to_string()]))
    );
    assert!(!run.program.schema(0).tables.contains_key("comments"));
}

fn summaries(src: &str) -> Vec<txlint::model::Summary> {
    let config = Config::parse("").expect("config");
    txlint::check_source("lib.rs", src, &config)
        .program
        .summaries
}

/// A helper's summary says what it does to the handles it gets: what it sends through each,
/// whether it takes the session itself, the locks it still holds on return, what it returns,
/// and which calls callers' walks followed into it.
#[test]
fn helpers_are_summarised_by_what_they_do_to_their_handles() {
    let src = r#"
async fn lock_tenant(conn: &mut PoolConnection<Postgres>, tenant: i64) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1)").bind(tenant).execute(&mut **conn).await?;
    sqlx::query("SELECT pg_advisory_lock(7)").execute(&mut **conn).await?;
    sqlx::query("SELECT pg_advisory_unlock(7)").execute(&mut **conn).await?;
    Ok(())
}

async fn debit(tx: &mut Transaction<'_, Postgres>, id: i64) -> sqlx::Result<i64> {
    let n: i64 = sqlx::query_scalar("SELECT n FROM accounts WHERE id = $1 FOR UPDATE")
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    Ok(n)
}

async fn own(pool: &PgPool) -> sqlx::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE accounts SET n = 0").execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

async fn caller(pool: &PgPool, id: i64) -> sqlx::Result<()> {
    let mut conn = pool.acquire().await?;
    lock_tenant(&mut conn, id).await?;
    lock_tenant(&mut conn, id + 1).await?;
    let mut tx = pool.begin().await?;
    let n = debit(&mut tx, id).await?;
    sqlx::query("UPDATE accounts SET n = $1 WHERE id = $2").bind(n - 1).bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    own(pool).await
}

fn claim(conn: &mut PgConnection) -> QueryResult<()> {
    conn.transaction(|conn| {
        diesel::sql_query("SELECT id FROM jobs WHERE state = 'new' FOR UPDATE SKIP LOCKED")
            .execute(conn)?;
        Ok(())
    })
}

fn worker(conn: &mut PgConnection) -> QueryResult<()> {
    claim(conn)
}

async fn share(conn: &mut PoolConnection<Postgres>) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_advisory_lock_shared(9)").execute(&mut **conn).await?;
    sqlx::query("SELECT pg_advisory_unlock(9)").execute(&mut **conn).await?;
    Ok(())
}

async fn reader(pool: &PgPool) -> sqlx::Result<()> {
    let mut conn = pool.acquire().await?;
    share(&mut conn).await
}
"#;
    let s = summaries(src);
    let names: Vec<_> = s.iter().filter_map(|s| s.unit.name.as_deref()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    let get = |name: &str| {
        s.iter()
            .find(|s| s.unit.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no summary of {name}"))
    };
    let line = |span: txlint::source::Span| src[..span.start()].lines().count();
    let held = |h: &txlint::model::HandleUse| -> Vec<(usize, String)> {
        h.held.iter().map(|(s, l)| (line(*s), l.clone())).collect()
    };

    let lock = get("lock_tenant");
    assert_eq!(
        lock.callers.iter().map(|&c| line(c)).collect::<Vec<_>>(),
        [26, 27]
    );
    let handles = lock.handles();
    assert_eq!(handles.len(), 1);
    assert_eq!(handles[0].via, "&mut **conn");
    assert_eq!(handles[0].acquired, None, "the caller's connection");
    // The lock on 7 is released; the one on the tenant is not.
    assert_eq!(held(&handles[0]), [(3, "pg_advisory_lock($1)".into())]);
    assert_eq!(lock.returns, txlint::model::Returns::Nothing);

    let debit = get("debit");
    let handles = debit.handles();
    assert_eq!(handles.len(), 1);
    assert_eq!(handles[0].transactions[0].executor, Executor::Transaction);
    // The row lock is the caller's until the caller ends the transaction.
    assert_eq!(held(&handles[0]), [(10, "FOR UPDATE".into())]);
    match &debit.returns {
        txlint::model::Returns::Data(seqs) => {
            let lines: Vec<_> = seqs
                .iter()
                .map(|&seq| line(debit.step(seq).expect("a step of debit").span))
                .collect();
            assert_eq!(lines, [10])
        }
        other => panic!("debit returns {other:?}"),
    }

    let own = get("own");
    let handles = own.handles();
    assert_eq!(handles.len(), 1);
    assert!(
        handles[0].acquired.is_some(),
        "it begins its own transaction"
    );
    let tx = handles[0].transactions[0];
    assert!(tx.begin().is_some() && tx.end().is_some());
    assert!(
        handles[0].held.is_empty(),
        "its commit releases what it took"
    );
    assert!(!own.left_open(tx));

    // The transaction of a closure ends with the closure, before the helper returns: its row
    // lock is not held by the caller.
    let claim = get("claim");
    let handles = claim.handles();
    assert_eq!(handles.len(), 1);
    let tx = handles[0].transactions[0];
    assert!(tx.begin().is_some());
    assert!(
        !claim.left_open(tx),
        "the closure's transaction ends in the helper"
    );
    assert!(handles[0].held.is_empty(), "{:?}", handles[0].held);

    // An exclusive unlock does not release a shared lock on the same key.
    let share = get("share");
    let handles = share.handles();
    assert_eq!(handles.len(), 1);
    assert_eq!(
        held(&handles[0]),
        [(48, "pg_advisory_lock_shared(9)".into())]
    );
}

/// SQL chosen by `if`/`match`, filled into a `format!` hole, or returned by a helper that builds
/// it: each text is a statement, and the texts are alternatives that never run together.
#[test]
fn sql_chosen_at_run_time_is_each_of_its_texts_in_exclusive_arms() {
    let src = r#"
async fn f(pool: &PgPool, key: i64, shared: bool) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query(&lock_sql(shared)).bind(key).execute(&mut *tx).await;
    let table = match key { 0 => "a", _ => "b" };
    sqlx::query(&format!("UPDATE {} SET n = 1", table)).execute(&mut *tx).await;
    tx.commit().await;
}

fn lock_sql(shared: bool) -> String {
    let mode = if shared { "_shared" } else { "" };
    format!("SELECT pg_advisory_xact_lock{}($1)", mode)
}
"#;
    let u = units(src, "");
    let f = unit(&u, "f");
    let all = steps(f);
    let texts: Vec<String> = all
        .iter()
        .map(|(_, s)| {
            let e = s.facts.extra();
            let locks: Vec<String> = e.advisory.iter().map(|a| a.function.to_string()).collect();
            let writes: Vec<String> = s.facts.writes.iter().map(|t| t.name.to_string()).collect();
            format!("{}{}", locks.join(","), writes.join(","))
        })
        .collect();
    assert_eq!(
        texts,
        [
            "pg_advisory_xact_lock_shared",
            "pg_advisory_xact_lock",
            "a",
            "b"
        ]
    );
    // The two locks are arms of one choice, and so are the two updates.
    let arm = |i: usize| *all[i].1.branch.last().expect("in an arm");
    assert!(f.exclusive(&all[0].1.branch, &all[1].1.branch));
    assert!(f.exclusive(&all[2].1.branch, &all[3].1.branch));
    assert_ne!(arm(0), arm(1));
    // A lock and an update run together.
    assert!(!f.exclusive(&all[0].1.branch, &all[2].1.branch));
}

#[test]
fn handles_held_in_statics_have_their_kind_and_database() {
    use txlint::model::Skip;
    use txlint::source::Dialect;
    let src = r#"
static LITE: Lazy<Arc<Mutex<Pool<Sqlite>>>> = Lazy::new(connect_lite);
static PG: OnceCell<PgPool> = OnceCell::new();
lazy_static! {
    static ref SHARED: sqlx::PgPool = connect();
}
async fn lite() {
    let client = LITE.clone();
    let client = client.lock().await;
    sqlx::query("UPDATE t SET n = ?1").execute(&*client).await;
}
async fn once() {
    let p = PG.get().unwrap();
    sqlx::query("SELECT pg_advisory_lock(1)").execute(p).await;
    sqlx::query("SELECT pg_advisory_unlock(1)").execute(p).await;
}
async fn lazy() {
    let mut tx = SHARED.begin().await.unwrap();
    sqlx::query("UPDATE t SET n = 1").execute(&mut *tx).await;
    tx.commit().await;
}
"#;
    let run = txlint::check_source("lib.rs", src, &Config::default());
    let skipped = skipped(&run);
    assert_eq!(skipped, vec![("lite", Skip::Dialect(Dialect::Sqlite))]);
    use Executor::*;
    use Scope::*;
    // `OnceCell::get` hands out the pool itself, not a connection of it: two statements, each
    // on whichever session the pool lends (no session of their own).
    let once = unit(&run.program.units, "once");
    assert_eq!(
        shape(once),
        vec![(Autocommit, Pool, 1), (Autocommit, Pool, 1)]
    );
    assert!(steps(once).iter().all(|(_, s)| s.session.is_none()));
    let lazy = unit(&run.program.units, "lazy");
    assert_eq!(shape(lazy), vec![(Explicit, Transaction, 1)]);
}

#[test]
fn a_field_of_self_is_typed_by_its_own_struct_not_by_another_structs_field_of_that_name() {
    // `Store::inner` is a connection; `Tx::inner` is a wrapper txlint does not know. A lock
    // through `self.inner` in `Tx`'s methods is on whatever `Tx` wraps, not on a connection
    // in autocommit.
    let src = r#"
pub struct Store { inner: sqlx::PgConnection }
pub struct Tx<C> { inner: WithTransaction<C> }
impl<C> Tx<C> {
    async fn lock(&self) {
        sqlx::query("SELECT pg_advisory_xact_lock(1)").execute(&self.inner).await;
    }
}
impl Store {
    async fn lock(&mut self) {
        sqlx::query("SELECT pg_advisory_xact_lock(2)").execute(&mut self.inner).await;
    }
}
"#;
    let u = units(src, "");
    let shapes: Vec<_> = u.iter().map(shape).collect();
    assert_eq!(
        shapes,
        vec![
            vec![(Scope::Unknown, Executor::Unknown, 1)],
            vec![(Scope::Autocommit, Executor::Connection, 1)],
        ]
    );
}

#[test]
fn a_query_builder_goes_on_through_blocks_and_both_arms_of_an_if() {
    use txlint::model::StmtKind;
    let src = r#"
async fn claim(pool: &sqlx::PgPool, mark: bool) {
    let mut qb = QueryBuilder::<Postgres>::new("WITH s AS (SELECT id FROM jobs WHERE status = ");
    qb.push_bind("pending");
    {
        qb.push(" FOR UPDATE SKIP LOCKED) ");
    }
    if mark {
        qb.push("UPDATE jobs SET status = ");
        qb.push_bind("processing");
    } else {
        qb.push("UPDATE jobs SET claimed = true, status = ");
        qb.push_bind("claimed");
    }
    qb.push(" FROM s WHERE jobs.id = s.id RETURNING *");
    qb.build().fetch_all(pool).await;
}
"#;
    let u = units(src, "");
    let kinds: Vec<_> = steps(unit(&u, "claim"))
        .iter()
        .map(|(_, s)| (s.facts.kind, s.facts.parsed))
        .collect();
    // One statement per arm, each the whole claim: the lock and the update it was taken for.
    assert_eq!(
        kinds,
        vec![(StmtKind::Update, true), (StmtKind::Update, true)]
    );
}

#[test]
fn a_sea_orm_migrations_up_runs_once() {
    let src = r#"
pub struct Migration;
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("UPDATE parts SET data_text = encode(data, 'hex') WHERE id IN (SELECT id FROM parts WHERE data_text IS NULL LIMIT 1000)").await?;
        Ok(())
    }
}
impl Migration {
    async fn up(&self, db: &sqlx::PgPool) {
        sqlx::query("UPDATE parts SET n = n + 1").execute(db).await;
    }
}
"#;
    let u = units(src, "");
    let once: Vec<bool> = u.iter().map(|u| u.runs_once()).collect();
    // Only the migration trait's `up`: an inherent method of the same name is application code.
    assert_eq!(once, vec![true, false]);
}

#[test]
fn indoc_macros_are_the_sql_they_unindent() {
    let src = r#"
async fn f(pool: &PgPool, table: &str) {
    sqlx::query(indoc::indoc! {"
        UPDATE jobs SET state = 'x' WHERE id = $1
    "}).bind(1).execute(pool).await;
    sqlx::query(concatdoc!("
        DELETE FROM ", "jobs WHERE id = $1
    ")).bind(1).execute(pool).await;
    let q = formatdoc!("
        INSERT INTO {table} (id) VALUES ($1)
    ");
    sqlx::query(&q).bind(1).execute(pool).await;
}
"#;
    let u = units(src, "");
    let f = unit(&u, "f");
    let kinds: Vec<String> = steps(f)
        .iter()
        .map(|(_, s)| {
            format!(
                "{:?} {:?}",
                s.facts.kind,
                s.facts
                    .writes
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "Update [\"jobs\"]".to_string(),
            "Delete [\"jobs\"]".to_string(),
            // The table is a hole: a name txlint does not know.
            "Insert [\"_______\"]".to_string(),
        ]
    );
    // The statement sits where its literal is.
    let (_, first) = steps(f)[0];
    assert_eq!(&src[first.span.range()].trim()[..11], "UPDATE jobs");
}

#[test]
fn handles_through_newtypes_and_error_adapters() {
    let src = r#"
pub struct DbConnection(pub PgConnection);

async fn newtype(db: DbConnection) -> sqlx::Result<()> {
    let DbConnection(mut conn) = db;
    sqlx::query("UPDATE jobs SET state = 'x' WHERE id = $1").bind(1).execute(&mut conn).await?;
    Ok(())
}

async fn adapters(pool: &deadpool_postgres::Pool) -> anyhow::Result<()> {
    let client = pool.get().await.map_err(|e| anyhow::anyhow!(e))?;
    client.execute("UPDATE jobs SET state = 'y' WHERE id = $1", &[&1]).await?;
    let other = pool.get().await.context("no connection")?;
    other.execute("UPDATE jobs SET state = 'z' WHERE id = $1", &[&1]).await?;
    Ok(())
}
"#;
    let u = units(src, "");
    assert_eq!(
        shape(unit(&u, "newtype")),
        vec![(Scope::Autocommit, Executor::Connection, 1)]
    );
    assert_eq!(
        shape(unit(&u, "adapters")),
        vec![
            (Scope::Autocommit, Executor::PooledConnection, 1),
            (Scope::Autocommit, Executor::PooledConnection, 1)
        ]
    );
}

#[test]
fn an_if_on_a_constant_flag_takes_one_arm() {
    let src = r#"
async fn get(client: &tokio_postgres::Client, id: i64, for_update: bool) {
    let lock = if for_update { "FOR UPDATE" } else { "" };
    let sql = format!("SELECT * FROM quotes WHERE id = $1 {lock}");
    client.query_one(&sql, &[&id]).await;
}

async fn plain(client: &tokio_postgres::Client) {
    get(client, 1, false).await;
}

async fn locked(client: &tokio_postgres::Client) {
    get(client, 1, !false).await;
}

async fn changing(client: &tokio_postgres::Client, x: bool) {
    let mut flag = false;
    if x {
        flag = true;
    }
    get(client, 1, flag).await;
}
"#;
    let u = units(src, "");
    let locks = |name: &str| -> Vec<bool> {
        steps(unit(&u, name))
            .iter()
            .map(|(_, s)| !s.facts.row_locks.is_empty())
            .collect()
    };
    assert_eq!(locks("plain"), vec![false]);
    assert_eq!(locks("locked"), vec![true]);
    // A `mut` binding may change before the call: both texts stay.
    let mut both = locks("changing");
    both.sort();
    assert_eq!(both, vec![false, true]);
}

#[test]
fn handles_a_function_declares_it_returns() {
    let src = r#"
pub type Conn = deadpool::managed::Object<AsyncPgConnection>;

pub struct Storage { inner: Inner }

impl Storage {
    pub fn conn(&mut self) -> &mut PgConnection { self.inner.raw() }
}

async fn get_conn() -> anyhow::Result<Conn> { make().await }

async fn dal(s: &mut Storage) -> sqlx::Result<()> {
    sqlx::query("UPDATE a SET x = 1 WHERE id = 1").execute(s.conn()).await?;
    sqlx::query("UPDATE a SET x = 2 WHERE id = 1").execute(s.conn()).await?;
    Ok(())
}

async fn getter() -> anyhow::Result<()> {
    diesel::sql_query("UPDATE a SET x = 3 WHERE id = 1").execute(&mut get_conn().await?).await?;
    diesel::sql_query("UPDATE a SET x = 4 WHERE id = 1").execute(&mut get_conn().await?).await?;
    Ok(())
}
"#;
    let u = units(src, "");
    // `s.conn()` hands out one connection, the caller's: one session, its transactions the
    // caller's to say.
    let dal = unit(&u, "dal");
    let s = steps(dal);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].0.executor, Executor::Connection);
    assert!(s[0].1.session.is_some());
    assert_eq!(s[0].1.session, s[1].1.session);
    let session = s[0].1.session.and_then(|i| dal.sessions.get(i));
    assert!(session.is_some_and(|s| s.inherited && s.acquired.is_none()));
    // Each call of the getter takes a pooled connection of its own.
    let getter = unit(&u, "getter");
    let s = steps(getter);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].0.executor, Executor::PooledConnection);
    assert_ne!(s[0].1.session, s[1].1.session);
    let taken = |i: usize| s[i].1.session.and_then(|k| getter.sessions.get(k));
    assert!(taken(0).is_some_and(|s| s.acquired.is_some() && !s.inherited));
}

#[test]
fn a_method_is_found_by_the_declared_type_of_its_receiver() {
    // Two `conn` methods in the run, one of them no handle: `self.storage.conn()` is the
    // one of `Connection`, the type the struct declares for `storage`.
    let src = r#"
pub struct Connection<'c> { inner: Inner<'c> }

impl<'c> Connection<'c> {
    pub fn conn(&mut self) -> &mut PgConnection { self.inner.raw() }
}

pub struct Store;

impl Store {
    async fn conn(&self) -> Result<Session> { open().await }
}

pub struct JobsDal<'a, 'c> {
    storage: &'a mut Connection<'c>,
}

impl JobsDal<'_, '_> {
    pub async fn finish(&mut self, id: i64) -> sqlx::Result<()> {
        sqlx::query("UPDATE jobs SET done = true WHERE id = $1").bind(id).execute(self.storage.conn()).await?;
        Ok(())
    }
}
"#;
    let u = units(src, "");
    let s = steps(unit(&u, "finish"));
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0.executor, Executor::Connection);
}

#[test]
fn a_method_called_with_arguments_is_not_read_by_its_name_alone() {
    // The run's only `pool` and `get` methods return a pool, but the receivers' types are not
    // known: `state.pool()` is read as that getter, `cache.get(&key)` (arguments) is not.
    let src = r#"
pub struct Db { pool: PgPool }

impl Db {
    pub fn pool(&self) -> &PgPool { &self.pool }
    pub fn get(&self, _name: &str) -> &PgPool { &self.pool }
}

async fn getter(state: Arc<State>) -> sqlx::Result<()> {
    sqlx::query("UPDATE a SET x = 1 WHERE id = 1").execute(state.pool()).await?;
    Ok(())
}

async fn lookup(cache: &Cache, key: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE a SET x = 2 WHERE id = 1").execute(cache.get(key)).await?;
    Ok(())
}
"#;
    let u = units(src, "");
    assert_eq!(
        shape(unit(&u, "getter")),
        vec![(Scope::Autocommit, Executor::Pool, 1)]
    );
    let s = steps(unit(&u, "lookup"));
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0.executor, Executor::Unknown);
}
