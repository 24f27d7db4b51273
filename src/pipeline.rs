//! The pipeline: read the files, extract each front-end's units (in parallel), link the
//! program, run the rules, apply suppressions. `lib.rs` re-exports its entry points.

use crate::io::{MAX_FILE_SIZE, STACK, display_path};
use crate::{config, diagnostic, extract, io, model, rules, shown, source, suppress};

use std::path::{Path, PathBuf};
use std::time::Instant;

use config::Config;
use diagnostic::Diagnostic;
use extract::Stats;
use model::Program;
use rules::read_error::read_error_diagnostic;
use source::{FileId, SourceFile, Span};

use crate::run::Run;

/// Read `paths` (already discovered) and lint them.
pub fn check_paths(paths: &[PathBuf], cwd: &Path, config: &Config) -> Run {
    check_discovered(paths, &[], cwd, config)
}

/// Read `paths` and lint them; `errors` are the paths the walk could not read, with why, each
/// reported as a `read-error`.
pub fn check_discovered(
    paths: &[PathBuf],
    errors: &[(PathBuf, String)],
    cwd: &Path,
    config: &Config,
) -> Run {
    check_in_context(paths, &[], errors, cwd, config)
}

/// Lint `paths` with `context` read beside them but not reported on: a diagnostic is kept
/// when its primary span or one of its labels is in a named file (or in a file they bring in,
/// such as a `query_file!`), so a lock cycle between a named file and a context file is
/// reported, a finding only in the context is not.
pub fn check_in_context(
    paths: &[PathBuf],
    context: &[PathBuf],
    errors: &[(PathBuf, String)],
    cwd: &Path,
    config: &Config,
) -> Run {
    check_with(Vec::new(), paths, context, errors, cwd, config)
}

/// Lint a document an editor has open (its text may not be saved) with `context`, the rest of
/// the project, read from disk and not reported on (as [`check_in_context`]).
pub fn check_document(doc: SourceFile, context: &[PathBuf], cwd: &Path, config: &Config) -> Run {
    check_with(vec![doc], &[], context, &[], cwd, config)
}

/// `open` files (in memory) and `paths` are reported on, `context` is read beside them.
fn check_with(
    open: Vec<SourceFile>,
    paths: &[PathBuf],
    context: &[PathBuf],
    errors: &[(PathBuf, String)],
    cwd: &Path,
    config: &Config,
) -> Run {
    let start = Instant::now();
    let named = open.len() + errors.len() + paths.len();
    let all = named + context.len();
    let paths: Vec<&PathBuf> = paths.iter().chain(context).collect();
    let mut files = open;
    files.reserve(all);
    let mut early = Vec::new();
    let mut unreadable = 0;
    for (path, why) in errors {
        let id = files.len();
        unreadable += 1;
        early.push(read_error_diagnostic(Span::new(id, 0..0), why.clone()));
        files.push(SourceFile::new(
            path.clone(),
            display_path(path, cwd),
            String::new(),
        ));
    }
    for path in paths {
        // Each front-end reads its files itself, a file or a batch at a time.
        files.push(SourceFile::unread(path.clone(), display_path(path, cwd)));
    }
    let mut run = check_files(files, config);
    run.unreadable += unreadable;
    run.diagnostics.extend(early);
    shown::in_named(&mut run, named, context.len());
    shown::sort(&mut run.diagnostics);
    run.elapsed = start.elapsed();
    run
}

/// Lint files already in memory (the CLI, the tests and the documentation examples use this).
/// The work runs on a thread with a [`STACK`]-sized stack (on the caller's after
/// [`io::run_on_this_thread`]).
pub fn check_files(files: Vec<SourceFile>, config: &Config) -> Run {
    if io::on_this_thread() {
        return analyse(files, config);
    }
    let files = std::sync::Mutex::new(Some(files));
    let take = || {
        files
            .lock()
            .ok()
            .and_then(|mut f| f.take())
            .unwrap_or_default()
    };
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("txlint".into())
            .stack_size(STACK)
            .spawn_scoped(s, || analyse(take(), config));
        match worker {
            Ok(w) => match w.join() {
                Ok(run) => run,
                // A panic is a bug in txlint: report it as one, not as a clean run.
                Err(panic) => std::panic::resume_unwind(panic),
            },
            // No thread to be had: the work runs here, on the caller's stack.
            Err(_) => analyse(take(), config),
        }
    })
}

