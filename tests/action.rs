//! `action.yml`'s lint step as GitHub's runner runs it: its `run:` script in bash, with the
//! inputs as environment variables and the built binary on PATH.

use std::path::Path;
use std::process::Command;

/// The `run: |` script of the step with `id: lint`, unindented.
fn lint_script() -> String {
    let action = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/action.yml"))
        .expect("action.yml");
    let mut lines = action.lines().skip_while(|l| l.trim() != "id: lint");
    let run = lines
        .by_ref()
        .find(|l| l.trim() == "run: |")
        .expect("the lint step's script");
    let indent = run.len() - run.trim_start().len() + 2;
    lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() >= indent)
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The script run in `dir` with these inputs: what it printed, and the `status` it put out.
fn run_step(dir: &Path, paths: &str, args: &str) -> (String, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_txlint")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output_file = dir.join("github-output");
    let _ = std::fs::remove_file(&output_file);
    let o = Command::new("bash")
        .arg("-c")
        .arg(lint_script())
        .current_dir(dir)
        .env("PATH", path)
        .env("TXLINT_PATHS", paths)
        .env("TXLINT_CONFIG", "")
        .env("TXLINT_FAIL_ON", "warning")
        .env("TXLINT_ARGS", args)
        .env("GITHUB_OUTPUT", &output_file)
        .output()
        .expect("bash");
    let outputs = std::fs::read_to_string(&output_file).unwrap_or_default();
    (String::from_utf8_lossy(&o.stdout).into_owned(), outputs)
}

#[test]
fn the_lint_step_writes_sarif_annotations_and_status_or_says_why_not() {
    let dir = std::env::temp_dir().join(format!("txlint-action-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.sql"), "SELECT pg_advisory_xact_lock(1);\n").unwrap();
    let (printed, outputs) = run_step(&dir, ".", "");
    assert!(printed.contains("::error file=a.sql,line=1"), "{printed}");
    assert_eq!(outputs.trim(), "status=1");
    assert!(dir.join("txlint.sarif").is_file());
    // Extra arguments reach both runs: nothing selected, nothing found.
    std::fs::remove_file(dir.join("txlint.sarif")).unwrap();
    let (printed, outputs) = run_step(&dir, ".", "--select lost-update");
    assert!(!printed.contains("::error file="), "{printed}");
    assert_eq!(outputs.trim(), "status=0");
    // A broken configuration: no report to upload, and an annotation that says so.
    std::fs::remove_file(dir.join("txlint.sarif")).unwrap();
    std::fs::write(dir.join("txlint.toml"), "[rules\n").unwrap();
    let (printed, outputs) = run_step(&dir, ".", "");
    assert!(
        printed.contains("::error title=txlint::txlint could not lint everything (exit 2)"),
        "{printed}"
    );
    assert_eq!(outputs.trim(), "status=2");
    assert!(!dir.join("txlint.sarif").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
