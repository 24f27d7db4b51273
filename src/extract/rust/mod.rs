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
mod jobs;
mod library;
mod lit;
mod macros;
mod modules;
mod names;
mod order;
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

/// A parsed Rust file, with what is needed to turn syn positions into byte offsets.
struct Parsed {
    id: FileId,
    path: PathBuf,
    /// The path as shown in reports.
    display: String,
    /// The text syn saw: the file without a BOM, a shebang line blanked.
    text: String,
    lines: LineIndex,
    /// Bytes stripped in front (a UTF-8 BOM).
    shift: usize,
    ast: syn::File,
    /// The database its SQL is for, unless a handle's type or a `cfg` feature says otherwise.
    dialect: Dialect,
    /// Files of the batch (indexes into it) whose `macro_rules!` this file's expansions copied
    /// tokens from, each with a token of the definition: see [`home`].
    foreign: Vec<(usize, proc_macro2::Span)>,
}

impl Parsed {
    fn offset(&self, lc: LineColumn) -> usize {
        self.lines
            .offset_of_column(lc.line, lc.column, self.text.len())
    }

    /// Byte range (in the stripped text) of a syntax node.
    fn range(&self, node: &impl Spanned) -> std::ops::Range<usize> {
        self.range_at(node.span())
    }

    fn range_at(&self, s: proc_macro2::Span) -> std::ops::Range<usize> {
        let (a, b) = (self.offset(s.start()), self.offset(s.end()));
        a..b.max(a)
    }

    fn span_at(&self, s: proc_macro2::Span) -> Span {
        let r = self.range_at(s);
        Span::new(self.id, r.start + self.shift..r.end + self.shift)
    }

    /// From the start of `from` to the end of `to`, without printing any syntax tree (a node's
    /// own span is computed from all its tokens, which costs its size).
    fn span_between(&self, from: proc_macro2::Span, to: proc_macro2::Span) -> Span {
        let (a, b) = (self.offset(from.start()), self.offset(to.end()));
        Span::new(self.id, a + self.shift..b.max(a) + self.shift)
    }
}

/// The parsed file a token of `parsed[i]` is from: that file, or the one whose `macro_rules!`
/// body an expansion there copied the token from (told by proc-macro2, which knows a token's
/// file: two tokens join only within one).
fn home(parsed: &[Parsed], i: usize, s: proc_macro2::Span) -> &Parsed {
    let p = &parsed[i];
    p.foreign
        .iter()
        .find(|(_, anchor)| anchor.join(s).is_some())
        .and_then(|&(file, _)| parsed.get(file))
        .unwrap_or(p)
}

/// Expand the `macro_rules!` invocations of a batch's parsed files, with the macros of the
/// batch's other files too (see [`macros`]).
fn expand_macros(parsed: &mut [Parsed]) {
    let own: Vec<macros::Defs> = parsed.iter().map(|p| macros::definitions(&p.ast)).collect();
    let mut batch = macros::Batch::default();
    for (i, (p, defs)) in parsed.iter().zip(&own).enumerate() {
        batch.add(i, &p.ast, defs);
    }
    for (p, defs) in parsed.iter_mut().zip(&own) {
        p.foreign = macros::expand(&mut p.ast, defs, &batch);
    }
}

/// Why syn could not read a file: where, and the message.
struct Unparsed {
    at: Option<LineColumn>,
    message: String,
    /// txlint's own limit (nesting) stopped it, not the file's syntax.
    limit: bool,
    text: String,
    shift: usize,
}

fn parse(
    id: FileId,
    file: &SourceFile,
    dialect: Dialect,
    cfg: &crate::config::RustConfig,
) -> Result<Parsed, Unparsed> {
    let (text, shift) = match file.text().strip_prefix('\u{feff}') {
        Some(rest) => (rest.to_string(), 3),
        None => (file.text().to_string(), 0),
    };
    let mut text = text;
    // `#!...` on the first line (not `#![attr]`) is a shebang: blank it, keeping offsets.
    if text.starts_with("#!") && !text.starts_with("#![") {
        let end = text.find('\n').unwrap_or(text.len());
        text.replace_range(..end, &" ".repeat(end));
    }
    // Tokens first (no recursion), then the depth check, then syn.
    let tokens = match text.parse::<TokenStream>() {
        Ok(t) => t,
        Err(e) => {
            return Err(Unparsed {
                at: Some(e.span().start()),
                message: e.to_string(),
                limit: false,
                text,
                shift,
            });
        }
    };
    if let Some(why) = depth::too_deep(&tokens) {
        return Err(Unparsed {
            at: None,
            message: format!("too deep to parse safely ({why})"),
            limit: true,
            text,
            shift,
        });
    }
    let mut p = Parsed {
        id,
        path: file.path.clone(),
        display: file.display.clone(),
        lines: LineIndex::at_newlines(&text),
        text,
        shift,
        ast: syn::File {
            shebang: None,
            attrs: Vec::new(),
            items: Vec::new(),
        },
        dialect,
        foreign: Vec::new(),
    };
    // A large file is read item by item, each dropped at once unless it can matter: the
    // syntax tree of generated bindings never exists whole.
    let thin = p.text.len() > THIN_ABOVE;
    if thin {
        // Items cut from the token stream and given to syn one at a time; syn never sees (or
        // copies) the whole stream. Where the cut is not understood, the whole file is read
        // as below and fails or succeeds there.
        if let Some(ast) = thin_items(&p, tokens, cfg) {
            p.ast = ast;
            return Ok(p);
        }
        let tokens = p.text.parse::<TokenStream>().unwrap_or_default();
        return read_whole(p, tokens, thin, cfg);
    }
    read_whole(p, tokens, thin, cfg)
}

