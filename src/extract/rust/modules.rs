//! Rust files no crate compiles: a file under a package's `src/` that is not a target's root
//! and that no `mod` of its workspace declares (nor a `#[path]`, an `include!` or the manifest
//! names) is left out of the build, however much SQL it holds (a module its authors stopped
//! declaring). Its functions are code nothing runs.
//!
//! Rust files only tests compile: a module every declaration of which is under a test
//! configuration (`#[cfg(test)] mod tests;`, `#[cfg(feature = "test-utils")] pub mod
//! fixtures;`), with the files below it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What the Rust files of one workspace declare, read from their text (every file, also
/// those the pre-scan leaves unparsed: a `mod.rs` often holds nothing but declarations).
#[derive(Default)]
pub(super) struct Modules {
    /// `mod name;` items (in a comment too: a declaration seen by mistake only keeps a file).
    declared: HashSet<String>,
    /// Those of `declared` declared under a test configuration, and those declared without.
    declared_for_tests: HashSet<String>,
    declared_always: HashSet<String>,
    /// File names in quotes (`#[path = "db/old.rs"]`, `include!("gen.rs")`): `old.rs`.
    named: HashSet<String>,
    /// Every file of the workspace, absolute.
    files: HashSet<PathBuf>,
}

impl Modules {
    /// Whether a file of the workspace declares a module `name` (`mod name;`).
    pub(super) fn declares(&self, name: &str) -> bool {
        self.declared.contains(name)
    }

    pub(super) fn add(&mut self, path: &Path, text: &str) {
        self.files.insert(absolute(path));
        let b = text.as_bytes();
        let word = |i: usize| i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_');
        let mut at = 0;
        while let Some(i) = text[at..].find("mod").map(|i| i + at) {
            at = i + 3;
            if (i > 0 && word(i - 1)) || !b.get(at).is_some_and(u8::is_ascii_whitespace) {
                continue;
            }
            let mut j = at;
            while b.get(j).is_some_and(u8::is_ascii_whitespace) {
                j += 1;
            }
            if text[j..].starts_with("r#") {
                j += 2;
            }
            let start = j;
            while word(j) {
                j += 1;
            }
            let name = &text[start..j];
            while b.get(j).is_some_and(u8::is_ascii_whitespace) {
                j += 1;
            }
            if !name.is_empty() && b.get(j) == Some(&b';') {
                self.declared.insert(name.to_string());
                match for_tests(&text[..i]) {
                    true => self.declared_for_tests.insert(name.to_string()),
                    false => self.declared_always.insert(name.to_string()),
                };
            }
        }
        let mut at = 0;
        while let Some(i) = text[at..].find(".rs\"").map(|i| i + at) {
            at = i + 4;
            let start = text[..i].rfind(['"', '/', '\\']).map_or(0, |s| s + 1);
            self.named.insert(text[start..i + 3].to_string());
        }
    }

