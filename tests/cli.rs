//! The `txlint` binary end to end: exit codes, formats, discovery, configuration errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh folder under the system temp dir, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("txlint-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn write(&self, rel: &str, text: &str) -> &Self {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn txlint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txlint"))
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .output()
        .expect("run txlint")
}

/// `txlint` in `dir` with `input` on its standard input.
fn txlint_stdin(dir: &Path, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlint"))
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run txlint");
    // A run that stops at a usage error exits without reading its input: the pipe may be
    // closed before the write (EPIPE), which is not what these tests check.
    let written = child.stdin.take().unwrap().write_all(input.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const BAD: &str = "SELECT pg_advisory_xact_lock(1);\n";
const GOOD: &str = "BEGIN;\nSELECT pg_advisory_xact_lock(1);\nCOMMIT;\n";
/// A suppression that suppresses nothing: a warning.
const WARN: &str = "-- txlint: ignore lost-update\nSELECT 1;\n";
/// A statement txlint cannot parse: an info note.
const UNPARSED: &str = "SELECT * FROM t WHERE;\n";

#[test]
fn exit_codes() {
    let d = Dir::new("exit");
    d.write("good.sql", GOOD);
    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("checked 1 file, 3 statements"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("no findings"));

    d.write("bad.sql", BAD);
    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("xact-lock-outside-transaction") && out.contains("bad.sql:1:8"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "no colour when not a terminal");

    let w = Dir::new("warn");
    w.write("w.sql", WARN);
    assert_eq!(txlint(w.path(), &["check"]).status.code(), Some(1));
    assert_eq!(
        txlint(w.path(), &["check", "--fail-on", "error"])
            .status
            .code(),
        Some(0)
    );

    // What txlint cannot parse is its own limit: an info note, which fails a run only when the
    // user asks for it.
    let i = Dir::new("info");
    i.write("i.sql", UNPARSED);
    let o = txlint(i.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("syntax-error"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("no errors or warnings (1 info note)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        txlint(i.path(), &["check", "--fail-on", "info"])
            .status
            .code(),
        Some(1)
    );
    i.write("txlint.toml", "[rules]\nsyntax-error = \"warning\"\n");
    assert_eq!(txlint(i.path(), &["check"]).status.code(), Some(1));
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    let d = Dir::new("usage");
    let o = txlint(d.path(), &["check", "missing.sql"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no such file or folder: missing.sql"),
        "{}",
        stderr(&o)
    );

    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no .sql or .rs files found"),
        "{}",
        stderr(&o)
    );

    let o = txlint(d.path(), &["check", "--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));

    let o = txlint(d.path(), &["explain", "no-such-rule"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_config_names_file_key_and_line() {
    let d = Dir::new("config");
    d.write("a.sql", GOOD).write(
        "txlint.toml",
        "dialect = \"postgres\"\n[sql]\nmood = \"script\"\n",
    );
    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("txlint.toml:3:") && err.contains("mood"),
        "{err}"
    );

    // Found from a subfolder too.
    d.write("sub/b.sql", GOOD);
    let o = txlint(&d.path().join("sub"), &["check"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn config_turns_rules_off_and_sets_mode() {
    let d = Dir::new("config-ok");
    d.write("a.sql", BAD);
    d.write("txlint.toml", "[sql]\nmode = \"transaction\"\n");
    assert_eq!(txlint(d.path(), &["check"]).status.code(), Some(0));
    d.write(
        "txlint.toml",
        "[rules]\nxact-lock-outside-transaction = \"warning\"\n",
    );
    let o = txlint(d.path(), &["check", "--fail-on", "error"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("1 warning"), "{}", stdout(&o));
    d.write(
        "other.toml",
        "[rules]\nxact-lock-outside-transaction = \"off\"\n",
    );
    assert_eq!(
        txlint(d.path(), &["check", "--config", "other.toml"])
            .status
            .code(),
        Some(0)
    );
}

/// A run that assumes the database's default isolation from its SQL says so in its summary;
/// the configuration's own setting needs no word.
#[test]
fn cockroach_default_isolation_is_said() {
    let d = Dir::new("cockroach-isolation");
    d.write(
        "schema/crdb/dbinit.sql",
        "CREATE TABLE t (id INT8 PRIMARY KEY);\n",
    );
    d.write("q.sql", "SELECT 1;\n");
    let o = txlint(d.path(), &["check"]);
    let out = stdout(&o);
    assert!(
        out.contains("SERIALIZABLE unless they set a level")
            && out.contains("schema/crdb/dbinit.sql"),
        "{out}"
    );
    d.write("txlint.toml", "isolation = \"read-committed\"\n");
    let out = stdout(&txlint(d.path(), &["check"]));
    assert!(!out.contains("SERIALIZABLE"), "{out}");
    // A test suite's CockroachDB files say nothing of the database the code runs on.
    let t = Dir::new("cockroach-tests");
    t.write(
        "tests/crdb/setup.sql",
        "CREATE TABLE t (id INT8 PRIMARY KEY);\n",
    );
    t.write("q.sql", "SELECT 1;\n");
    let out = stdout(&txlint(t.path(), &["check"]));
    assert!(!out.contains("SERIALIZABLE"), "{out}");
}

#[test]
fn json_to_output_file() {
    let d = Dir::new("json");
    d.write("bad.sql", BAD);
    let o = txlint(
        d.path(),
        &["check", "--format", "json", "--output", "out.json"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    assert!(
        stderr(&o).contains("checked 1 file"),
        "summary goes to stderr: {}",
        stderr(&o)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("out.json")).unwrap()).unwrap();
    assert_eq!(json["diagnostics"][0]["path"], "bad.sql");
    assert_eq!(json["diagnostics"][0]["start"]["line"], 1);
}

#[test]
fn walking_respects_gitignore_hidden_and_build_folders() {
    let d = Dir::new("walk");
    d.write(".gitignore", "ignored/\n")
        .write("ignored/a.sql", BAD)
        .write(".hidden/a.sql", BAD)
        .write("target/a.sql", BAD)
        .write("node_modules/x/a.sql", BAD)
        .write("db/ok.sql", GOOD)
        .write("notes.txt", BAD);
    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("checked 1 file"), "{}", stdout(&o));
}

#[test]
fn excludes_and_force_exclude() {
    let d = Dir::new("exclude");
    d.write("txlint.toml", "exclude = [\"legacy/**\"]\n")
        .write("legacy/old.sql", BAD)
        .write("new.sql", GOOD);
    assert_eq!(txlint(d.path(), &["check"]).status.code(), Some(0));
    // Named explicitly, an excluded file is linted...
    assert_eq!(
        txlint(d.path(), &["check", "legacy/old.sql"]).status.code(),
        Some(1)
    );
    // ...unless --force-exclude (what pre-commit passes).
    let o = txlint(d.path(), &["check", "--force-exclude", "legacy/old.sql"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = txlint(
        d.path(),
        &["check", "--force-exclude", "legacy/old.sql", "new.sql"],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("checked 1 file"));
}

#[test]
fn bad_input_is_reported_and_the_run_goes_on() {
    let d = Dir::new("bad-input");
    std::fs::write(d.path().join("latin1.sql"), b"SELECT 'caf\xe9';\n").unwrap();
    d.write("b.sql", BAD).write(
        "deep.sql",
        &format!(
            "SELECT * FROM t WHERE {}1{} = 1;\n",
            "(".repeat(5000),
            ")".repeat(5000)
        ),
    );
    let o = txlint(d.path(), &["check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rules: Vec<&str> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"read-error"), "{rules:?}");
    assert!(
        rules.contains(&"xact-lock-outside-transaction"),
        "{rules:?}"
    );
    assert!(
        rules.contains(&"syntax-error"),
        "deep nesting is a syntax error, not a crash: {rules:?}"
    );
    assert_eq!(json["summary"]["files"], 3);
}

/// The text report of a finding far into a very long line (minified or generated SQL) draws
/// a window of that line around it, with its place (miette cannot pad a snippet past column
/// 65,535, and the whole line for every finding made reports quadratic in its length).
#[test]
fn a_finding_on_a_very_long_line_is_reported_in_text() {
    let d = Dir::new("long-line");
    d.write(
        "wide.sql",
        &format!(
            "SELECT 1 /* {} */; SELECT pg_advisory_xact_lock(1);\n",
            " ".repeat(70_000)
        ),
    );
    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("╭─[wide.sql:1:70025]"), "{out}");
    assert!(out.contains("SELECT pg_advisory_xact_lock(1);"), "{out}");
    assert!(out.lines().all(|l| l.chars().count() < 1_000), "{out}");
}

/// A one-line file of many findings: each finding's snippet is a window of the line, so the
/// report grows with the number of findings, not with findings times the line's length.
#[test]
fn many_findings_on_one_long_line_draw_windows() {
    let d = Dir::new("long-line-many");
    d.write(
        "one.sql",
        &format!("{}\n", "SELECT pg_advisory_xact_lock(1); ".repeat(3_000)),
    );
    let o = txlint(d.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.matches("╭─[one.sql:1:").count(), 3_000);
    // About 1 KB a finding; the line itself is 99 KB.
    assert!(out.len() < 3_000 * 2_000, "{} bytes", out.len());
    assert!(out.lines().all(|l| l.chars().count() < 1_000));
}

#[test]
fn rust_files_without_sql_are_not_parsed_and_late_reads_report_their_errors() {
    let d = Dir::new("rust-prescan");
    d.write(
        "src/db.rs",
        "async fn f(pool: &sqlx::PgPool) {\n    sqlx::query(\"SELECT pg_advisory_xact_lock(1)\").execute(pool).await;\n}\n",
    )
    .write("src/math.rs", "pub fn add(a: u32, b: u32) -> u32 { a + b }\n")
    .write("src/broken.rs", "fn add(a: u32 { a }\n");
    std::fs::write(
        d.path().join("src/latin1.rs"),
        b"// caf\xe9\nfn f(pool: &PgPool) {}\n",
    )
    .unwrap();
    let o = txlint(d.path(), &["check", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let found: Vec<(&str, &str)> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["rule"].as_str().unwrap(), d["path"].as_str().unwrap()))
        .collect();
    // The file that sends SQL is read (late, by the Rust front-end) and linted; invalid UTF-8
    // in a late-read file is reported like any other; a broken file with no SQL in it is not
    // parsed, so it has no syntax error to report.
    assert!(
        found.contains(&("xact-lock-outside-transaction", "src/db.rs")),
        "{found:?}"
    );
    assert!(
        found.contains(&("read-error", "src/latin1.rs")),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|(_, p)| *p == "src/broken.rs"),
        "{found:?}"
    );
    assert_eq!(json["summary"]["files"], 4);
    assert_eq!(json["summary"]["skipped"], 2, "math.rs and broken.rs");
    let o = txlint(d.path(), &["check"]);
    assert!(
        stdout(&o).contains("checked 4 files (2 Rust files with no SQL or handle, not parsed)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn rules_and_explain() {
    let d = Dir::new("rules");
    let o = txlint(d.path(), &["rules"]);
    assert_eq!(o.status.code(), Some(0));
    for r in txlint::registry::ALL {
        assert!(stdout(&o).contains(r.name));
    }
    let o = txlint(d.path(), &["explain", "xact-lock-outside-transaction"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).starts_with("# xact-lock-outside-transaction"));
    let o = txlint(d.path(), &["--help"]);
    assert!(stdout(&o).contains("check") && stdout(&o).contains("explain"));
}

#[test]
fn the_readme_example_has_its_two_races() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = txlint(root, &["check", "examples/", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let found: Vec<(String, u64)> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap().to_string(),
                d["start"]["line"].as_u64().unwrap(),
            )
        })
        .collect();
    let rule = "xact-lock-outside-transaction".to_string();
    assert_eq!(found, vec![(rule.clone(), 12), (rule, 16)]);
    // The README shows the first one's witness as txlint writes it.
    let o = txlint(root, &["witness", "examples/job_queue.sql:12"]);
    assert_eq!(o.status.code(), Some(0));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("```sql\n{}```", stdout(&o))),
        "README's witness differs from:\n{}",
        stdout(&o)
    );
}

#[test]
fn model_shows_executors_and_transactions() {
    let d = Dir::new("model");
    d.write(
        "src/lib.rs",
        "async fn f(pool: &PgPool) {\n    let mut tx = pool.begin().await.unwrap();\n    sqlx::query(\"SELECT 1 FOR UPDATE\").execute(&mut *tx).await;\n}\n",
    );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("src/lib.rs:1:1 fn f"), "{out}");
    assert!(out.contains("  transaction via transaction"), "{out}");
    assert!(
        out.contains("src/lib.rs:3:18 Select session 0, via `&mut *tx`, FOR UPDATE"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("1 unit, 1 statement: 1 via transaction"),
        "{out}"
    );
}

/// `txlint model` shows the object a routine creates when it is missing, with the part dynamic
/// SQL fills in at run time as a hole.
#[test]
fn model_shows_objects_created_if_missing() {
    let d = Dir::new("model-creates");
    d.write(
        "a.sql",
        "CREATE FUNCTION f(q text) RETURNS void LANGUAGE plpgsql AS $$\nBEGIN\n    CREATE TABLE IF NOT EXISTS event_log (id int);\n    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON event_log (id)', 'ix_' || q);\nEND $$;\n",
    );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("a.sql:3:5 Ddl creates `event_log` if missing\n"),
        "{out}"
    );
    assert!(out.contains("creates `ix___` if missing"), "{out}");
}

/// `txlint model` shows what host code binds to each parameter and which statements' results
/// the value comes from.
#[test]
fn model_shows_bound_values_and_their_sources() {
    let d = Dir::new("model-binds");
    d.write(
        "src/lib.rs",
        "async fn f(pool: &PgPool, name: &str) -> sqlx::Result<()> {\n    let mut tx = pool.begin().await?;\n    let id: i64 = sqlx::query_scalar(\"SELECT id FROM t WHERE name = $1\").bind(name).fetch_one(&mut *tx).await?;\n    sqlx::query(\"UPDATE t SET n = n + 1 WHERE id = $1\").bind(id).execute(&mut *tx).await?;\n    tx.commit().await\n}\n",
    );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("      binds $1 = name\n"), "{out}");
    assert!(
        out.contains("      binds $1 = id (from src/lib.rs:3:"),
        "{out}"
    );
}

/// A value computed from named fields of a row is shown with those fields after its source.
#[test]
fn model_shows_the_fields_a_value_comes_through() {
    let d = Dir::new("model-fields");
    d.write(
        "src/lib.rs",
        "async fn f(pool: &PgPool, id: i64) -> sqlx::Result<()> {\n    let u: Usage = sqlx::query_as(\"SELECT * FROM usage WHERE id = $1\").bind(id).fetch_one(pool).await?;\n    let total = u.rate * (u.end - u.start);\n    sqlx::query(\"UPDATE usage SET total = $1 WHERE id = $2\").bind(total).bind(u).execute(pool).await?;\n    Ok(())\n}\n",
    );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // In the order of their names; the whole row where it is bound itself.
    assert!(
        out.contains("      binds $1 = total (from src/lib.rs:2:"),
        "{out}"
    );
    assert!(out.contains(" .end .rate .start)\n"), "{out}");
    let whole = out
        .lines()
        .find(|l| l.starts_with("      binds $2 = u (from src/lib.rs:2:"));
    assert!(whole.is_some_and(|l| !l.contains(" .")), "{out}");
}

/// `txlint model` names the tool that runs a migration, how it runs it, and that the migration's
/// `DO` blocks run once.
#[test]
fn model_shows_migration_runners() {
    let d = Dir::new("runners");
    d.write("go.mod", "module example.com/app\n")
        .write(
            "db/migrations/20240101120000_seed.sql",
            "-- +goose Up\nDO $$ BEGIN PERFORM 1; END $$;\n",
        )
        .write(
            "db/migration/000002_plans.up.sql",
            "UPDATE plans SET name = lower(name);\n",
        );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "db/migrations/20240101120000_seed.sql:1:1 script  (goose migration, from a `-- +goose Up` line: runs each file in a transaction)",
        "db/migrations/20240101120000_seed.sql:2:1 DO block  (in a goose migration: runs once, when it is applied)",
        "db/migration/000002_plans.up.sql:1:1 script  (golang-migrate migration, from `<version>_<name>.up.sql` and `.down.sql` outside a Rust crate: runs each file as one simple-query message: an implicit transaction that ends with the file)",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}

/// Who calls what a file holds, when that is application code going through a pool: the
/// functions a Supabase migration defines (RPCs), the queries of an sqlc query file.
#[test]
fn model_shows_pooled_callers() {
    let d = Dir::new("pooled-callers");
    d.write(
        "supabase/migrations/20240101120000_locks.sql",
        "create function lock_it(k bigint) returns void language plpgsql as $$\n\
         begin perform pg_advisory_xact_lock(k); end $$;\n",
    )
    .write(
        "db/queries.sql",
        "-- name: Next :one\nSELECT id FROM jobs LIMIT 1;\n",
    );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "supabase/migrations/20240101120000_locks.sql:1:1 routine lock_it (called by Supabase clients as RPCs, through PostgREST's connection pool (`supabase.rpc(..)`))",
        "(called by sqlc's generated code, through a connection pool (`database/sql`, pgx))",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}

#[test]
fn a_background_job_is_shown_and_replicated_jobs_are_checked_like_requests() {
    let d = Dir::new("background-job");
    let job = "pub async fn recount(pool: sqlx::PgPool) -> sqlx::Result<()> {\n    \
               loop {\n        \
               let n: i64 = sqlx::query_scalar(\"SELECT total FROM tally WHERE id = 1\").fetch_one(&pool).await?;\n        \
               sqlx::query(\"UPDATE tally SET total = $1 WHERE id = 1\").bind(n + 1).execute(&pool).await?;\n        \
               tokio::time::sleep(std::time::Duration::from_secs(60)).await;\n    }\n}\n\n\
               #[tokio::main]\nasync fn main() {\n    \
               let pool = sqlx::PgPool::connect(\"postgres://\").await.unwrap();\n    \
               tokio::spawn(recount(pool));\n}\n";
    d.write("src/main.rs", job);
    let o = txlint(d.path(), &["model"]);
    let out = stdout(&o);
    let line = "src/main.rs:9:1 fn main (a background job: only the timer loop at src/main.rs:2:5 runs it)";
    assert!(out.contains(line), "missing {line:?} in:\n{out}");
    // One process runs the loop and nothing else writes `tally`: no lost update.
    let o = txlint(d.path(), &["check", "--format", "json"]);
    assert!(!stdout(&o).contains("lost-update"), "{}", stdout(&o));
    // Every instance runs it: the read-compute-write races with its copies.
    d.write("txlint.toml", "[rust]\nbackground_jobs = \"replicated\"\n");
    let o = txlint(d.path(), &["check", "--format", "json"]);
    assert!(stdout(&o).contains("lost-update"), "{}", stdout(&o));
    assert!(!stdout(&txlint(d.path(), &["model"])).contains("background job"));
}

#[test]
fn model_says_a_schema_dump_copy_is_analysed_at_its_source() {
    let d = Dir::new("schema-dump");
    let body = "RETURNS void LANGUAGE sql AS $$ UPDATE t SET n = n + 1 $$;\n";
    d.write(
        "db/migrations/001_bump.sql",
        &format!("CREATE FUNCTION bump() {body}"),
    )
    .write(
        "db/structure.sql",
        &format!("--\n-- PostgreSQL database dump\n--\n\nCREATE FUNCTION public.bump() {body}"),
    );
    let o = txlint(d.path(), &["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let line = "db/structure.sql:5:1 bump: a pg_dump schema file's copy of the definition at db/migrations/001_bump.sql:1:1, analysed there";
    assert!(out.contains(line), "missing {line:?} in:\n{out}");
}

#[test]
fn rust_files_are_linted_with_sql_files() {
    let d = Dir::new("rust");
    d.write("db/a.sql", GOOD).write(
        "src/main.rs",
        "async fn f(pool: &sqlx::PgPool) {\n    sqlx::query(\"SELECT pg_advisory_xact_lock(1)\").execute(pool).await;\n}\n",
    );
    let o = txlint(d.path(), &["check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(json["summary"]["files"], 2);
    assert_eq!(json["diagnostics"][0]["path"], "src/main.rs");
    assert_eq!(json["diagnostics"][0]["start"]["line"], 2);
    assert_eq!(json["diagnostics"][0]["start"]["column"], 25);
}

#[test]
fn graph_draws_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = txlint(
        root,
        &[
            "graph",
            "--format",
            "dot",
            "fixtures/lock-order-inversion/functions.sql",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("digraph locks {"), "{out}");
    assert!(out.contains("[label=\"orders\", color=red"), "{out}");
    assert!(
        out.contains("[label=\"accounts\"];"),
        "a node outside every cycle is not red: {out}"
    );
    let o = txlint(
        root,
        &["graph", "fixtures/lock-order-inversion/functions.sql"],
    );
    let out = stdout(&o);
    assert!(out.starts_with("flowchart LR"), "{out}");
    assert!(
        out.contains("|\"place_order (fixtures/lock-order-inversion/functions.sql:5)\"|"),
        "{out}"
    );
    assert!(out.contains("linkStyle 0 stroke:red"), "{out}");
}

#[test]
fn overrides_set_mode_per_folder() {
    let d = Dir::new("overrides");
    d.write("migrations/001.sql", BAD)
        .write("scripts/a.sql", BAD);
    d.write(
        "txlint.toml",
        "[[overrides]]\npaths = [\"migrations/**\"]\nsql = { mode = \"transaction\" }\n",
    );
    let o = txlint(d.path(), &["check", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let paths: Vec<&str> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        vec!["scripts/a.sql"],
        "the migration runs in one transaction"
    );
}

/// A file named from inside one project but lying outside it is not read with that project
/// as context: another project's schema and transactions say nothing about it.
#[test]
fn a_named_file_outside_the_working_project_gets_no_context() {
    let d = Dir::new("outside");
    d.write("repo/.git/HEAD", "ref: refs/heads/main\n")
        .write(
            "repo/a.sql",
            "BEGIN;\nUPDATE accounts SET n = 1 WHERE id = 1;\nUPDATE ledger SET n = 1 WHERE id = 1;\nCOMMIT;\n",
        )
        .write(
            "elsewhere/b.sql",
            "BEGIN;\nUPDATE ledger SET n = 2 WHERE id = 1;\nUPDATE accounts SET n = 2 WHERE id = 1;\nCOMMIT;\n",
        );
    let b = d.path().join("elsewhere/b.sql");
    let o = txlint(
        &d.path().join("repo"),
        &["check", "--format", "json", b.to_str().unwrap()],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["summary"]["context"], 0, "{}", stderr(&o));
    assert_eq!(v["diagnostics"].as_array().map(Vec::len), Some(0));
    // Named from inside, a.sql still has its project (here only itself) and b.sql is not in it.
    let o = txlint(
        &d.path().join("repo"),
        &["check", "--format", "json", "a.sql"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["summary"]["context"], 0, "{}", stderr(&o));
}

#[test]
fn named_files_are_reported_with_the_rest_of_the_project_as_context() {
    // Two transactions in opposite order, one per file, and a finding only in a third file.
    let d = Dir::new("context");
    d.write("txlint.toml", "")
        .write(
            "a.sql",
            "BEGIN;\nUPDATE accounts SET n = 1 WHERE id = 1;\nUPDATE ledger SET n = 1 WHERE id = 1;\nCOMMIT;\n",
        )
        .write(
            "b.sql",
            "BEGIN;\nUPDATE ledger SET n = 2 WHERE id = 1;\nUPDATE accounts SET n = 2 WHERE id = 1;\nCOMMIT;\n",
        )
        .write("other/c.sql", BAD)
        .write("excluded/d.sql", BAD);
    let json =
        |o: &Output| -> serde_json::Value { serde_json::from_str(&stdout(o)).expect("json") };
    let rules = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let path = d["path"].as_str().unwrap().to_string();
                (d["rule"].as_str().unwrap().to_string(), path)
            })
            .collect()
    };
    // a.sql alone: the cycle through b.sql is reported (one finding, with the other side a
    // label); c.sql's own finding is not; the summary says what was context.
    let o = txlint(d.path(), &["check", "--format", "json", "a.sql"]);
    let v = json(&o);
    let found = rules(&v);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "lock-order-inversion");
    assert_eq!(v["summary"]["files"], 1);
    assert_eq!(v["summary"]["context"], 3);
    assert!(
        stderr(&o).contains("checked 1 file (3 more read as context)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(1));
    // Excluded files are not context either.
    d.write("txlint.toml", "exclude = [\"excluded\"]\n");
    let v = json(&txlint(d.path(), &["check", "--format", "json", "a.sql"]));
    assert_eq!(v["summary"]["context"], 2);
    // --no-context: a.sql alone has no cycle.
    let o = txlint(
        d.path(),
        &["check", "--format", "json", "--no-context", "a.sql"],
    );
    assert!(rules(&json(&o)).is_empty());
    assert_eq!(o.status.code(), Some(0));
    // A folder named is the whole run: no context is added.
    let v = json(&txlint(d.path(), &["check", "--format", "json", "other"]));
    assert_eq!(v["summary"]["context"], 0);
    assert_eq!(
        rules(&v),
        vec![(
            "xact-lock-outside-transaction".to_string(),
            "other/c.sql".to_string()
        )]
    );
}

#[test]
fn github_annotations_and_gitlab_code_quality() {
    let d = Dir::new("ci-formats");
    d.write("db/q.sql", BAD).write("db/w.sql", WARN);
    let o = txlint(d.path(), &["check", "--format", "github"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with(
            "::error file=db/q.sql,line=1,col=8,endLine=1,endColumn=32,title=xact-lock-outside-transaction::"
        ),
        "{out}"
    );
    // The help is on the same line, its line break escaped.
    assert!(lines[0].contains("%0Ahelp: "), "{out}");
    assert!(
        lines[1].starts_with("::warning file=db/w.sql,line=1,"),
        "{out}"
    );
    let o = txlint(d.path(), &["check", "--format", "gitlab"]);
    let issues: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let issues = issues.as_array().expect("an array");
    assert_eq!(issues.len(), 2);
    assert_eq!(issues[0]["check_name"], "xact-lock-outside-transaction");
    assert_eq!(issues[0]["severity"], "critical");
    assert_eq!(issues[0]["location"]["path"], "db/q.sql");
    assert_eq!(issues[0]["location"]["lines"]["begin"], 1);
    assert_eq!(issues[1]["severity"], "major");
    assert_ne!(issues[0]["fingerprint"], issues[1]["fingerprint"]);
}

#[test]
fn a_baseline_hides_known_findings_across_moved_lines_and_shows_new_ones() {
    let d = Dir::new("baseline");
    d.write("db/a.sql", &format!("{BAD}{BAD}"));
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--format", "json"];
        args.extend_from_slice(extra);
        txlint(d.path(), &args)
    };
    let o = check(&["--baseline", "base.json", "--write-baseline"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("wrote 2 findings to the baseline base.json"));
    let o = check(&["--baseline", "base.json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["diagnostics"].as_array().unwrap().len(), 0);
    assert_eq!(v["summary"]["baselined"], 2);
    // Lines moved down: still known. A third copy of the line is new.
    d.write("db/a.sql", &format!("-- moved\n\n{BAD}{BAD}{BAD}"));
    let o = check(&["--baseline", "base.json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let found = v["diagnostics"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["start"]["line"], 5);
    // --exit-zero reports but does not fail.
    assert_eq!(check(&["--exit-zero"]).status.code(), Some(0));
    // A missing or foreign baseline is a usage error that says what to do.
    let o = check(&["--baseline", "missing.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--write-baseline"), "{}", stderr(&o));
    d.write("foreign.json", "{\"a\": 1}");
    let o = check(&["--baseline", "foreign.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a txlint baseline"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_closed_pipe_is_a_message_not_a_panic() {
    use std::io::BufRead;
    let d = Dir::new("pipe");
    d.write(
        "many.sql",
        &"UPDATE t SET a = 1 WHERE id = 2;\n".repeat(5_000),
    );
    for cmd in ["model", "graph"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_txlint"))
            .args([cmd, "many.sql"])
            .current_dir(d.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Read one line, then close the pipe, as `| head -1` does.
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if cmd == "model" {
            assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
            assert!(err.contains("cannot write the output"), "{cmd}: {err}");
        }
        assert!(!err.contains("panicked"), "{cmd}: {err}");
    }
}

#[test]
fn select_ignore_statistics_and_quiet() {
    let d = Dir::new("select");
    d.write("a.sql", &format!("{BAD}{BAD}"))
        .write("w.sql", WARN);
    let o = txlint(d.path(), &["check", "--statistics"]);
    assert_eq!(
        stdout(&o),
        "     2  xact-lock-outside-transaction  error\n     1  unused-suppression  warning\n"
    );
    assert!(stderr(&o).starts_with("checked 2 files"), "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(1));
    let o = txlint(
        d.path(),
        &["check", "--statistics", "--select", "unused-suppression"],
    );
    assert_eq!(stdout(&o), "     1  unused-suppression  warning\n");
    let o = txlint(
        d.path(),
        &[
            "check",
            "--ignore",
            "xact-lock-outside-transaction,unused-suppression",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = txlint(d.path(), &["check", "--select", "no-such-rule"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown rule `no-such-rule`"));
    // --quiet: the findings, no summary line anywhere.
    let o = txlint(d.path(), &["check", "--quiet"]);
    assert!(stdout(&o).contains("xact-lock-outside-transaction"));
    assert!(!stdout(&o).contains("checked ") && !stderr(&o).contains("checked "));
}

#[test]
fn init_writes_a_commented_configuration_that_means_the_defaults() {
    let d = Dir::new("init");
    let o = txlint(d.path(), &["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(d.path().join("txlint.toml")).unwrap();
    // Every documented setting is there, commented out.
    for key in [
        "# dialect",
        "# include = ",
        "# exclude = ",
        "# pool_mode",
        "# [rust]",
        "# [[overrides]]",
        "# [rules]",
    ] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    assert!(
        text.lines().all(|l| l.is_empty() || l.starts_with('#')),
        "{text}"
    );
    // The file stands alone: it points at sections of the docs, not at sections "below"
    // that only the docs page has.
    assert!(!text.contains("\" below"), "{text}");
    // It parses, and a run with it behaves as without it.
    d.write("a.sql", BAD);
    assert_eq!(txlint(d.path(), &["check"]).status.code(), Some(1));
    // A second init refuses to replace it; --force does.
    let o = txlint(d.path(), &["init"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--force"));
    assert_eq!(
        txlint(d.path(), &["init", "--force"]).status.code(),
        Some(0)
    );
}

#[test]
fn standard_input_stands_for_the_file_named() {
    let d = Dir::new("stdin");
    let with_stdin = |args: &[&str], input: &str| txlint_stdin(d.path(), args, input);
    let json =
        |o: &Output| -> serde_json::Value { serde_json::from_str(&stdout(o)).expect("json") };
    let o = with_stdin(
        &[
            "check",
            "--format",
            "json",
            "-",
            "--stdin-filename",
            "db/x.sql",
        ],
        BAD,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["diagnostics"][0]["path"], "db/x.sql");
    assert_eq!(v["diagnostics"][0]["rule"], "xact-lock-outside-transaction");
    // A Rust document is read as Rust.
    let rust = "async fn f(pool: &sqlx::PgPool) {\n    sqlx::query(\"SELECT pg_advisory_xact_lock(1)\").execute(pool).await;\n}\n";
    let v = json(&with_stdin(
        &[
            "check",
            "--format",
            "json",
            "-",
            "--stdin-filename",
            "src/lib.rs",
        ],
        rust,
    ));
    assert_eq!(v["diagnostics"][0]["path"], "src/lib.rs");
    assert_eq!(v["diagnostics"][0]["start"]["line"], 2);
    // Usage errors.
    let o = with_stdin(&["check", "-", "other.sql"], BAD);
    assert_eq!(o.status.code(), Some(2));
    let o = with_stdin(&["check", "-", "--stdin-filename", "notes.md"], BAD);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("must end in .sql or .rs"),
        "{}",
        stderr(&o)
    );
}

/// The bash completion script completes subcommands and a subcommand's options, in bash itself.
#[test]
fn completions_complete_in_bash() {
    let complete = |words: &str| {
        let script = format!(
            "source <('{}' completions bash); COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             _txlint txlint \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            env!("CARGO_BIN_EXE_txlint")
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(complete("txlint ch").trim(), "check");
    let options = complete("txlint check --fo");
    assert!(
        options.lines().any(|l| l == "--format") && options.lines().any(|l| l == "--force-exclude"),
        "{options}"
    );
    let shells = std::process::Command::new(env!("CARGO_BIN_EXE_txlint"))
        .args(["completions", "nushell"])
        .output()
        .expect("txlint");
    assert_eq!(
        shells.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

/// `txlint model` shows the statement txlint wrote for a diesel chain.
#[test]
fn model_shows_query_builder_sql() {
    let out = txlint(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &["model", "fixtures/lost-update/valid_diesel.rs"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for sql in [
        "as SQL: SELECT balance FROM accounts WHERE id = $1 FOR UPDATE",
        "as SQL: UPDATE accounts SET balance = $1 WHERE id = $2",
        "as SQL: UPDATE accounts SET balance = balance + $1 WHERE id = $2",
    ] {
        assert!(text.contains(sql), "missing {sql:?} in:\n{text}");
    }
}

/// `txlint model` shows what a helper that callers walk in place does to the handle it gets:
/// the session lock it takes through its caller's connection is still held when it returns.
#[test]
fn model_shows_helper_summaries() {
    let out = txlint(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &["model", "fixtures/session-lock-on-pool/helper_callers.rs"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let f = "fixtures/session-lock-on-pool/helper_callers.rs";
    for line in [
        format!(
            "{f}:6:1 helper fn lock_tenant, walked in place from 4 calls: {f}:16:5, {f}:21:5, {f}:26:5, 1 more"
        ),
        "  `&mut **conn`, from its caller:".to_string(),
        "    autocommit via pooled connection".to_string(),
        format!("      {f}:7:18 Select"),
        format!("    still held on return: pg_advisory_lock($1) at {f}:7:25"),
        "  returns nothing read from the database".to_string(),
    ] {
        assert!(
            text.lines().any(|l| l.trim_end() == line),
            "missing {line:?} in:\n{text}"
        );
    }
}

/// Each file is linted with the nearest `txlint.toml` above it, as in the editor: a
/// sub-project's rules, `exclude` and project boundary apply to its files, from the top folder,
/// for a file named alone and for standard input standing for a file there.
#[test]
fn each_file_takes_the_nearest_configuration() {
    let d = Dir::new("nearest");
    let ab = "BEGIN;\nUPDATE accounts SET n = 1 WHERE id = 1;\nUPDATE ledger SET n = 1 WHERE id = 1;\nCOMMIT;\n";
    let ba = "BEGIN;\nUPDATE ledger SET n = 2 WHERE id = 1;\nUPDATE accounts SET n = 2 WHERE id = 1;\nCOMMIT;\n";
    d.write("txlint.toml", "")
        .write("a.sql", BAD)
        .write("ab.sql", ab)
        .write(
            "sub/txlint.toml",
            "exclude = [\"vendor\"]\n[rules]\nxact-lock-outside-transaction = \"off\"\n",
        )
        .write("sub/b.sql", BAD)
        .write("sub/ba.sql", ba)
        .write(
            "sub/vendor/c.sql",
            "-- txlint: ignore lost-update\nSELECT 1;\n",
        );
    let found = |args: &[&str]| -> Vec<(String, String)> {
        let o = txlint(d.path(), args);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let (p, r) = (x["path"].as_str(), x["rule"].as_str());
                (p.unwrap().to_string(), r.unwrap().to_string())
            })
            .collect()
    };
    // The sub-project turns the rule off and excludes its vendor folder (whose unused
    // suppression would be a warning); its lock order is its own, not the top project's.
    assert_eq!(
        found(&["check", "--format", "json", "."]),
        [(
            "a.sql".to_string(),
            "xact-lock-outside-transaction".to_string()
        )]
    );
    assert_eq!(found(&["check", "--format", "json", "sub/b.sql"]), []);
    // Within one project the same two orders are a cycle.
    d.write("ba.sql", ba);
    let top = found(&["check", "--format", "json", "ab.sql", "ba.sql"]);
    assert!(
        top.iter().any(|(_, r)| r == "lock-order-inversion"),
        "{top:?}"
    );
    // `--config` names one configuration for every file.
    let all = found(&[
        "check",
        "--format",
        "json",
        "--config",
        "txlint.toml",
        "sub/b.sql",
    ]);
    assert_eq!(all.len(), 1, "{all:?}");
    // Standard input standing for a file of the sub-project.
    let args = [
        "check",
        "--format",
        "json",
        "-",
        "--stdin-filename",
        "sub/x.sql",
    ];
    let o = txlint_stdin(d.path(), &args, BAD);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// `sql.extensions` adds file endings read as SQL, on a walk and when named; without it a
/// `.pgsql` file is not read.
#[test]
fn sql_extensions_are_configurable() {
    let d = Dir::new("extensions");
    d.write("q.pgsql", BAD)
        .write("Q2.SQL", BAD)
        .write("notes.txt", BAD);
    let o = txlint(d.path(), &["check", "--format", "json", "."]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let paths: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["Q2.SQL"]);
    let o = txlint(d.path(), &["check", "q.pgsql"]);
    assert!(stderr(&o).contains("skipping q.pgsql"), "{}", stderr(&o));
    d.write("txlint.toml", "[sql]\nextensions = [\"pgsql\"]\n");
    let o = txlint(d.path(), &["check", "--format", "json", "."]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let mut paths: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["Q2.SQL", "q.pgsql"]);
    let o = txlint(d.path(), &["check", "q.pgsql"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

/// `txlint witness path:line` writes the shipped example's race as two psql sessions, in text
/// and JSON; a place without a finding is a usage error that says where the findings are.
#[test]
fn witness_writes_the_two_sessions_of_a_finding() {
    let d = Dir::new("witness");
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/job_queue.sql"),
    )
    .unwrap();
    d.write("job_queue.sql", &example);
    let o = txlint(d.path(), &["witness", "job_queue.sql:12"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("-- 1. A\nSELECT pg_advisory_xact_lock(hashtext('jobs'));\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "-- 2. B\nSELECT pg_try_advisory_xact_lock(hashtext('jobs'));  -- the race: `t`"
        ),
        "{text}"
    );
    let o = txlint(
        d.path(),
        &["witness", "job_queue.sql:16", "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let w = &v[0]["witness"];
    assert_eq!(w["rule"], "xact-lock-outside-transaction");
    assert!(
        w["setup"][0]
            .as_str()
            .unwrap()
            .contains("CREATE TABLE IF NOT EXISTS jobs")
    );
    assert!(
        w["steps"][1]["sql"]
            .as_str()
            .unwrap()
            .contains("FOR UPDATE NOWAIT")
    );
    let o = txlint(d.path(), &["witness", "job_queue.sql:3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("lines 12, 16"), "{}", stderr(&o));
    let o = txlint(d.path(), &["witness", "job_queue.sql"]);
    assert_eq!(o.status.code(), Some(2));
    // Per finding in the JSON report.
    let o = txlint(d.path(), &["check", "--format", "json", "--witness", "."]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    for f in v["diagnostics"].as_array().unwrap() {
        assert_eq!(f["witness"]["rule"], f["rule"], "{f:#}");
    }
    let o = txlint(d.path(), &["check", "--witness", "."]);
    assert_eq!(o.status.code(), Some(2));
}

/// Output is a function of the input alone: routines calling each other in a ring, where the
/// walk is cut decides what each copy holds, give the same findings and graph on every run
/// (each run is a new process, with new hash seeds).
#[test]
fn findings_and_graph_are_the_same_on_every_run() {
    let d = Dir::new("ring");
    let mut sql = String::new();
    for i in 0..3 {
        sql += &format!(
            "CREATE TABLE ring_{i} (id int PRIMARY KEY, n int);\nCREATE FUNCTION ring{i}() RETURNS void LANGUAGE plpgsql AS $$\nBEGIN\n  UPDATE ring_{i} SET n = n + 1 WHERE id = 1;\n  PERFORM ring{}();\nEND $$;\n",
            (i + 1) % 3
        );
    }
    d.write("ring.sql", &sql);
    for args in [&["check", "--format", "json"][..], &["graph"][..]] {
        let first = stdout(&txlint(d.path(), args));
        assert!(!first.is_empty(), "{args:?}");
        for _ in 0..8 {
            assert_eq!(stdout(&txlint(d.path(), args)), first, "{args:?}");
        }
    }
}

/// A finding after multi-byte characters on its line is placed by bytes in `offset` and by
/// characters in `column` (`é` is 2 bytes, `€` 3, `😀` 4: 6 bytes more than characters).
#[test]
fn positions_after_multibyte_characters_on_the_line() {
    let d = Dir::new("multibyte");
    d.write(
        "src/lib.rs",
        "async fn f(pool: &sqlx::PgPool) { let _s = \"é€😀\"; let _ = sqlx::query(\"SELECT id FROM t FOR UPDATE\").fetch_all(pool).await; }\n",
    );
    let out = stdout(&txlint(d.path(), &["check", "--format", "json"]));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let start = &json["diagnostics"][0]["start"];
    assert_eq!(start["line"], 1, "{out}");
    assert_eq!(start["column"], 89, "{out}");
    assert_eq!(start["offset"], 94, "{out}");
}

/// A file whose name is not UTF-8 is linted, and its finding can be witnessed by that name.
#[cfg(unix)]
#[test]
fn witness_takes_a_path_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let d = Dir::new("witness-bytes");
    let name = std::ffi::OsStr::from_bytes(b"q\xff.sql");
    std::fs::write(
        d.path().join(name),
        "SELECT 1;\nSELECT pg_advisory_xact_lock(7);\n",
    )
    .unwrap();
    let mut at = name.to_os_string();
    at.push(":2");
    let o = Command::new(env!("CARGO_BIN_EXE_txlint"))
        .current_dir(d.path())
        .arg("witness")
        .arg(&at)
        .output()
        .expect("txlint");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("pg_advisory_xact_lock(7)"),
        "{}",
        stdout(&o)
    );
}

/// One path that is not there, or one sub-project's broken `txlint.toml`, is reported: the rest
/// is linted and shown, and the run exits 2.
#[test]
fn a_bad_path_or_a_broken_sub_project_leaves_the_rest_linted() {
    let d = Dir::new("partial");
    d.write("txlint.toml", "")
        .write("good.sql", BAD)
        .write("broken/txlint.toml", "[rules\n")
        .write("broken/b.sql", BAD);
    let o = txlint(d.path(), &["check", "missing.sql", "good.sql"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.sql"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("xact-lock-outside-transaction"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("good.sql"), "{}", stdout(&o));
    let o = txlint(d.path(), &["check", "--format", "json", "."]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("broken/txlint.toml"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let paths: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["path"].as_str())
        .collect();
    assert_eq!(paths, ["good.sql"]);
}

/// `--format concise` is one line per finding; control characters from a source file are
/// escaped in every text output; `--color` overrides the terminal test.
#[test]
fn concise_lines_escaped_control_characters_and_color() {
    let d = Dir::new("concise");
    d.write(
        "a.sql",
        "SELECT pg_advisory_xact_lock(1);\n-- \u{1b}]0;pwned\u{7}\n",
    );
    let o = txlint(d.path(), &["check", "--format", "concise", "a.sql"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o).lines().collect::<Vec<_>>(),
        [
            "a.sql:1:8: error[xact-lock-outside-transaction] `pg_advisory_xact_lock(1)` is taken outside a transaction (autocommit) and released when this statement ends, before any work it should protect"
        ]
    );
    let text = stdout(&txlint(d.path(), &["check", "--color", "never", "a.sql"]));
    assert!(text.contains("?]0;pwned?"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    let colored = stdout(&txlint(d.path(), &["check", "--color", "always", "a.sql"]));
    assert!(colored.contains("\u{1b}["), "{colored}");
    assert!(!colored.contains("\u{1b}]0;pwned"), "{colored}");
}

/// `--exclude` adds globs to every project's `exclude`, sub-projects' too.
#[test]
fn exclude_on_the_command_line_applies_to_every_project() {
    let d = Dir::new("cli-exclude");
    d.write("txlint.toml", "")
        .write("a.sql", BAD)
        .write("generated/g.sql", BAD)
        .write("sub/txlint.toml", "")
        .write("sub/b.sql", BAD)
        .write("sub/generated/h.sql", BAD);
    let paths = |args: &[&str]| -> Vec<String> {
        let o = txlint(d.path(), args);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
        let mut p: Vec<String> = v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x["path"].as_str().map(str::to_string))
            .collect();
        p.sort();
        p
    };
    assert_eq!(
        paths(&["check", "--format", "json", "."]).len(),
        4,
        "every file without --exclude"
    );
    assert_eq!(
        paths(&["check", "--format", "json", "--exclude", "generated", "."]),
        ["a.sql", "sub/b.sql"]
    );
}

/// A binary file named `.sql` (a NUL byte near its start) is a `read-error`, not analysed nor
/// shown; the other files are linted.
#[test]
fn a_binary_file_is_reported_not_printed() {
    let d = Dir::new("binary");
    d.write("a.sql", BAD);
    std::fs::write(
        d.path().join("blob.sql"),
        b"\x7fELF\x02\x01\x00\x00SELECT pg_advisory_xact_lock(1);\x1b]0;x\x07",
    )
    .unwrap();
    let o = txlint(d.path(), &["check", "--format", "concise", "."]);
    let out = stdout(&o);
    assert!(
        out.contains("blob.sql:1:1: error[read-error] binary file (a NUL byte at offset 6)"),
        "{out}"
    );
    assert!(
        out.contains("a.sql:1:8: error[xact-lock-outside-transaction]"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(!out.contains('\u{1b}'), "{out}");
}

/// A query sent with SQL built at run time is not silence: the summary counts such calls and
/// `txlint model` says where they are.
#[test]
fn query_calls_whose_sql_was_not_read_are_counted_and_listed() {
    let d = Dir::new("unread-sql");
    d.write(
        "src/a.rs",
        "async fn f(pool: &sqlx::PgPool, t: &str) -> sqlx::Result<()> {\n    let sql = make(t);\n    sqlx::query(&sql).execute(pool).await?;\n    sqlx::query(\"SELECT 1\").execute(pool).await?;\n    Ok(())\n}\n",
    );
    let o = txlint(d.path(), &["check", "src/a.rs"]);
    assert!(
        stdout(&o)
            .contains("(1 query call with SQL txlint could not read, listed by `txlint model`)"),
        "{}",
        stdout(&o)
    );
    let model = stdout(&txlint(d.path(), &["model", "src/a.rs"]));
    assert!(
        model.contains("src/a.rs:3:23 query call whose SQL txlint could not read"),
        "{model}"
    );
}

/// A function whose SQL is its parameter (a project's wrapper around the driver) sends its
/// callers' SQL, which txlint reads in each caller: checked alone it is not SQL txlint failed
/// to read. A call with SQL built at run time is counted once, however many callers walk the
/// function it is in.
#[test]
fn sql_a_function_is_given_is_not_counted_as_unread_and_each_call_counts_once() {
    let d = Dir::new("unread-sql-wrapper");
    d.write(
        "src/db.rs",
        "use tokio_postgres::{Client, types::ToSql};\n\
         pub struct Db { client: Client }\n\
         impl Db {\n\
         \x20   pub async fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, tokio_postgres::Error> {\n\
         \x20       let statement = self.client.prepare(sql).await?;\n\
         \x20       self.client.execute(&statement, params).await\n\
         \x20   }\n\
         \x20   pub async fn dynamic(&self) -> Result<u64, tokio_postgres::Error> {\n\
         \x20       let sql = build();\n\
         \x20       self.client.execute(&sql, &[]).await\n\
         \x20   }\n\
         }\n\
         pub async fn run(pool: &sqlx::PgPool, sql: &str) -> sqlx::Result<()> {\n\
         \x20   sqlx::query(sql).bind(1).execute(pool).await?;\n\
         \x20   Ok(())\n\
         }\n\
         pub async fn a(db: &Db, pool: &sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {\n\
         \x20   db.exec(\"UPDATE t SET n = 1 WHERE id = $1\", &[&1i64]).await?;\n\
         \x20   run(pool, \"DELETE FROM t WHERE id = $1\").await?;\n\
         \x20   db.dynamic().await?;\n\
         \x20   Ok(())\n\
         }\n\
         pub async fn b(db: &Db) -> Result<(), Box<dyn std::error::Error>> {\n\
         \x20   db.dynamic().await?;\n\
         \x20   Ok(())\n\
         }\n",
    );
    let o = txlint(d.path(), &["check", "src/db.rs"]);
    assert!(
        stdout(&o)
            .contains("(1 query call with SQL txlint could not read, listed by `txlint model`)"),
        "{}",
        stdout(&o)
    );
    let model = stdout(&txlint(d.path(), &["model", "src/db.rs"]));
    let unread: Vec<&str> = model
        .lines()
        .filter(|l| l.contains("query call whose SQL txlint could not read"))
        .collect();
    assert_eq!(unread.len(), 1, "{model}");
    assert!(unread[0].contains("src/db.rs:10:"), "{model}");
    // The callers' SQL is read where they pass it.
    assert!(model.contains("Update"), "{model}");
    assert!(model.contains("Delete"), "{model}");
}

/// docs/output.md's JSON example is what `txlint check --format json examples/` prints: the
/// same fields everywhere, its finding one of the run's (its `help` may be cut with ` ...`),
/// the same summary.
#[test]
fn the_json_example_of_the_docs_is_the_output() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/output.md"))
        .expect("docs/output.md");
    let start = doc.find("```json\n").expect("a JSON example") + "```json\n".len();
    let end = start + doc[start..].find("```").expect("its end");
    let example: serde_json::Value = serde_json::from_str(&doc[start..end]).expect("JSON");
    let o = txlint(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &["check", "--format", "json", "examples/"],
    );
    let real: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json output");
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object()
            .map_or(Vec::new(), |o| o.keys().cloned().collect())
    };
    assert_eq!(keys(&example), keys(&real));
    assert_eq!(example["summary"], real["summary"]);
    assert_eq!(example["tool"]["name"], real["tool"]["name"]);
    let shown = &example["diagnostics"][0];
    let same = real["diagnostics"].as_array().unwrap().iter().find(|d| {
        keys(d) == keys(shown)
            && [
                "rule", "severity", "message", "path", "start", "end", "note", "labels",
            ]
            .iter()
            .all(|k| d[k] == shown[k])
            && shown["help"].as_str().is_some_and(|h| {
                let cut = h.trim_end_matches(" ...");
                d["help"].as_str().is_some_and(|r| r.starts_with(cut))
            })
    });
    assert!(
        same.is_some(),
        "the example's finding is not in the output: {}",
        stdout(&o)
    );
}

/// `ALTER TABLE .. DROP CONSTRAINT` removes the key it names, given or by PostgreSQL's default
/// name (`<table>_<columns>_fkey`, `_key`, `_pkey`): `txlint schema` no longer shows it.
#[test]
fn a_constraint_dropped_by_name_leaves_the_schema() {
    let d = Dir::new("dropped-constraint");
    d.write(
        "001.sql",
        "CREATE TABLE b (id bigint PRIMARY KEY);\n\
         CREATE TABLE a (id bigint PRIMARY KEY, b_id bigint REFERENCES b (id), c_id bigint,\n\
         email text UNIQUE, CONSTRAINT a_c_fk FOREIGN KEY (c_id) REFERENCES b (id));\n\
         CREATE TABLE c (id bigint PRIMARY KEY, k text NOT NULL);\n",
    )
    .write(
        "002.sql",
        "ALTER TABLE a DROP CONSTRAINT a_b_id_fkey;\nALTER TABLE a DROP CONSTRAINT a_c_fk;\n\
         ALTER TABLE a DROP CONSTRAINT a_email_key;\n\
         ALTER TABLE c DROP CONSTRAINT c_pkey, ADD CONSTRAINT c_pkey PRIMARY KEY (k);\n",
    );
    let before = stdout(&txlint(d.path(), &["schema", "001.sql"]));
    assert!(before.contains("foreign key: (b_id) -> b (id)"), "{before}");
    assert!(before.contains("unique: (email)"), "{before}");
    let after = stdout(&txlint(d.path(), &["schema", "."]));
    assert!(!after.contains("foreign key"), "{after}");
    assert!(!after.contains("unique: (email)"), "{after}");
    assert!(after.contains("primary key: (id)"), "{after}");
    // Dropped and added again in one statement: the new key stays.
    assert!(after.contains("primary key: (k)"), "{after}");
}

/// DDL the application sends itself declares tables no script declares (`CREATE TABLE IF NOT
/// EXISTS` at start-up); where a migration declares the table too, the migration is the schema
/// (the host's DDL is often an old path the migrations replaced).
#[test]
fn host_code_ddl_declares_tables_the_migrations_do_not() {
    let d = Dir::new("host-ddl");
    d.write(
        "migrations/001.sql",
        "CREATE TABLE queue (id bigint PRIMARY KEY, doc bigint NOT NULL);\n\
         CREATE UNIQUE INDEX queue_doc ON queue (doc);\n",
    )
    .write(
        "src/lib.rs",
        "async fn init(c: &tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {\n    \
         c.batch_execute(\"CREATE TABLE IF NOT EXISTS runs (id integer PRIMARY KEY, q text)\").await?;\n    \
         c.batch_execute(\"CREATE TABLE IF NOT EXISTS queue (id bigint, doc bigint)\").await?;\n    \
         Ok(())\n}\n",
    );
    let out = stdout(&txlint(d.path(), &["schema", "."]));
    let table = |name: &str| {
        let at = out.find(name).unwrap_or(out.len());
        out[at..].split("\n\n").next().unwrap_or("").to_string()
    };
    assert!(table("runs").contains("primary key: (id)"), "{out}");
    assert!(table("queue").contains("unique: (doc)"), "{out}");
}

/// A table in a schema of its own is `schema.table` in `txlint schema`, and a table of the same
/// name in `public` is another table: its `CREATE TABLE` does not replace the first one's
/// columns. An unqualified `ALTER TABLE` names the one table of that name in a schema.
#[test]
fn schema_keeps_tables_of_other_schemas_apart() {
    let d = Dir::new("schema-qualified");
    d.write(
        "001.sql",
        "CREATE SCHEMA underway;\n\
         CREATE TABLE underway.task (id uuid PRIMARY KEY, queue text NOT NULL);\n\
         CREATE TABLE underway.attempt (id uuid PRIMARY KEY, task_id uuid NOT NULL);\n\
         ALTER TABLE attempt ADD CONSTRAINT attempt_task UNIQUE (task_id);\n\
         CREATE TABLE public.task (id int PRIMARY KEY, title text);\n",
    );
    let out = stdout(&txlint(d.path(), &["schema", "."]));
    assert!(
        out.contains("underway.task  (001.sql:2)\n  columns: id, queue\n"),
        "{out}"
    );
    assert!(
        out.contains("task  (001.sql:5)\n  columns: id, title\n"),
        "{out}"
    );
    assert!(out.contains("underway.attempt  (001.sql:3)\n  columns: id, task_id\n  primary key: (id)\n  unique: (task_id)\n"), "{out}");
    assert!(!out.contains("\nattempt"), "{out}");
}

/// Two packages of one repository, each with its migrations: each package's statements are
/// judged by its own tables, and `txlint schema` shows each package's schema. (One run used to
/// merge them: the second `CREATE TABLE users` replaced the first, and its missing key was
/// taken for both.) A table only the other package declares is still known.
#[test]
fn each_package_sees_its_own_migrations() {
    let d = Dir::new("two-packages");
    let check = "BEGIN;\nSELECT 1 FROM users WHERE email = $1 FOR UPDATE;\n\
                 INSERT INTO users (id, email) VALUES ($2, $1);\nCOMMIT;\n";
    d.write("Cargo.toml", "[workspace]\n")
        .write("accounts/Cargo.toml", "[package]\nname = \"accounts\"\n")
        .write(
            "accounts/migrations/001.sql",
            "CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL UNIQUE);\n\
             CREATE TABLE sessions (token text PRIMARY KEY);\n",
        )
        .write("accounts/queries.sql", check)
        .write("billing/Cargo.toml", "[package]\nname = \"billing\"\n")
        .write(
            "billing/migrations/001.sql",
            "CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL);\n",
        )
        .write("billing/queries.sql", check)
        .write(
            "billing/sessions.sql",
            "BEGIN;\nSELECT 1 FROM sessions WHERE token = $1 FOR UPDATE;\n\
             INSERT INTO sessions (token) VALUES ($1);\nCOMMIT;\n",
        );
    let out = stdout(&txlint(d.path(), &["check", "--format", "concise", "."]));
    let line = |file: &str| {
        out.lines()
            .find(|l| l.starts_with(file))
            .unwrap_or_else(|| panic!("no finding in {file}:\n{out}"))
            .to_string()
    };
    assert!(
        line("accounts/queries.sql:3").contains("the unique key (email)"),
        "{out}"
    );
    assert!(
        line("billing/queries.sql:3").contains("no unique constraint on (email)"),
        "{out}"
    );
    assert!(
        line("billing/sessions.sql:3").contains("the unique key (token)"),
        "{out}"
    );
    let schema = stdout(&txlint(d.path(), &["schema", "."]));
    assert!(schema.contains("# package accounts:"), "{schema}");
    assert!(schema.contains("# package billing:"), "{schema}");
    assert_eq!(schema.matches("unique: (email)").count(), 1, "{schema}");
    assert!(
        schema.contains("(and 1 table only other packages declare)"),
        "{schema}"
    );
}

/// docs/usage.md's synopsis is the binary's: a line for every subcommand of `txlint --help`,
/// every long option of each subcommand's `--help` on its lines and no option the binary lacks,
/// and the values listed for an option (`--format text|json`) are the ones it takes.
#[test]
fn the_usage_synopsis_is_the_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/usage.md")).expect("docs/usage.md");
    let start = doc.find("```\n").expect("a synopsis") + 4;
    let synopsis = &doc[start..start + doc[start..].find("```").expect("its end")];
    let help = stdout(&txlint(root, &["--help"]));
    let commands: Vec<&str> = help
        .split("Commands:\n")
        .nth(1)
        .expect("commands")
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 10, "{commands:?}");
    for cmd in commands {
        // The synopsis lines of `cmd`: its own and their continuations.
        let mut lines = String::new();
        let mut mine = false;
        for l in synopsis.lines() {
            if l.starts_with("txlint ") {
                mine = l.split_whitespace().nth(1) == Some(cmd);
            }
            if mine {
                lines += l;
                lines += "\n";
            }
        }
        assert!(!lines.is_empty(), "no synopsis line for `txlint {cmd}`");
        let help = stdout(&txlint(root, &[cmd, "--help"]));
        let options: Vec<&str> = help
            .lines()
            .filter_map(|l| {
                // `  -o, --output <OUTPUT>` or `      --format <FORMAT>`.
                let l = l.trim_start();
                let l = match l.as_bytes().get(2) {
                    Some(b',') if !l.starts_with("--") => l[3..].trim_start(),
                    _ => l,
                };
                l.strip_prefix("--")?.split([' ', '=']).next()
            })
            .filter(|o| !["help", "version"].contains(o))
            .collect();
        for o in &options {
            assert!(
                lines.contains(&format!("--{o}")),
                "docs/usage.md's synopsis of `txlint {cmd}` lacks --{o}:\n{lines}"
            );
        }
        let shown: Vec<&str> = lines
            .split(|c: char| c.is_whitespace() || c == '[' || c == ']')
            .filter_map(|w| w.strip_prefix("--"))
            .collect();
        for o in &shown {
            assert!(
                options.contains(o),
                "docs/usage.md shows --{o} for `txlint {cmd}`, which its --help does not list"
            );
        }
        // Values listed for an option: those its --help lists.
        for (at, _) in lines.match_indices(" --") {
            let mut words = lines[at + 3..].split_whitespace();
            let (Some(name), Some(values)) = (words.next(), words.next()) else {
                continue;
            };
            let values = values.trim_end_matches(']');
            if !values.contains('|') {
                continue;
            }
            let section = help
                .split(&format!("--{name} "))
                .nth(1)
                .expect("the option's help");
            let section = section.split("\n  -").next().unwrap_or(section);
            for v in values.split('|') {
                assert!(
                    section.contains(&format!("- {v}:"))
                        || section.contains(&format!(" {v},"))
                        || section.contains(&format!(" {v}]")),
                    "`txlint {cmd} --{name}` does not take `{v}` (docs/usage.md)"
                );
            }
        }
    }
}
