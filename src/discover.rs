//! Which files a run reads: walking folders (respecting `.gitignore`, skipping `target/`,
//! `node_modules/` and hidden folders), explicit paths, include/exclude globs.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::config::Config;

/// File endings txlint reads.
pub const EXTENSIONS: &[&str] = &["sql", "rs"];

#[derive(Debug, Default)]
pub struct Discovered {
    pub files: Vec<PathBuf>,
    /// Explicit paths that do not exist.
    pub missing: Vec<PathBuf>,
    /// Explicit files skipped because of their ending, or excluded with `--force-exclude`.
    pub skipped: Vec<(PathBuf, &'static str)>,
}

/// `cwd` resolves relative paths against the configuration's folder.
pub fn discover(paths: &[PathBuf], cwd: &Path, config: &Config, force_exclude: bool) -> Discovered {
    let include = globs(&config.include);
    let exclude = globs(&config.exclude);
    let rel = |p: &Path| -> PathBuf {
        let abs = cwd.join(p);
        abs.strip_prefix(&config.root)
            .map_or_else(|_| p.to_path_buf(), Path::to_path_buf)
    };
    // A path is excluded if it, or a folder above it, matches an exclude glob.
    let excluded = |p: &Path| {
        let r = rel(p);
        r.ancestors()
            .any(|a| !a.as_os_str().is_empty() && exclude.is_match(a))
    };
    let included = |p: &Path| config.include.is_empty() || include.is_match(rel(p));
    let mut out = Discovered::default();
    for path in paths {
        if path.is_file() {
            if !has_extension(path) {
                out.skipped.push((path.clone(), "not a .sql or .rs file"));
            } else if force_exclude && (excluded(path) || !included(path)) {
                out.skipped
                    .push((path.clone(), "excluded by the configuration"));
            } else {
                out.files.push(path.clone());
            }
            continue;
        }
        if !path.exists() {
            out.missing.push(path.clone());
            continue;
        }
        if force_exclude && excluded(path) {
            continue;
        }
        let walker = ignore::WalkBuilder::new(path)
            .hidden(true)
            .require_git(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|e| {
                let name = e.file_name();
                !(e.depth() > 0
                    && e.file_type().is_some_and(|t| t.is_dir())
                    && (name == "target" || name == "node_modules"))
            })
            .build();
        for entry in walker.flatten() {
            let p = entry.path();
            if entry.file_type().is_some_and(|t| t.is_file())
                && has_extension(p)
                && !excluded(p)
                && included(p)
            {
                out.files.push(p.to_path_buf());
            }
        }
    }
    out.files.sort();
    out.files.dedup();
    out
}

fn has_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

fn globs(patterns: &[String]) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        // Checked when the configuration was loaded.
        if let Ok(g) = Glob::new(p) {
            b.add(g);
        }
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}