/// The file's items from its tokens, each kept only if it can matter (see [`keep`]): items
/// whose text does not pass the pre-scan and that are never kept for their kind are dropped
/// before syn parses them. `None` where an item cannot be cut out or parsed.
fn thin_items(
    p: &Parsed,
    tokens: TokenStream,
    cfg: &crate::config::RustConfig,
) -> Option<syn::File> {
    use proc_macro2::Delimiter;
    let mut trees: std::collections::VecDeque<TokenTree> = tokens.into_iter().collect();
    // Inner attributes (`#![..]`) open the file.
    let mut inner = TokenStream::new();
    while let (Some(TokenTree::Punct(hash)), Some(TokenTree::Punct(bang))) =
        (trees.front(), trees.get(1))
        && hash.as_char() == '#'
        && bang.as_char() == '!'
    {
        inner.extend(trees.drain(..trees.len().min(3)));
    }
    let attrs = syn::parse::Parser::parse2(syn::Attribute::parse_inner, inner).ok()?;
    let mut items = Vec::new();
    let mut chunk: Vec<TokenTree> = Vec::new();
    // The item's first two words after its attributes and `pub`.
    let mut head: Vec<String> = Vec::new();
    fn word(head: &[String], i: usize) -> Option<&str> {
        head.get(i).map(String::as_str)
    }
    for tree in trees {
        let ends = match &tree {
            TokenTree::Punct(q) => q.as_char() == ';',
            // `const`/`static`/`use`/`type` items end at `;` (`static S: T = T { .. };`,
            // `use a::{b, c};`); a `const fn` ends at its body.
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                !matches!(word(&head, 0), Some("const" | "static" | "use" | "type"))
                    || matches!(word(&head, 1), Some("fn" | "unsafe" | "async" | "extern"))
            }
            _ => false,
        };
        if let TokenTree::Ident(i) = &tree
            && head.len() < 2
        {
            let w = i.to_string();
            if !(head.is_empty() && w == "pub") {
                head.push(w);
            }
        }
        chunk.push(tree);
        if !ends {
            continue;
        }
        let (first, last) = (chunk.first()?.span(), chunk.last()?.span());
        let range = p.offset(first.start())..p.offset(last.end());
        let matters = p
            .text
            .get(range)
            .is_some_and(|t| prescan::item_may_matter(t, cfg));
        // Kinds that `keep` drops whenever their text does not pass need not be parsed.
        let droppable = matches!(
            word(&head, 0),
            Some("fn" | "struct" | "enum" | "union" | "trait" | "impl" | "unsafe" | "async")
                | Some("macro_rules")
        );
        // `extern "C" { .. }` declares foreign functions: no body sends anything or passes a
        // handle on, whatever the names say (a binding crate's are `mysql_query`, ..).
        let foreign = matches!((word(&head, 0), word(&head, 1)), (Some("extern"), None));
        head.clear();
        if foreign || (!matters && droppable) {
            chunk.clear();
            continue;
        }
        let tokens: TokenStream = std::mem::take(&mut chunk).into_iter().collect();
        let mut item: syn::Item = syn::parse2(tokens).ok()?;
        if keep(p, &mut item, cfg) {
            items.push(item);
        }
    }
    if !chunk.is_empty() {
        return None;
    }
    Some(syn::File {
        shebang: None,
        attrs,
        items,
    })
}

