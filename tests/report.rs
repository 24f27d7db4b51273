//! Reporters: SARIF validates against the 2.1.0 schema and carries what code scanning needs;
//! JSON positions are exact; the text report names rule, file and line.

use serde_json::Value;
use txlint::config::Config;
use txlint::report::{self, Format, TextStyle};

const SQL: &str = "\
SELECT 'é', pg_advisory_xact_lock(42);
BEGIN;
SAVEPOINT s;
SELECT pg_advisory_xact_lock(1);
ROLLBACK TO SAVEPOINT s;
UPDATE jobs SET state = 'x' WHERE id = 1;
COMMIT;
SELECT * FROM t WHERE;
";

fn run() -> txlint::Run {
    let file = txlint::source::SourceFile::new(
        "db/my jobs.sql".into(),
        "db/my jobs.sql".into(),
        SQL.into(),
    );
    txlint::check_files(vec![file], &Config::default())
}

const STYLE: TextStyle = TextStyle {
    color: false,
    width: 100,
};

fn sarif_schema() -> Value {
    let text = std::fs::read_to_string("../shared/schemas/sarif-2.1.0.schema.json")
        .expect("../shared/schemas/sarif-2.1.0.schema.json");
    let mut schema: Value = serde_json::from_str(&text).expect("schema JSON");
    // The published schema's `language` patterns (run, toolComponent) have a stray `]` that
    // regex engines reject; strip every copy of that one pattern.
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                if map
                    .get("pattern")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.ends_with("]?$") && p.contains("[a-zA-Z]{2}"))
                {
                    map.remove("pattern");
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut schema);
    schema
}

#[test]
fn sarif_validates_against_the_schema() {
    let run = run();
    assert_eq!(run.diagnostics.len(), 3, "{:#?}", run.diagnostics);
    let sarif: Value = serde_json::from_str(&report::render(&run, Format::Sarif, STYLE)).unwrap();
    let schema = sarif_schema();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    // An invalid document is caught, so the validation above means something.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!validator.is_valid(&broken));
}

#[test]
fn sarif_has_what_code_scanning_needs() {
    let sarif: Value = serde_json::from_str(&report::render(&run(), Format::Sarif, STYLE)).unwrap();
    let run0 = &sarif["runs"][0];
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(run0["columnKind"], "unicodeCodePoints");
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), txlint::registry::ALL.len());
    for r in rules {
        for key in ["shortDescription", "fullDescription"] {
            let text = r[key]["text"].as_str().unwrap();
            assert!(!text.is_empty() && text.len() <= 1024, "{}: {key}", r["id"]);
        }
        let help = r["help"]["text"].as_str().unwrap();
        assert!(!help.is_empty());
        // The documentation tests' block markers are not shown to users.
        assert!(
            !help.contains("expect_diagnostic") && !help.contains(",mode="),
            "{}",
            r["id"]
        );
        // Links work outside the repository: to the rule's page, and none relative.
        assert!(!help.contains("](../"), "{}", r["id"]);
        let uri = r["helpUri"].as_str().unwrap();
        let page = format!("/blob/main/rules/{}.md", r["id"].as_str().unwrap());
        assert!(uri.starts_with("https://") && uri.ends_with(&page), "{uri}");
        // A name distinct from the id, as SARIF viewers show it.
        assert_ne!(r["name"], r["id"]);
    }
    assert!(
        run0["tool"]["driver"]["informationUri"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://"))
    );
    let results = run0["results"].as_array().unwrap();
    let first = &results[0];
    assert_eq!(first["ruleId"], "xact-lock-outside-transaction");
    assert_eq!(
        rules[first["ruleIndex"].as_u64().unwrap() as usize]["id"],
        first["ruleId"]
    );
    let loc = &first["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "db/my%20jobs.sql");
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    // `é` is one code point: the call starts at column 13, ends (exclusive) at column 38.
    assert_eq!(loc["region"]["startLine"], 1);
    assert_eq!(loc["region"]["startColumn"], 13);
    assert_eq!(loc["region"]["endLine"], 1);
    assert_eq!(loc["region"]["endColumn"], 38);
    // The savepoint finding carries its labels as related locations.
    let sp = results
        .iter()
        .find(|r| r["locations"][0]["physicalLocation"]["region"]["startLine"] == 5)
        .unwrap();
    assert_eq!(sp["relatedLocations"].as_array().unwrap().len(), 2);
    assert_eq!(
        sp["relatedLocations"][0]["physicalLocation"]["region"]["startLine"],
        4
    );
    // What txlint could not parse is a note, for its rule and its result.
    let syntax = results
        .iter()
        .find(|r| r["ruleId"] == "syntax-error")
        .unwrap();
    assert_eq!(syntax["level"], "note");
    let rule = rules.iter().find(|r| r["id"] == "syntax-error").unwrap();
    assert_eq!(rule["defaultConfiguration"]["level"], "note");
    // Fingerprints are present and distinct.
    let prints: Vec<&str> = results
        .iter()
        .map(|r| r["partialFingerprints"]["txlint/v1"].as_str().unwrap())
        .collect();
    let mut unique = prints.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), prints.len());
    // ... and stable across runs.
    let again: Value = serde_json::from_str(&report::render(&run(), Format::Sarif, STYLE)).unwrap();
    assert_eq!(
        again["runs"][0]["results"][0]["partialFingerprints"],
        first["partialFingerprints"]
    );
}