fn analyse(files: Vec<SourceFile>, config: &Config) -> Run {
    let start = Instant::now();
    let mut a = Analysis::new(files);
    let extracted = a.extract(config);
    let linked = a.link(extracted, config);
    a.isolation(config);
    a.skip(&linked, config);
    a.expand(&linked);
    a.check(config);
    a.filter(config);
    a.finish(start)
}

/// One run of the pipeline: read and extract every file, link what the front-ends gave into
/// one program, set aside the units the rules skip, follow routine calls and build the
/// schemas, check, then keep the findings the configuration and suppressions let through.
struct Analysis {
    program: Program,
    stats: Stats,
    diagnostics: Vec<Diagnostic>,
    suppressions: Vec<suppress::Suppression>,
    unreadable: usize,
    /// The `.sql` files (the others are Rust), by position in `program.files`.
    sql: Vec<usize>,
    /// The folder each file's project is in (its nearest `txlint.toml` or `Cargo.toml`).
    projects: std::collections::HashMap<PathBuf, Option<PathBuf>>,
}

/// What [`Analysis::link`] gathers beside the units: the routines the `.sql` files create and
/// drop, the tables declared in host code, the triggers.
struct Linked {
    routines: Vec<extract::RoutineEvent>,
    declared: Vec<model::TableDdl>,
    triggers: Vec<model::Trigger>,
}

impl Analysis {
    fn new(files: Vec<SourceFile>) -> Self {
        let sql = (0..files.len())
            .filter(|&i| !source::is_rust(&files[i].path))
            .collect();
        let mut program = Program::default();
        program.files = files;
        Analysis {
            program,
            stats: Stats::default(),
            diagnostics: Vec::new(),
            suppressions: Vec::new(),
            unreadable: 0,
            sql,
            projects: std::collections::HashMap::new(),
        }
    }

    /// Read and extract: the `.sql` files one per worker, then the Rust files as one batch.
    fn extract(&mut self, config: &Config) -> Vec<extract::Extracted> {
        let program = &mut self.program;
        let sql = &self.sql;
        let rust: Vec<usize> = (0..program.files.len())
            .filter(|&i| source::is_rust(&program.files[i].path))
            .collect();
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let sql_paths: Vec<PathBuf> = sql
            .iter()
            .map(|&i| absolute(&program.files[i].path))
            .collect();
        let sqlc = extract::sqlc::Sqlc::find(&sql_paths);
        let init = extract::initdb::ImageInit::find(&sql_paths);
        // The crate a .sql file belongs to names its database when nothing closer does.
        let mut crates = extract::dialects::Crates::default();
        let crate_dialects: Vec<_> = sql_paths.iter().map(|p| crates.of(p)).collect();
        let mut extracted = Vec::with_capacity(sql.len() + 1);
        // Which routines the `.sql` files define, before any is parsed: statements keep only
        // calls of these (see `model::routines`).
        let routines: extract::Routines = std::sync::Arc::new(
            io::parallel(sql.len(), |i| routine_names_in(&program.files[sql[i]]))
                .into_iter()
                .flatten()
                .collect(),
        );
        let from_sql = extract_sql_parallel(
            &program.files,
            sql,
            config,
            (&sqlc, &init),
            &crate_dialects,
            &routines,
        );
        for (&id, (x, read)) in sql.iter().zip(from_sql) {
            let f = &mut program.files[id];
            if let Some((lines, len)) = read.lines {
                f.lines = lines;
                f.unread = false;
                f.dropped = Some(len);
            }
            self.unreadable += usize::from(read.unreadable);
            self.diagnostics.extend(read.notes);
            self.suppressions.extend(read.suppressions);
            extracted.push(x);
        }
        if !rust.is_empty() {
            extracted.push(extract::rust::extract(
                &mut program.files,
                &rust,
                config,
                &routines,
            ));
        }
        extracted
    }

