//! Rust sources: the SQL strings sent through sqlx, tokio-postgres/postgres, deadpool/bb8,
//! diesel and sea-orm, with the session and transaction each statement runs on.
//!
//! Every function body becomes a unit. Its statements are walked in program order (both arms
//! of a branch, a loop body once); each value is followed just far enough to know whether it is
//! a database handle (and of which kind) or SQL text. A call to a function of the run that is
//! given a handle is walked in place, with its parameter bound to the caller's handle, so a
//! helper's statements join the caller's transaction; such a helper is then not reported on
//! its own.

mod calls;
mod dataflow;
mod depth;
mod diesel;
mod fallback;
mod index;
mod jobs;
mod library;
mod lit;
mod macros;
mod modules;
mod names;
mod order;
mod parsed;
pub mod prescan;
mod returns;
mod seaorm;
mod types;
mod walk;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::{LineColumn, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;

use super::session::SessionWalker;
use super::{Extracted, Front, dialects};
use crate::config::Config;
use crate::model::*;
use crate::parse::facts::ParseFailure;
use crate::parse::split::split;
use crate::source::{Dialect, FileId, LineIndex, OffsetMap, SourceFile, Span};
use index::{FnDef, Index, in_scope, is_test};
use parsed::{Parsed, Unparsed, expand_macros, home, mentions_text, parse};

/// Methods that send the SQL given as their first argument on their receiver.
const CLIENT_METHODS: &[&str] = &[
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "query_typed",
    "query_typed_raw",
    "execute",
    "execute_raw",
    "batch_execute",
    "simple_query",
    "execute_unprepared",
    "query_all",
    "copy_in",
    "copy_out",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
    "execute_many",
];
/// Of those, the ones that send a whole script in one simple-query message.
const BATCH_METHODS: &[&str] = &["batch_execute", "simple_query", "execute_unprepared"];
/// sqlx `Executor` methods: given a bare string (one argument, not a `sqlx::query(..)`), they
/// send it with the simple-query protocol (`Execute for &str` has no arguments).
const SQLX_SIMPLE: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
];
/// Methods whose result is one row or none, as an `Option`.
const OPTIONAL: &[&str] = &["fetch_optional", "query_opt", "optional", "one"];
/// Builder methods that run the query on the executor given as their argument.
const TERMINALS: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
    "load",
    "get_result",
    "get_results",
    "first",
    "one",
    "all",
];
/// Conversions that keep an error an error, between a call and the `?` that passes it on.
const PASS_ON: &[&str] = &[
    "map_err",
    "context",
    "with_context",
    "wrap_err",
    "wrap_err_with",
    "map",
    "err_into",
    "change_context",
    "attach_printable",
];
/// Functions that start a query builder from SQL (sqlx, diesel).
const BUILDERS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_with",
    "query_as_with",
    "query_scalar_with",
    "raw_sql",
    "sql_query",
];
/// sqlx query macros: (name, index of the SQL argument, SQL is a file path).
const MACROS: &[(&str, usize, bool)] = &[
    ("query", 0, false),
    ("query_unchecked", 0, false),
    ("query_scalar", 0, false),
    ("query_scalar_unchecked", 0, false),
    ("query_as", 1, false),
    ("query_as_unchecked", 1, false),
    ("query_file", 0, true),
    ("query_file_unchecked", 0, true),
    ("query_file_scalar", 0, true),
    ("query_file_scalar_unchecked", 0, true),
    ("query_file_as", 1, true),
    ("query_file_as_unchecked", 1, true),
];

/// Read the Rust files `ids` of `files`; SQL files named by `query_file!` are added to `files`.
///
/// Files are read in batches, one per Cargo workspace (calls are followed within a batch), on
/// every core. A file is read from disk here if it was not read yet, given to syn only if the
/// pre-scan says it can matter, and forgotten again (text and syntax tree) once its batch is
/// walked unless a statement, a unit or a suppression comment points into it: memory holds
/// the largest workspace's syntax trees, not the whole tree's.
pub fn extract(
    files: &mut Vec<SourceFile>,
    ids: &[FileId],
    config: &Config,
    routines: &crate::extract::Routines,
) -> Extracted {
    let batches = batches(files, ids);
    let extra = Extra::new(files, batches.len());
    // Each batch's files move to the thread that reads them, and back.
    let work: Vec<std::sync::Mutex<Vec<(FileId, SourceFile)>>> = batches
        .iter()
        .map(|b| {
            let own = b
                .iter()
                .map(|&id| {
                    let placeholder = SourceFile::unread(PathBuf::new(), String::new());
                    (id, std::mem::replace(&mut files[id], placeholder))
                })
                .collect();
            std::sync::Mutex::new(own)
        })
        .collect();
    let results = crate::io::parallel(work.len(), |b| {
        let own = work[b]
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        let result = batch(b, own, config, &extra, routines);
        extra.done(b);
        result
    });
    let mut out = Extracted::default();
    for (x, own) in results {
        for (id, f) in own {
            files[id] = f;
        }
        out.merge(x);
    }
    files.extend(extra.into_files());
    out
}

