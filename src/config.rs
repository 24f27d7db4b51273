//! `txlint.toml`: which rules run at which severity, which files, and how `.sql` files run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::registry::Severity;

pub const FILE_NAME: &str = "txlint.toml";

/// What `txlint init` writes: the annotated example of docs/configuration.md (so the two never
/// disagree), every setting commented out, so that the file means the defaults.
pub fn starter() -> String {
    const DOC: &str = include_str!("../docs/configuration.md");
    let example = DOC
        .split_once("```toml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map_or("", |(block, _)| block);
    let mut out = String::from(
        "# txlint configuration (docs/configuration.md). Every setting below is commented out:\n\
         # as it is, this file means the defaults. Uncomment what you need.\n\n",
    );
    for line in example.lines() {
        match line.is_empty() || line.starts_with('#') {
            true => out += line,
            false => {
                out += "# ";
                out += line;
            }
        }
        out.push('\n');
    }
    out
}

pub use crate::source::Dialect;

/// How the statements of a `.sql` file reach the database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqlMode {
    /// A psql-style script: autocommit outside `BEGIN ... COMMIT`.
    #[default]
    Script,
    /// The whole file runs inside one transaction (migration tools that wrap each file).
    Transaction,
    /// Each statement is sent on its own by application code (sqlc-style query files): the
    /// transaction it runs in is not known.
    Statements,
}

/// A rule's setting in `[rules]`: a severity, or `"off"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleLevel {
    Off,
    Info,
    Warning,
    Error,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlConfig {
    /// Unset: `script`, unless txlint recognises who runs the file (a migration tool that
    /// wraps each file in a transaction, sqlc query files).
    #[serde(default)]
    pub mode: Option<SqlMode>,
    /// File endings read as SQL besides `sql` (`["pgsql", "psql"]`), without the dot.
    #[serde(default)]
    pub extensions: Vec<String>,
}

pub use crate::registry::PoolMode;

/// Teaching txlint a codebase's own database wrappers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RustConfig {
    /// Type names that are connection pools.
    #[serde(default)]
    pub pool_types: Vec<String>,
    /// Type names that are dedicated connections.
    #[serde(default)]
    pub connection_types: Vec<String>,
    /// Type names that are open transactions.
    #[serde(default)]
    pub transaction_types: Vec<String>,
    /// Functions and methods that send the SQL string given to them: a method sends it on its
    /// receiver, a free function on its first argument.
    #[serde(default)]
    pub query_functions: Vec<String>,
    /// How many processes run the timer loops of background jobs (see `Unit::job`).
    #[serde(default)]
    pub background_jobs: BackgroundJobs,
}

/// `rust.background_jobs`: whether a job's runs can overlap with each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackgroundJobs {
    /// One process runs each timer loop: a job's runs follow one another.
    #[default]
    Single,
    /// Every instance of the service runs them: a job races with its copies elsewhere.
    Replicated,
}

/// `[[overrides]]`: another dialect or `sql.mode` for the `.sql` files matching `paths`
/// (migrations that a tool wraps in a transaction, sqlc query files, a MySQL folder).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    pub paths: Vec<String>,
    #[serde(default)]
    pub dialect: Option<Dialect>,
    #[serde(default)]
    pub sql: Option<SqlConfig>,
    #[serde(skip)]
    matcher: Option<globset::GlobSet>,
}