    /// No crate compiles the file at `path`: it lies under its package's `src/` (not
    /// `src/bin/`), is not `src/lib.rs` or `src/main.rs`, the package's root was read, and
    /// nothing declares or names it. `packages` caches each folder's package and each
    /// package's manifest.
    pub(super) fn uncompiled(&self, path: &Path, packages: &mut Packages) -> bool {
        let path = absolute(path);
        let Some(dir) = path.parent() else {
            return false;
        };
        let Some(package) = packages.package(dir) else {
            return false;
        };
        let Ok(rel) = path.strip_prefix(&package) else {
            return false;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        let in_src = rel.starts_with("src/")
            && !rel.starts_with("src/bin/")
            && rel != "src/lib.rs"
            && rel != "src/main.rs";
        let root_read = ["src/lib.rs", "src/main.rs"]
            .iter()
            .any(|r| self.files.contains(&package.join(r)));
        if !in_src || !root_read {
            return false;
        }
        let name = match path.file_stem().and_then(|s| s.to_str()) {
            Some("mod") => dir.file_name().and_then(|d| d.to_str()),
            stem => stem,
        };
        let file_name = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let declared = name.is_none_or(|n| self.declared.contains(n));
        let mut named =
            || self.named.contains(file_name) || packages.manifest(&package).contains(&rel);
        !declared && !named()
    }
}

impl Modules {
    /// Only tests compile the file at `path`: its package is a dev-dependency only (see
    /// [`Packages::dev_only`]), or it lies under its package's `src/` and it or a folder on the
    /// way is a module declared only under a test configuration.
    pub(super) fn test_only(&self, path: &Path, packages: &mut Packages) -> bool {
        let path = absolute(path);
        let Some(package) = path.parent().and_then(|dir| packages.package(dir)) else {
            return false;
        };
        if packages.dev_only(&self.files).contains(&package) {
            return true;
        }
        if let Ok(rel) = path.strip_prefix(&package) {
            let rel = rel.to_string_lossy().replace('\\', "/");
            let manifest = packages.manifest(&package);
            if test_binaries(manifest).contains(&rel) {
                return true;
            }
        }
        if self.declared_for_tests.is_empty() {
            return false;
        }
        let Ok(rel) = path.strip_prefix(package.join("src")) else {
            return false;
        };
        rel.with_extension("").components().any(|c| {
            let name = c.as_os_str().to_string_lossy();
            self.declared_for_tests.contains(name.as_ref())
                && !self.declared_always.contains(name.as_ref())
        })
    }
}

/// The attributes just before a `mod` item (`text` ends where the item starts, past `pub`)
/// hold a test configuration.
fn for_tests(text: &str) -> bool {
    let mut rest = text.trim_end();
    for vis in ["pub(crate)", "pub(super)", "pub"] {
        if let Some(r) = rest.strip_suffix(vis) {
            rest = r.trim_end();
            break;
        }
    }
    // Attributes one after the other, the nearest first: `#[cfg(..)]` lines.
    while rest.ends_with(']') {
        let Some(open) = rest.rfind("#[") else {
            return false;
        };
        let attr = &rest[open + 2..rest.len() - 1];
        if let Some(args) = attr.trim().strip_prefix("cfg")
            && cfg_is_test(args)
        {
            return true;
        }
        rest = rest[..open].trim_end();
    }
    false
}

/// The binaries a manifest builds only with test features (`[[bin]] name = "seed"
/// required-features = ["test-utils"]`): their root files, relative to the package.
fn test_binaries(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    for section in manifest.split("[[bin]]").skip(1) {
        let section = section.split("\n[").next().unwrap_or("");
        let value = |key: &str| {
            section.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let Some(features) = value("required-features") else {
            continue;
        };
        let features: Vec<&str> = features
            .trim_matches(['[', ']'])
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .filter(|f| !f.is_empty())
            .collect();
        if features.is_empty() || !features.iter().any(|f| cfg_is_test(&format!("\"{f}\""))) {
            continue;
        }
        match (value("path"), value("name")) {
            (Some(path), _) => out.push(path.trim_matches('"').to_string()),
            (None, Some(name)) => {
                let name = name.trim_matches('"');
                out.push(format!("src/bin/{name}.rs"));
                out.push(format!("src/bin/{name}/main.rs"));
            }
            (None, None) => {}
        }
    }
    out
}

/// A `cfg` predicate that holds only in test builds: `test`, a feature named for tests
/// (`"test-utils"`, `"testing"`, `"test_helpers"`), `all(..)` with one of them, `any(..)`
/// whose every alternative is one. Never under `not(..)`.
pub(super) fn cfg_is_test(tokens: &str) -> bool {
    let testy = |t: &str| {
        t.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w == "test" || w == "testing" || w == "tests")
    };
    if tokens.contains("not") {
        return false;
    }
    let any = tokens.match_indices("any").map(|(i, _)| i).find(|&i| {
        let before = tokens[..i].chars().next_back();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '"')
            && tokens[i + 3..].trim_start().starts_with('(')
    });
    match any {
        Some(at) => {
            let inner = tokens[at + 3..].trim_start().trim_start_matches('(');
            let inner = inner.rsplit_once(')').map_or(inner, |(a, _)| a);
            inner.split(',').filter(|a| !a.trim().is_empty()).all(testy)
        }
        None => testy(tokens),
    }
}