/// Files the pre-scan left out that invoke a `macro_rules!` macro whose definition (in a file
/// to be parsed) can matter: what the macro writes there can send SQL (see [`macros`]). Their
/// text is read again if it was let go.
fn macro_users(
    own: &mut [(FileId, SourceFile)],
    (candidates, skipped): (&[usize], &[usize]),
    cfg: &crate::config::RustConfig,
    out: &mut Extracted,
) -> Vec<usize> {
    let names = candidates
        .iter()
        .flat_map(|&i| macros::defined(own[i].1.text()))
        .filter(|(_, body)| prescan::item_may_matter(body, cfg))
        .map(|(name, _)| name);
    let Some(finder) = macros::Invocations::new(names) else {
        return Vec::new();
    };
    let mut users = Vec::new();
    for &i in skipped {
        let (id, f) = &mut own[i];
        if f.text().is_empty() {
            match crate::extract::load(&f.path, *id) {
                Ok((text, _)) if finder.in_text(&text) => f.set_text(text),
                Ok(_) => continue,
                Err(read_error) => {
                    out.notes.push(*read_error);
                    continue;
                }
            }
        } else if !finder.in_text(f.text()) {
            continue;
        }
        users.push(i);
    }
    users
}

/// Text to parse above which a batch waits until no other such batch is being read: two large
/// workspaces' syntax trees at once set a whole run's peak memory (the registry's 1,603 crates:
/// 374 -> 295 MB; `cargo bench --bench rust_tree`).
const HEAVY_ABOVE: usize = 1024 * 1024;

/// Text given to syn above which a batch returns the memory its syntax trees freed to the
/// system.
const TRIM_AFTER: usize = 256 * 1024;

/// glibc keeps what a thread frees in its arena, so the next batch's trees land beside the
/// holes the last one left: the process grew with every large workspace it read, not with the
/// largest (the registry: 428 -> 374 MB, no cost in time).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_back_memory() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::os::raw::c_int;
    }
    // SAFETY: `malloc_trim` only returns free pages of the allocator's arenas to the system.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back_memory() {}

