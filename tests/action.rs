//! `action.yml`'s lint step as GitHub's runner runs it: its `run:` script in bash, with the
//! inputs as environment variables and the built binary on PATH.

use std::path::Path;
use std::process::Command;

/// The `run: |` script of the step with `id: lint`, unindented.
fn lint_script() -> String {
    script("lint")
}

/// The `run: |` script of the step with this `id`, unindented.
fn script(id: &str) -> String {
    let action = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/action.yml"))
        .expect("action.yml");
    let mut lines = action
        .lines()
        .skip_while(|l| l.trim() != format!("id: {id}"));
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

/// The install step as the runner runs it, in `dir` (its `RUNNER_TEMP`) with `releases` as the
/// download address and `cargo` on PATH a stub that records its arguments: what it printed, the
/// folder it put on `GITHUB_PATH`, and the stub's record.
fn install_step(dir: &Path, releases: &str) -> (String, String, String) {
    let stub = dir.join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    let record = dir.join("cargo-args");
    let cargo = stub.join("cargo");
    std::fs::write(
        &cargo,
        format!("#!/bin/sh\necho \"$@\" >> {}\n", record.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let github_path = dir.join("github-path");
    let o = Command::new("bash")
        .arg("-c")
        .arg(script("install"))
        .current_dir(dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                stub.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("GITHUB_ACTION_PATH", env!("CARGO_MANIFEST_DIR"))
        .env("GITHUB_PATH", &github_path)
        .env("RUNNER_TEMP", dir)
        .env("RUNNER_OS", "Linux")
        .env("RUNNER_ARCH", "X64")
        .env("TXLINT_REPOSITORY", "")
        .env("TXLINT_RELEASES", releases)
        .output()
        .expect("bash");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        std::fs::read_to_string(&github_path).unwrap_or_default(),
        std::fs::read_to_string(&record).unwrap_or_default(),
    )
}

/// With a release binary for the runner at the action's version, the install step downloads it
/// and puts it on PATH without building; with none, it says so and builds from the action's
/// source with `cargo install --locked`.
#[test]
fn the_install_step_downloads_the_release_binary_or_builds() {
    let dir = std::env::temp_dir().join(format!("txlint-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let version = env!("CARGO_PKG_VERSION");
    let release = dir.join("releases").join(format!("v{version}"));
    std::fs::create_dir_all(&release).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_txlint"));
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(release.join("txlint-x86_64-unknown-linux-gnu.tar.gz"))
        .arg("-C")
        .arg(bin.parent().unwrap())
        .arg("txlint")
        .status()
        .expect("tar");
    assert!(tar.success());
    let releases = format!("file://{}", dir.join("releases").display());
    let (printed, path, cargo) = install_step(&dir, &releases);
    assert!(printed.contains(&format!("txlint {version}")), "{printed}");
    assert!(printed.contains("downloaded file://"), "{printed}");
    assert!(
        cargo.is_empty(),
        "built although a binary was there: {cargo}"
    );
    let installed = Path::new(path.trim()).join("txlint");
    let o = Command::new(&installed).arg("--version").output().unwrap();
    assert!(o.status.success(), "{}", installed.display());
    // No release of this version: built from source.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let empty = format!("file://{}", dir.join("none").display());
    let (printed, path, cargo) = install_step(&dir, &empty);
    assert!(
        printed.contains("no release binary at file://"),
        "{printed}"
    );
    assert!(printed.contains("built from"), "{printed}");
    assert!(cargo.starts_with("install --locked"), "{cargo}");
    assert!(
        cargo.contains(&format!("--path {}", env!("CARGO_MANIFEST_DIR"))),
        "{cargo}"
    );
    assert!(path.trim().ends_with("txlint-build/bin"), "{path}");
    let _ = std::fs::remove_dir_all(&dir);
}
