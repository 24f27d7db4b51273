//! `txlint witness` on each core rule's fixtures, run on the suite's server: the script it
//! writes shows the race (the error code, the output it names, or one run's work lost).

use std::collections::HashMap;
use std::path::Path;

use txlint::config::{Config, PoolMode};
use txlint::witness::Witness;

use super::pg::{Session, server, sqlstate};

/// The witness of the finding at `path:line` (`path` under `fixtures/`, or from the top).
fn witness_at(path: &str, line: usize, config: Config) -> Witness {
    let cwd = std::env::current_dir().unwrap();
    let file = match path.starts_with("examples/") {
        true => Path::new(path).to_path_buf(),
        false => Path::new("fixtures").join(path),
    };
    let run = txlint::check_paths(&[file], &cwd, &config);
    let d = run
        .diagnostics
        .iter()
        .find(|d| run.program.files[d.span.file].line(d.span.start()) == line)
        .unwrap_or_else(|| panic!("no finding at {path}:{line}: {:#?}", run.diagnostics));
    txlint::witness::witness(&run.program, d).unwrap_or_else(|why| panic!("no witness: {why}"))
}

/// Run the witness's steps in order; the outputs, by step. `alone`: one session's steps by
/// themselves, where nothing makes a step wait.
fn drive(w: &Witness, steps: &[&txlint::witness::WitnessStep], alone: bool) -> Vec<String> {
    let db = server().database(&w.setup.join("\n"));
    let mut sessions: HashMap<char, Session> = HashMap::new();
    let mut pending: HashMap<char, usize> = HashMap::new();
    let mut out = vec![String::new(); steps.len()];
    for (i, s) in steps.iter().enumerate() {
        let session = sessions.entry(s.session).or_insert_with(|| db.session());
        if let Some(j) = pending.remove(&s.session) {
            out[j] = session.wait();
        }
        if s.waits && !alone {
            session.send(&s.sql);
            db.until_blocked(session);
            pending.insert(s.session, i);
        } else {
            out[i] = session.run(&s.sql);
        }
    }
    for (name, j) in pending {
        out[j] = sessions.get_mut(&name).unwrap().wait();
    }
    out
}

/// The race shows as the witness says.
fn shows_the_race(w: &Witness) {
    let steps: Vec<_> = w.steps.iter().collect();
    let out = drive(w, &steps, false);
    let errors: Vec<&str> = out.iter().filter_map(|o| sqlstate(o)).collect();
    let shown = txlint::witness::render(w);
    match w.error {
        Some(code) => assert_eq!(errors, [code], "{shown}\n{out:#?}"),
        None => assert!(errors.is_empty(), "no step fails:\n{shown}\n{out:#?}"),
    }
    for (s, o) in w.steps.iter().zip(&out) {
        if let Some(shows) = &s.shows {
            assert_eq!(o.lines().last().unwrap_or(""), shows, "{shown}\n{out:#?}");
        }
    }
    if w.same_as_one_run {
        let last = w.steps.last().unwrap();
        let once: Vec<_> = w
            .steps
            .iter()
            .filter(|s| s.session == 'A')
            .chain(std::iter::once(last))
            .collect();
        let alone = drive(w, &once, true);
        assert_eq!(out.last(), alone.last(), "one run's work is lost:\n{shown}");
        let setup = drive(w, &[last], true);
        assert_ne!(
            setup.last(),
            alone.last(),
            "one run changes the value:\n{shown}"
        );
    }
}

#[test]
fn witness_lost_update() {
    let w = witness_at("lost-update/script.sql", 3, Config::default());
    shows_the_race(&w);
    // In a transaction, too.
    shows_the_race(&witness_at("lost-update/script.sql", 8, Config::default()));
}

#[test]
fn witness_lock_order_inversion() {
    let w = witness_at("lock-order-inversion/advisory.sql", 4, Config::default());
    assert_eq!(w.error, Some("40P01"));
    shows_the_race(&w);
}

#[test]
fn witness_xact_lock_outside_transaction() {
    shows_the_race(&witness_at(
        "xact-lock-outside-transaction/advisory.sql",
        4,
        Config::default(),
    ));
    let rows =
        std::fs::read_to_string("fixtures/xact-lock-outside-transaction/row_locks.sql").unwrap();
    let line = rows
        .lines()
        .position(|l| l.contains("FOR UPDATE") && l.contains("expect: xact"))
        .unwrap()
        + 1;
    let script = Config {
        sql: txlint::config::SqlConfig {
            mode: Some(txlint::config::SqlMode::Script),
            ..Default::default()
        },
        ..Config::default()
    };
    shows_the_race(&witness_at(
        "xact-lock-outside-transaction/row_locks.sql",
        line,
        script,
    ));
}

/// The README's example: both of its races.
#[test]
fn witness_readme_example() {
    let w = witness_at("examples/job_queue.sql", 12, Config::default());
    assert!(
        w.steps[1]
            .sql
            .contains("pg_try_advisory_xact_lock(hashtext('jobs'))"),
        "{w:#?}"
    );
    shows_the_race(&w);
    shows_the_race(&witness_at("examples/job_queue.sql", 16, Config::default()));
}

#[test]
fn witness_session_lock_on_pool() {
    let config = Config {
        pool_mode: PoolMode::Transaction,
        ..Config::default()
    };
    shows_the_race(&witness_at("session-lock-on-pool/pgbouncer.sql", 3, config));
}

#[test]
fn witness_row_lock_predicate_gap() {
    shows_the_race(&witness_at(
        "row-lock-predicate-gap/check_then_insert.sql",
        4,
        Config::default(),
    ));
}