/// The Rust files of one batch, read, walked and (where nothing points into them) forgotten.
fn batch(
    b: usize,
    mut own: Vec<(FileId, SourceFile)>,
    config: &Config,
    extra: &Extra,
    routines: &crate::extract::Routines,
) -> (Extracted, Vec<(FileId, SourceFile)>) {
    let mut front = Front::new(0, config.dialect.unwrap_or_default(), routines.clone());
    let mut crates = dialects::Crates::default();
    let mut parsed = Vec::new();
    let mut late = HashSet::new();
    let mut candidates = Vec::new();
    let mut modules = modules::Modules::default();
    // Files read here and not parsed: a background job's loop may be there (see `jobs::mark`).
    let mut unparsed = Vec::new();
    // Files the pre-scan left out.
    let mut skipped = Vec::new();
    for (i, (id, f)) in own.iter_mut().enumerate() {
        if f.unread {
            f.unread = false;
            match crate::extract::load(&f.path, *id) {
                Ok((text, note)) => {
                    front.out.notes.extend(note);
                    late.insert(*id);
                    modules.add(&f.path, &text);
                    if !prescan::may_matter(&text, &config.rust) {
                        front.out.stats.rust_skipped += 1;
                        unparsed.push(i);
                        skipped.push(i);
                        continue;
                    }
                    f.set_text(text);
                }
                Err(read_error) => {
                    front.out.notes.push(*read_error);
                    front.out.unreadable += 1;
                    continue;
                }
            }
        } else {
            modules.add(&f.path, f.text());
            if !prescan::may_matter(f.text(), &config.rust) {
                front.out.stats.rust_skipped += 1;
                skipped.push(i);
                continue;
            }
        }
        candidates.push(i);
    }
    for i in macro_users(
        &mut own,
        (&candidates, &skipped),
        &config.rust,
        &mut front.out,
    ) {
        front.out.stats.rust_skipped -= 1;
        unparsed.retain(|&u| u != i);
        candidates.push(i);
    }
    candidates.sort_unstable();
    // One heavy batch at a time (see `HEAVY_ABOVE`).
    let bytes: usize = candidates.iter().map(|&i| own[i].1.text().len()).sum();
    let heavy = (bytes > HEAVY_ABOVE).then(|| extra.heavy(b));
    for i in candidates {
        let (id, f) = &mut own[i];
        // The database the file's SQL is for, where nothing closer tells (see `emit`).
        let dialect = config
            .settings_for(&f.path)
            .dialect
            .or(config.dialect)
            .or_else(|| dialects::of_rust_text(f.text()))
            .or_else(|| crates.of(&f.path))
            .unwrap_or_default();
        match parse(*id, f, dialect, &config.rust) {
            Ok(p) => parsed.push(p),
            Err(why) => {
                front.dialect = dialect;
                fallback::fallback_walk(&mut front, f, *id, why)
            }
        }
    }
    if !parsed.is_empty() {
        expand_macros(&mut parsed);
        walk_all(&mut front, &parsed, config, (b, extra), &modules);
    }
    drop(parsed);
    jobs::mark(&mut front.out.units, &mut own, unparsed, config);
    // proc-macro2 keeps every parsed file in a thread-local source map.
    proc_macro2::extra::invalidate_current_thread_spans();
    drop(heavy);
    if bytes > TRIM_AFTER {
        give_back_memory();
    }
    // Files read here that nothing points into are forgotten (a suppression comment counts).
    let mut kept: HashSet<FileId> = front.out.units.iter().flat_map(Unit::files).collect();
    kept.extend(front.out.summaries.iter().flat_map(|s| s.unit.files()));
    kept.extend(front.out.failures.iter().map(|f| f.span.file));
    kept.extend(front.out.unread_sql.iter().map(|s| s.file));
    for (id, f) in &mut own {
        if late.contains(id) && !kept.contains(id) && !f.text().contains("txlint") {
            f.forget();
        }
    }
    (front.out, own)
}