/// How one `.sql` file is read, as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSettings {
    /// `None` when the configuration leaves it to txlint (see `extract::dialects`).
    pub dialect: Option<Dialect>,
    /// `None` when the configuration leaves it to txlint (see `extract::runners`).
    pub mode: Option<SqlMode>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Unset: PostgreSQL, unless txlint tells another database from a file's name, folder or
    /// content, the Rust types that send it, or the crate's dependencies.
    #[serde(default)]
    pub dialect: Option<Dialect>,
    /// Globs (relative to the config file's folder) a file must match to be linted.
    #[serde(default)]
    pub include: Vec<String>,
    /// Globs of files and folders to skip.
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub sql: SqlConfig,
    #[serde(default)]
    pub rust: RustConfig,
    #[serde(default)]
    pub pool_mode: PoolMode,
    /// The isolation level a transaction runs at unless it sets one (the database's
    /// `default_transaction_isolation`). Unset: READ COMMITTED, PostgreSQL's default, unless
    /// the run's SQL is CockroachDB's (see `extract::dialects::is_cockroach`): SERIALIZABLE.
    #[serde(default)]
    pub isolation: Option<crate::model::Isolation>,
    /// Run the core rules on test code too (`#[test]` functions, `#[cfg(test)]` modules, files
    /// under `tests/` and `benches/`, SQL files under a folder named for tests; see
    /// [`Config::is_test_path`]). Off by default: tests run one at a time on scratch
    /// databases and sometimes provoke races on purpose.
    #[serde(default)]
    pub include_tests: bool,
    #[serde(default)]
    pub rules: BTreeMap<Spanned<String>, RuleLevel>,
    /// Settings for some `.sql` files (`[[overrides]]`); the last matching one wins.
    #[serde(default)]
    pub overrides: Vec<Override>,
    /// Folder the globs are relative to; not a key of the file.
    #[serde(skip)]
    pub root: PathBuf,
    /// The file this came from, if any.
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

#[derive(Debug)]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl Config {
    /// The configuration for a run started in `cwd`: the file given, else the nearest
    /// `txlint.toml` in `cwd` or a parent folder, else the defaults.
    pub fn discover(cwd: &Path, explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let found = match explicit {
            Some(p) => Some(cwd.join(p)),
            None => cwd
                .ancestors()
                .map(|d| d.join(FILE_NAME))
                .find(|p| p.is_file()),
        };
        match found {
            Some(path) => Config::load(&path),
            None => Ok(Config {
                root: cwd.to_path_buf(),
                ..Config::default()
            }),
        }
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        // A FIFO or a folder given as the configuration would block or fail oddly.
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            return Err(ConfigError {
                path: path.to_path_buf(),
                line: None,
                message: "not a regular file: give the path of a txlint.toml".to_string(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the configuration: {e}"),
        })?;
        let mut config = Config::parse(&text).map_err(|(line, message)| ConfigError {
            path: path.to_path_buf(),
            line,
            message,
        })?;
        config.root = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        config.path = Some(path.to_path_buf());
        Ok(config)
    }

    /// Parse and check the text of a config file; errors carry a 1-based line, and quote at
    /// most the start of a long value (see [`clipped`]).
    pub fn parse(text: &str) -> Result<Config, (Option<usize>, String)> {
        Self::parse_text(text).map_err(|(line, message)| (line, clipped(&message)))
    }

    fn parse_text(text: &str) -> Result<Config, (Option<usize>, String)> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let config: Config = toml::from_str(text)
            .map_err(|e| (e.span().map(|s| line_of(s.start)), e.message().to_string()))?;
        for name in config.rules.keys() {
            if crate::registry::find(name.get_ref()).is_none() {
                return Err((
                    Some(line_of(name.span().start)),
                    format!(
                        "unknown rule `{}` in [rules]; `txlint rules` lists the rules",
                        name.get_ref()
                    ),
                ));
            }
        }
        let mut config = config;
        let globs = config.overrides.iter().flat_map(|o| &o.paths);
        for glob in config.include.iter().chain(&config.exclude).chain(globs) {
            if let Err(e) = globset::Glob::new(glob) {
                let line = text.find(&format!("\"{glob}\"")).map(line_of);
                return Err((line, format!("bad glob `{glob}`: {e}")));
            }
        }
        for o in &mut config.overrides {
            let mut b = globset::GlobSetBuilder::new();
            for g in &o.paths {
                if let Ok(g) = globset::Glob::new(g) {
                    b.add(g);
                }
            }
            o.matcher = b.build().ok();
        }
        Ok(config)
    }

    /// `path` relative to the configuration's folder, where globs apply (as given when the
    /// configuration has no folder, or the file is outside it).
    pub fn relative(&self, path: &Path) -> PathBuf {
        crate::io::relative_to(&self.root, path)
    }

    /// Dialect and `sql.mode` for a file: the defaults, then every matching override in order.
    pub fn settings_for(&self, path: &Path) -> FileSettings {
        let mut s = FileSettings {
            dialect: self.dialect,
            mode: self.sql.mode,
        };
        let rel = self.relative(path);
        for o in &self.overrides {
            if o.matcher.as_ref().is_some_and(|m| m.is_match(&rel)) {
                if let Some(d) = o.dialect {
                    s.dialect = Some(d);
                }
                if let Some(mode) = o.sql.as_ref().and_then(|sql| sql.mode) {
                    s.mode = Some(mode);
                }
            }
        }
        s
    }

    /// A file of test code: below a `tests` or `benches` folder (relative to the
    /// configuration's folder). A SQL file also below a folder named for tests or benchmarks
    /// (`test`, `testing`, `test_runner`, `e2e-tests`, `testdata`, `benchmarks`): SQL has no
    /// manifest to say which of its files only tests run, and a Rust file has (see
    /// `rust.md#test-code`).
    pub fn is_test_path(&self, path: &Path) -> bool {
        let rel = self.relative(path);
        let sql = !crate::source::is_rust(path);
        let mut folders = rel.components().rev().skip(1);
        folders.any(|c| {
            let c = c.as_os_str();
            c == "tests" || c == "benches" || (sql && c.to_str().is_some_and(named_for_tests))
        })
    }

    /// A file txlint reads: `.rs`, `.sql` or one of `sql.extensions` (compared without case).
    pub fn reads(&self, path: &Path) -> bool {
        let Some(e) = path.extension().and_then(|e| e.to_str()) else {
            return false;
        };
        let sql = std::iter::once("sql").chain(self.sql.extensions.iter().map(String::as_str));
        crate::source::is_rust(path)
            || sql
                .map(|x| x.trim_start_matches('.'))
                .any(|x| x.eq_ignore_ascii_case(e))
    }

    /// The severity a rule reports at, or `None` when it is turned off.
    pub fn severity(&self, rule: &crate::registry::Rule) -> Option<Severity> {
        match self.rules.get(rule.name) {
            Some(RuleLevel::Off) => None,
            Some(RuleLevel::Info) => Some(Severity::Info),
            Some(RuleLevel::Warning) => Some(Severity::Warning),
            Some(RuleLevel::Error) => Some(Severity::Error),
            None => Some(rule.severity),
        }
    }
}

