//! The `txlint` command: arguments -> library -> reporter -> exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use txlint::config::Config;
use txlint::diagnostic::Severity;
use txlint::report::{self, Format, TextStyle};
use txlint::{discover, rules};

/// Static linter for SQL concurrency bugs: lost updates, lock-order deadlocks, transaction-scoped
/// locks taken outside a transaction, and more.
///
/// Exit status: 0 no findings at or above --fail-on, 1 findings, 2 usage or configuration error,
/// or nothing to read.
#[derive(Parser)]
#[command(name = "txlint", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Print a rule's documentation.
    Explain {
        /// Rule name, as `txlint rules` lists it.
        rule: String,
    },
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Files and folders to lint.
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report to this file instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Configuration file (default: the nearest txlint.toml in this folder or above).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Lowest severity that makes the exit status 1.
    #[arg(long, value_enum, default_value_t = FailOn::Warning)]
    fail_on: FailOn,
    /// Apply the configuration's exclude and include globs to files named explicitly too
    /// (pre-commit passes file names).
    #[arg(long)]
    force_exclude: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum FailOn {
    Error,
    Warning,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check(args),
        Command::Rules { markdown } => {
            if markdown {
                print!("{}", rules::index_markdown());
            } else {
                let width = rules::ALL.iter().map(|r| r.name.len()).max().unwrap_or(0);
                for r in rules::ALL {
                    println!(
                        "{:width$}  {:7}  {}",
                        r.name,
                        r.severity.as_str(),
                        r.summary()
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Command::Explain { rule } => match rules::find(&rule) {
            Some(r) => {
                print!("{}", r.doc);
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("txlint: unknown rule `{rule}`; `txlint rules` lists the rules");
                ExitCode::from(2)
            }
        },
    }
}

fn check(args: CheckArgs) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("txlint: {msg}");
        ExitCode::from(2)
    };
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return fail(format!("cannot read the current folder: {e}")),
    };
    let config = match Config::discover(&cwd, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    let found = discover::discover(&args.paths, &cwd, &config, args.force_exclude);
    if !found.missing.is_empty() {
        let list: Vec<_> = found
            .missing
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        return fail(format!("no such file or folder: {}", list.join(", ")));
    }
    for (path, why) in &found.skipped {
        eprintln!("txlint: skipping {}: {why}", path.display());
    }
    if found.files.is_empty() {
        // Everything named was excluded on purpose (pre-commit with --force-exclude): fine.
        if !found.skipped.is_empty() && args.force_exclude {
            return ExitCode::SUCCESS;
        }
        let names: Vec<_> = args.paths.iter().map(|p| p.display().to_string()).collect();
        return fail(format!(
            "no .sql or .rs files found in {}",
            names.join(", ")
        ));
    }
    let run = txlint::check_paths(&found.files, &cwd, &config);
    let to_terminal = args.output.is_none() && std::io::stdout().is_terminal();
    let style = TextStyle {
        color: to_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        width: if to_terminal { terminal_width() } else { 100 },
    };
    let rendered = report::render(&run, args.format, style);
    let written = match &args.output {
        Some(path) => std::fs::write(path, &rendered)
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => std::io::stdout()
            .lock()
            .write_all(rendered.as_bytes())
            .map_err(|e| format!("cannot write the report: {e}")),
    };
    if let Err(e) = written {
        return fail(e);
    }
    if args.output.is_some() || args.format != Format::Text {
        eprintln!("{}", report::text::summary(&run));
    }
    if run.unreadable == run.program.files.len() {
        return fail("none of the files could be read".to_string());
    }
    let threshold = match args.fail_on {
        FailOn::Error => Severity::Error,
        FailOn::Warning => Severity::Warning,
    };
    if run.diagnostics.iter().any(|d| d.severity >= threshold) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}
