//! The `txlint` command: arguments -> library -> reporter -> exit code.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use txlint::config::Config;
use txlint::diagnostic::Severity;
use txlint::report::{self, Format, TextStyle};
use txlint::{discover, registry, workspace};

mod args;
use args::*;

/// glibc gives each thread that allocates an arena of its own and keeps what is freed in it:
/// the workers' parse trees, freed file by file, stay as holes beside the model. Two arenas
/// for the two kinds of thread (the workers, the rest) take about 13 % off a run's peak memory
/// at no cost in time (8 copies of the corpus: 268 -> 234 MB; `cargo bench --bench scale`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fewer_arenas() {
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;
    // SAFETY: `mallopt` sets one allocator parameter; it is called before any thread starts.
    unsafe {
        mallopt(M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fewer_arenas() {}

fn main() -> ExitCode {
    fewer_arenas();
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check(args),
        Command::Init { force } => {
            let path = Path::new(txlint::config::FILE_NAME);
            if path.exists() && !force {
                return fail(format!(
                    "{} is already there (--force replaces it)",
                    path.display()
                ));
            }
            match std::fs::write(path, txlint::config::starter()) {
                Ok(()) => {
                    eprintln!(
                        "txlint: wrote {}: every setting is commented out, the defaults",
                        path.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(format!("cannot write {}: {e}", path.display())),
            }
        }
        Command::Lsp => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let (connection, io) = txlint::lsp::stdio();
            let served = txlint::lsp::serve(&connection, &cwd);
            txlint::lsp::finish(connection, io);
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e == txlint::lsp::EXIT_WITHOUT_SHUTDOWN => {
                    eprintln!("txlint: language server: {e}");
                    ExitCode::from(1)
                }
                Err(e) => fail(format!("language server: {e}")),
            }
        }
        Command::Graph {
            paths,
            format,
            config,
        } => match load(&paths, config.as_deref(), false, false, false, &[]) {
            Ok((run, partial)) => exit_partial(emit(&report::graph::render(&run, format)), partial),
            Err(code) => code,
        },
        Command::Schema { paths, config } => {
            match load(&paths, config.as_deref(), false, false, false, &[]) {
                Ok((run, partial)) => exit_partial(emit(&report::schema::render(&run)), partial),
                Err(code) => code,
            }
        }
        Command::Model { paths, config } => {
            match load(&paths, config.as_deref(), false, false, false, &[]) {
                Ok((run, partial)) => exit_partial(emit(&report::model::render(&run)), partial),
                Err(code) => code,
            }
        }
        Command::Witness { at, format, config } => witness(&at, format, config.as_deref()),
        Command::Rules { markdown } => {
            if markdown {
                return emit(&registry::index_markdown());
            }
            let width = registry::ALL
                .iter()
                .map(|r| r.name.len())
                .max()
                .unwrap_or(0);
            let list: String = registry::ALL
                .iter()
                .map(|r| {
                    format!(
                        "{:width$}  {:7}  {}\n",
                        r.name,
                        r.severity.as_str(),
                        r.summary()
                    )
                })
                .collect();
            emit(&list)
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "txlint", &mut script);
            emit(&String::from_utf8_lossy(&script))
        }
        Command::Explain { rule } => match registry::find(&rule) {
            Some(r) => emit(r.doc),
            None => {
                eprintln!("txlint: unknown rule `{rule}`; `txlint rules` lists the rules");
                ExitCode::from(2)
            }
        },
    }
}

/// Print to standard output; a closed pipe (`txlint model | head -1`) or a full disk is a
/// message and exit 2, not a panic.
fn emit(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(format!("cannot write the output: {e}")),
    }
}

/// `code`, or 2 when some input could not be used (already reported).
fn exit_partial(code: ExitCode, partial: bool) -> ExitCode {
    if partial { ExitCode::from(2) } else { code }
}

fn fail(msg: String) -> ExitCode {
    eprintln!("txlint: {msg}");
    ExitCode::from(2)
}