/// The whole file through syn (a large one's items kept only if they can matter).
fn read_whole(
    mut p: Parsed,
    tokens: TokenStream,
    thin: bool,
    cfg: &crate::config::RustConfig,
) -> Result<Parsed, Unparsed> {
    let shift = p.shift;
    let read = |input: syn::parse::ParseStream| -> syn::Result<syn::File> {
        let attrs = input.call(syn::Attribute::parse_inner)?;
        let mut items = Vec::new();
        while !input.is_empty() {
            let mut item: syn::Item = input.parse()?;
            if !thin || keep(&p, &mut item, cfg) {
                items.push(item);
            }
        }
        Ok(syn::File {
            shebang: None,
            attrs,
            items,
        })
    };
    match syn::parse::Parser::parse2(read, tokens) {
        Ok(ast) => {
            p.ast = ast;
            Ok(p)
        }
        Err(e) => Err(Unparsed {
            at: Some(e.span().start()),
            message: e.to_string(),
            limit: false,
            text: p.text,
            shift,
        }),
    }
}

/// Files larger than this (generated bindings, tables) keep only the items that can matter.
const THIN_ABOVE: usize = 64 * 1024;

/// Whether an item of a large file can matter: the pre-scan, applied to the item's own text.
/// What a batch holds is then the code that talks to a database, not every binding beside it.
/// Imports, type aliases and text constants are kept whatever they say (others refer to them
/// by name); modules and `impl` blocks keep the items inside that can matter.
fn keep(p: &Parsed, item: &mut syn::Item, cfg: &crate::config::RustConfig) -> bool {
    let matters = |r: std::ops::Range<usize>| {
        p.text
            .get(r)
            .is_some_and(|t| prescan::item_may_matter(t, cfg))
    };
    match item {
        syn::Item::Use(_) | syn::Item::Type(_) | syn::Item::ExternCrate(_) => true,
        syn::Item::ForeignMod(_) => false,
        syn::Item::Const(c) => mentions_text(&c.ty) || matters(p.range(&*c)),
        syn::Item::Static(s) => mentions_text(&s.ty) || matters(p.range(&*s)),
        syn::Item::Mod(m) => match &mut m.content {
            Some((_, inner)) => {
                inner.retain_mut(|it| keep(p, it, cfg));
                !inner.is_empty()
            }
            None => true,
        },
        syn::Item::Impl(i) => {
            let head = p.span_between(i.impl_token.span, i.brace_token.span.open());
            if matters(head.start() - p.shift..head.end() - p.shift) {
                return true;
            }
            i.items.retain(|it| matters(p.range(it)));
            !i.items.is_empty()
        }
        other => matters(p.range(&*other)),
    }
}

/// The type names text (`str`, `String`, `Cow`), anywhere inside (`&[&str]`, `LazyLock<String>`).
fn mentions_text(ty: &syn::Type) -> bool {
    struct Text(bool);
    impl Visit<'_> for Text {
        fn visit_path_segment(&mut self, s: &syn::PathSegment) {
            self.0 |= s.ident == "str" || s.ident == "String" || s.ident == "Cow";
            syn::visit::visit_path_segment(self, s);
        }
    }
    let mut text = Text(false);
    text.visit_type(ty);
    text.0
}

/// A function body to walk.
struct FnDef<'a> {
    file: usize,
    name: String,
    /// `#[test]`, `#[tokio::test]`, ..., or inside `#[cfg(test)]`.
    test: bool,
    /// Inside `#[cfg(feature = "sqlite")]` (or another database's feature).
    dialect: Option<Dialect>,
    sig: &'a syn::Signature,
    block: &'a syn::Block,
    span: Span,
    /// The type of the `impl` block a method is in (`impl Repo`, `impl Trait for PgPool`).
    owner: Option<&'a syn::Type>,
    /// Marked `#[allow(dead_code)]`, private, and named nowhere else in its file (see
    /// [`Collector::unused`]).
    unused: bool,
    /// A migration's `up`/`down` (sea-orm's `MigrationTrait`): applied once per database.
    migration: bool,
}

impl FnDef<'_> {
    /// A plain function returning text (`fn lock_query(shared: bool) -> String`): what it
    /// returns may be SQL its callers send.
    fn builds_text(&self) -> bool {
        self.sig.asyncness.is_none()
            && matches!(&self.sig.output, syn::ReturnType::Type(_, t) if mentions_text(t))
    }
}

