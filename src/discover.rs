//! Which files a run reads: walking folders (respecting `.gitignore`, skipping `target/`,
//! `node_modules/` and hidden folders), explicit paths, include/exclude globs.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::config::Config;

#[derive(Debug, Default)]
pub struct Discovered {
    pub files: Vec<PathBuf>,
    /// Explicit paths that do not exist.
    pub missing: Vec<PathBuf>,
    /// Explicit files skipped because of their ending, or excluded with `--force-exclude`, and
    /// symbolic links out of a folder walked.
    pub skipped: Vec<(PathBuf, &'static str)>,
    /// Paths the walk could not read (a folder without permission, a symlink loop), and why:
    /// each becomes a `read-error`.
    pub errors: Vec<(PathBuf, String)>,
}

/// The configuration's include and exclude globs, relative to its folder.
pub struct Selection<'c> {
    config: &'c Config,
    include: GlobSet,
    exclude: GlobSet,
}

impl<'c> Selection<'c> {
    pub fn new(config: &'c Config) -> Self {
        Selection {
            config,
            include: globs(&config.include),
            exclude: globs(&config.exclude),
        }
    }

    fn rel(&self, p: &Path, cwd: &Path) -> PathBuf {
        let abs = cwd.join(p);
        abs.strip_prefix(&self.config.root)
            .map_or_else(|_| p.to_path_buf(), Path::to_path_buf)
    }

    /// It, or a folder above it, matches an exclude glob.
    pub fn excluded(&self, p: &Path, cwd: &Path) -> bool {
        let r = self.rel(p, cwd);
        r.ancestors()
            .any(|a| !a.as_os_str().is_empty() && self.exclude.is_match(a))
    }

    pub fn included(&self, p: &Path, cwd: &Path) -> bool {
        self.config.include.is_empty() || self.include.is_match(self.rel(p, cwd))
    }

    /// A file txlint reads (by its ending) that the configuration does not leave out.
    pub fn selects(&self, p: &Path, cwd: &Path) -> bool {
        self.config.reads(p) && !self.excluded(p, cwd) && self.included(p, cwd)
    }
}

/// `cwd` resolves relative paths against the configuration's folder.
pub fn discover(paths: &[PathBuf], cwd: &Path, config: &Config, force_exclude: bool) -> Discovered {
    let selection = Selection::new(config);
    let excluded = |p: &Path| selection.excluded(p, cwd);
    let included = |p: &Path| selection.included(p, cwd);
    let mut out = Discovered::default();
    for path in paths {
        // A FIFO, a socket or a device named explicitly is reported, never read.
        let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
        if path.is_file() || (special && config.reads(path)) {
            if !config.reads(path) {
                out.skipped.push((
                    path.clone(),
                    "not a .sql or .rs file (nor one of sql.extensions)",
                ));
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
        // Links are followed inside the folder walked, not out of it (a link to `/` would lint
        // the machine); a link named on the command line is a folder walked.
        let root = path.canonicalize().unwrap_or_else(|_| path.clone());
        let outside = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = outside.clone();
        let walker = ignore::WalkBuilder::new(path)
            .hidden(true)
            .require_git(false)
            .follow_links(true)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |e| {
                let name = e.file_name();
                if e.depth() > 0
                    && e.file_type().is_some_and(|t| t.is_dir())
                    && (name == "target" || name == "node_modules")
                {
                    return false;
                }
                let leaves = e.depth() > 0
                    && e.path_is_symlink()
                    && e.path().canonicalize().is_ok_and(|t| !t.starts_with(&root));
                if leaves && let Ok(mut v) = seen.lock() {
                    v.push(e.path().to_path_buf());
                }
                !leaves
            })
            .build();
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    out.errors.push(walk_error(path, &e));
                    continue;
                }
            };
            let p = entry.path();
            let kind = entry.file_type();
            let wanted = config.reads(p) && !excluded(p) && included(p);
            if kind.is_some_and(|t| t.is_file()) && wanted {
                out.files.push(p.to_path_buf());
            } else if wanted && kind.is_some_and(|t| !t.is_dir() && !t.is_file()) {
                // A FIFO named `x.sql` would block the run: reported, not read.
                out.files.push(p.to_path_buf());
            }
        }
        if let Ok(mut v) = outside.lock() {
            out.skipped.extend(v.drain(..).map(|p| {
                (
                    p,
                    "a symbolic link out of the folder walked; not followed (name it to read it)",
                )
            }));
        }
    }
    out.files.sort();
    out.files.dedup();
    out
}

/// The project's other files, read as context for the named ones: everything the
/// configuration includes under its folder (or, without a txlint.toml, under the git
/// repository's top folder); nothing outside a project, and nothing for named files that are
/// all outside it (another project's schema says nothing about them).
pub fn context_of(named: &[PathBuf], cwd: &Path, config: &Config) -> Vec<PathBuf> {
    let root = match &config.path {
        Some(_) => Some(config.root.clone()),
        None => cwd
            .ancestors()
            .find(|d| d.join(".git").exists())
            .map(Path::to_path_buf),
    };
    let Some(root) = root else {
        return Vec::new();
    };
    let canonical = |p: &Path| {
        let p = cwd.join(p);
        p.canonicalize().unwrap_or(p)
    };
    let named: std::collections::HashSet<PathBuf> = named.iter().map(|p| canonical(p)).collect();
    let inside = canonical(&root);
    if !named.iter().any(|p| p.starts_with(&inside)) {
        return Vec::new();
    }
    discover(&[root], cwd, config, true)
        .files
        .into_iter()
        .filter(|f| !named.contains(&canonical(f)))
        .collect()
}

/// Where a walk error happened and what it was, in a user's words.
fn walk_error(root: &Path, e: &ignore::Error) -> (PathBuf, String) {
    fn inner(e: &ignore::Error) -> (Option<PathBuf>, String) {
        match e {
            ignore::Error::WithPath { path, err } => (Some(path.clone()), inner(err).1),
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                inner(err)
            }
            ignore::Error::Loop { child, .. } => (
                Some(child.clone()),
                "a symbolic link loop; not followed".to_string(),
            ),
            ignore::Error::Io(io) => (None, format!("cannot read: {io}")),
            other => (None, other.to_string()),
        }
    }
    let (path, why) = inner(e);
    (path.unwrap_or_else(|| root.to_path_buf()), why)
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