    /// Gather what the front-ends gave (units, notes, syntax errors, limits) into the program.
    fn link(&mut self, extracted: Vec<extract::Extracted>, config: &Config) -> Linked {
        let program = &mut self.program;
        let embedded: Vec<usize> = extracted
            .iter()
            .flat_map(|x| x.embedded.iter().copied())
            .collect();
        let mut linked = Linked {
            routines: Vec::new(),
            declared: Vec::new(),
            triggers: Vec::new(),
        };
        let scripts = self.sql.len();
        for (i, x) in extracted.into_iter().enumerate() {
            self.stats += x.stats;
            self.unreadable += x.unreadable;
            self.diagnostics.extend(x.notes);
            linked.routines.extend(x.routines);
            program.generated.extend(x.generated);
            program.unread_sql.extend(x.unread_sql);
            program.summaries.extend(x.summaries);
            linked.declared.extend(x.declared);
            linked.triggers.extend(x.triggers);
            self.diagnostics.extend(x.limits.iter().map(|l| {
                rules::analysis_limit::limit_diagnostic(l.span, "txlint", &l.what, &l.why, l.fix)
            }));
            // A SQL file Rust code sends is parsed where it is sent (a template may only be
            // the head of a statement the code completes): what it gave as a script is not
            // reported.
            self.diagnostics.extend(
                x.failures
                    .iter()
                    .filter(|f| i >= scripts || !embedded.contains(&f.span.file))
                    .map(rules::syntax_error::syntax_error_diagnostic),
            );
            program.units.extend(x.units);
        }
        // A call is walked once alone and again in each caller that walks its function in
        // place: each call site counts once.
        program.unread_sql.sort_unstable();
        program.unread_sql.dedup();
        // A SQL file that Rust code sends is not also a script: its statements run where the
        // code sends them.
        program
            .units
            .retain(|u| !(u.kind == model::UnitKind::Script && embedded.contains(&u.span.file)));
        for unit in &mut program.units {
            unit.test |= config.is_test_path(&program.files[unit.span.file].path);
        }
        linked
    }

    /// The database's default isolation level, for the transactions that set none: the
    /// configuration's, else SERIALIZABLE when the run's SQL is CockroachDB's.
    fn isolation(&mut self, config: &Config) {
        let files = &self.program.files;
        let cockroach = || {
            // A test suite's SQL says nothing of the database the code runs on.
            let mut sql = self.sql.iter().copied();
            sql.find(|&f| {
                let path = &files[f].path;
                !config.is_test_path(path)
                    && extract::dialects::is_cockroach(&config.relative(path))
            })
        };
        let level = match config.isolation {
            Some(level) => level,
            None => match cockroach() {
                Some(file) => {
                    self.program.cockroach = Some(file);
                    model::Isolation::Serializable
                }
                None => return,
            },
        };
        self.program.default_isolation(level);
    }