/// What the whole run's Rust code declares: functions, string constants, struct fields that
/// hold database handles.
struct Index<'a> {
    parsed: &'a [Parsed],
    config: &'a Config,
    fns: Vec<FnDef<'a>>,
    by_name: HashMap<String, Vec<usize>>,
    /// String constants and statics (by the file they are in), in file order.
    consts: Vec<(usize, &'a syn::Expr)>,
    /// Indices into `consts` by name.
    const_names: HashMap<String, Vec<usize>>,
    /// For each of `consts`, the block it is declared in (none: a module's).
    const_scopes: Vec<Option<Scope>>,
    /// Handle fields by name, whatever struct they are of: kind, database, and whether
    /// transactions are of the type too (used where the struct is not known).
    fields: HashMap<String, (Executor, Option<Dialect>, bool)>,
    /// The run's structs with named fields, by name (and file): `self.field` is typed by the
    /// method's own struct.
    structs: HashMap<String, Vec<(usize, &'a syn::ItemStruct)>>,
    /// Statics that hold a handle (`static POOL: OnceCell<PgPool>`, `lazy_static!`'s `static
    /// ref`), by name: kind, database, and whether it is a once-cell (its `get` is the handle).
    statics: HashMap<String, (Executor, Option<Dialect>, bool)>,
    /// Structs with a field that holds a handle (see [`Value::Object`]), with that handle's
    /// kind and database.
    handle_structs: HashMap<String, (Executor, Option<Dialect>)>,
    /// The run's type aliases, `use .. as ..` renames and `Deref` targets.
    names: names::TypeNames<'a>,
    /// Structs with a `Deref`, `DerefMut`, `AsRef` or `AsMut` impl: one of them that holds a
    /// handle stands for it (see [`Index::wrapper`]).
    derefs: HashSet<String>,
    /// What struct literals put in a field, by field name (`Queue { claim: format!(..) }`):
    /// SQL built once and kept in a field, read where a method uses `self.claim`.
    field_values: HashMap<String, Vec<(usize, &'a syn::Expr)>>,
    /// sea-orm entities whose table is not named after their module: the module (`user`, from
    /// `mod user` or `user.rs`) and its model's `#[sea_orm(table_name = "users")]`.
    entity_tables: HashMap<String, String>,
    /// sea-orm model fields renamed by `#[sea_orm(column_name = "..")]`: (table, field) to
    /// the column.
    entity_columns: HashMap<(String, String), String>,
    /// diesel `#[derive(Insertable)]` structs with a `#[diesel(table_name = ..)]`, by name.
    insertables: HashMap<String, diesel::Insertable>,
    /// Tables declared in Rust: by diesel's `table!` (by their Rust name) and by sea-orm
    /// entities' models (by their table's name).
    tables: std::collections::BTreeMap<String, TableDdl>,
    /// diesel's `joinable!(child -> parent (column))`, by Rust names.
    joinables: Vec<[String; 3]>,
    /// sea-orm's `belongs_to` relations: child module, parent module, the child's column and
    /// the parent's it refers to.
    relations: Vec<[String; 4]>,
}

struct Collector<'a, 'i> {
    ix: &'i mut Index<'a>,
    file: usize,
    /// Inside `#[cfg(test)]` (a module or an item).
    in_test: bool,
    /// Inside `#[cfg(feature = "<database>")]`.
    in_dialect: Option<Dialect>,
    /// Inside `impl <type>`.
    owner: Option<&'a syn::Type>,
    /// The innermost inline `mod` around the item, if any.
    module: Option<&'a syn::Ident>,
    /// Inside `impl Trait for Type` (the trait's name): its methods are called through the
    /// trait.
    impl_trait: Option<String>,
    /// The innermost block around the item (a function's body): where a `const` in it is seen.
    block: Option<Scope>,
}

/// Where a name declared in a block is seen: the block's first and last position.
type Scope = (LineColumn, LineColumn);

/// `at` is inside `scope`.
fn in_scope(scope: &Scope, at: LineColumn) -> bool {
    let key = |p: LineColumn| (p.line, p.column);
    key(scope.0) <= key(at) && key(at) <= key(scope.1)
}

impl<'a> Visit<'a> for Collector<'a, '_> {
    fn visit_block(&mut self, b: &'a syn::Block) {
        let span = b.brace_token.span.join();
        let outer = self.block.replace((span.start(), span.end()));
        syn::visit::visit_block(self, b);
        self.block = outer;
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        let owner = self.owner.take();
        let unused = self.unused(&f.vis, &f.attrs, &f.sig.ident);
        self.nested(&f.attrs, |c| {
            c.add(&f.sig, &f.block, f);
            c.mark_unused(unused);
            syn::visit::visit_item_fn(c, f)
        });
        self.owner = owner;
    }
    fn visit_item_struct(&mut self, s: &'a syn::ItemStruct) {
        let file = self.file;
        if let Some(handle) = s.fields.iter().find_map(|f| self.ix.kind_of(&f.ty, file)) {
            self.ix.handle_structs.insert(s.ident.to_string(), handle);
        }
        if matches!(s.fields, syn::Fields::Named(_)) {
            let here = (self.file, s);
            self.ix
                .structs
                .entry(s.ident.to_string())
                .or_default()
                .push(here);
        }
        if let Some(row) = diesel::insertable(s) {
            self.ix.insertables.insert(s.ident.to_string(), row);
        }
        if let Some(table) = seaorm::table_name(&s.attrs) {
            if let Some(m) = self.entity_module().filter(|m| *m != table) {
                self.ix.entity_tables.insert(m, table.clone());
            }
            let (ddl, renamed) = seaorm::entity_table(s, table);
            for (field, column) in renamed {
                let key = (ddl.table.clone(), field);
                self.ix.entity_columns.insert(key, column);
            }
            self.ix.tables.entry(ddl.table.clone()).or_insert(ddl);
        }
        syn::visit::visit_item_struct(self, s);
    }
    fn visit_item_enum(&mut self, e: &'a syn::ItemEnum) {
        if e.ident == "Relation"
            && let Some(module) = self.entity_module()
        {
            for (parent, from, to) in seaorm::belongs_to(e) {
                let parent = parent.unwrap_or_else(|| module.clone());
                self.ix.relations.push([module.clone(), parent, from, to]);
            }
        }
        syn::visit::visit_item_enum(self, e);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        let unused = self.unused(&f.vis, &f.attrs, &f.sig.ident);
        // sea-orm's `impl MigrationTrait for Migration { async fn up(..) }`: run once, by the
        // migrator.
        let migration = self.impl_trait.as_deref() == Some("MigrationTrait")
            && matches!(f.sig.ident.to_string().as_str(), "up" | "down");
        self.nested(&f.attrs, |c| {
            c.add(&f.sig, &f.block, f);
            c.mark_unused(unused);
            if let Some(d) = c.ix.fns.last_mut() {
                d.migration = migration;
            }
            syn::visit::visit_impl_item_fn(c, f)
        });
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        self.nested(&f.attrs, |c| {
            if let Some(block) = &f.default {
                c.add(&f.sig, block, f);
            }
            syn::visit::visit_trait_item_fn(c, f)
        });
    }
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string());
        if name.as_deref() == Some("table") {
            for (rust, t) in diesel::table_macro(m.tokens.clone()) {
                self.ix.tables.insert(rust, t);
            }
        }
        if name.as_deref() == Some("lazy_static") {
            for s in lazy_statics(m.tokens.clone()) {
                self.handle_static(&s.ident, &s.ty);
            }
        }
        if name.as_deref() == Some("joinable")
            && let Some(j) = diesel::joinable_macro(m.tokens.clone())
        {
            self.ix.joinables.push(j);
        }
        syn::visit::visit_macro(self, m);
    }
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        let outer = self.module.replace(&m.ident);
        self.nested(&m.attrs, |c| syn::visit::visit_item_mod(c, m));
        self.module = outer;
    }
    fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
        let derefs = i.trait_.as_ref().and_then(|(_, t, _)| t.segments.last());
        if derefs.is_some_and(|s| {
            matches!(
                s.ident.to_string().as_str(),
                "Deref" | "DerefMut" | "AsRef" | "AsMut"
            )
        }) && let Some(name) = types::type_name(&i.self_ty)
        {
            self.ix.derefs.insert(name);
        }
        let outer = self.owner.replace(&i.self_ty);
        let name = i.trait_.as_ref().and_then(|(_, t, _)| t.segments.last());
        let in_trait = std::mem::replace(&mut self.impl_trait, name.map(|s| s.ident.to_string()));
        self.nested(&i.attrs, |c| syn::visit::visit_item_impl(c, i));
        self.owner = outer;
        self.impl_trait = in_trait;
    }
    fn visit_item_const(&mut self, c: &'a syn::ItemConst) {
        self.constant(&c.ident, &c.ty, &c.expr);
    }
    fn visit_item_static(&mut self, s: &'a syn::ItemStatic) {
        self.constant(&s.ident, &s.ty, &s.expr);
        self.handle_static(&s.ident, &s.ty);
    }
    fn visit_expr_struct(&mut self, s: &'a syn::ExprStruct) {
        for f in &s.fields {
            if let syn::Member::Named(name) = &f.member
                && matches!(f.expr, syn::Expr::Lit(_) | syn::Expr::Macro(_))
            {
                let at = (self.file, &f.expr);
                self.ix
                    .field_values
                    .entry(name.to_string())
                    .or_default()
                    .push(at);
            }
        }
        syn::visit::visit_expr_struct(self, s);
    }
    fn visit_field(&mut self, f: &'a syn::Field) {
        if let Some(name) = &f.ident
            && let Some((kind, dialect)) = self.ix.kind_of(&f.ty, self.file)
        {
            let shares = self.ix.shares_transactions(&f.ty, self.file);
            self.ix
                .fields
                .insert(name.to_string(), (kind, dialect, shares));
        }
    }
}

