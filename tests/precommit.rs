//! The hook as pre-commit runs it: the real framework (from PyPI, installed into the target
//! folder when it is not on PATH), this repository's `.pre-commit-hooks.yaml` with the built
//! binary as a `language: system` hook, commits in a scratch git repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

/// `pre-commit`: `$TXLINT_PRE_COMMIT`, else on PATH, else installed into the tests' virtualenv.
fn pre_commit() -> PathBuf {
    if let Some(p) = std::env::var_os("TXLINT_PRE_COMMIT") {
        return PathBuf::from(p);
    }
    if Command::new("pre-commit")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return PathBuf::from("pre-commit");
    }
    common::python_tools(&["pre-commit"]).join("pre-commit")
}

/// The shipped hook's `types_or`, `require_serial` and `entry` arguments, as a local hook
/// running the built binary.
fn local_hook() -> String {
    let hooks = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/.pre-commit-hooks.yaml"
    ))
    .expect(".pre-commit-hooks.yaml");
    let value = |key: &str| {
        hooks
            .lines()
            .find_map(|l| l.trim().trim_start_matches("- ").strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no `{key}` in .pre-commit-hooks.yaml"))
    };
    let entry = value("entry:");
    let args = entry.strip_prefix("txlint").expect("entry runs txlint");
    format!(
        "repos:\n- repo: local\n  hooks:\n  - id: txlint\n    name: txlint\n    entry: {}{args}\n    language: system\n    types_or: {}\n    require_serial: {}\n",
        env!("CARGO_BIN_EXE_txlint"),
        value("types_or:"),
        value("require_serial:"),
    )
}

struct Repo {
    dir: PathBuf,
    pre_commit: PathBuf,
}

impl Repo {
    fn git(&self, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(&self.dir)
            .env("PRE_COMMIT_HOME", self.dir.with_extension("cache"))
            .env("PATH", path_with(&self.pre_commit))
            .output()
            .expect("git")
    }

    /// Write the files, stage them and commit: the hook's output and whether it let the
    /// commit through.
    fn commit(&self, files: &[(&str, &str)]) -> (bool, String) {
        for (name, text) in files {
            let p = self.dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            assert!(self.git(&["add", name]).status.success());
        }
        let o = self.git(&["commit", "--quiet", "-m", "change"]);
        let out =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        if !o.status.success() {
            // Unstage what the hook refused, as a user would fix it.
            self.git(&["reset", "--quiet", "--hard", "HEAD"]);
        }
        (o.status.success(), out)
    }
}

/// PATH with the folder of `pre-commit` in front (the git hook script runs it by name).
fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut parts: Vec<PathBuf> = bin.parent().map(Path::to_path_buf).into_iter().collect();
    parts.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(parts).unwrap_or_default()
}

/// The fixture whose check the schema settles (`fixtures/check-then-act/schema_settles/`).
const REGISTER: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/check-then-act/schema_settles/valid_register.rs"
));

const LOCK: &str = r#"
async fn lock(pool: &sqlx::PgPool) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(1)").execute(pool).await?;
    Ok(())
}
"#;

#[test]
fn pre_commit_checks_rust_commits_with_the_project_as_context() {
    let pre_commit = pre_commit();
    let dir = std::env::temp_dir().join(format!("txlint-pre-commit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(dir.with_extension("cache"));
    std::fs::create_dir_all(&dir).unwrap();
    let repo = Repo { dir, pre_commit };
    for args in [
        &["init", "--quiet", "-b", "main"][..],
        &["config", "user.email", "test@example.com"],
        &["config", "user.name", "test"],
        &["config", "commit.gpgsign", "false"],
    ] {
        assert!(repo.git(args).status.success(), "git {args:?}");
    }
    std::fs::write(repo.dir.join(".pre-commit-config.yaml"), local_hook()).unwrap();
    let install = Command::new(&repo.pre_commit)
        .arg("install")
        .current_dir(&repo.dir)
        .env("PRE_COMMIT_HOME", repo.dir.with_extension("cache"))
        .output()
        .expect("pre-commit install");
    assert!(install.status.success(), "{install:?}");
    let (ok, out) = repo.commit(&[(".pre-commit-config.yaml", &local_hook())]);
    assert!(ok, "{out}");

    // The migration with the unique key, then a Rust-only commit whose check it settles.
    let (ok, out) = repo.commit(&[(
        "migrations/001_users.sql",
        "CREATE TABLE users (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE);\n",
    )]);
    assert!(ok, "{out}");
    let (ok, out) = repo.commit(&[("src/register.rs", REGISTER)]);
    assert!(ok, "the committed schema is context: {out}");

    // A Rust-only commit is checked.
    let (ok, out) = repo.commit(&[("src/lock.rs", LOCK)]);
    assert!(!ok, "a Rust-only commit was not checked: {out}");
    assert!(out.contains("xact-lock-outside-transaction"), "{out}");

    // A cycle between two files of one commit.
    let (ok, out) = repo.commit(&[
        (
            "a.sql",
            "BEGIN;\nUPDATE accounts SET n = 1 WHERE id = 1;\nUPDATE ledger SET n = 1 WHERE id = 1;\nCOMMIT;\n",
        ),
        (
            "b.sql",
            "BEGIN;\nUPDATE ledger SET n = 2 WHERE id = 1;\nUPDATE accounts SET n = 2 WHERE id = 1;\nCOMMIT;\n",
        ),
    ]);
    assert!(!ok, "the two-file cycle was missed: {out}");
    assert!(out.contains("lock-order-inversion"), "{out}");

    let _ = std::fs::remove_dir_all(&repo.dir);
    let _ = std::fs::remove_dir_all(repo.dir.with_extension("cache"));
}

/// The hook that builds txlint and the one that runs the txlint on PATH check the same way:
/// the same entry, file types and one process.
#[test]
fn both_hooks_run_the_same_check() {
    let hooks = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/.pre-commit-hooks.yaml"
    ))
    .expect(".pre-commit-hooks.yaml");
    let blocks: Vec<Vec<&str>> = hooks
        .split("\n- ")
        .filter(|b| b.trim_start_matches("- ").starts_with("id:"))
        .map(|b| {
            b.lines()
                .map(|l| l.trim().trim_start_matches("- "))
                .filter(|l| {
                    ["entry:", "types_or:", "require_serial:"]
                        .iter()
                        .any(|k| l.starts_with(k))
                })
                .collect()
        })
        .collect();
    assert_eq!(blocks.len(), 2, "{hooks}");
    assert_eq!(blocks[0].len(), 3, "{:?}", blocks[0]);
    assert_eq!(blocks[0], blocks[1]);
    assert!(hooks.contains("id: txlint-system") && hooks.contains("language: system"));
}