/// The working folder and the configuration for it (`--config`, else the nearest file), with
/// `exclude` added.
fn start(config: Option<&Path>, exclude: &[String]) -> Result<(PathBuf, Config), ExitCode> {
    let cwd = std::env::current_dir()
        .map_err(|e| fail(format!("cannot read the current folder: {e}")))?;
    let config = workspace::config_of(&cwd, config, exclude).map_err(|e| fail(e.to_string()))?;
    Ok((cwd, config))
}

/// Configuration, discovery and the run, and whether some input could not be used (a path
/// that is not there, a project whose `txlint.toml` is broken: reported, the rest linted);
/// `Err` is the exit code after a message.
/// `by_project`: each file with its nearest configuration ([`workspace::projects`]); the model, graph and
/// schema views show one run, with the working folder's.
fn load(
    paths: &[PathBuf],
    config_path: Option<&Path>,
    force_exclude: bool,
    context: bool,
    by_project: bool,
    exclude: &[String],
) -> Result<(txlint::Run, bool), ExitCode> {
    let (cwd, config) = start(config_path, exclude)?;
    let found = discover::discover(paths, &cwd, &config, force_exclude);
    // A path that is not there is reported and the rest linted; the run then exits 2.
    let mut partial = false;
    if !found.missing.is_empty() {
        let list: Vec<_> = found
            .missing
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        fail(format!("no such file or folder: {}", list.join(", ")));
        partial = true;
    }
    for (path, why) in &found.skipped {
        eprintln!("txlint: skipping {}: {why}", path.display());
    }
    if found.files.is_empty() {
        // Everything named was excluded on purpose (pre-commit with --force-exclude): fine.
        if !found.skipped.is_empty() && force_exclude {
            return Err(ExitCode::SUCCESS);
        }
        let names: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(fail(format!(
            "no .sql or .rs files found in {}",
            names.join(", ")
        )));
    }
    let named = paths.iter().all(|p| p.is_file());
    let explicit = config_path.is_some() || !by_project;
    let (projects, broken) =
        workspace::projects(&found.files, config, &cwd, explicit, exclude, |f| {
            force_exclude || !paths.contains(f)
        });
    for (e, files) in &broken {
        fail(format!("{e} (its {files} files were not linted)"));
    }
    partial |= !broken.is_empty();
    let mut run: Option<txlint::Run> = None;
    let mut errors = &found.errors[..];
    for (config, files) in &projects {
        let context = match context && named {
            true => discover::context_of(files, &cwd, config),
            false => Vec::new(),
        };
        let one = txlint::check_in_context(files, &context, errors, &cwd, config);
        errors = &[];
        match &mut run {
            Some(all) => all.merge(one),
            None => run = Some(one),
        }
    }
    let Some(run) = run else {
        let names: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(fail(format!(
            "no .sql or .rs files found in {} that their txlint.toml includes",
            names.join(", ")
        )));
    };
    if run.unreadable == run.program.files.len() {
        // Say which and why, not only that nothing was read.
        for d in &run.diagnostics {
            eprintln!(
                "txlint: {}: {}",
                run.program.files[d.span.file].display, d.message
            );
        }
        return Err(fail("none of the files could be read".to_string()));
    }
    Ok((run, partial))
}