/// Every function of a batch's parsed files, walked.
fn walk_all(
    front: &mut Front,
    parsed: &[Parsed],
    config: &Config,
    (b, extra): (usize, &Extra),
    modules: &modules::Modules,
) {
    let index = Index::build(parsed, config, modules);
    let mut shared = Shared {
        cache: HashMap::new(),
        inlined: HashMap::new(),
        extra,
        batch: b,
    };
    // SQL files that constants include are query files of the code, whether or not a call
    // using the constant is recognised.
    for (file, expr) in &index.consts {
        Walker::new(&index, front, &mut shared, *file).sql_only(expr);
    }
    let mut units = Vec::new();
    for (i, f) in index.fns.iter().enumerate() {
        let mut w = Walker::new(&index, front, &mut shared, f.file);
        w.test = f.test && !config.include_tests;
        w.in_async = f.sig.asyncness.is_some();
        w.borrowed = f
            .sig
            .inputs
            .iter()
            .filter_map(|a| match a {
                syn::FnArg::Typed(t) if matches!(&*t.ty, syn::Type::Reference(_)) => {
                    match &*t.pat {
                        syn::Pat::Ident(id) => Some(id.ident.to_string()),
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect();
        w.stack.push(i);
        w.params(f.sig, f.owner, None, None);
        let returns = match w.body(f.block) {
            Value::Handle(h) => Returns::Handle(h.kind),
            Value::Data(flow) => Returns::Data(flow.iter().collect()),
            _ => Returns::Nothing,
        };
        let open: Vec<usize> = w.walkers.iter().filter_map(|s| s.open_since()).collect();
        units.push((i, w.finish(f), returns, open));
    }
    // A function that sends nothing is no unit: no rule has anything to read in it, and its
    // file need not stay in memory. One that callers walk in place is their statements; its
    // own walk is kept as its summary.
    for (i, unit, returns, open) in units {
        if unit.transactions.is_empty() {
            continue;
        }
        match shared.inlined.remove(&i) {
            Some(mut callers) => {
                callers.sort_by_key(|s| (s.file, s.start()));
                callers.dedup();
                front.out.summaries.push(Summary {
                    unit,
                    callers,
                    returns,
                    open,
                });
            }
            None => front.out.units.push(unit),
        }
    }
    let mut declared: Vec<_> = index.tables.values().cloned().collect();
    // `joinable!(child -> parent (column))`: a foreign key to the parent's primary key.
    for [child, parent, column] in &index.joinables {
        let (Some(c), Some(p)) = (index.tables.get(child), index.tables.get(parent)) else {
            continue;
        };
        let fk = ForeignKey {
            name: None,
            columns: vec![column.clone()],
            table: p.table.clone(),
            referred: p.primary_key.clone().unwrap_or_default(),
        };
        if let Some(d) = declared.iter_mut().find(|d| d.table == c.table)
            && !d.foreign_keys.contains(&fk)
        {
            d.foreign_keys.push(fk);
        }
    }
    // sea-orm's `#[sea_orm(belongs_to = "super::parent::Entity", from = .., to = ..)]`.
    let table_of = |module: &str| {
        let t = index
            .entity_tables
            .get(module)
            .map_or(module, String::as_str);
        t.to_string()
    };
    for [child, parent, from, to] in &index.relations {
        let fk = ForeignKey {
            name: None,
            columns: vec![from.clone()],
            table: table_of(parent),
            referred: vec![to.clone()],
        };
        let child = table_of(child);
        if let Some(d) = declared.iter_mut().find(|d| d.table == child)
            && !d.foreign_keys.contains(&fk)
        {
            d.foreign_keys.push(fk);
        }
    }
    declared.sort_by(|a, b| a.table.cmp(&b.table));
    front.out.declared.extend(declared);
}

/// The Rust files in batches, one per Cargo workspace (the nearest `Cargo.toml` with a
/// `[workspace]` above the file, as Cargo finds it, else the nearest one), files outside any
/// crate together; largest batch first, so that the cores finish together. A workspace inside
/// another (a benchmark suite's crates, each its own) is a batch of its own.
fn batches(files: &[SourceFile], ids: &[FileId]) -> Vec<Vec<FileId>> {
    let mut roots: HashMap<PathBuf, Option<PathBuf>> = HashMap::new();
    let mut manifests: HashMap<PathBuf, bool> = HashMap::new();
    let mut by_root: HashMap<Option<PathBuf>, Vec<FileId>> = HashMap::new();
    for &id in ids {
        let abs = std::path::absolute(&files[id].path).unwrap_or_else(|_| files[id].path.clone());
        let dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
        let root = roots
            .entry(dir.clone())
            .or_insert_with(|| {
                let mut nearest = None;
                let mut workspace = None;
                for d in dir.ancestors() {
                    let m = d.join("Cargo.toml");
                    let is_workspace = *manifests.entry(m.clone()).or_insert_with(|| {
                        std::fs::read_to_string(&m)
                            .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
                    });
                    if nearest.is_none() && m.is_file() {
                        nearest = Some(d.to_path_buf());
                    }
                    if is_workspace && workspace.is_none() {
                        workspace = Some(d.to_path_buf());
                    }
                }
                workspace.or(nearest)
            })
            .clone();
        by_root.entry(root).or_default().push(id);
    }
    let mut out: Vec<Vec<FileId>> = by_root.into_values().collect();
    out.sort_by_key(|b| (std::cmp::Reverse(b.len()), b[0]));
    out
}

/// SQL files that Rust code names (`query_file!`, `include_str!`) beyond the run's own: each
/// gets the next file id. Batches run in parallel, so that ids do not depend on timing a batch
/// that needs a new one waits until every earlier batch is done (batches start in order, so
/// the earlier ones are running or done; it is rare: the run usually has the file already).
///
/// It also lets one heavy batch at a time hold its syntax trees (see [`HEAVY_ABOVE`]). A heavy
/// batch that waits for an earlier one here gives that turn up, or the earlier one could be
/// waiting for it.
struct Extra {
    state: std::sync::Mutex<ExtraState>,
    turn: std::sync::Condvar,
}

struct ExtraState {
    by_path: HashMap<PathBuf, FileId>,
    files: Vec<SourceFile>,
    first: FileId,
    done: Vec<bool>,
    /// The heavy batch holding its syntax trees.
    heavy: Option<usize>,
}

/// A heavy batch's turn, given back when dropped.
struct Heavy<'a> {
    extra: &'a Extra,
    batch: usize,
}

impl Drop for Heavy<'_> {
    fn drop(&mut self) {
        if let Ok(mut st) = self.extra.state.lock()
            && st.heavy == Some(self.batch)
        {
            st.heavy = None;
        }
        self.extra.turn.notify_all();
    }
}

impl Extra {
    fn new(files: &[SourceFile], batches: usize) -> Self {
        let by_path = files
            .iter()
            .enumerate()
            .filter(|(_, f)| !crate::source::is_rust(&f.path))
            .map(|(id, f)| (f.path.canonicalize().unwrap_or_else(|_| f.path.clone()), id))
            .collect();
        Extra {
            state: std::sync::Mutex::new(ExtraState {
                by_path,
                files: Vec::new(),
                first: files.len(),
                done: vec![false; batches],
                heavy: None,
            }),
            turn: std::sync::Condvar::new(),
        }
    }

    /// The id of the file at `path`, made by `make` if the run does not have it yet.
    fn id(&self, batch: usize, path: &Path, make: impl FnOnce() -> SourceFile) -> Option<FileId> {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let mut st = self.state.lock().ok()?;
        if let Some(&id) = st.by_path.get(&key) {
            return Some(id);
        }
        while !st.done[..batch].iter().all(|&d| d) {
            if st.heavy == Some(batch) {
                st.heavy = None;
                self.turn.notify_all();
            }
            st = self.turn.wait(st).ok()?;
        }
        if let Some(&id) = st.by_path.get(&key) {
            return Some(id);
        }
        let id = st.first + st.files.len();
        st.files.push(make());
        st.by_path.insert(key, id);
        Some(id)
    }

    /// Wait for the heavy batches' turn (none may be had if the lock is poisoned: go on).
    fn heavy(&self, batch: usize) -> Heavy<'_> {
        if let Ok(mut st) = self.state.lock() {
            while st.heavy.is_some() {
                match self.turn.wait(st) {
                    Ok(next) => st = next,
                    Err(_) => return Heavy { extra: self, batch },
                }
            }
            st.heavy = Some(batch);
        }
        Heavy { extra: self, batch }
    }

    fn done(&self, batch: usize) {
        if let Ok(mut st) = self.state.lock() {
            st.done[batch] = true;
        }
        self.turn.notify_all();
    }

    fn into_files(self) -> Vec<SourceFile> {
        self.state.into_inner().map(|s| s.files).unwrap_or_default()
    }
}

/// Where a SQL text starts in its host file (and, for a text completed at run time, a hash of
/// what it became), and the dialect it is read in.
type SqlKey = ((FileId, usize, u64), Dialect);

/// State shared by every walk of a batch.
struct Shared<'e> {
    /// Steps of each SQL literal, read once per dialect, with their messages.
    cache: HashMap<SqlKey, Vec<(Step, usize)>>,
    /// Functions walked in place in some caller, with the calls walked.
    inlined: HashMap<usize, Vec<Span>>,
    /// SQL files read for `query_file!`.
    extra: &'e Extra,
    /// The batch's place in the run (see [`Extra`]).
    batch: usize,
}

