//! The postgres image's init scripts: the `.sql` files that a Dockerfile or compose file copies
//! or mounts into `docker-entrypoint-initdb.d`, which the image's entrypoint runs once when it
//! creates the database. The Dockerfiles and compose files are read once per run, as sqlc's
//! configurations are (see [`super::sqlc::Sqlc::find`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

const FOLDER: &str = "docker-entrypoint-initdb.d";
const FILES: [&str; 5] = [
    "Dockerfile",
    "docker-compose.yml",
    "docker-compose.yaml",
    "compose.yml",
    "compose.yaml",
];

/// The lines naming `docker-entrypoint-initdb.d` in the Dockerfiles and compose files of the
/// folders that hold the run's `.sql` files or the folders above those.
#[derive(Clone, Debug, Default)]
pub struct ImageInit {
    lines: HashMap<PathBuf, Vec<String>>,
}

impl ImageInit {
    pub fn find(files: &[PathBuf]) -> ImageInit {
        let mut folders: Vec<&Path> = files
            .iter()
            .flat_map(|f| f.ancestors().skip(1).take(2))
            .collect();
        folders.sort();
        folders.dedup();
        let mut lines = HashMap::new();
        for dir in folders {
            let found: Vec<String> = FILES
                .iter()
                .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
                .flat_map(|text| {
                    text.lines()
                        .filter(|l| l.contains(FOLDER))
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect();
            if !found.is_empty() {
                lines.insert(dir.to_path_buf(), found);
            }
        }
        ImageInit { lines }
    }

    /// A Dockerfile or compose file in the file's folder or the one above copies or mounts the
    /// file (by name or `*.sql`), or its folder, into `docker-entrypoint-initdb.d` (`COPY
    /// ./db_init.sql /docker-entrypoint-initdb.d/`, `- ./initdb:/docker-entrypoint-initdb.d`).
    pub fn puts(&self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let folder = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let mounted = format!("{folder}:/{FOLDER}");
        path.ancestors()
            .skip(1)
            .take(2)
            .filter_map(|d| self.lines.get(d))
            .flatten()
            .any(|l| {
                (!name.is_empty() && l.contains(name))
                    || l.contains("*.sql")
                    || (!folder.is_empty() && l.contains(&mounted))
            })
    }
}
