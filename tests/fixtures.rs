//! `fixtures/<rule>/*.sql` carry their expectations inline: `-- expect: <rule>[, <rule>]` on the
//! line where each diagnostic starts. Files named `valid_*` must give nothing. The exact set of
//! (line, rule) pairs is compared (`// expect:` and `.rs` fixtures alike), and the rendered text output is compared with `<file>.snap`
//! (`TXLINT_BLESS=1 cargo test --test fixtures` rewrites the snapshots after a deliberate change;
//! review them before committing). `-- fixture-config: <toml line>` lines form the config.

use std::path::{Path, PathBuf};

use txlint::config::Config;
use txlint::report::TextStyle;
use txlint::source::SourceFile;

fn fixture_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in std::fs::read_dir("fixtures").expect("fixtures/") {
        let dir = dir.expect("entry").path();
        for f in std::fs::read_dir(&dir).expect("fixture folder") {
            let f = f.expect("entry").path();
            if f.extension().is_some_and(|e| e == "sql" || e == "rs") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

/// (line, rule) pairs written in the file.
fn expectations(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(at) = line
            .find("-- expect: ")
            .or_else(|| line.find("// expect: "))
        {
            for rule in line[at + 11..].split(',') {
                out.push((n + 1, rule.trim().to_string()));
            }
        }
    }
    out.sort();
    out
}

fn config(text: &str) -> Config {
    let toml: String = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("-- fixture-config: ")
                .or_else(|| l.strip_prefix("// fixture-config: "))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    Config::parse(&toml).expect("fixture config")
}

fn check(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let display = path.to_string_lossy().replace('\\', "/");
    let run = txlint::check_paths(
        &[path.to_path_buf()],
        &std::env::current_dir().unwrap(),
        &config(&text),
    );
    let file: &SourceFile = &run.program.files[0];
    assert_eq!(file.display, display);
    let mut got: Vec<(usize, String)> = run
        .diagnostics
        .iter()
        .map(|d| (file.line_col(d.span.start).line, d.rule.to_string()))
        .collect();
    got.sort();
    let want = expectations(&text);
    let name = path.file_name().unwrap().to_string_lossy();
    if name.starts_with("valid_") && !want.is_empty() {
        return Err(format!(
            "{display}: a valid_ fixture cannot expect findings"
        ));
    }
    if !name.starts_with("valid_") && want.is_empty() {
        return Err(format!("{display}: expects nothing; name it valid_*"));
    }
    if got != want {
        let messages: Vec<_> = run
            .diagnostics
            .iter()
            .map(|d| {
                format!(
                    "  {}: {}: {}",
                    file.line_col(d.span.start).line,
                    d.rule,
                    d.message
                )
            })
            .collect();
        return Err(format!(
            "{display}:\n expected {want:?}\n      got {got:?}\n{}",
            messages.join("\n")
        ));
    }
    for d in &run.diagnostics {
        let first = d.message.chars().next().unwrap_or('x');
        if first.is_uppercase() || d.message.ends_with('.') {
            return Err(format!(
                "{display}: message must start lower-case and not end with a period: {}",
                d.message
            ));
        }
    }
    let rendered = txlint::report::text::render_findings(
        &run,
        TextStyle {
            color: false,
            width: 100,
        },
    );
    let snap = PathBuf::from(format!("{}.snap", path.display()));
    if std::env::var_os("TXLINT_BLESS").is_some() {
        std::fs::write(&snap, &rendered).map_err(|e| e.to_string())?;
    } else {
        let want = std::fs::read_to_string(&snap).map_err(|_| {
            format!(
                "{}: missing snapshot; run with TXLINT_BLESS=1 and review it",
                snap.display()
            )
        })?;
        if want != rendered {
            return Err(format!(
                "{}: rendered output differs:\n{rendered}",
                snap.display()
            ));
        }
    }
    Ok(())
}

#[test]
fn fixtures() {
    let files = fixture_files();
    assert!(files.len() >= 8, "only {} fixtures", files.len());
    let errors: Vec<String> = files.iter().filter_map(|f| check(f).err()).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

#[test]
fn no_stale_snapshots() {
    for dir in std::fs::read_dir("fixtures").unwrap() {
        for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "snap") {
                assert!(
                    f.with_extension("").exists(),
                    "{} has no fixture",
                    f.display()
                );
            }
        }
    }
}