/// How often `word` occurs in `text` as a whole identifier.
fn words(text: &str, word: &str) -> usize {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word)
        .filter(|(at, _)| {
            !ident(text[..*at].chars().next_back())
                && !ident(text[at + word.len()..].chars().next())
        })
        .count()
}

/// The statics of a `lazy_static! { static ref NAME: Type = ..; }` block, read as plain
/// statics (without `ref`); none when the block does not parse so.
fn lazy_statics(tokens: proc_macro2::TokenStream) -> Vec<syn::ItemStatic> {
    let mut plain = Vec::new();
    let mut after_static = false;
    for t in tokens {
        let is_ref = matches!(&t, proc_macro2::TokenTree::Ident(i) if i == "ref");
        if !(after_static && is_ref) {
            after_static = matches!(&t, proc_macro2::TokenTree::Ident(i) if i == "static");
            plain.push(t);
        }
    }
    let file: syn::File = match syn::parse2(plain.into_iter().collect()) {
        Ok(f) => f,
        Err(_) => return Vec::new(),
    };
    file.items
        .into_iter()
        .filter_map(|i| match i {
            syn::Item::Static(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// `#[cfg(feature = "sqlite")]`: code for one database.
fn cfg_dialect(attrs: &[syn::Attribute]) -> Option<Dialect> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::List(l) if a.path().is_ident("cfg") => {
            dialects::of_cfg_feature(&l.tokens.to_string())
        }
        _ => None,
    })
}

/// `#[test]`, `#[tokio::test]`, `#[sqlx::test]`, `#[rstest]`, `#[test_case(..)]`, `#[bench]`,
/// or a test configuration (see [`modules::cfg_is_test`]).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        let last = path.segments.last().map(|s| s.ident.to_string());
        match last.as_deref() {
            Some("test" | "rstest" | "test_case" | "bench") => true,
            Some("cfg") if path.segments.len() == 1 => {
                let syn::Meta::List(list) = &a.meta else {
                    return false;
                };
                modules::cfg_is_test(&list.tokens.to_string())
            }
            _ => false,
        }
    })
}