#[test]
fn json_positions_and_schema() {
    let json: Value = serde_json::from_str(&report::render(&run(), Format::Json, STYLE)).unwrap();
    assert_eq!(json["version"], 1);
    let d = &json["diagnostics"][0];
    assert_eq!(d["rule"], "xact-lock-outside-transaction");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["path"], "db/my jobs.sql");
    // Columns count code points, offsets count bytes (`é` is two bytes).
    assert_eq!(
        d["start"],
        serde_json::json!({"line": 1, "column": 13, "offset": 13})
    );
    assert_eq!(
        d["end"],
        serde_json::json!({"line": 1, "column": 38, "offset": 38})
    );
    assert!(d["help"].as_str().unwrap().contains("BEGIN"));
    let sp = &json["diagnostics"][1];
    assert_eq!(sp["labels"][1]["message"], "runs without the lock");
    assert_eq!(sp["labels"][1]["start"]["line"], 6);
    let syntax = &json["diagnostics"][2];
    assert_eq!(syntax["rule"], "syntax-error");
    // txlint's own limit: an info note by default, which fails no run.
    assert_eq!(syntax["severity"], "info");
    assert_eq!(syntax["start"]["line"], 8);
    assert_eq!(json["summary"]["errors"], 2);
    assert_eq!(json["summary"]["warnings"], 0);
    assert_eq!(json["summary"]["infos"], 1);
    // Only the `UPDATE` gives sqlparser's tree anything to add; the `SELECT .. WHERE;` fails.
    assert_eq!(json["summary"]["parsed"], 1);
    assert_eq!(json["summary"]["fallback"], 7);
    assert_eq!(json["summary"]["files"], 1);
}

#[test]
fn text_names_rule_file_and_line() {
    let text = report::render(&run(), Format::Text, STYLE);
    assert!(text.contains("xact-lock-outside-transaction"));
    assert!(text.contains("[db/my jobs.sql:1:13]"), "{text}");
    assert!(text.contains("[db/my jobs.sql:5:1]"), "{text}");
    assert!(text.contains("help:"));
    assert!(
        !text.contains('\u{1b}'),
        "no colour codes when colour is off"
    );
    let last = text.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("checked 1 file, 8 statements (1 parsed, 7 read from tokens only) in "),
        "{last}"
    );
    assert!(
        last.ends_with(": 2 errors, 0 warnings (1 info note)"),
        "{last}"
    );
}

/// SARIF from the binary run on files outside its working folder: every URI is relative to
/// `%SRCROOT%` (declared in `originalUriBaseIds`), the document validates, and past 25,000
/// results the most severe are kept and the run says how many were left out.
#[test]
fn sarif_outside_the_working_folder_is_relative_and_capped() {
    let base = std::env::temp_dir().join(format!("txlint-sarif-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (work, data) = (base.join("work"), base.join("elsewhere/db"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    // 25,010 errors and one warning (a suppression that suppresses nothing).
    let many = "SELECT pg_advisory_xact_lock(1);\n".repeat(25_010);
    std::fs::write(data.join("many.sql"), many).unwrap();
    std::fs::write(
        data.join("warn.sql"),
        "-- txlint: ignore lost-update\nSELECT 1;\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_txlint"))
        .args(["check", "--format", "sarif"])
        .arg(&data)
        .current_dir(&work)
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF");
    let run0 = &sarif["runs"][0];
    let root = run0["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert!(
        root.starts_with("file:///") && root.ends_with('/'),
        "{root}"
    );
    let results = run0["results"].as_array().unwrap();
    assert_eq!(results.len(), 25_000);
    for r in results.iter().take(3).chain(results.last()) {
        let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap();
        assert!(
            !uri.starts_with('/') && !uri.contains(':') && !uri.contains(".."),
            "{uri}"
        );
        assert!(uri.ends_with("elsewhere/db/many.sql"), "{uri}");
    }
    // The warning went; errors were kept.
    assert!(results.iter().all(|r| r["level"] == "error"));
    let note = &run0["invocations"][0]["toolExecutionNotifications"][0];
    assert!(
        note["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("11 results were left out"),
        "{note}"
    );
    let validator = jsonschema::validator_for(&sarif_schema()).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .take(5)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let _ = std::fs::remove_dir_all(&base);
}
