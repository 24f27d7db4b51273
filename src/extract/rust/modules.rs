//! Rust files no crate compiles: a file under a package's `src/` that is not a target's root
//! and that no `mod` of its workspace declares (nor a `#[path]`, an `include!` or the manifest
//! names) is left out of the build, however much SQL it holds (a module its authors stopped
//! declaring). Its functions are code nothing runs.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What the Rust files of one workspace declare, read from their text (every file, also
/// those the pre-scan leaves unparsed: a `mod.rs` often holds nothing but declarations).
#[derive(Default)]
pub(super) struct Modules {
    /// `mod name;` items (in a comment too: a declaration seen by mistake only keeps a file).
    declared: HashSet<String>,
    /// File names in quotes (`#[path = "db/old.rs"]`, `include!("gen.rs")`): `old.rs`.
    named: HashSet<String>,
    /// Every file of the workspace, absolute.
    files: HashSet<PathBuf>,
}

impl Modules {
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
        let package = packages
            .of_dir
            .entry(dir.to_path_buf())
            .or_insert_with(|| {
                dir.ancestors()
                    .find(|d| d.join("Cargo.toml").is_file())
                    .map(Path::to_path_buf)
            })
            .clone();
        let Some(package) = package else {
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
        let mut named = || {
            self.named.contains(file_name)
                || packages
                    .manifests
                    .entry(package.clone())
                    .or_insert_with(|| {
                        std::fs::read_to_string(package.join("Cargo.toml")).unwrap_or_default()
                    })
                    .contains(&rel)
        };
        !declared && !named()
    }
}

/// Packages found while judging a workspace's files: each folder's, and each package's
/// `Cargo.toml` (read once, when a file there is declared nowhere).
#[derive(Default)]
pub(super) struct Packages {
    of_dir: HashMap<PathBuf, Option<PathBuf>>,
    manifests: HashMap<PathBuf, String>,
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
}