    /// Set aside the units the rules skip: another dialect's part, a routine a later
    /// definition replaces, unused code, tests (unless the configuration includes them).
    fn skip(&mut self, linked: &Linked, config: &Config) {
        let program = &mut self.program;
        let projects = &mut self.projects;
        let superseded: std::collections::HashMap<Span, extract::Superseded> =
            extract::superseded(&linked.routines, |f| {
                project_of(&program.files[f].path, projects)
            })
            .into_iter()
            .collect();
        for mut unit in std::mem::take(&mut program.units) {
            if let Some((other, dialect)) = unit.split_off_dialects() {
                program.skipped.push((other, model::Skip::Dialect(dialect)));
                if unit.transactions.is_empty() {
                    continue;
                }
            }
            let gone = (unit.kind == model::UnitKind::Routine)
                .then(|| superseded.get(&unit.span))
                .flatten();
            let skip = match gone {
                Some(&extract::Superseded::By(by))
                    if linked.routines.iter().any(|e| e.span == by && e.dropped) =>
                {
                    Some(model::Skip::Dropped(by))
                }
                Some(&extract::Superseded::By(by)) => Some(model::Skip::Replaced(by)),
                Some(&extract::Superseded::CopyOf(first)) => Some(model::Skip::Copy(first)),
                Some(&extract::Superseded::Dumped(source)) => Some(model::Skip::Dumped(source)),
                None if unit.unused => Some(model::Skip::Unused),
                None if unit.test && !config.include_tests => Some(model::Skip::Test),
                None => None,
            };
            match skip {
                Some(why) => program.skipped.push((unit, why)),
                None => program.units.push(unit),
            }
        }
    }

    /// Follow routine calls and triggers into the statements that run them, then build each
    /// project's schema from the run's DDL.
    fn expand(&mut self, linked: &Linked) {
        let program = &mut self.program;
        model::routines::drop_transition_reads(&mut program.units, &linked.triggers);
        model::routines::inline(&mut program.units, &linked.triggers);
        let files = &program.files;
        let projects = &mut self.projects;
        let schemas =
            model::schema::Schemas::build(&program.units, &linked.declared, files.len(), |f| {
                project_of(&files[f].path, projects)
            });
        program.schemas = schemas;
    }

    /// Run every rule the configuration turns on.
    fn check(&mut self, config: &Config) {
        let options = rules::Options {
            pool_mode: config.pool_mode,
            root: config.root.clone(),
        };
        let cx = rules::Context::new(&self.program, &options);
        for (rule, check) in rules::CHECKS {
            if config.severity(rule).is_some() {
                check(&cx, &mut self.diagnostics);
            }
        }
    }

    /// Keep what is shown: suppressions applied (and unused ones reported), each finding at
    /// its configured severity, rules turned off dropped; sorted, repeats merged.
    fn filter(&mut self, config: &Config) {
        // `.sql` files were scanned where they were read; Rust files and the SQL they send,
        // here.
        let scanned: std::collections::HashSet<FileId> = self.sql.iter().copied().collect();
        self.suppressions.extend(
            self.program
                .files
                .iter()
                .enumerate()
                .filter(|(id, _)| !scanned.contains(id))
                .flat_map(|(id, f)| suppress::scan(id, f.text())),
        );
        let diagnostics = std::mem::take(&mut self.diagnostics);
        self.diagnostics = shown::configured(
            &self.program.files,
            &mut self.suppressions,
            diagnostics,
            config,
        );
    }

    fn finish(self, start: Instant) -> Run {
        Run {
            program: self.program,
            diagnostics: self.diagnostics,
            stats: self.stats,
            unreadable: self.unreadable,
            context: 0,
            baselined: 0,
            witnesses: Vec::new(),
            elapsed: start.elapsed(),
        }
    }
}

/// What the worker that extracts a `.sql` file learned from reading it.
#[derive(Default)]
struct Read {
    /// The file was read here: its lines and length (its text is not kept).
    lines: Option<(source::LineIndex, usize)>,
    suppressions: Vec<suppress::Suppression>,
    notes: Vec<Diagnostic>,
    unreadable: bool,
}