/// SQL text: its value and where each byte of it is in a host file.
#[derive(Clone, Debug)]
struct Sql {
    file: FileId,
    text: String,
    map: OffsetMap,
    /// Sent as one simple-query message (several statements, one implicit transaction).
    batch: bool,
    /// Made a prepared statement (`sqlx::query(..)`, `query!`, sea-orm `Statement`): sent
    /// with the extended protocol, one statement.
    prepared: bool,
    /// Values bound so far, in parameter order.
    binds: Vec<Bind>,
    /// The database it is written for, when the code says (sea-orm's `DbBackend::Sqlite`).
    dialect: Option<Dialect>,
    /// Built with holes that run-time values fill (`format!("... {where_clause}")`).
    template: bool,
    /// Its `VALUES` rows come from a collection (`push_values`): whether that is sorted, and
    /// where the collection is named.
    rows: Option<(bool, Span)>,
    /// Other texts it may be, chosen at run time (`if shared { "..SHARE" } else { "..UPDATE" }`,
    /// a `format!` hole filled so): sent, each is one arm of a choice.
    alts: Vec<Sql>,
    /// One of several texts written at one place: its text is part of its key.
    chosen: bool,
}

/// Texts one value may be, at most (the first ones written are kept).
const MAX_ALTS: usize = 4;