#[test]
fn witness_check_then_act() {
    // Get-or-create and max + 1 in a routine: the second call does not see the first one's row.
    for (path, line) in [
        ("check-then-act/get_or_create_plpgsql.sql", 11),
        ("check-then-act/plpgsql.sql", 19),
    ] {
        let w = witness_at(path, line, Config::default());
        assert!(w.steps.iter().all(|s| !s.waits), "{w:#?}");
        shows_the_race(&w);
    }
    // A claim re-checked only by key: the second call waits, then overwrites the first.
    let w = witness_at("check-then-act/rechecked_partly.sql", 6, Config::default());
    assert!(w.steps.iter().any(|s| s.waits), "{w:#?}");
    shows_the_race(&w);
}

/// Where txlint cannot write a witness, it says what is missing instead of guessing.
#[test]
fn witness_says_what_is_missing() {
    let cwd = std::env::current_dir().unwrap();
    let missing = |path: &str, line: usize| -> String {
        let run = txlint::check_paths(
            &[Path::new("fixtures").join(path)],
            &cwd,
            &Config::default(),
        );
        let d = run
            .diagnostics
            .iter()
            .find(|d| run.program.files[d.span.file].line(d.span.start()) == line)
            .unwrap();
        txlint::witness::witness(&run.program, d).expect_err("no witness")
    };
    assert!(missing("lost-update/script_with_a_bound_key.sql", 4).contains("host code"));
    // A race whose finding names no two-session schedule (an upsert's rows in input order).
    assert!(
        missing("lock-order-inversion/advisory.sql", 14)
            .contains("no witness is written for this kind of lock-order-inversion finding")
    );
    assert!(missing("lost-update/sqlx.rs", 11).contains("Rust code"));
    assert!(missing("check-then-act/plpgsql.sql", 8).contains("tells the two calls apart"));
}

/// Every witness txlint writes for a fixture's finding shows its race on the server: a witness
/// that claims a race PostgreSQL does not show would be a false proof.
#[test]
fn every_fixture_witness_shows_its_race() {
    let mut files = Vec::new();
    for dir in std::fs::read_dir("fixtures").unwrap() {
        for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "sql") {
                files.push(f);
            }
        }
    }
    files.sort();
    let cwd = std::env::current_dir().unwrap();
    let mut shown = Vec::new();
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        let toml: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("-- fixture-config: "))
            .map(|l| format!("{l}\n"))
            .collect();
        let config = Config::parse(&toml).unwrap();
        let run = txlint::check_paths(std::slice::from_ref(&f), &cwd, &config);
        for d in &run.diagnostics {
            if let Ok(w) = txlint::witness::witness(&run.program, d) {
                shows_the_race(&w);
                shown.push(w.at);
            }
        }
    }
    assert!(shown.len() >= 20, "{shown:#?}");
}

/// A race whose read runs in a trigger's body is not written as a one-body script: the witness
/// says so instead of showing a script that would not race.
#[test]
fn no_witness_through_a_trigger() {
    let cwd = std::env::current_dir().unwrap();
    let file = Path::new("fixtures/check-then-act/trigger_capacity.sql").to_path_buf();
    let run = txlint::check_paths(&[file], &cwd, &Config::default());
    let d = run
        .diagnostics
        .iter()
        .find(|d| d.rule == "check-then-act")
        .expect("the cap finding");
    let why = txlint::witness::witness(&run.program, d).expect_err("no witness");
    assert!(why.contains("runs through a call or a trigger"), "{why}");
}

/// On a schema as applications write it (a schema of its own, enum types, foreign keys, `uuid`
/// keys, `NOT NULL` columns without defaults, identity keys), the setup creates what each table
/// needs before it, gives every required column a value, and inserts the parent rows first: the
/// witness runs on an empty database and shows its race.
#[test]
fn witness_setup_on_an_application_schema() {
    let cases = [
        ("lost-update/qualified_schema.sql", 21),
        ("check-then-act/qualified_schema.sql", 23),
        ("row-lock-predicate-gap/qualified_schema.sql", 20),
        ("lock-order-inversion/qualified_schema.sql", 18),
    ];
    for (path, line) in cases {
        let w = witness_at(path, line, Config::default());
        let setup = w.setup.join("\n");
        let at = |needle: &str| {
            setup
                .find(needle)
                .unwrap_or_else(|| panic!("{path}: no `{needle}` in the setup:\n{setup}"))
        };
        // The schema before anything in it, and tables under their qualified names.
        assert_eq!(at("CREATE SCHEMA IF NOT EXISTS"), 0, "{setup}");
        assert!(!setup.contains("INSERT INTO items") && !setup.contains("INSERT INTO wallets"));
        shows_the_race(&w);
    }
    let w = witness_at("lost-update/qualified_schema.sql", 21, Config::default());
    let setup = w.setup.join("\n");
    let pos = |needle: &str| setup.find(needle).unwrap_or(usize::MAX);
    assert!(pos("CREATE TYPE billing.plan") < pos("CREATE TABLE billing.customers"));
    assert!(pos("CREATE TABLE billing.customers") < pos("CREATE TABLE billing.wallets"));
    assert!(pos("INSERT INTO billing.customers") < pos("INSERT INTO billing.wallets"));
    // The identity key is given, so the parent row overrides the system value.
    assert!(setup.contains("OVERRIDING SYSTEM VALUE"), "{setup}");
    assert!(
        setup.contains("'5d9a8f3e-1b2c-4d5e-8f90-123456789abc'"),
        "{setup}"
    );
    assert!(w.assumed.is_empty(), "{:?}", w.assumed);
    let w = witness_at("check-then-act/qualified_schema.sql", 23, Config::default());
    assert!(
        w.steps
            .iter()
            .any(|s| s.sql.starts_with("SELECT crm.invite(")),
        "{w:#?}"
    );
}
