//! Who runs a `.sql` file, told from its name, its folder and its first lines: a migration tool
//! (and whether it wraps each file in a transaction), or application code that sends the
//! statements of a query file one by one. The answer decides the file's `sql.mode` when the
//! configuration does not (`txlint model` shows it, `docs/configuration.md` lists the tools).
//!
//! Each tool is one row of [`TOOLS`]: how its files are recognised, how it runs them, and the
//! marker that makes it run one outside a transaction. The first row that recognises a file
//! wins, so the more specific markers come first.

use std::path::Path;

use super::initdb::ImageInit;
use super::sqlc::Sqlc;
use crate::config::SqlMode;
use crate::model::Runner;

/// A file's runner and the mode it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detected {
    pub runner: Runner,
    pub mode: SqlMode,
}

/// What txlint knows of one tool that runs `.sql` files.
pub struct Tool {
    pub name: &'static str,
    /// How txlint recognises its files.
    pub recognised: &'static str,
    /// How it runs a file when nothing in the file opts out.
    pub mode: SqlMode,
    /// What that means, for `txlint model` and the docs.
    pub runs: &'static str,
    /// It applies each file once per database (a migration tool).
    pub migration: bool,
    /// The marker that makes it run a file statement by statement, outside a transaction.
    pub opt_out: Option<&'static str>,
    /// Who calls what the file holds, when that is application code going through a
    /// connection pool: each call runs on whichever pooled connection serves it.
    pub called: Option<&'static str>,
    recognise: fn(&Probe) -> Option<Found>,
}

/// What a tool's test found in a file.
enum Found {
    /// One of its files, run as the tool does by default.
    Default,
    /// One of its files, with the marker that opts out of the transaction.
    OptedOut,
}

const TX: &str = "each file in a transaction";
const MESSAGE: &str =
    "each file as one simple-query message: an implicit transaction that ends with the file";
const ONE_BY_ONE: &str =
    "its statements one at a time from application code, in a transaction txlint does not see";