/// A host value bound to a parameter.
#[derive(Clone, Debug)]
struct Bind {
    /// The steps whose results it is computed from.
    from: Flow,
    /// The value, normalised (see [`value_text`]).
    text: String,
    /// In key order with the other keys (see [`Input::ordered`]).
    ordered: bool,
    /// What it was put in order from (see [`Input::sources`]).
    sources: Vec<String>,
}

/// A host expression as a value: `&x`, `*x`, `x.clone()`, `x.as_str()`, `x.to_string()` and
/// the like are all `x`.
fn value_text(source: &str) -> String {
    let mut t = source.trim();
    loop {
        let before = t;
        t = t.trim_start_matches('&').trim_start();
        t = t.strip_prefix("mut ").unwrap_or(t).trim_start();
        t = t.trim_start_matches('*');
        for suffix in [
            ".clone()",
            ".as_str()",
            ".to_string()",
            ".to_owned()",
            ".as_ref()",
            ".into()",
            ".as_slice()",
            ".borrow()",
            ".deref()",
            ".as_deref()",
        ] {
            t = t.strip_suffix(suffix).unwrap_or(t);
        }
        if let Some(inner) = t.strip_prefix('(').and_then(|x| x.strip_suffix(')'))
            && !inner.contains(',')
        {
            t = inner;
        }
        if t == before {
            return t.to_string();
        }
    }
}

use dataflow::Flow;

impl Sql {
    /// Text at the places `map` gives, sent as it is: not yet a prepared statement, nothing
    /// bound, no template.
    fn new(file: FileId, text: String, map: OffsetMap) -> Sql {
        Sql {
            file,
            text,
            map,
            batch: false,
            prepared: false,
            binds: Vec::new(),
            dialect: None,
            template: false,
            rows: None,
            alts: Vec::new(),
            chosen: false,
        }
    }

    /// One text at one place is read once. A template's head can be completed differently at
    /// different calls (`format!(HEAD, table)`, a `QueryBuilder` pushed to), so what it
    /// became is part of its key.
    fn key(&self) -> (FileId, usize, u64) {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let text = match self.template || self.chosen {
            true => BuildHasherDefault::<DefaultHasher>::default().hash_one(&self.text),
            false => 0,
        };
        (self.file, self.map.host(0), text)
    }

    /// This text or `other`'s (the arms of an `if` or a `match`): alternatives, one per
    /// distinct text.
    fn or(mut self, other: Sql) -> Sql {
        let mut other = other;
        let more = std::mem::take(&mut other.alts);
        for s in std::iter::once(other).chain(more) {
            if s.text != self.text && !self.alts.iter().any(|a| a.text == s.text) {
                self.alts.push(s);
            }
        }
        self.alts.truncate(MAX_ALTS - 1);
        self
    }

    /// The texts it may be: itself, then its alternatives, each with its flags and binds.
    fn variants(&self) -> Vec<Sql> {
        let mut first = self.clone();
        let alts = std::mem::take(&mut first.alts);
        let mut out = vec![first.clone()];
        out.extend(alts.into_iter().map(|a| Sql {
            file: a.file,
            text: a.text,
            map: a.map,
            template: self.template || a.template,
            ..first.clone()
        }));
        for v in &mut out {
            v.chosen = true;
        }
        out
    }