/// Packages found while judging a workspace's files: each folder's, and each package's
/// `Cargo.toml` (read once, when a file there is declared nowhere).
#[derive(Default)]
pub(super) struct Packages {
    of_dir: HashMap<PathBuf, Option<PathBuf>>,
    manifests: HashMap<PathBuf, String>,
    dev_only: Option<HashSet<PathBuf>>,
}

impl Packages {
    /// A package's `Cargo.toml`, read once (empty if it cannot be read).
    fn manifest(&mut self, package: &Path) -> &str {
        self.manifests
            .entry(package.to_path_buf())
            .or_insert_with(|| {
                std::fs::read_to_string(package.join("Cargo.toml")).unwrap_or_default()
            })
    }

    /// The packages of `files` that the others depend on only for their tests: each is named
    /// for tests (`app-test-utils`, `testing`), under some `[dev-dependencies]` and under no
    /// `[dependencies]` or `[build-dependencies]` (a workspace's crate of builders and
    /// fixtures). Only tests compile them. The name matters: a library's own tests and
    /// examples name the library under `[dev-dependencies]` too, and it is no test code.
    fn dev_only(&mut self, files: &HashSet<PathBuf>) -> &HashSet<PathBuf> {
        if self.dev_only.is_none() {
            let mut dirs: Vec<PathBuf> = files
                .iter()
                .filter_map(|f| f.parent().and_then(|d| self.package(d)))
                .collect();
            dirs.sort();
            dirs.dedup();
            let mut named = HashMap::new();
            let (mut normal, mut dev) = (HashSet::new(), HashSet::new());
            for dir in dirs {
                let Ok(table) = self.manifest(&dir).parse::<toml::Table>() else {
                    continue;
                };
                if let Some(name) = package_name(&table) {
                    named.insert(name, dir);
                }
                for (section, names) in dependencies(&table) {
                    match section {
                        "dev-dependencies" => dev.extend(names),
                        _ => normal.extend(names),
                    }
                }
            }
            let only: HashSet<PathBuf> = named
                .into_iter()
                .filter(|(n, _)| named_for_tests(n) && dev.contains(n) && !normal.contains(n))
                .map(|(_, d)| d)
                .collect();
            self.dev_only = Some(only);
        }
        self.dev_only.get_or_insert_default()
    }

    /// The package a folder is in: the nearest folder above with a `Cargo.toml`.
    fn package(&mut self, dir: &Path) -> Option<PathBuf> {
        self.of_dir
            .entry(dir.to_path_buf())
            .or_insert_with(|| {
                dir.ancestors()
                    .find(|d| d.join("Cargo.toml").is_file())
                    .map(Path::to_path_buf)
            })
            .clone()
    }
}

/// A manifest's package name, `-` and `_` alike (Cargo accepts either in a dependency).
pub(super) fn package_name(manifest: &toml::Table) -> Option<String> {
    let name = manifest.get("package")?.get("name")?.as_str()?;
    Some(name.replace('_', "-"))
}

/// A package name with a word for tests in it: `test`, `tests`, `testing`, `testkit`,
/// `testutils`, `fixtures` (`crates_io_test_utils`, `app-testing`).
pub(super) fn named_for_tests(name: &str) -> bool {
    name.split('-').any(|w| {
        matches!(
            w,
            "test" | "tests" | "testing" | "testkit" | "testutils" | "fixtures"
        )
    })
}

