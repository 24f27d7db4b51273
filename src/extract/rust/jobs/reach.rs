//! Which packages can call a function: its own, and those that depend on it, directly or
//! through others (Rust code names another package's items only through a dependency). A
//! call of the same name anywhere else is another function's: in a large workspace the name
//! of a job's entry (`start`, `run`) is called in many packages, and only its own package's
//! calls say who runs it. A method of a trait is not kept to its package (the trait's
//! package calls its implementations without depending on them): see
//! [`super::scan::Func::dispatched`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::super::modules::{dependency_specs, package_name};

/// The packages of a workspace's files, and who depends on whom.
#[derive(Default)]
pub(super) struct Reach {
    /// For each package (by its position), the packages that can name its items, sorted.
    seen_by: Vec<Vec<usize>>,
}

impl Reach {
    /// The packages of `paths` (the folder of the nearest `Cargo.toml`), each path's
    /// position among them (none: a file of no package, which sees and is seen by all), and
    /// which packages depend on which, read from their manifests' `[dependencies]`,
    /// `[dev-dependencies]` and `[build-dependencies]` (under `[target.'cfg(..)']` too), by
    /// package name (`db = { package = "app-db" }`, also through a workspace's
    /// `[workspace.dependencies]`) or by path.
    pub(super) fn new<'p>(paths: impl Iterator<Item = &'p Path>) -> (Reach, Vec<Option<usize>>) {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut index: HashMap<PathBuf, usize> = HashMap::new();
        let mut of_dir: HashMap<PathBuf, Option<usize>> = HashMap::new();
        let mut packages = Vec::new();
        for p in paths {
            let dir = p.parent().unwrap_or(Path::new("")).to_path_buf();
            let found = of_dir.entry(dir).or_insert_with(|| {
                let package = crate::io::absolute(super::super::package_dir(p)?);
                let next = dirs.len();
                let at = *index.entry(package.clone()).or_insert(next);
                if at == next {
                    dirs.push(package);
                }
                Some(at)
            });
            packages.push(*found);
        }
        let manifests: Vec<Option<toml::Table>> = dirs.iter().map(|d| read(d)).collect();
        let by_name: HashMap<String, usize> = manifests
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((package_name(m.as_ref()?)?, i)))
            .collect();
        let workspace = dirs.first().and_then(|d| workspace_of(d));
        // Each package's direct dependents.
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); dirs.len()];
        for (q, m) in manifests.iter().enumerate() {
            let Some(m) = m else { continue };
            for (key, spec) in dependency_specs(m) {
                let shared = spec.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                let (spec, base) = match (&workspace, shared) {
                    (Some((root, deps)), true) => match deps.get(key) {
                        Some(s) => (s, root.as_path()),
                        None => (spec, dirs[q].as_path()),
                    },
                    _ => (spec, dirs[q].as_path()),
                };
                let by_path = spec
                    .get("path")
                    .and_then(|p| p.as_str())
                    .map(|p| crate::io::absolute(&base.join(p)))
                    .and_then(|p| dirs.iter().position(|d| *d == p));
                let renamed = spec.get("package").and_then(|p| p.as_str()).unwrap_or(key);
                let by_name = by_name.get(&renamed.replace('_', "-")).copied();
                if let Some(p) = by_path.or(by_name).filter(|&p| p != q) {
                    dependents[p].push(q);
                }
            }
        }
        let seen_by = (0..dirs.len())
            .map(|p| {
                let mut seen = vec![p];
                let mut at = 0;
                while let Some(&next) = seen.get(at) {
                    for &q in &dependents[next] {
                        if !seen.contains(&q) {
                            seen.push(q);
                        }
                    }
                    at += 1;
                }
                seen.sort_unstable();
                seen
            })
            .collect();
        (Reach { seen_by }, packages)
    }

    /// For tests: for each package, the packages that can name its items.
    #[cfg(test)]
    pub(super) fn of(mut seen_by: Vec<Vec<usize>>) -> Reach {
        seen_by.iter_mut().for_each(|s| s.sort_unstable());
        Reach { seen_by }
    }

    /// Whether code of package `from` can name items of package `of` (a file of no package
    /// can, and its items can be named by all).
    pub(super) fn sees(&self, from: Option<usize>, of: Option<usize>) -> bool {
        match (from, of) {
            (Some(from), Some(of)) => self
                .seen_by
                .get(of)
                .is_none_or(|s| s.binary_search(&from).is_ok()),
            _ => true,
        }
    }
}

fn read(dir: &Path) -> Option<toml::Table> {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .ok()?
        .parse()
        .ok()
}

/// The folder and `[workspace.dependencies]` of the workspace around `dir`: the nearest
/// manifest at or above it with a `[workspace]` table.
fn workspace_of(dir: &Path) -> Option<(PathBuf, toml::Table)> {
    for d in dir.ancestors() {
        if let Some(m) = read(d)
            && let Some(w) = m.get("workspace").and_then(|w| w.as_table())
        {
            let deps = w.get("dependencies").and_then(|d| d.as_table());
            return Some((d.to_path_buf(), deps.cloned().unwrap_or_default()));
        }
    }
    None
}