/// `message` with every word longer than [`LONGEST_QUOTED`] characters cut to its start and
/// its length: an error about a 10 MB value names it, it does not print it.
fn clipped(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4096));
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let n = word.chars().count();
        if n > LONGEST_QUOTED {
            out.extend(word.chars().take(LONGEST_QUOTED / 2));
            out.push_str(&format!("... ({n} characters)"));
        } else {
            out.push_str(word);
        }
    }
    out
}

const LONGEST_QUOTED: usize = 120;

/// A folder name with a word for tests or benchmarks in it, words split at `-`, `_` and `.`:
/// `test`, `tests`, `testing`, `testdata`, `bench`, `benches`, `benchmark`, `benchmarks`
/// (`test_runner`, `e2e-tests`; not `latest` or `contest`).
fn named_for_tests(name: &str) -> bool {
    name.split(['-', '_', '.']).any(|w| {
        let w = w.to_ascii_lowercase();
        matches!(
            w.as_str(),
            "test"
                | "tests"
                | "testing"
                | "testdata"
                | "bench"
                | "benches"
                | "benchmark"
                | "benchmarks"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_keys() {
        let c = Config::parse(
            "dialect = \"mysql\"\nexclude = [\"old/**\"]\n[sql]\nmode = \"transaction\"\n[rules]\nsyntax-error = \"off\"\n",
        )
        .unwrap();
        assert_eq!(c.dialect, Some(Dialect::Mysql));
        assert_eq!(c.sql.mode, Some(SqlMode::Transaction));
        assert_eq!(c.rules.get("syntax-error"), Some(&RuleLevel::Off));
    }

    #[test]
    fn overrides_apply_in_order() {
        let mut c = Config::parse(
            "[[overrides]]\npaths = [\"migrations/**\"]\nsql = { mode = \"transaction\" }\n[[overrides]]\npaths = [\"migrations/mysql/**\"]\ndialect = \"mysql\"\n",
        )
        .unwrap();
        c.root = PathBuf::from("/app");
        let at = |p: &str| c.settings_for(Path::new(p));
        assert_eq!(
            at("/app/db/a.sql"),
            FileSettings {
                dialect: None,
                mode: None
            }
        );
        assert_eq!(
            at("/app/migrations/1.sql"),
            FileSettings {
                dialect: None,
                mode: Some(SqlMode::Transaction)
            }
        );
        assert_eq!(
            at("/app/migrations/mysql/1.sql"),
            FileSettings {
                dialect: Some(Dialect::Mysql),
                mode: Some(SqlMode::Transaction)
            }
        );
    }

    #[test]
    fn test_folders() {
        let at = |root: &str| Config {
            root: PathBuf::from(root),
            ..Config::default()
        };
        let c = at("/app");
        let test = |p: &str| c.is_test_path(Path::new(p));
        // Any file below `tests` or `benches`.
        assert!(test("/app/tests/a.rs") && test("/app/db/benches/b.sql"));
        // A SQL file also below a folder named for tests or benchmarks, a word of its name.
        assert!(test("/app/test_runner/perf/setup.sql"));
        assert!(test("/app/src/test/regress/sql/a.sql"));
        assert!(test("/app/e2e-Tests/a.sql") && test("/app/testdata/a.sql"));
        assert!(test("/app/pgbench.benchmarks/a.sql"));
        // Not a Rust file there (Cargo and the manifests say which are), not a word
        // inside another, not the file's own name, not above the configuration's folder.
        assert!(!test("/app/test_runner/src/lib.rs"));
        assert!(!test("/app/latest/a.sql") && !test("/app/contest/a.sql"));
        assert!(!test("/app/db/test_setup.sql"));
        assert!(!at("/home/test/app").is_test_path(Path::new("/home/test/app/db/a.sql")));
    }

    #[test]
    fn bad_glob_names_its_line() {
        let (line, msg) =
            Config::parse("dialect = \"postgres\"\nexclude = [\"ok/**\", \"a[\"]\n").unwrap_err();
        assert_eq!(line, Some(2));
        assert!(msg.contains("bad glob `a[`"), "{msg}");
    }

    #[test]
    fn unknown_key_names_line() {
        let (line, msg) =
            Config::parse("dialect = \"postgres\"\n\n[sql]\nmod = \"x\"\n").unwrap_err();
        assert_eq!(line, Some(4));
        assert!(msg.contains("unknown field `mod`"), "{msg}");
    }

    #[test]
    fn bad_value_and_unknown_rule_name_line() {
        let long = "y".repeat(100_000);
        let (_, msg) = Config::parse(&format!("exclude = [\"{long}[\"]\n")).unwrap_err();
        assert!(msg.starts_with("bad glob `yyyy"), "{msg}");
        assert!(msg.contains(" characters)") && msg.len() < 1_000, "{msg}");
        let (line, msg) = Config::parse(&format!("{long} = 1\n")).unwrap_err();
        assert_eq!(line, Some(1));
        assert!(
            msg.len() < 1_000,
            "an unknown key is not echoed whole: {}",
            msg.len()
        );
        let (line, msg) = Config::parse("[sql]\nmode = \"sometimes\"\n").unwrap_err();
        assert_eq!(line, Some(2));
        assert!(msg.contains("sometimes"), "{msg}");
        let (line, msg) = Config::parse("[rules]\n\nlost-updates = \"off\"\n").unwrap_err();
        assert_eq!(line, Some(3));
        assert!(msg.contains("unknown rule `lost-updates`"), "{msg}");
    }
}