/// The packages a manifest depends on, by section (`dependencies`, `dev-dependencies`,
/// `build-dependencies`, also under `[target.'cfg(..)']`), by their package name (`db = {
/// package = "app-db" }` is `app-db`).
fn dependencies(manifest: &toml::Table) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    for (section, deps) in dependency_tables(manifest) {
        let mut kept = Vec::new();
        for (key, spec) in deps {
            let renamed = spec.get("package").and_then(|p| p.as_str());
            let name = renamed.unwrap_or(key).replace('_', "-");
            // `x = { optional = true }` that only test features turn on (`testing =
            // ["dep:x"]`) is compiled for tests only, like a dev-dependency.
            match section == "dependencies" && for_test_features(manifest, key, spec) {
                true => out.push(("dev-dependencies", vec![name])),
                false => kept.push(name),
            }
        }
        out.push((section, kept));
    }
    out
}

/// Every dependency a manifest names, in any section: its key and its specification.
pub(super) fn dependency_specs(manifest: &toml::Table) -> Vec<(&str, &toml::Value)> {
    let tables = dependency_tables(manifest).into_iter();
    tables
        .flat_map(|(_, t)| t.iter().map(|(k, v)| (k.as_str(), v)))
        .collect()
}

/// The dependency tables of a manifest, by section, also under `[target.'cfg(..)']`.
fn dependency_tables(manifest: &toml::Table) -> Vec<(&'static str, &toml::Table)> {
    let sections = ["dependencies", "dev-dependencies", "build-dependencies"];
    let targets = manifest.get("target").and_then(|t| t.as_table());
    let tables = std::iter::once(manifest).chain(
        targets
            .into_iter()
            .flat_map(|t| t.values().filter_map(|v| v.as_table())),
    );
    let mut out = Vec::new();
    for table in tables {
        for section in sections {
            if let Some(deps) = table.get(section).and_then(|d| d.as_table()) {
                out.push((section, deps));
            }
        }
    }
    out
}