impl<'a> Collector<'a, '_> {
    /// A constant or static whose type can hold text (`&str`, `String`, `Cow<str>`, arrays and
    /// wrappers of them): the others (numbers, bindings' GUIDs) never hold SQL.
    fn constant(&mut self, name: &syn::Ident, ty: &syn::Type, expr: &'a syn::Expr) {
        if mentions_text(ty) {
            let i = self.ix.consts.len();
            self.ix.consts.push((self.file, expr));
            self.ix.const_scopes.push(self.block);
            self.ix
                .const_names
                .entry(name.to_string())
                .or_default()
                .push(i);
        }
    }

    /// The module an entity of this place is in: the inline `mod`, else the file's (`user.rs`,
    /// `user/mod.rs`).
    fn entity_module(&self) -> Option<String> {
        if let Some(m) = self.module {
            return Some(m.to_string());
        }
        let file = &self.ix.parsed[self.file].path;
        match file.file_stem().and_then(|f| f.to_str()) {
            Some("mod") => file
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|d| d.to_str())
                .map(str::to_string),
            stem => stem.map(str::to_string),
        }
    }

    /// A private function (not a trait's method) its authors mark `#[allow(dead_code)]` whose
    /// name its file never mentions again: kept, but nothing runs it (a private item is seen
    /// only in its module).
    fn unused(&self, vis: &syn::Visibility, attrs: &[syn::Attribute], name: &syn::Ident) -> bool {
        let allows_dead = attrs.iter().any(|a| {
            a.path().is_ident("allow")
                && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().contains("dead_code"))
        });
        matches!(vis, syn::Visibility::Inherited)
            && self.impl_trait.is_none()
            && allows_dead
            && words(&self.ix.parsed[self.file].text, &name.to_string()) == 1
    }

    /// Set [`FnDef::unused`] on the function just added.
    fn mark_unused(&mut self, unused: bool) {
        if let Some(f) = self.ix.fns.last_mut() {
            f.unused = unused;
        }
    }

    /// A static that holds a database handle: indexed by name.
    fn handle_static(&mut self, name: &syn::Ident, ty: &syn::Type) {
        if let Some((kind, dialect)) = self.ix.kind_of(ty, self.file) {
            let once = types::is_once_cell(ty);
            self.ix
                .statics
                .insert(name.to_string(), (kind, dialect, once));
        }
    }

    /// Visit an item with the test and database context its attributes add.
    fn nested(&mut self, attrs: &[syn::Attribute], f: impl FnOnce(&mut Self)) {
        let test = self.in_test || is_test(attrs);
        let dialect = cfg_dialect(attrs).or(self.in_dialect);
        let outer = (
            std::mem::replace(&mut self.in_test, test),
            std::mem::replace(&mut self.in_dialect, dialect),
        );
        f(self);
        (self.in_test, self.in_dialect) = outer;
    }

    fn add(&mut self, sig: &'a syn::Signature, block: &'a syn::Block, node: &impl Spanned) {
        let p = &self.ix.parsed[self.file];
        let at = node.span();
        let i = self.ix.fns.len();
        self.ix.fns.push(FnDef {
            file: self.file,
            name: sig.ident.to_string(),
            test: self.in_test || self.ix.config.is_test_path(&p.path),
            dialect: self.in_dialect,
            sig,
            block,
            span: home(self.ix.parsed, self.file, at).span_at(at),
            owner: self.owner,
            unused: false,
            migration: false,
        });
        self.ix
            .by_name
            .entry(sig.ident.to_string())
            .or_default()
            .push(i);
    }
}

