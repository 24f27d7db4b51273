//! Which configuration a file is linted with: one place for `txlint check` (its files grouped
//! by project), standard input and the language server.
//!
//! A file goes with the nearest `txlint.toml` above its folder (the defaults, rooted at that
//! folder, when there is none), unless the command line names one for every file (`--config`);
//! the command line's `--exclude` patterns are added to it. A file found by a walk, or named
//! with `--force-exclude`, is linted only when its project's `include`/`exclude` select it.
//! What of the project around a file is read as its context is `discover::context_of`'s, for
//! all three alike.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::config::{self, Config, ConfigError};
use crate::discover::Selection;

/// The configuration of the project `folder` is in (or the one `explicit` names), with
/// `exclude` added.
pub fn config_of(
    folder: &Path,
    explicit: Option<&Path>,
    exclude: &[String],
) -> Result<Config, ConfigError> {
    let mut config = Config::discover(folder, explicit)?;
    config.exclude.extend_from_slice(exclude);
    Ok(config)
}

/// Its project's configuration lints `path` (relative to `cwd`), found by a walk or named
/// with `--force-exclude`.
pub fn selects(config: &Config, path: &Path, cwd: &Path) -> bool {
    Selection::new(config).selects(path, cwd)
}

/// A project's configuration and its files.
pub type Project = (Config, Vec<PathBuf>);

/// `files` by project, each with its configuration: the working folder's (`top`) first, then
/// each other `txlint.toml` a file is under (its rules and settings; the files its
/// `include`/`exclude` leave out are dropped when `selectable` says they may be). Each project
/// is a run of its own: its schema, routines and lock graph. With `explicit` (`--config`, or a
/// view that shows one run) every file goes with `top`.
///
/// Also returns each project whose configuration is broken, with its number of files: they
/// are not linted, the others are.
pub fn projects(
    files: &[PathBuf],
    top: Config,
    cwd: &Path,
    explicit: bool,
    exclude: &[String],
    selectable: impl Fn(&PathBuf) -> bool,
) -> (Vec<Project>, Vec<(ConfigError, usize)>) {
    if explicit {
        return (vec![(top, files.to_vec())], Vec::new());
    }
    let mut nearest: HashMap<PathBuf, Option<PathBuf>> = HashMap::new();
    let mut groups: Vec<(Option<PathBuf>, Vec<PathBuf>)> = vec![(top.path.clone(), Vec::new())];
    for f in files {
        let abs = std::path::absolute(cwd.join(f)).unwrap_or_else(|_| cwd.join(f));
        let dir = abs.parent().unwrap_or(cwd).to_path_buf();
        let key = nearest
            .entry(dir.clone())
            .or_insert_with(|| {
                dir.ancestors()
                    .map(|d| d.join(config::FILE_NAME))
                    .find(|p| p.is_file())
            })
            .clone();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some(g) => g.1.push(f.clone()),
            None => groups.push((key, vec![f.clone()])),
        }
    }
    let mut out = Vec::new();
    let mut broken = Vec::new();
    let mut groups = groups.into_iter();
    if let Some((_, first)) = groups.next() {
        out.push((top, first));
    }
    for (key, files) in groups {
        let folder = match &key {
            Some(p) => p.parent().unwrap_or(cwd).to_path_buf(),
            None => std::path::absolute(&files[0])
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or_else(|| cwd.to_path_buf()),
        };
        // One project's broken configuration leaves the others linted.
        let config = match config_of(&folder, None, exclude) {
            Ok(config) => config,
            Err(e) => {
                broken.push((e, files.len()));
                continue;
            }
        };
        let files: Vec<PathBuf> = files
            .into_iter()
            .filter(|f| !selectable(f) || selects(&config, f, cwd))
            .collect();
        out.push((config, files));
    }
    out.retain(|(_, files)| !files.is_empty());
    (out, broken)
}
