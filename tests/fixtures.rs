//! `fixtures/<rule>/*.sql|*.rs` carry their expectations inline: `-- expect: <rule>[, <rule>]`
//! (or `// expect:`) on the line where each diagnostic starts. Files named `valid_*` must give
//! nothing. The exact set of (file, line, rule) is compared, and the rendered text output is
//! compared with `<file>.snap` (`TXLINT_BLESS=1 cargo test --test fixtures` rewrites the
//! snapshots after a deliberate change; review them before committing).
//! `-- fixture-config: <toml line>` lines form the config. A folder inside a rule's fixtures is
//! one run over all its files, subfolders included (findings across files, migrations laid out
//! as their tools lay them out), with its snapshot in `<folder>.snap`; a folder named `valid_*`
//! must give nothing.

use std::path::{Path, PathBuf};

use txlint::config::Config;
use txlint::report::TextStyle;

fn is_source(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "sql" || e == "rs")
}

/// Each case: the files linted together, and where its snapshot lives.
fn cases() -> Vec<(Vec<PathBuf>, PathBuf)> {
    let mut cases = Vec::new();
    for dir in std::fs::read_dir("fixtures").expect("fixtures/") {
        let dir = dir.expect("entry").path();
        for f in std::fs::read_dir(&dir).expect("fixture folder") {
            let f = f.expect("entry").path();
            if f.is_dir() {
                let mut files = Vec::new();
                sources_below(&f, &mut files);
                files.sort();
                cases.push((files, PathBuf::from(format!("{}.snap", f.display()))));
            } else if is_source(&f) {
                let snap = PathBuf::from(format!("{}.snap", f.display()));
                cases.push((vec![f], snap));
            }
        }
    }
    cases.sort();
    cases
}

fn sources_below(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("fixture folder") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources_below(&p, out);
        } else if is_source(&p) {
            out.push(p);
        }
    }
}

/// (file, line, rule) written in the files.
fn expectations(files: &[(String, String)]) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    for (name, text) in files {
        for (n, line) in text.lines().enumerate() {
            if let Some(at) = line
                .find("-- expect: ")
                .or_else(|| line.find("// expect: "))
            {
                for rule in line[at + 11..].split(',') {
                    out.push((name.clone(), n + 1, rule.trim().to_string()));
                }
            }
        }
    }
    out.sort();
    out
}