/// `.sql` files are independent until the rules: read them on every core, results in file order.
/// The routine names a `.sql` file may define. A file on disk is scanned in pieces that
/// overlap by more than a name's length, never held whole (the pass that parses it reads it
/// again, and reports what it cannot read).
fn routine_names_in(f: &SourceFile) -> Vec<String> {
    use std::io::Read as _;
    const PIECE: usize = 64 * 1024;
    const OVERLAP: usize = 1024;
    if !f.unread {
        return extract::sql::routine_names(f.text());
    }
    // Only what `read` would read: a FIFO or a device would block or never end.
    let readable =
        std::fs::metadata(&f.path).is_ok_and(|m| m.is_file() && m.len() <= MAX_FILE_SIZE);
    if !readable {
        return Vec::new();
    }
    let Ok(mut file) = std::fs::File::open(&f.path) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut piece: Vec<u8> = Vec::with_capacity(PIECE + OVERLAP);
    let mut buf = vec![0; PIECE];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        piece.extend_from_slice(&buf[..n]);
        // A piece's last, cut-off name only adds a name. Valid UTF-8 (nearly every piece) is
        // checked much faster than it is converted.
        names.extend(match std::str::from_utf8(&piece) {
            Ok(text) => extract::sql::routine_names(text),
            Err(_) => extract::sql::routine_names(&String::from_utf8_lossy(&piece)),
        });
        let keep = piece.len().saturating_sub(OVERLAP);
        piece.drain(..keep);
    }
    names
}

fn extract_sql_parallel(
    files: &[SourceFile],
    ids: &[usize],
    config: &Config,
    (sqlc, init): (&extract::sqlc::Sqlc, &extract::initdb::ImageInit),
    crate_dialects: &[Option<source::Dialect>],
    routines: &extract::Routines,
) -> Vec<(extract::Extracted, Read)> {
    let one = |id: usize, crate_dialect: Option<source::Dialect>| {
        let f = &files[id];
        let mut read = Read::default();
        let loaded;
        let text = match f.unread {
            true => match extract::load(&f.path, id) {
                Ok((text, note)) => {
                    read.notes.extend(note);
                    loaded = text;
                    &loaded
                }
                Err(read_error) => {
                    read.notes.push(*read_error);
                    read.unreadable = true;
                    return (extract::Extracted::default(), read);
                }
            },
            false => f.text(),
        };
        let abs = std::path::absolute(&f.path).unwrap_or_else(|_| f.path.clone());
        let runner = extract::runners::detect(&abs, text, sqlc, init);
        let settings = config.settings_for(&f.path);
        // The configuration decides (txlint's, then sqlc's `engine`); else the file's folder or
        // name, its content, its crate.
        let dialect = settings
            .dialect
            .or(config.dialect)
            .or_else(|| sqlc.engine(&abs))
            .or_else(|| extract::dialects::of_path(&config.relative(&f.path)))
            .or_else(|| extract::dialects::of_text(text))
            .or(crate_dialect)
            .unwrap_or_default();
        read.suppressions = suppress::scan(id, text);
        if f.unread {
            read.lines = Some((source::LineIndex::new(text), text.len()));
        }
        (
            extract::sql::extract(id, text, dialect, settings, runner, routines.clone()),
            read,
        )
    };
    io::parallel(ids.len(), |i| one(ids[i], crate_dialects[i]))
}

/// Lint one text as if it were a file named `name` (examples and tests).
pub fn check_source(name: &str, text: &str, config: &Config) -> Run {
    let file = SourceFile::new(PathBuf::from(name), name.to_string(), text.to_string());
    check_files(vec![file], config)
}

/// The project a file belongs to: the nearest folder above it with a `Cargo.toml`,
/// `package.json`, `pyproject.toml`, `go.mod` or `.git`; `None` when there is none (the run is
/// then one project). `known` caches the answer per folder.
fn project_of(
    path: &Path,
    known: &mut std::collections::HashMap<PathBuf, Option<PathBuf>>,
) -> Option<PathBuf> {
    const MARKERS: [&str; 5] = [
        "Cargo.toml",
        "package.json",
        "pyproject.toml",
        "go.mod",
        ".git",
    ];
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = abs.parent()?.to_path_buf();
    if let Some(p) = known.get(&dir) {
        return p.clone();
    }
    let found = dir
        .ancestors()
        .find(|d| MARKERS.iter().any(|m| d.join(m).exists()))
        .map(Path::to_path_buf);
    known.insert(dir, found.clone());
    found
}
