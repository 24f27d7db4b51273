//! One finding per rule and primary span, in every output format: a helper walked in place from
//! several callers, or two cycles through one acquisition, never give two diagnostics at the
//! same place.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use txlint::config::Config;
use txlint::report::{self, Format, TextStyle};

/// A helper that leaks a session lock, called from three functions, and three transactions
/// that form two cycles through the same first acquisition.
const HELPER: &str = r#"
async fn lock_tenant(conn: &mut sqlx::pool::PoolConnection<sqlx::Postgres>, t: i64) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1)").bind(t).execute(&mut **conn).await?;
    Ok(())
}
async fn a(pool: &sqlx::PgPool) -> sqlx::Result<()> { let mut c = pool.acquire().await?; lock_tenant(&mut c, 1).await }
async fn b(pool: &sqlx::PgPool) -> sqlx::Result<()> { let mut c = pool.acquire().await?; lock_tenant(&mut c, 2).await }
async fn c(pool: &sqlx::PgPool) -> sqlx::Result<()> { let mut c = pool.acquire().await?; lock_tenant(&mut c, 3).await }
"#;

/// `c` is requested once while `a` and `b` are held: the cycles (a, c) and (b, c) both start
/// at that request.
const CYCLES: &str = "\
BEGIN; UPDATE a SET n = 1 WHERE id = 1; UPDATE b SET n = 1 WHERE id = 1; UPDATE c SET n = 1 WHERE id = 1; COMMIT;
BEGIN; UPDATE c SET n = 2 WHERE id = 1; UPDATE a SET n = 2 WHERE id = 1; COMMIT;
BEGIN; UPDATE c SET n = 3 WHERE id = 1; UPDATE b SET n = 3 WHERE id = 1; COMMIT;
";

const STYLE: TextStyle = TextStyle {
    color: false,
    width: 100,
};

fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("folder") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files_below(&p, out);
        } else if p.extension().is_some_and(|e| e == "sql" || e == "rs") {
            out.push(p);
        }
    }
}

fn assert_unique(run: &txlint::Run, what: &str) {
    let json: Value = serde_json::from_str(&report::render(run, Format::Json, STYLE)).unwrap();
    let mut seen = BTreeSet::new();
    for d in json["diagnostics"].as_array().unwrap() {
        let key = (
            d["rule"].to_string(),
            d["path"].to_string(),
            d["start"]["offset"].as_u64(),
            d["end"]["offset"].as_u64(),
        );
        assert!(seen.insert(key.clone()), "{what}: JSON repeats {key:?}");
    }
    let sarif: Value = serde_json::from_str(&report::render(run, Format::Sarif, STYLE)).unwrap();
    let mut seen = BTreeSet::new();
    for r in sarif["runs"][0]["results"].as_array().unwrap() {
        let loc = &r["locations"][0]["physicalLocation"];
        let key = (
            r["ruleId"].to_string(),
            loc["artifactLocation"]["uri"].to_string(),
            loc["region"].to_string(),
        );
        assert!(seen.insert(key.clone()), "{what}: SARIF repeats {key:?}");
    }
    let text = report::render(run, Format::Text, STYLE);
    let mut seen = BTreeSet::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        // Each finding starts with its rule name alone on a line, then its first location.
        if run.diagnostics.iter().any(|d| d.rule == *l)
            && let Some(at) = lines[i..].iter().find(|x| x.contains("╭─["))
        {
            assert!(
                seen.insert((l.to_string(), at.trim().to_string())),
                "{what}: text repeats {l} at {at}"
            );
        }
    }
    assert_eq!(
        json["diagnostics"].as_array().unwrap().len(),
        run.diagnostics.len()
    );
}

#[test]
fn a_helper_called_from_several_places_is_one_finding_with_its_callers() {
    let run = txlint::check_source("lib.rs", HELPER, &Config::default());
    let leaks: Vec<_> = run
        .diagnostics
        .iter()
        .filter(|d| d.rule == "session-lock-on-pool")
        .collect();
    assert_eq!(leaks.len(), 1, "{:#?}", run.diagnostics);
    let callers = leaks[0]
        .labels
        .iter()
        .filter(|l| l.message.starts_with("called from here"))
        .count();
    assert_eq!(callers, 3);
    assert_unique(&run, "helper");
}

#[test]
fn cycles_through_one_acquisition_are_one_finding() {
    let run = txlint::check_source("cycles.sql", CYCLES, &Config::default());
    let cycles: Vec<_> = run
        .diagnostics
        .iter()
        .filter(|d| d.rule == "lock-order-inversion")
        .collect();
    assert_eq!(cycles.len(), 1, "{:#?}", run.diagnostics);
    // The other cycle's places are labels of the one finding.
    let requested = cycles[0]
        .labels
        .iter()
        .filter(|l| l.message.starts_with("then"))
        .count();
    assert_eq!(requested, 2, "{:#?}", cycles[0].labels);
    assert_unique(&run, "cycles");
}

#[test]
fn no_fixture_repeats_a_rule_at_a_span() {
    let mut files = Vec::new();
    files_below(Path::new("fixtures"), &mut files);
    files.sort();
    let cwd = std::env::current_dir().unwrap();
    // Every fixture in one run: helpers, cycles and schemas meet across files.
    let run = txlint::check_paths(&files, &cwd, &Config::default());
    assert!(run.diagnostics.len() > 50, "{}", run.diagnostics.len());
    assert_unique(&run, "all fixtures");
}