fn config(files: &[(String, String)]) -> Config {
    let toml: String = files
        .iter()
        .flat_map(|(_, t)| t.lines())
        .filter_map(|l| {
            l.strip_prefix("-- fixture-config: ")
                .or_else(|| l.strip_prefix("// fixture-config: "))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    Config::parse(&toml).expect("fixture config")
}

fn check(paths: &[PathBuf], snap: &Path) -> Result<(), String> {
    let texts: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
            Ok((
                p.to_string_lossy().replace('\\', "/"),
                String::from_utf8_lossy(&bytes).into_owned(),
            ))
        })
        .collect::<Result<_, String>>()?;
    let name = snap.display().to_string();
    let run = txlint::check_paths(paths, &std::env::current_dir().unwrap(), &config(&texts));
    let mut got: Vec<(String, usize, String)> = run
        .diagnostics
        .iter()
        .map(|d| {
            let f = &run.program.files[d.span.file];
            (
                f.display.clone(),
                f.line_col(d.span.start()).line,
                d.rule.to_string(),
            )
        })
        .collect();
    got.sort();
    let want = expectations(&texts);
    let valid_name = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("valid_"))
    };
    let case_folder = snap.with_extension("");
    let valid =
        (case_folder.is_dir() && valid_name(&case_folder)) || paths.iter().all(|p| valid_name(p));
    if valid && !want.is_empty() {
        return Err(format!("{name}: a valid_ fixture cannot expect findings"));
    }
    if !valid && want.is_empty() {
        return Err(format!("{name}: expects nothing; name it valid_*"));
    }
    if got != want {
        let messages: Vec<_> = run
            .diagnostics
            .iter()
            .map(|d| {
                let f = &run.program.files[d.span.file];
                format!(
                    "  {}:{}: {}: {}",
                    f.display,
                    f.line_col(d.span.start()).line,
                    d.rule,
                    d.message
                )
            })
            .collect();
        return Err(format!(
            "{name}:\n expected {want:?}\n      got {got:?}\n{}",
            messages.join("\n")
        ));
    }
    for d in &run.diagnostics {
        let first = d.message.chars().next().unwrap_or('x');
        if first.is_uppercase() || d.message.ends_with('.') {
            return Err(format!(
                "{name}: message must start lower-case and not end with a period: {}",
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
    if std::env::var_os("TXLINT_BLESS").is_some() {
        std::fs::write(snap, &rendered).map_err(|e| e.to_string())?;
    } else {
        let want = std::fs::read_to_string(snap).map_err(|_| {
            format!("{name}: missing snapshot; run with TXLINT_BLESS=1 and review it")
        })?;
        if want != rendered {
            return Err(format!("{name}: rendered output differs:\n{rendered}"));
        }
    }
    Ok(())
}

/// One test per case, named by its rule and file (`cargo test --test fixtures lost-update`),
/// and one that no snapshot is left without its fixture.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let cases = cases();
    assert!(cases.len() >= 8, "only {} fixtures", cases.len());
    let mut trials: Vec<libtest_mimic::Trial> = cases
        .into_iter()
        .map(|(files, snap)| {
            let name = snap
                .with_extension("")
                .strip_prefix("fixtures")
                .unwrap_or(&snap)
                .to_string_lossy()
                .trim_start_matches('/')
                .replace('\\', "/");
            libtest_mimic::Trial::test(name, move || check(&files, &snap).map_err(Into::into))
        })
        .collect();
    trials.push(libtest_mimic::Trial::test("no_stale_snapshots", || {
        no_stale_snapshots().map_err(Into::into)
    }));
    trials.push(libtest_mimic::Trial::test(
        "every_finding_has_a_witness_or_a_reason",
        || {
            every_finding_has_a_witness_or_a_reason();
            Ok(())
        },
    ));
    libtest_mimic::run(&args, trials).exit();
}

fn no_stale_snapshots() -> Result<(), String> {
    for dir in std::fs::read_dir("fixtures").map_err(|e| e.to_string())? {
        let dir = dir.map_err(|e| e.to_string())?.path();
        for f in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let f = f.map_err(|e| e.to_string())?.path();
            if f.extension().is_some_and(|e| e == "snap") && !f.with_extension("").exists() {
                return Err(format!("{} has no fixture", f.display()));
            }
        }
    }
    Ok(())
}

/// A witness replays the statements its finding names as the race's subject (a routine's by
/// calling it; a session lock is shown by calls of its own).
fn replays_its_subject(
    program: &txlint::model::Program,
    d: &txlint::diagnostic::Diagnostic,
    w: &txlint::witness::Witness,
) {
    use txlint::diagnostic::Race;
    let subject = d
        .subject
        .as_ref()
        .expect("a witnessed finding has a subject");
    if subject.race == Race::SessionLockOnPool {
        return;
    }
    for r in &subject.steps {
        let unit = program.units.iter().find(|u| u.span == r.unit).unwrap();
        let step = unit
            .transactions
            .iter()
            .flat_map(|t| &t.steps)
            .find(|s| s.seq == r.seq)
            .unwrap();
        // A routine's statements are replayed by calling it.
        if let (Some(name), txlint::model::UnitKind::Routine) = (unit.name.as_deref(), unit.kind) {
            let name = name.rsplit('.').next().unwrap();
            assert!(w.steps.iter().any(|s| s.sql.contains(name)), "{w:#?}");
            continue;
        }
        let text = &program.files[step.span.file].text()[step.span.start()..step.span.end()];
        let head = text.lines().next().unwrap().trim().trim_end_matches(';');
        assert!(
            w.steps.iter().any(|s| s.sql.contains(head)),
            "{}: `{head}` is not replayed: {w:#?}",
            w.at
        );
    }
}

/// Every finding of every fixture gets a witness or says what is missing, without a panic;
/// each witness has steps on two sessions and what to look for (`tests/truth` runs them).
fn every_finding_has_a_witness_or_a_reason() {
    let (mut written, mut missing) = (0, 0);
    for (paths, _) in cases() {
        let texts: Vec<(String, String)> = paths
            .iter()
            .map(|p| {
                let bytes = std::fs::read(p).unwrap();
                (
                    p.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                )
            })
            .collect();
        let cwd = std::env::current_dir().unwrap();
        let run = txlint::check_paths(&paths, &cwd, &config(&texts));
        for d in &run.diagnostics {
            let core = txlint::registry::find(d.rule).is_some_and(|r| r.core);
            if !core {
                continue;
            }
            match txlint::witness::witness(&run.program, d) {
                Ok(w) => {
                    written += 1;
                    let sessions: std::collections::BTreeSet<char> =
                        w.steps.iter().map(|s| s.session).collect();
                    assert!(sessions.len() >= 2, "{}: {w:#?}", w.at);
                    assert!(!w.look_for.is_empty(), "{}", w.at);
                    replays_its_subject(&run.program, d, &w);
                }
                Err(why) => {
                    missing += 1;
                    assert!(why.contains(':'), "the reason names the place: {why}");
                }
            }
        }
    }
    eprintln!("witnesses: {written} written, {missing} missing");
    assert!(
        written >= 10 && missing >= 10,
        "{written} written, {missing} missing"
    );
}