    fn concat(mut self, other: Sql) -> Sql {
        // Each text it may be goes on the same way (`if a { b.push(x) } else { b.push(y) };
        // b.push(rest)`).
        let alts = std::mem::take(&mut self.alts);
        self.alts = alts.into_iter().map(|a| a.concat(other.clone())).collect();
        let at = self.text.len();
        self.text += &other.text;
        self.template |= other.template;
        self.rows = self.rows.or(other.rows);
        if other.file == self.file {
            self.map.extend(at, &other.map);
        }
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Handle {
    kind: Executor,
    /// Index of the session walker statements on this handle go to.
    walker: usize,
    session: Option<usize>,
    /// The database it talks to, when its type tells (`SqlitePool`, `Transaction<'_, MySql>`).
    dialect: Option<Dialect>,
}

#[derive(Clone, Debug, Default)]
enum Value {
    #[default]
    None,
    Handle(Handle),
    Sql(Sql),
    /// Data computed from the results of these steps.
    Data(Flow),
    /// A value of a struct of the run that holds a database handle in a field (`Repo { pool:
    /// PgPool }`): its methods reach the handle through `self`, so a call is walked in place.
    Object(std::rc::Rc<str>),
    /// A closure handed to a function of the run, held until that function calls it (an index
    /// into [`Walker::closures`]).
    Closure(usize),
    /// A diesel query builder chain (see `diesel.rs`).
    Diesel(Box<diesel::Query>),
    /// The guard of an exclusive in-process lock (`self.inner.write().await`, `m.lock()`),
    /// named by the lock (`Controller.inner`): handles reached through it are used under it.
    Guard(crate::model::Name),
    /// `true` or `false` as written, or a name bound to one that cannot change (an argument
    /// of a call walked in place, a `let` without `mut`): an `if` on it takes one arm.
    Bool(bool),
}

/// A closure held for the function it was handed to: its syntax, the variables it sees and
/// its file; whether it ran.
struct Held {
    closure: std::rc::Rc<syn::ExprClosure>,
    vars: HashMap<String, Value>,
    aliases: HashMap<String, String>,
    file: usize,
    ran: bool,
}

/// Expressions the walker follows into one another before it stops (within [`crate::io::STACK`]).
const MAX_DEPTH: usize = 4_000;

const UNKNOWN: usize = 0;
const POOL: usize = 1;

struct Walker<'a, 'w> {
    ix: &'w Index<'a>,
    front: &'w mut Front,
    shared: &'w mut Shared<'a>,
    file: usize,
    vars: HashMap<String, Value>,
    /// What the names of the function walked in place stand for in its outermost caller: a
    /// parameter, the argument it was given (`tenant_id` for `&request.tenant_id`), `self`, the
    /// receiver. Values bound to statements are written in the caller's terms, so that one
    /// value reached by two paths is one key.
    aliases: HashMap<String, String>,
    walkers: Vec<SessionWalker>,
    sessions: Vec<Session>,
    /// Sessions of `self.<field>` connections.
    field_sessions: HashMap<String, Handle>,
    /// Handles a struct literal of the run put in a field (`Self { transaction }` in
    /// `begin_write`), by struct and field: `self.transaction` in its methods is that handle.
    /// `None` once two literals put different handles there.
    built: HashMap<(std::rc::Rc<str>, String), Option<Handle>>,
    /// The text variables the last branch arm walked built on (see [`Walker::in_arm`]).
    arm_sql: Vec<(String, Sql)>,
    /// Handles (by session walker) reached through an exclusive lock's guard, with the lock.
    guarded: HashMap<usize, crate::model::Name>,
    /// Values returned by the functions being walked in place, innermost last.
    returned: Vec<Vec<Value>>,
    /// Closures handed to functions of the run (see [`Value::Closure`]).
    closures: Vec<Held>,
    seq: usize,
    message: usize,
    branch: Vec<usize>,
    next_branch: usize,
    /// Each exit with the frame it only leaves (see `frames`), `None` when it leaves the
    /// function walked: a `return Ok(..)` in a helper, a `?` in a helper or an `async` block
    /// whose result the code around it handles, leave only those.
    exits: Vec<(Exit, Option<usize>)>,
    /// `return`s that left only a helper walked in place, with the `seq` its walk ended at
    /// (see [`crate::model::Unit::helper_returns`]).
    helper_returns: Vec<(Exit, usize)>,
    /// How many helper bodies and `async` blocks the walk is inside.
    frames: usize,
    /// The `async` block about to be walked is awaited with `?` (`async { .. }.await?`).
    async_tried: bool,
    conditions: Vec<Condition>,
    loops: Vec<Loop>,
    /// The loops whose bodies are being walked (indices into `loops`), outermost first.
    open_loops: Vec<usize>,
    choices: Vec<Vec<usize>>,
    /// Collections sorted in place so far (`ids.sort()`).
    sorted: HashSet<String>,
    /// Variables computed to be in key order (`let lo = a.min(b)`), with the names they were
    /// computed from.
    ordered: HashMap<String, Vec<String>>,
    /// Call sites of the helpers being walked in place, outermost first.
    calls: Vec<Span>,
    /// Calls whose error the enclosing expression passes on: with `?`, or as the value of the
    /// function (its tail, a `return`), innermost last.
    tried: Vec<Span>,
    /// An error of the code being walked reaches the unit's caller: each helper call on the way
    /// was passed on with `?` (see [`Host::propagated`]).
    passes_on: bool,
    /// Walking test code that the rules skip: helpers it calls are still walked on their own.
    test: bool,
    /// The function walked is `async`: its caller may drop it at any `.await`.
    in_async: bool,
    /// Its parameters that are references (`conn: &mut PgConnection`): passing one on moves
    /// a borrow, not the connection.
    borrowed: Vec<String>,
    /// Constants being resolved through other constants.
    const_depth: usize,
    /// Expressions being walked, nested in one another.
    depth: usize,
    /// Variables known, in the arm being walked, to hold a sea-orm backend
    /// (`if backend == DbBackend::Sqlite`).
    backends: HashMap<String, Dialect>,
    /// Sequence number of the last step emitted.
    last_step: Option<usize>,
    /// Steps whose rows were fetched as "one or none" (`fetch_optional`, `query_opt`, diesel's
    /// `.optional()`, sea-orm's `.one`): an `Option` of their result says whether a row was
    /// found, not whether a column was `NULL`.
    optional: HashSet<usize>,
    /// Functions being walked (outermost first), against recursion.
    stack: Vec<usize>,
    /// The types of local variables that the code names (`let persist = NewCrate { .. }`,
    /// `let r: Repo = ..`): a method called on one is that type's.
    types: HashMap<String, std::rc::Rc<str>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace's members are one batch; a workspace inside it (a benchmark suite's crate
    /// with a `[workspace]` of its own, which Cargo builds apart) is another.
    #[test]
    fn a_workspace_inside_another_is_a_batch_of_its_own() {
        let root = std::env::temp_dir().join(format!("txlint-batches-{}", std::process::id()));
        let files = [
            ("Cargo.toml", "[workspace]\nmembers = [\"a\", \"b\"]\n"),
            ("a/Cargo.toml", "[package]\nname = \"a\"\n"),
            ("a/src/lib.rs", ""),
            ("b/Cargo.toml", "[package]\nname = \"b\"\n"),
            ("b/src/lib.rs", ""),
            (
                "bench/big/Cargo.toml",
                "[package]\nname = \"big\"\n\n[workspace]\n",
            ),
            ("bench/big/src/main.rs", ""),
            ("bench/big/src/gen.rs", ""),
        ];
        let mut sources = Vec::new();
        for (path, text) in files {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            if path.ends_with(".rs") {
                sources.push(SourceFile::unread(p, String::new()));
            }
        }
        let ids: Vec<FileId> = (0..sources.len()).collect();
        let got = batches(&sources, &ids);
        std::fs::remove_dir_all(&root).ok();
        // The members' files (ids 0, 1), then the benchmark's (2, 3): equal sizes, file order.
        assert_eq!(got, [vec![0, 1], vec![2, 3]]);
    }

    /// A heavy batch that waits for an earlier batch to give a new file its id lets that batch
    /// have the heavy turn: the earlier one may be waiting for it (it read its files more
    /// slowly), and neither would go on.
    #[test]
    fn heavy_batch_waiting_for_an_earlier_one_gives_its_turn_up() {
        // Detached threads, so that a deadlock fails the test instead of hanging it.
        let extra: &'static Extra = Box::leak(Box::new(Extra::new(&[], 2)));
        let (sent, got) = std::sync::mpsc::channel();
        let later = extra.heavy(1);
        let to_earlier = sent.clone();
        std::thread::spawn(move || {
            let make = || SourceFile::new("q.sql".into(), "q.sql".into(), String::new());
            let id = extra.id(1, Path::new("/nonexistent/q.sql"), make);
            drop(later);
            sent.send(("later", id)).ok();
        });
        std::thread::spawn(move || {
            // Batch 0 gets the turn although batch 1 has not finished.
            drop(extra.heavy(0));
            extra.done(0);
            to_earlier.send(("earlier", None)).ok();
        });
        // Generous: it only has to be finite (it hung before).
        let wait = std::time::Duration::from_secs(60);
        let mut order = vec![got.recv_timeout(wait), got.recv_timeout(wait)];
        order.sort_by_key(|r| r.as_ref().map(|(who, _)| *who).ok());
        assert_eq!(order, [Ok(("earlier", None)), Ok(("later", Some(0)))]);
    }
}
