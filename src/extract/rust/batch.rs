//! Batches: the files of one Cargo workspace walked together, on every core, with the files
//! read along the way and the memory given back after.

use super::*;

/// Files the pre-scan left out that invoke a `macro_rules!` macro whose definition (in a file
/// to be parsed) can matter: what the macro writes there can send SQL (see [`macros`]). Their
/// text is read again if it was let go.
pub(super) fn macro_users(
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
pub(super) const HEAVY_ABOVE: usize = 1024 * 1024;

/// Text given to syn above which a batch returns the memory its syntax trees freed to the
/// system.
pub(super) const TRIM_AFTER: usize = 256 * 1024;

/// glibc keeps what a thread frees in its arena, so the next batch's trees land beside the
/// holes the last one left: the process grew with every large workspace it read, not with the
/// largest (the registry: 428 -> 374 MB, no cost in time).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(super) fn give_back_memory() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::os::raw::c_int;
    }
    // SAFETY: `malloc_trim` only returns free pages of the allocator's arenas to the system.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn give_back_memory() {}

/// The Rust files of one batch, read, walked and (where nothing points into them) forgotten.
pub(super) fn batch(
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
    let mut modules = modules::Modules::default();
    let Read {
        mut candidates,
        mut unparsed,
        skipped,
    } = read(&mut own, config, &mut front, &mut modules, &mut late);
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
    forget_unused(&front.out, &mut own, &late);
    (front.out, own)
}

/// What a batch's reading found: the files to parse, the files read here and not parsed (a
/// background job's loop may be there, see `jobs::mark`), and the files the pre-scan left out.
struct Read {
    candidates: Vec<usize>,
    unparsed: Vec<usize>,
    skipped: Vec<usize>,
}

/// Read the batch's files not read yet, and keep those the pre-scan says may matter.
fn read(
    own: &mut [(FileId, SourceFile)],
    config: &Config,
    front: &mut Front,
    modules: &mut modules::Modules,
    late: &mut HashSet<FileId>,
) -> Read {
    let mut out = Read {
        candidates: Vec::new(),
        unparsed: Vec::new(),
        skipped: Vec::new(),
    };
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
                        out.unparsed.push(i);
                        out.skipped.push(i);
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
                out.skipped.push(i);
                continue;
            }
        }
        out.candidates.push(i);
    }
    out
}

/// Files read here that nothing points into (a unit, a failure, a limit's note) are forgotten
/// (a suppression comment counts).
fn forget_unused(out: &Extracted, own: &mut [(FileId, SourceFile)], late: &HashSet<FileId>) {
    let mut kept: HashSet<FileId> = out.units.iter().flat_map(Unit::files).collect();
    kept.extend(out.summaries.iter().flat_map(|s| s.unit.files()));
    kept.extend(out.failures.iter().map(|f| f.span.file));
    kept.extend(out.unread_sql.iter().map(|s| s.file));
    kept.extend(out.limits.iter().map(|l| l.span.file));
    for (id, f) in own {
        if late.contains(id) && !kept.contains(id) && !f.text().contains("txlint") {
            f.forget();
        }
    }
}