impl<'a> Index<'a> {
    fn build(parsed: &'a [Parsed], config: &'a Config, modules: &modules::Modules) -> Self {
        let mut ix = Index {
            parsed,
            config,
            fns: Vec::new(),
            by_name: HashMap::new(),
            consts: Vec::new(),
            const_names: HashMap::new(),
            const_scopes: Vec::new(),
            fields: HashMap::new(),
            structs: HashMap::new(),
            statics: HashMap::new(),
            handle_structs: HashMap::new(),
            entity_tables: HashMap::new(),
            entity_columns: HashMap::new(),
            insertables: HashMap::new(),
            tables: std::collections::BTreeMap::new(),
            joinables: Vec::new(),
            relations: Vec::new(),
            derefs: HashSet::new(),
            names: names::TypeNames::collect(parsed.iter().map(|p| (p.path.as_path(), &p.ast))),
            field_values: HashMap::new(),
        };
        for (file, p) in parsed.iter().enumerate() {
            Collector {
                ix: &mut ix,
                file,
                in_test: false,
                in_dialect: None,
                owner: None,
                module: None,
                impl_trait: None,
                block: None,
            }
            .visit_file(&p.ast);
        }
        let mut packages = modules::Packages::default();
        let dead: Vec<bool> = parsed
            .iter()
            .map(|p| modules.uncompiled(&p.path, &mut packages))
            .collect();
        let tests: Vec<bool> = parsed
            .iter()
            .map(|p| modules.test_only(&p.path, &mut packages))
            .collect();
        for f in &mut ix.fns {
            f.unused |= dead.get(f.file).copied().unwrap_or(false);
            f.test |= tests.get(f.file).copied().unwrap_or(false);
        }
        ix
    }

    /// The declared type of field `field` of the struct `owner` names (`impl Tx { .. self.inner
    /// }`): the struct in `file`, else the only one of that name in the run. `None`: no such
    /// struct, or it has no such field.
    fn field_type(
        &self,
        owner: &syn::Type,
        field: &str,
        file: usize,
    ) -> Option<(usize, &'a syn::Type)> {
        let all = self.structs.get(&types::type_name(owner)?)?;
        let (at, s) = match all.as_slice() {
            [one] => one,
            many => many.iter().find(|(f, _)| *f == file)?,
        };
        s.fields
            .iter()
            .find(|f| f.ident.as_ref().is_some_and(|i| i == field))
            .map(|f| (*at, &f.ty))
    }

    /// The function a call names: one in the caller's file first, else the only one anywhere.
    /// The method `name` of the type named `owner` (`impl Repo { fn load(&self) }`).
    fn method(&self, name: &str, owner: &str) -> Option<usize> {
        self.by_name.get(name)?.iter().copied().find(|&i| {
            let f = &self.fns[i];
            f.sig.receiver().is_some()
                && f.owner.and_then(types::type_name).as_deref() == Some(owner)
        })
    }

    /// The method `name` implemented on a handle type (`impl Counters for PgPool`) or on a
    /// wrapper of one (`impl Tx { fn commit(self) }`).
    fn handle_method(&self, name: &str) -> Option<usize> {
        self.by_name.get(name)?.iter().copied().find(|&i| {
            let f = &self.fns[i];
            f.sig.receiver().is_some()
                && f.owner
                    .is_some_and(|t| self.handle_type(t, f.file).is_some())
        })
    }

    /// The kind and database of a type of `file`, through the run's names for the driver's
    /// types (`type Conn = Object<AsyncPgConnection>`). `None`: not a handle type.
    fn kind_of(&self, ty: &syn::Type, file: usize) -> Option<(Executor, Option<Dialect>)> {
        self.judged(&self.names.resolve(ty, file))
    }