/// The tools txlint recognises, most specific first.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "sqlc query file",
        recognised: "`-- name: Query :one|:many|:exec..` annotations, or a path under `queries` in sqlc.yaml/sqlc.json",
        mode: SqlMode::Statements,
        runs: ONE_BY_ONE,
        migration: false,
        opt_out: None,
        called: Some("sqlc's generated code, through a connection pool (`database/sql`, pgx)"),
        recognise: |p| {
            (p.has("name:") && p.any_line(is_sqlc_annotation) || p.sqlc.is_query_file(p.path))
                .then_some(Found::Default)
        },
    },
    Tool {
        name: "named-query file",
        recognised: "`-- name: query-name` (yesql, goyesql, dotsql, aiosql) or `-- :name` (HugSQL) before each query",
        mode: SqlMode::Statements,
        runs: ONE_BY_ONE,
        migration: false,
        opt_out: None,
        called: None,
        recognise: |p| (p.has("name") && p.any_line(is_named_query)).then_some(Found::Default),
    },
    Tool {
        name: "graphile-migrate migration",
        recognised: "`--! Previous:` / `--! Hash:` headers, or `migrations/committed/*.sql` and `migrations/current.sql`",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`--! no-transaction` on the first line"),
        called: None,
        recognise: |p| {
            let headers = p.has("--! ")
                && p.any_line(|l| l.starts_with("--! Previous:") || l.starts_with("--! Hash:"));
            let folder = (p.folder(1) == "committed" && p.folder(2) == "migrations")
                || (p.name == "current.sql" && p.folder(1) == "migrations");
            (headers || folder)
                .then(|| p.opted_out(p.first.eq_ignore_ascii_case("--! no-transaction")))
        },
    },
    Tool {
        name: "cornucopia/clorinde query file",
        recognised: "`--! query_name` annotations",
        mode: SqlMode::Statements,
        runs: ONE_BY_ONE,
        migration: false,
        opt_out: None,
        called: None,
        recognise: |p| {
            (p.has("--! ") && p.any_line(|l| l.starts_with("--! "))).then_some(Found::Default)
        },
    },
    Tool {
        name: "goose migration",
        recognised: "a `-- +goose Up` line",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`-- +goose NO TRANSACTION`"),
        called: None,
        recognise: |p| {
            if !p.has("+goose") || !p.any_line(|l| goose(l, "up")) {
                return None;
            }
            Some(p.opted_out(p.any_line(|l| goose(l, "no transaction"))))
        },
    },
    Tool {
        name: "dbmate migration",
        recognised: "`-- migrate:up` on the first line",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`-- migrate:up transaction:false`"),
        called: None,
        recognise: |p| {
            p.first
                .starts_with("-- migrate:up")
                .then(|| p.opted_out(p.first.contains("transaction:false")))
        },
    },
    Tool {
        name: "Liquibase formatted SQL",
        recognised: "`--liquibase formatted sql` on the first line",
        mode: SqlMode::Transaction,
        runs: "each changeset in a transaction",
        migration: true,
        opt_out: Some("`runInTransaction:false` on a changeset"),
        called: None,
        recognise: |p| {
            let first = p.first.to_ascii_lowercase().replace(' ', "");
            first
                .starts_with("--liquibaseformattedsql")
                .then(|| p.opted_out(p.text.contains("runInTransaction:false")))
        },
    },
    Tool {
        name: "tern migration",
        recognised: "a `---- create above / drop below ----` line",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`---- tern: disable-tx ----`"),
        called: None,
        recognise: |p| {
            (p.has("---- create above")
                && p.any_line(|l| l.starts_with("---- create above / drop below ----")))
            .then(|| p.opted_out(p.text.contains("---- tern: disable-tx ----")))
        },
    },
    Tool {
        name: "Atlas migration",
        recognised: "an `atlas.sum` file beside it",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`-- atlas:txmode none` at the top"),
        called: None,
        recognise: |p| {
            p.beside("atlas.sum")
                .then(|| p.opted_out(p.any_line(|l| l.starts_with("-- atlas:txmode none"))))
        },
    },
    Tool {
        name: "sqitch change",
        recognised: "`deploy/`, `revert/` or `verify/` under a folder with `sqitch.plan`",
        mode: SqlMode::Script,
        runs: "each file with psql: a script that opens its own transaction",
        migration: true,
        opt_out: None,
        called: None,
        recognise: |p| {
            (matches!(p.folder(1).as_str(), "deploy" | "revert" | "verify")
                && p.above("sqitch.plan"))
            .then_some(Found::Default)
        },
    },
    Tool {
        name: "Prisma migration",
        recognised: "`migrations/<timestamp>_<name>/migration.sql`",
        mode: SqlMode::Transaction,
        runs: MESSAGE,
        migration: true,
        opt_out: None,
        called: None,
        recognise: |p| {
            (p.name == "migration.sql" && p.folder(2) == "migrations" && versioned(&p.folder(1)))
                .then_some(Found::Default)
        },
    },
    Tool {
        name: "diesel migration",
        recognised: "`migrations/<version>_<name>/up.sql` and `down.sql`",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`run_in_transaction = false` in metadata.toml"),
        called: None,
        recognise: |p| {
            if !matches!(p.name, "up.sql" | "down.sql") || p.folder(2) != "migrations" {
                return None;
            }
            let metadata = p
                .path
                .parent()
                .and_then(|d| std::fs::read_to_string(d.join("metadata.toml")).ok());
            let out = metadata.is_some_and(|m| {
                m.lines()
                    .any(|l| l.replace(' ', "") == "run_in_transaction=false")
            });
            Some(p.opted_out(out))
        },
    },
    Tool {
        name: "Supabase migration",
        recognised: "`supabase/migrations/<timestamp>_<name>.sql`",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: None,
        called: Some(
            "Supabase clients as RPCs, through PostgREST's connection pool (`supabase.rpc(..)`)",
        ),
        recognise: |p| {
            (p.folder(1) == "migrations" && p.folder(2) == "supabase" && versioned(p.name))
                .then_some(Found::Default)
        },
    },
    Tool {
        name: "Flyway/refinery migration",
        recognised: "`V<version>__<name>.sql`, `U<version>__<name>.sql`, `R__<name>.sql`",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: None,
        called: None,
        recognise: |p| flyway(p.name).then_some(Found::Default),
    },
    Tool {
        name: "sqlx migration",
        recognised: "`migrations/<version>_<name>.sql` (or `.up.sql`, `.down.sql`) in a Rust crate",
        mode: SqlMode::Transaction,
        runs: TX,
        migration: true,
        opt_out: Some("`-- no-transaction` on the first line"),
        called: None,
        recognise: |p| {
            (versioned(p.name) && p.folder(1) == "migrations" && p.project() == Some("Cargo.toml"))
                .then(|| p.opted_out(p.first.eq_ignore_ascii_case("-- no-transaction")))
        },
    },
    Tool {
        name: "golang-migrate migration",
        recognised: "`<version>_<name>.up.sql` and `.down.sql` outside a Rust crate",
        mode: SqlMode::Transaction,
        runs: MESSAGE,
        migration: true,
        opt_out: Some(
            "`x-multi-statement=true` in the database URL (not seen in the file: configure `sql.mode`)",
        ),
        called: None,
        recognise: |p| {
            (versioned(p.name) && (p.name.ends_with(".up.sql") || p.name.ends_with(".down.sql")))
                .then_some(Found::Default)
        },
    },
    Tool {
        name: "PostgreSQL image init script",
        recognised: "a file in `docker-entrypoint-initdb.d`, or one that a Dockerfile or compose file in its folder or the one above copies or mounts there",
        mode: SqlMode::Script,
        runs: "once, by the postgres image's entrypoint (psql) when it creates the database",
        migration: true,
        opt_out: None,
        called: None,
        recognise: |p| {
            (p.folder(1) == "docker-entrypoint-initdb.d" || p.init.puts(p.path))
                .then_some(Found::Default)
        },
    },
    Tool {
        name: "migration",
        recognised: "a versioned name (`<number>_<name>.sql`, `<date>-<name>.sql`) in a folder named like `migrations`; the tool is not recognised",
        mode: SqlMode::Script,
        runs: "as a psql script, as txlint cannot tell how the tool runs it",
        migration: true,
        opt_out: None,
        called: None,
        recognise: |p| {
            let folders = [p.folder(1), p.folder(2)];
            (versioned(p.name) && folders.iter().any(|f| f.contains("migrat")))
                .then_some(Found::Default)
        },
    },
];