/// Every function of a batch's parsed files, walked.
pub(super) fn walk_all(
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
        cut: HashSet::new(),
        deep: Vec::new(),
        field_sql: HashMap::new(),
        leaves: HashMap::new(),
        chosen: Vec::new(),
        ambiguous: None,
        extra,
        batch: b,
    };
    // SQL files that constants include are query files of the code, whether or not a call
    // using the constant is recognised.
    for (file, expr) in &index.consts {
        Walker::new(&index, front, &mut shared, *file).sql_only(expr);
    }
    let (mut units, mut ends) = (Vec::new(), Vec::new());
    for i in 0..index.fns.len() {
        for (unit, held, end) in walk_each_impl(&index, front, &mut shared, config, i) {
            units.push((i, unit, held));
            ends.push(end);
        }
    }
    leases::mark(&index, &mut units);
    // A function that sends nothing is no unit: no rule has anything to read in it, and its
    // file need not stay in memory. One that callers walk in place is their statements; its
    // own walk is kept as its summary.
    let alone = inline::checked_alone(&shared);
    // (Statements the rules have semantics for: what SQLite calls do goes unsaid.)
    let judged = |u: &Unit| {
        let mut steps = u.transactions.iter().flat_map(|t| t.steps.iter());
        steps.any(|s| s.facts.dialect.has_rules())
    };
    let sends: HashSet<usize> = (units.iter())
        .filter(|(_, unit, _)| judged(unit))
        .map(|&(i, _, _)| i)
        .collect();
    front
        .out
        .limits
        .extend(inline::lost_calls(&index, &shared, &alone, &sends));
    for ((i, unit, _), (returns, open)) in units.into_iter().zip(ends) {
        if unit.transactions.is_empty() {
            continue;
        }
        // (A function walked once per implementation is several units of one index.)
        match shared.inlined.get(&i) {
            // Some caller reached it too deep to walk it in place: it is checked alone.
            Some(_) if alone.contains(&i) => front.out.units.push(unit),
            Some(callers) => {
                let mut callers = callers.clone();
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
    front.out.declared.extend(index.declared_tables());
}

/// One function's walk: its unit, the handles it holds, what it returns and the transactions
/// it leaves open.
type Walked = (Unit, Vec<leases::Held>, (Returns, Vec<usize>));

/// Walks of one function, at most, one per choice of the types implementing the traits it
/// calls through (see [`walk_each_impl`]).
const MAX_WALKS: usize = 8;

/// One function walked (see [`walk_fn`]); once per type implementing a trait it calls through
/// when several types of the run do (`repo: &R` with `R: Views` and two stores implementing
/// `Views`): each walk takes one of them for every call through that trait, as a build of
/// the generic code does, and gives a unit of its own. A walk that meets a second such trait
/// is walked again once per type of that one too, up to [`MAX_WALKS`] walks in all.
pub(super) fn walk_each_impl<'a>(
    index: &Index<'a>,
    front: &mut Front,
    shared: &mut Shared<'a>,
    config: &Config,
    i: usize,
) -> Vec<Walked> {
    let mut done = Vec::new();
    // Choices still to walk with; the first walk takes none.
    let mut todo: Vec<Vec<(String, String)>> = vec![Vec::new()];
    let mut walks = 0;
    while let Some(chosen) = todo.pop() {
        shared.chosen = chosen;
        shared.ambiguous = None;
        let walked = walk_fn(index, front, shared, config, i);
        walks += 1;
        match shared.ambiguous.take() {
            Some((t, impls)) if walks + todo.len() + impls.len() <= MAX_WALKS => {
                // In walk order: the first type's walk is done first.
                for ty in impls.into_iter().rev() {
                    let mut next = shared.chosen.clone();
                    next.push((t.clone(), ty));
                    todo.push(next);
                }
            }
            _ => done.push(walked),
        }
    }
    shared.chosen = Vec::new();
    done
}

/// One function walked: its unit, the handles it holds, what it returns and the transactions
/// it leaves open.
fn walk_fn<'a>(
    index: &Index<'a>,
    front: &mut Front,
    shared: &mut Shared<'a>,
    config: &Config,
    i: usize,
) -> Walked {
    let f = &index.fns[i];
    let mut w = Walker::new(index, front, shared, f.file);
    w.test = f.test && !config.include_tests;
    w.in_async = f.sig.asyncness.is_some();
    w.borrowed = f
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(t) if matches!(&*t.ty, syn::Type::Reference(_)) => match &*t.pat {
                syn::Pat::Ident(id) => Some(id.ident.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    w.stack.push(i);
    // `self` in a trait's default method: what implements the trait, whose methods (the
    // trait's defaults among them) its calls on `self` reach.
    let this = f.in_trait.map(|t| Value::Object(t.to_string().into()));
    w.params(f.sig, f.owner, this, None);
    w.note_held_params(f.sig);
    let returns = match w.body(f.block) {
        Value::Handle(h) => Returns::Handle(h.kind),
        Value::Data(flow) => Returns::Data(flow.iter().collect()),
        _ => Returns::Nothing,
    };
    let open: Vec<usize> = w.walkers.iter().filter_map(|s| s.open_since()).collect();
    let held = std::mem::take(&mut w.held);
    (w.finish(f), held, (returns, open))
}

/// The Rust files in batches, one per Cargo workspace (the nearest `Cargo.toml` with a
/// `[workspace]` above the file, as Cargo finds it, else the nearest one), files outside any
/// crate together; largest batch first, so that the cores finish together. A workspace inside
/// another (a benchmark suite's crates, each its own) is a batch of its own.
pub(super) fn batches(files: &[SourceFile], ids: &[FileId]) -> Vec<Vec<FileId>> {
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
pub(super) struct Extra {
    pub(super) state: std::sync::Mutex<ExtraState>,
    pub(super) turn: std::sync::Condvar,
}

pub(super) struct ExtraState {
    pub(super) by_path: HashMap<PathBuf, FileId>,
    pub(super) files: Vec<SourceFile>,
    pub(super) first: FileId,
    pub(super) done: Vec<bool>,
    /// The heavy batch holding its syntax trees.
    pub(super) heavy: Option<usize>,
}

/// A heavy batch's turn, given back when dropped.
pub(super) struct Heavy<'a> {
    pub(super) extra: &'a Extra,
    pub(super) batch: usize,
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
    pub(super) fn new(files: &[SourceFile], batches: usize) -> Self {
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
    pub(super) fn id(
        &self,
        batch: usize,
        path: &Path,
        make: impl FnOnce() -> SourceFile,
    ) -> Option<FileId> {
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
    pub(super) fn heavy(&self, batch: usize) -> Heavy<'_> {
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

    pub(super) fn done(&self, batch: usize) {
        if let Ok(mut st) = self.state.lock() {
            st.done[batch] = true;
        }
        self.turn.notify_all();
    }

    pub(super) fn into_files(self) -> Vec<SourceFile> {
        self.state.into_inner().map(|s| s.files).unwrap_or_default()
    }
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
