//! The house's layers (docs/architecture.md): the top-level modules of `src/` import one
//! another without a cycle, `io` and `registry` are at the bottom, and the rules read the model,
//! the registry and their options, nothing of how the model was built.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module (from `src/lib.rs`) and the other top-level modules its code names
/// (`crate::x`), comments left out.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    names(true)
}

/// Each top-level module and what its code names of the crate: other modules (`modules`), or
/// items of `lib.rs` itself (`!modules`).
fn names(modules_only: bool) -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string("src/lib.rs").expect("src/lib.rs");
    let modules: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))?
                .strip_suffix(';')
        })
        .map(str::to_string)
        .collect();
    let mut out = BTreeMap::new();
    for m in &modules {
        let mut names = BTreeSet::new();
        let dir = Path::new("src").join(m);
        let mut files = vec![Path::new("src").join(format!("{m}.rs"))];
        collect(&dir, &mut files);
        for f in files.iter().filter(|f| f.is_file()) {
            let text = std::fs::read_to_string(f).expect("source file");
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (at, _) in line.match_indices("crate::") {
                    let rest = &line[at + "crate::".len()..];
                    // `crate::x::..`, or each of `crate::{x, y::z}` (on one line).
                    let group = rest
                        .strip_prefix('{')
                        .map(|g| g.split('}').next().unwrap_or(g));
                    let heads: Vec<&str> = match group {
                        Some(g) => g.split(',').map(str::trim).collect(),
                        None => vec![rest],
                    };
                    for head in heads {
                        let name: String = head
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() && modules.contains(&name) == modules_only && name != *m
                        {
                            names.insert(name);
                        }
                    }
                }
            }
        }
        out.insert(m.clone(), names);
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn top_level_modules_import_one_another_without_a_cycle() {
    let graph = imports();
    // Take modules that import nothing left; whatever never leaves is on a cycle.
    let mut left = graph.clone();
    loop {
        let done: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        if done.is_empty() {
            break;
        }
        for m in done {
            left.remove(&m);
        }
    }
    assert!(left.is_empty(), "modules on an import cycle: {left:?}");
}

#[test]
fn io_and_registry_are_the_bottom() {
    let graph = imports();
    assert_eq!(graph["io"], BTreeSet::new());
    assert_eq!(graph["registry"], BTreeSet::new());
}

#[test]
fn rules_read_the_model_not_how_it_was_built() {
    let graph = imports();
    // Not the configuration: a rule gets its options in `rules::Options`. `io` is the bottom.
    let allowed = ["diagnostic", "io", "model", "registry", "source"];
    let extra: Vec<&String> = graph["rules"]
        .iter()
        .filter(|m| !allowed.contains(&m.as_str()))
        .collect();
    assert!(extra.is_empty(), "rules import {extra:?}");
}

#[test]
fn nothing_calls_up_into_lib_rs() {
    for (m, items) in names(false) {
        assert!(items.is_empty(), "{m} names {items:?} of lib.rs");
    }
    // `lib.rs` declares the modules and re-exports the pipeline's entry points.
    let lib = std::fs::read_to_string("src/lib.rs").expect("src/lib.rs");
    assert!(!lib.contains("fn "), "lib.rs defines functions");
    assert!(
        lib.contains("pub use pipeline::"),
        "lib.rs re-exports the pipeline"
    );
}
