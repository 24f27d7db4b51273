//! The command line: `txlint`'s subcommands and their arguments (clap), read by `main.rs`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use txlint::report::Format;
use txlint::report::graph::GraphFormat;

/// Static linter for SQL concurrency bugs: lost updates, lock-order deadlocks, transaction-scoped
/// locks taken outside a transaction, and more.
///
/// Exit status: 0 no findings at or above --fail-on, 1 findings, 2 usage or configuration error,
/// nothing to read, or a path or sub-project that could not be used (the rest is still linted
/// and reported).
#[derive(Parser)]
#[command(name = "txlint", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Lint `.sql` and `.rs` files and folders (default: the current folder).
    ///
    /// Folders are walked respecting .gitignore and skipping hidden folders, target/ and
    /// node_modules/. Files named explicitly are linted even when the configuration excludes
    /// them, unless --force-exclude is given.
    Check(CheckArgs),
    /// List every rule with its default severity and one-line summary.
    Rules {
        /// Print the rule index as Markdown (the source of docs/rules.md).
        #[arg(long)]
        markdown: bool,
    },
    /// Print the transaction model txlint builds: every unit, transaction and statement with
    /// its executor, session and locks (to see why a finding was or was not made).
    Model {
        /// Files and folders to read.
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        /// Configuration file (default: the nearest txlint.toml in this folder or above).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print the lock-order graph (which locks each transaction takes while holding which),
    /// with the cycles that can deadlock in red, as Graphviz DOT or Mermaid.
    Graph {
        /// Files and folders to read.
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        /// Output format: `dot` (render with `dot -Tsvg`) or `mermaid` (renders in GitHub
        /// Markdown).
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
        /// Configuration file (default: the nearest txlint.toml in this folder or above).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print the schema txlint learned from the SQL (tables, keys, foreign keys), to see why a
    /// finding was or was not made.
    Schema {
        /// Files and folders to read (migrations included).
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        /// Configuration file (default: the nearest txlint.toml in this folder or above).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Write the two-session script that shows a finding's race on a scratch database: the
    /// setup (tables, rows), the steps for psql sessions A and B in order, and what to look for.
    ///
    /// For findings in .sql scripts whose statements have literal values; otherwise it says
    /// what is missing. The rest of the project is read as context (its schema).
    Witness {
        /// The finding: `path:line`, as `txlint check` prints it.
        at: std::ffi::OsString,
        /// `json`: the setup, the steps and what shows the race, for a driver.
        #[arg(long, value_enum, default_value_t = WitnessFormat::Text)]
        format: WitnessFormat,
        /// Configuration file (default: the nearest txlint.toml in this folder or above).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Serve diagnostics to an editor over the Language Server Protocol on stdin/stdout.
    Lsp,
    /// Write a txlint.toml in the current folder with every setting, commented out (the
    /// defaults), each with what it does.
    Init {
        /// Replace a txlint.toml that is already there.
        #[arg(long)]
        force: bool,
    },
    /// Print a rule's documentation.
    Explain {
        /// Rule name, as `txlint rules` lists it.
        rule: String,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// `txlint completions bash > ~/.local/share/bash-completion/completions/txlint`,
    /// `txlint completions zsh > ~/.zfunc/_txlint`,
    /// `txlint completions fish > ~/.config/fish/completions/txlint.fish`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum WitnessFormat {
    Text,
    Json,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Files and folders to lint; `-` reads one document from standard input (name it with
    /// --stdin-filename).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// The path the document read from standard input stands for (its ending says SQL or
    /// Rust; the configuration and the project around it apply as for that file).
    #[arg(long, value_name = "PATH", default_value = "stdin.sql")]
    pub stdin_filename: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Configuration file for every file (default: for each file, the nearest txlint.toml
    /// above it, as in the editor; each such project is linted as a run of its own).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Lowest severity that makes the exit status 1 (`info` notes, such as statements txlint
    /// could not parse, never fail a run unless this is `info`).
    #[arg(long, value_enum, default_value_t = FailOn::Warning)]
    pub fail_on: FailOn,
    /// Apply the configuration's exclude and include globs to files named explicitly too
    /// (pre-commit passes file names).
    #[arg(long)]
    pub force_exclude: bool,
    /// Read only the files named. By default, when only files are named (as pre-commit and
    /// editors do), the rest of the project (the folder of txlint.toml, else of the git
    /// repository) is read too, with the configuration's include and exclude, as context:
    /// its schema, routines and transactions count, but only findings that involve a named
    /// file are reported.
    #[arg(long)]
    pub no_context: bool,
    /// With `--format json`: give each finding of a core rule its witness, the two-session
    /// script that shows its race (as `txlint witness` writes it), or what is missing for one.
    #[arg(long)]
    pub witness: bool,
    /// Report only findings that are not in this baseline file (written by --write-baseline):
    /// adopt txlint in an existing codebase and fail only on new findings. Findings are matched
    /// by rule, file and the text of their line, so they survive lines moving.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write every current finding to the --baseline file (replacing it) instead of reporting.
    #[arg(long, requires = "baseline")]
    pub write_baseline: bool,
    /// Exit 0 even when there are findings (errors in the run itself still exit 2).
    #[arg(long)]
    pub exit_zero: bool,
    /// Report only these rules (comma-separated names, as `txlint rules` lists them).
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub select: Vec<String>,
    /// Do not report these rules (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub ignore: Vec<String>,
    /// Print how many findings each rule made instead of the findings.
    #[arg(long)]
    pub statistics: bool,
    /// Print the findings only: no summary line.
    #[arg(long, short)]
    pub quiet: bool,
    /// Colour in the text report: `auto` when writing to a terminal and `NO_COLOR` is unset.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// Skip files and folders matching these globs too, as if each project's configuration
    /// listed them under `exclude` (relative to its folder; repeat or separate with commas).
    #[arg(long, value_delimiter = ',', value_name = "GLOBS")]
    pub exclude: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Info,
}