/// What the tests of [`TOOLS`] read of a file.
struct Probe<'a> {
    path: &'a Path,
    name: &'a str,
    text: &'a str,
    /// The first non-empty line, trimmed.
    first: &'a str,
    sqlc: &'a Sqlc,
    init: &'a ImageInit,
}

impl Probe<'_> {
    /// A cheap test before the line passes: most files have none of the markers.
    fn has(&self, marker: &str) -> bool {
        self.text.contains(marker)
    }

    fn any_line(&self, test: impl Fn(&str) -> bool) -> bool {
        self.text.lines().map(str::trim).any(test)
    }

    /// The name of the folder `up` levels above the file (1: its own folder), lower case.
    fn folder(&self, up: usize) -> String {
        self.path
            .ancestors()
            .nth(up)
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_ascii_lowercase()
    }

    fn beside(&self, file: &str) -> bool {
        self.path.parent().is_some_and(|d| d.join(file).is_file())
    }

    fn above(&self, file: &str) -> bool {
        self.path
            .ancestors()
            .skip(2)
            .any(|d| d.join(file).is_file())
    }

    /// The manifest of the nearest project around the file's folder: a Rust crate, a Go
    /// module, a Node package, ... (a monorepo's Go service inside a Rust workspace is Go).
    fn project(&self) -> Option<&'static str> {
        const MANIFESTS: [&str; 6] = [
            "Cargo.toml",
            "go.mod",
            "package.json",
            "pyproject.toml",
            "Gemfile",
            "mix.exs",
        ];
        self.path
            .ancestors()
            .skip(2)
            .find_map(|d| MANIFESTS.into_iter().find(|m| d.join(m).is_file()))
    }

    fn opted_out(&self, out: bool) -> Found {
        if out { Found::OptedOut } else { Found::Default }
    }
}