/// `txlint witness path:line`.
fn witness(at: &std::ffi::OsStr, format: WitnessFormat, config: Option<&Path>) -> ExitCode {
    let Some((path, line)) = path_and_line(at) else {
        return fail(format!("`{}` is not path:line", at.to_string_lossy()));
    };
    let run = match load(std::slice::from_ref(&path), config, false, true, false, &[]) {
        Ok((run, _)) => run,
        Err(code) => return code,
    };
    let same = |p: &Path| p.canonicalize().ok() == path.canonicalize().ok();
    let here: Vec<&txlint::diagnostic::Diagnostic> = run
        .diagnostics
        .iter()
        .filter(|d| registry::find(d.rule).is_some_and(|r| r.core))
        .filter(|d| {
            let f = &run.program.files[d.span.file];
            same(&f.path) && f.line(d.span.start()) == line
        })
        .collect();
    if here.is_empty() {
        let lines: Vec<String> = run
            .diagnostics
            .iter()
            .filter(|d| same(&run.program.files[d.span.file].path))
            .map(|d| {
                run.program.files[d.span.file]
                    .line(d.span.start())
                    .to_string()
            })
            .collect();
        let hint = match lines.is_empty() {
            true => "it has no findings".to_string(),
            false => format!("its findings are at lines {}", lines.join(", ")),
        };
        return fail(format!("no finding at {}: {hint}", at.to_string_lossy()));
    }
    let index = txlint::witness::Witnesses::new(&run.program);
    let results: Vec<_> = here.iter().map(|d| index.of(d)).collect();
    let out = match format {
        WitnessFormat::Json => {
            let v: Vec<serde_json::Value> = results
                .iter()
                .map(|r| match r {
                    Ok(w) => serde_json::json!({ "witness": w }),
                    Err(why) => serde_json::json!({ "missing": why }),
                })
                .collect();
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
        WitnessFormat::Text => results
            .iter()
            .map(|r| match r {
                Ok(w) => txlint::witness::render(w),
                Err(why) => format!("-- no witness: {why}\n"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    let code = emit(&out);
    match results.iter().any(Result::is_ok) {
        true => code,
        false => ExitCode::from(1),
    }
}

/// `txlint check -`: one document from standard input, standing for `--stdin-filename`, with
/// the project around that path as context (unless --no-context).
fn from_stdin(args: &CheckArgs) -> Result<txlint::Run, ExitCode> {
    let (cwd, config) = start(args.config.as_deref(), &[])?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
        .map_err(|e| fail(format!("cannot read standard input: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| fail("standard input is not UTF-8 text".to_string()))?;
    let path = &args.stdin_filename;
    // The document's own project, as for a file on disk.
    let config = match (&args.config, cwd.join(path).parent()) {
        (None, Some(folder)) if folder.is_dir() => {
            workspace::config_of(folder, None, &[]).map_err(|e| fail(e.to_string()))?
        }
        _ => config,
    };
    if !config.reads(path) {
        return Err(fail(format!(
            "--stdin-filename {} must end in .sql or .rs (or one of sql.extensions)",
            path.display()
        )));
    }
    let context = match args.no_context {
        true => Vec::new(),
        false => discover::context_of(std::slice::from_ref(path), &cwd, &config),
    };
    let display = txlint::display_path(path, &cwd);
    let doc = txlint::source::SourceFile::new(path.clone(), display, text);
    Ok(txlint::check_document(doc, &context, &cwd, &config))
}

fn check(args: CheckArgs) -> ExitCode {
    if args.witness && !matches!(args.format, Format::Json) {
        return fail(
            "--witness goes with --format json (or use `txlint witness path:line`)".into(),
        );
    }
    // A rule named wrong is said before the run, not after it.
    let mut choice = match txlint::shown::Choice::new(&args.select, &args.ignore) {
        Ok(choice) => choice,
        Err(e) => return fail(e),
    };
    let loaded = match args.paths.iter().any(|p| p.as_os_str() == "-") {
        true if args.paths.len() > 1 => Err(fail(
            "`-` (standard input) is the only path of its run".to_string(),
        )),
        true => from_stdin(&args).map(|run| (run, false)),
        false => load(
            &args.paths,
            args.config.as_deref(),
            args.force_exclude,
            !args.no_context,
            true,
            &args.exclude,
        ),
    };
    let (mut run, partial) = match loaded {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    if let Some(file) = &args.baseline {
        if args.write_baseline {
            return write_baseline(&run, file);
        }
        match read_baseline(file) {
            Ok(known) => choice = choice.with_baseline(known),
            Err(e) => return fail(e),
        }
    }
    choice.apply(&mut run);
    if args.witness {
        run.witnesses = witnesses(&run);
    }
    // The reports need the files and the findings, not the model: give its memory back first.
    run.program.forget_model();
    if let Err(e) = write_report(&args, &run) {
        return fail(e);
    }
    if !args.quiet && (args.output.is_some() || args.format != Format::Text || args.statistics) {
        eprintln!("{}", report::text::summary(&run));
    }
    let threshold = match args.fail_on {
        FailOn::Error => Severity::Error,
        FailOn::Warning => Severity::Warning,
        FailOn::Info => Severity::Info,
    };
    if partial {
        ExitCode::from(2)
    } else if !args.exit_zero && run.diagnostics.iter().any(|d| d.severity >= threshold) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `--write-baseline`: the run's findings written to `file`.
fn write_baseline(run: &txlint::Run, file: &Path) -> ExitCode {
    let text = txlint::baseline::write(run);
    match std::fs::write(file, text) {
        Ok(()) => {
            eprintln!(
                "txlint: wrote {} findings to the baseline {}",
                run.diagnostics.len(),
                file.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("cannot write {}: {e}", file.display())),
    }
}

/// `--baseline`: the findings known before, which are not shown again.
fn read_baseline(file: &Path) -> Result<std::collections::HashSet<String>, String> {
    match std::fs::read_to_string(file) {
        Ok(text) => txlint::baseline::parse(&text)
            .map_err(|e| format!("{}: not a txlint baseline: {e}", file.display())),
        Err(e) => Err(format!(
            "cannot read the baseline {}: {e} (write one with --write-baseline)",
            file.display()
        )),
    }
}

/// `--witness`: each core rule's finding's witness, or why none could be written.
fn witnesses(run: &txlint::Run) -> Vec<Option<Result<txlint::witness::Witness, String>>> {
    let index = txlint::witness::Witnesses::new(&run.program);
    run.diagnostics
        .iter()
        .map(|d| {
            let core = registry::find(d.rule).is_some_and(|r| r.core);
            core.then(|| index.of(d))
        })
        .collect()
}

/// The report, in the format asked, to `--output` or standard output.
fn write_report(args: &CheckArgs, run: &txlint::Run) -> Result<(), String> {
    let to_terminal = args.output.is_none() && std::io::stdout().is_terminal();
    let style = TextStyle {
        color: match args.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => to_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        },
        width: if to_terminal { terminal_width() } else { 100 },
    };
    let rendered = match (args.statistics, args.format) {
        (true, _) => statistics(run),
        (false, Format::Text) if args.quiet => report::text::render_findings(run, style),
        (false, format) => report::render(run, format, style),
    };
    match &args.output {
        Some(path) => std::fs::write(path, &rendered)
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => std::io::stdout()
            .lock()
            .write_all(rendered.as_bytes())
            .map_err(|e| format!("cannot write the report: {e}")),
    }
}

/// `--statistics`: findings per rule, most first: count, rule, its severity.
fn statistics(run: &txlint::Run) -> String {
    let mut counts: Vec<(usize, &str, Severity)> = Vec::new();
    for d in &run.diagnostics {
        match counts.iter_mut().find(|(_, r, _)| *r == d.rule) {
            Some(c) => c.0 += 1,
            None => counts.push((1, d.rule, d.severity)),
        }
    }
    counts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    counts
        .iter()
        .map(|(n, rule, severity)| format!("{n:>6}  {rule}  {}\n", severity.as_str()))
        .collect()
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}

/// `path:line`, the path in any bytes the file system takes (not only UTF-8).
fn path_and_line(at: &std::ffi::OsStr) -> Option<(PathBuf, usize)> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let bytes = at.as_bytes();
        let colon = bytes.iter().rposition(|&b| b == b':')?;
        let line = std::str::from_utf8(&bytes[colon + 1..])
            .ok()?
            .parse()
            .ok()?;
        let path = std::ffi::OsStr::from_bytes(&bytes[..colon]);
        Some((PathBuf::from(path), line))
    }
    #[cfg(not(unix))]
    {
        let (path, line) = at.to_str()?.rsplit_once(':')?;
        Some((PathBuf::from(path), line.parse().ok()?))
    }
}