/// The optional dependency `key` is turned on by features, every one of them named for tests
/// (`[features] testing = ["dep:key", "key/testing"]`).
fn for_test_features(manifest: &toml::Table, key: &str, spec: &toml::Value) -> bool {
    if spec.get("optional").and_then(|o| o.as_bool()) != Some(true) {
        return false;
    }
    let Some(features) = manifest.get("features").and_then(|f| f.as_table()) else {
        return false;
    };
    fn items(f: &toml::Value) -> impl Iterator<Item = &str> {
        let list = f.as_array().map(|a| a.iter().filter_map(|i| i.as_str()));
        list.into_iter().flatten()
    }
    let names = |item: &str| {
        let item = item.strip_prefix("dep:").unwrap_or(item);
        item.split(['/', '?']).next().unwrap_or(item).to_string()
    };
    // The features that turn it on, directly or through another (`default = ["testing"]`).
    let mut on: HashSet<String> = HashSet::from([key.to_string()]);
    loop {
        let before = on.len();
        for (f, list) in features {
            if items(list).any(|i| on.contains(&names(i))) {
                on.insert(f.clone());
            }
        }
        if on.len() == before {
            break;
        }
    }
    on.remove(key);
    !on.is_empty() && on.iter().all(|f| cfg_is_test(&format!("\"{f}\"")))
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_and_names_are_read_from_text() {
        let mut m = Modules::default();
        m.add(
            Path::new("/p/src/lib.rs"),
            "pub mod db;\n#[cfg(test)] mod tests;\nmod r#type ;\nmod inline { }\nfn model() {}\n\
             #[path = \"legacy/old_store.rs\"]\nmod store;\nconst X: &str = include_str!(\"q.sql\");",
        );
        for name in ["db", "tests", "type", "store"] {
            assert!(m.declared.contains(name), "{name}");
        }
        assert!(!m.declared.contains("inline") && !m.declared.contains("el"));
        assert!(m.named.contains("old_store.rs"));
        assert!(!m.named.iter().any(|n| n.contains("sql")));
    }

    #[test]
    fn modules_declared_only_for_tests() {
        let mut m = Modules::default();
        m.add(
            Path::new("/p/src/lib.rs"),
            "#[cfg(test)]\nmod tests;\n#[cfg(feature = \"test-utils\")]\n#[allow(unused)]\npub mod fixtures;\n\
             #[cfg(any(test, feature = \"postgres\"))] mod pg;\n#[cfg(not(test))] mod live;\n\
             #[cfg(test)] mod shared;\nmod db;",
        );
        m.add(Path::new("/p/src/other.rs"), "mod shared;");
        for name in ["tests", "fixtures"] {
            assert!(m.declared_for_tests.contains(name), "{name}");
        }
        for name in ["pg", "live", "db"] {
            assert!(!m.declared_for_tests.contains(name), "{name}");
        }
        // Declared for tests in one place and always in another: compiled always.
        assert!(m.declared_for_tests.contains("shared") && m.declared_always.contains("shared"));
    }

    #[test]
    fn binaries_built_only_with_test_features() {
        let manifest = "[package]\nname = \"db\"\n\n[[bin]]\nname = \"seed\"\nrequired-features = [\"test-utils\"]\n\n\
                        [[bin]]\nname = \"server\"\nrequired-features = [\"postgres\"]\n\n\
                        [[bin]]\nname = \"bench\"\npath = \"tools/bench.rs\"\nrequired-features = [\"testing\"]\n\n\
                        [features]\ntest-utils = []\n";
        assert_eq!(
            test_binaries(manifest),
            ["src/bin/seed.rs", "src/bin/seed/main.rs", "tools/bench.rs"]
        );
    }

    #[test]
    fn test_configurations() {
        for yes in [
            "(test)",
            "(all(test, feature = \"pg\"))",
            "(feature = \"test-utils\")",
            "(any(test, feature = \"testing\"))",
        ] {
            assert!(cfg_is_test(yes), "{yes}");
        }
        for no in [
            "(not(test))",
            "(any(test, feature = \"postgres\"))",
            "(feature = \"latest\")",
            "(feature = \"company\")",
            "(unix)",
        ] {
            assert!(!cfg_is_test(no), "{no}");
        }
    }

    #[test]
    fn dependencies_by_section_and_package_name() {
        let m: toml::Table = r#"
[package]
name = "app_core"
[dependencies]
db = { package = "app-db", path = "../db" }
[target.'cfg(unix)'.build-dependencies]
gen_tool = "1"
[dev-dependencies]
app-test-utils = { path = "../tu" }
"#
        .parse()
        .unwrap();
        assert_eq!(package_name(&m).as_deref(), Some("app-core"));
        let deps = dependencies(&m);
        assert!(deps.contains(&("dependencies", vec!["app-db".to_string()])));
        assert!(deps.contains(&("build-dependencies", vec!["gen-tool".to_string()])));
        assert!(deps.contains(&("dev-dependencies", vec!["app-test-utils".to_string()])));
        assert!(named_for_tests("app-test-utils") && named_for_tests("testing"));
        assert!(!named_for_tests("contest") && !named_for_tests("app-core"));
    }

    #[test]
    fn optional_dependencies_only_test_features_turn_on() {
        let section = |manifest: &str, name: &str| {
            let m: toml::Table = manifest.parse().unwrap();
            dependencies(&m)
                .into_iter()
                .find(|(_, names)| names.iter().any(|n| n == name))
                .map(|(s, _)| s)
        };
        let base = "[dependencies]\nfakes = { path = \"../f\", optional = true }\n";
        let testing = "[features]\ntesting = [\"dep:fakes\", \"db/testing\"]\n";
        assert_eq!(
            section(&format!("{base}{testing}"), "fakes"),
            Some("dev-dependencies")
        );
        // Also on in normal builds: by default, by a feature of another name, or by its own.
        for other in ["default = [\"testing\"]\n", "cache = [\"fakes?/cache\"]\n"] {
            let m = format!("{base}{testing}{other}");
            assert_eq!(section(&m, "fakes"), Some("dependencies"), "{m}");
        }
        assert_eq!(section(base, "fakes"), Some("dependencies"));
        let required = "[dependencies]\nfakes = { path = \"../f\" }\n";
        assert_eq!(
            section(&format!("{required}{testing}"), "fakes"),
            Some("dependencies")
        );
    }
}