    /// The kind and database of a type already resolved through the run's names.
    fn judged(&self, ty: &syn::Type) -> Option<(Executor, Option<Dialect>)> {
        let kind = types::of_type(ty, &self.config.rust)?;
        Some((kind, types::dialect_of_type(ty)))
    }

    /// A type of `file` the driver's transactions are too (see [`types::shares_transactions`]),
    /// or a wrapper of the run that derefs to one (`impl Deref for PermittedConnection { type
    /// Target = AsyncPgConnection; }`).
    /// The name as written counts as much as what it resolves to: a project's own
    /// `type AsyncPgConnection = Object<..>` is still handed the driver's transactions.
    fn shares_transactions(&self, ty: &syn::Type, file: usize) -> bool {
        let resolved = self.names.resolve(ty, file);
        types::shares_transactions(ty)
            || types::shares_transactions(&resolved)
            || types::type_name(&resolved)
                .and_then(|n| self.names.declared_target(&n, file))
                .is_some_and(|(at, t)| {
                    types::shares_transactions(t)
                        || types::shares_transactions(&self.names.resolve(t, at))
                })
    }

    /// The kind and database of a handle type, or of a wrapper of the run around one: a
    /// struct that holds one and derefs, or a type whose `Deref` target is one.
    fn handle_type(&self, ty: &syn::Type, file: usize) -> Option<(Executor, Option<Dialect>)> {
        let resolved = self.names.resolve(ty, file);
        if let Some(found) = self.judged(&resolved) {
            return Some(found);
        }
        let name = types::type_name(&resolved)?;
        self.wrapper(&name).or_else(|| {
            let (at, target) = self.names.declared_target(&name, file)?;
            self.kind_of(target, at)
        })
    }

    /// A struct of the run that stands for the handle it holds (`struct Tx(Transaction<'static,
    /// Postgres>)` with `impl Deref for Tx`): that handle's kind and database.
    fn wrapper(&self, name: &str) -> Option<(Executor, Option<Dialect>)> {
        self.derefs
            .contains(name)
            .then(|| self.handle_structs.get(name).copied())
            .flatten()
    }

    /// The one-column primary key of `table` as Rust declares it (`table!`, a sea-orm entity's
    /// model), else `id`.
    /// Every column of the table's primary key (`#[sea_orm(primary_key)]` on two fields is one
    /// composite key), else `id`.
    fn primary_keys(&self, table: &str) -> Vec<String> {
        let declared = self.tables.values().find(|d| d.table == table);
        match declared.and_then(|d| d.primary_key.clone()) {
            Some(keys) if !keys.is_empty() => keys,
            _ => vec!["id".to_string()],
        }
    }

    fn primary_key(&self, table: &str) -> &str {
        let declared = self.tables.values().find(|d| d.table == table);
        match declared.and_then(|d| d.primary_key.as_deref()) {
            Some([key]) => key,
            _ => "id",
        }
    }

    fn function(&self, name: &str, file: usize) -> Option<usize> {
        self.choose(self.by_name.get(name)?, file)
    }

    /// Of functions of one name, the one in `file`, else the only one.
    fn choose(&self, candidates: &[usize], file: usize) -> Option<usize> {
        candidates
            .iter()
            .copied()
            .find(|&i| self.fns[i].file == file)
            .or_else(|| (candidates.len() == 1).then(|| candidates[0]))
    }

    /// The function a path call names: `Self::f(..)` and `Type::f(..)` an associated one (see
    /// [`Index::function`]); a bare or module path (`f(..)`, `db::f(..)`) a free function,
    /// never a method of the same name (inside `impl Db { fn insert(&self) }`, `insert(&mut
    /// tx)` calls the free `insert`).
    fn called_path(&self, path: &syn::Path, file: usize) -> Option<usize> {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.called(&segments, file)
    }

    /// [`Index::called_path`] of a path already split into its segments.
    fn called(&self, path: &[String], file: usize) -> Option<usize> {
        let name = path.last()?;
        let by_type = path.len() >= 2 && {
            let q = &path[path.len() - 2];
            q == "Self" || q.starts_with(|c: char| c.is_ascii_uppercase())
        };
        if by_type {
            return self.function(name, file);
        }
        let free: Vec<usize> = self
            .by_name
            .get(name)?
            .iter()
            .copied()
            .filter(|&i| self.fns[i].owner.is_none() && self.fns[i].sig.receiver().is_none())
            .collect();
        self.choose(&free, file)
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

/// Expressions the walker follows into one another before it stops (within [`crate::STACK`]).
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