/// The runner of the `.sql` file at `path` (as found on disk) with text `text`.
pub fn detect(path: &Path, text: &str, sqlc: &Sqlc, init: &ImageInit) -> Option<Detected> {
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let probe = Probe {
        path,
        name: path.file_name()?.to_str()?,
        text,
        first,
        sqlc,
        init,
    };
    TOOLS.iter().find_map(|tool| {
        let found = (tool.recognise)(&probe)?;
        let (evidence, mode, runs) = match found {
            Found::Default => (tool.recognised, tool.mode, tool.runs),
            Found::OptedOut => (
                tool.opt_out.unwrap_or(tool.recognised),
                SqlMode::Script,
                "this file outside a transaction, as a script",
            ),
        };
        Some(Detected {
            runner: Runner {
                name: tool.name,
                evidence,
                runs,
                migration: tool.migration,
                called: tool.called,
            },
            mode,
        })
    })
}

/// The evidence a script itself gives: PostgreSQL refuses `LOCK TABLE` outside a transaction
/// block (25P01), so a top-level `LOCK TABLE` proves that whatever runs the file (a tool txlint
/// recognised as running it without one, or none it recognised) runs it in one.
pub fn wrapped_by_lock_table(detected: Option<Detected>) -> Detected {
    Detected {
        runner: Runner {
            name: detected.map_or("migration runner", |d| d.runner.name),
            evidence: "a top-level `LOCK TABLE`, which PostgreSQL refuses outside a transaction block (25P01)",
            runs: "this file in a transaction",
            migration: detected.is_none_or(|d| d.runner.migration),
            called: detected.and_then(|d| d.runner.called),
        },
        mode: SqlMode::Transaction,
    }
}

/// `<digits>_<name>`, `<digits>-<name>`, `<date>_<name>` (`2020-06-30-135809_views`): a
/// migration's version first.
fn versioned(name: &str) -> bool {
    let digits = name.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &name[digits..];
    if digits >= 8 {
        // A timestamp or a date, possibly in parts: `2020-06-30-135809_x`, `20240101120000_x`.
        return rest.starts_with(['_', '-', '.']) || rest.is_empty();
    }
    digits > 0 && rest.starts_with(['_', '-']) && rest.len() > 1
}

/// Flyway's names: `V1__init.sql`, `V1.2_3__x.sql`, `U1__undo.sql`, `R__views.sql`.
fn flyway(name: &str) -> bool {
    if let Some(rest) = name.strip_prefix("R__") {
        return rest.len() > ".sql".len();
    }
    let Some(rest) = name.strip_prefix('V').or_else(|| name.strip_prefix('U')) else {
        return false;
    };
    let Some((version, _)) = rest.split_once("__") else {
        return false;
    };
    !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == '_')
}

/// `-- +goose Up`, `-- +goose NO TRANSACTION`: goose's annotations, case aside.
fn goose(line: &str, what: &str) -> bool {
    line.strip_prefix("--")
        .map(str::trim_start)
        .and_then(|l| l.strip_prefix("+goose"))
        .is_some_and(|l| l.trim().eq_ignore_ascii_case(what))
}

/// `-- name: GetAuthor :one` (sqlc's query annotation).
fn is_sqlc_annotation(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("--") else {
        return false;
    };
    let Some(rest) = rest.trim_start().strip_prefix("name:") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    let (Some(_), Some(kind)) = (words.next(), words.next()) else {
        return false;
    };
    matches!(
        kind,
        ":one"
            | ":many"
            | ":exec"
            | ":execrows"
            | ":execresult"
            | ":execlastid"
            | ":batchexec"
            | ":batchmany"
            | ":batchone"
            | ":copyfrom"
    )
}

/// `-- name: get-user` (yesql and its ports: one identifier, nothing after it but an optional
/// `$`/`!`/`<!` suffix of aiosql), `-- :name get-user :? :1` (HugSQL).
fn is_named_query(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("--").map(str::trim_start) else {
        return false;
    };
    if let Some(rest) = rest.strip_prefix(":name ") {
        return !rest.trim().is_empty();
    }
    let Some(rest) = rest.strip_prefix("name:") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    let ident = |w: &str| {
        let w = w.trim_end_matches(['$', '!', '<', '*', '#', '^']);
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    };
    words.next().is_some_and(ident) && words.next().is_none()
}

#[cfg(test)]
mod tests;
