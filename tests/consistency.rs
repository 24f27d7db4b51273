//! Cheap tests that stop drift between the registry, the files and the docs.

use std::collections::BTreeSet;
use std::path::Path;

use txlint::registry::ALL;

fn names_in(dir: &str, ext: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            ext.is_empty() && p.is_dir()
                || !ext.is_empty() && p.extension().is_some_and(|e| e == ext)
        })
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_rule_has_its_files_and_nothing_else_exists() {
    let names: BTreeSet<String> = ALL.iter().map(|r| r.name.to_string()).collect();
    assert_eq!(names.len(), ALL.len(), "rule names must be unique");
    for n in &names {
        assert!(
            n.split('-')
                .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase())),
            "`{n}` is not kebab-case"
        );
    }
    assert_eq!(names_in("rules", "md"), names, "rules/*.md");
    assert_eq!(names_in("fixtures", ""), names, "fixtures/*/");
    let sources: BTreeSet<String> = names.iter().map(|n| n.replace('-', "_")).collect();
    // A rule is one file, or a folder with one file per check (clippy's `loops/`).
    let mut files = names_in("src/rules", "rs");
    files.remove("mod");
    for folder in names_in("src/rules", "") {
        assert!(
            Path::new("src/rules")
                .join(&folder)
                .join("mod.rs")
                .is_file(),
            "src/rules/{folder}/ has no mod.rs"
        );
        assert!(
            files.insert(folder.clone()),
            "{folder} is a file and a folder"
        );
    }
    assert_eq!(files, sources, "src/rules/*.rs and src/rules/*/mod.rs");
}

#[test]
fn docs_are_the_files_and_have_the_sections() {
    for r in ALL {
        let on_disk =
            std::fs::read_to_string(Path::new("rules").join(format!("{}.md", r.name))).unwrap();
        assert_eq!(on_disk, r.doc);
        assert!(
            r.doc.starts_with(&format!("# {}\n", r.name)),
            "{}: title",
            r.name
        );
        let summary = r.summary();
        assert!(
            !summary.is_empty() && summary.len() <= 1024,
            "{}: summary",
            r.name
        );
        let mut at = 0;
        for section in [
            "What it does",
            "Why is this bad?",
            "Examples",
            "How to fix",
            "Options",
            "References",
        ] {
            let pos = r
                .doc
                .find(&format!("\n## {section}\n"))
                .unwrap_or_else(|| panic!("{}: no `## {section}`", r.name));
            assert!(pos > at, "{}: `## {section}` out of order", r.name);
            at = pos;
        }
    }
}

#[test]
fn rule_index_is_generated() {
    let on_disk = std::fs::read_to_string("docs/rules.md").expect("docs/rules.md");
    assert_eq!(
        on_disk,
        txlint::registry::index_markdown(),
        "regenerate with `cargo run -- rules --markdown > docs/rules.md`"
    );
}

#[test]
fn the_configuration_page_is_a_configuration_that_loads() {
    let doc = std::fs::read_to_string("docs/configuration.md").unwrap();
    let block = doc
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block in docs/configuration.md");
    let config = txlint::config::Config::parse(block)
        .unwrap_or_else(|(line, e)| panic!("docs/configuration.md block, line {line:?}: {e}"));
    assert_eq!(config.pool_mode, txlint::config::PoolMode::Session);
    assert!(!config.include_tests);
    assert_eq!(
        config.sql.mode, None,
        "the sample leaves sql.mode to txlint"
    );
    assert_eq!(config.overrides.len(), 3);
}

/// README's table of what txlint finds names every rule, each once, linked to its page.
#[test]
fn the_readme_lists_every_rule() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    for rule in ALL {
        let row = format!("| [`{0}`](rules/{0}.md) |", rule.name);
        assert_eq!(
            readme.matches(&row).count(),
            1,
            "README's rule table has no row (or several) for `{}`",
            rule.name
        );
    }
}
