//! Background jobs: functions that only a loop woken by a timer runs, one run after another.
//!
//! `loop { ingest().await; sleep(every).await }`, `interval.tick()` in a `select!`, a closure
//! handed to a scheduler (`every(..)`, a `cron` call): what such a loop calls runs once per
//! wake-up, one run after the other, in the process that started the loop. txlint assumes one
//! process runs it (see [`crate::model::Unit::job`]). Not such a job:
//! - a loop that also receives from a channel (`recv`, `try_recv`), or a function that drains
//!   one: it handles what this process's other code sent, so it runs wherever that code runs;
//! - work the loop runs side by side: spawned in it (`spawn`, `join_all` over a `map`), or
//!   pushed to a `FuturesUnordered`, `JoinSet` or under a `Semaphore` there;
//! - a loop started more than once at a time: its function spawned in a loop or a `map` (a
//!   worker pool), on any path from the functions nothing calls (`main` is run once);
//! - a retry: a loop that leaves with a value (`return Ok(row)`, `break conn`) or a `while`
//!   that counts its turns;
//! - a loop whose statements claim rows with `SKIP LOCKED` (a queue's workers).
//!
//! Read from tokens, not syntax trees: the loop is often in a file that sends no SQL (a
//! binary's `main`, a scheduler module), which the front-end never gives to syn; macro input
//! (`select!`) is read the same way. Callers are read as the answers need them, round by
//! round. Calls are matched by name alone (a method too), so a name with one caller that is
//! neither in such a loop nor itself a job is no job, and so is a name whose mentions cannot
//! all be read (a generic one in many files, a file too large or not Rust tokens): names
//! matched too widely only keep findings.

use std::collections::{HashMap, HashSet};

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use proc_macro2::{Delimiter, TokenStream, TokenTree};

use crate::config::{BackgroundJobs, Config};
use crate::model::{LockWait, Unit, UnitKind};
use crate::source::{FileId, LineIndex, SourceFile, Span};

/// Rounds of looking for callers' callers, and the names looked for in all, per batch.
const MAX_ROUNDS: usize = 8;
const MAX_NAMES: usize = 4_096;

/// One Rust file of a batch, parsed by syn or not.
pub(super) struct Text<'a> {
    pub id: FileId,
    pub text: &'a str,
    /// Under `tests/` or `benches/`: its calls are no production path.
    pub test: bool,
}

/// Set [`Unit::job`] on the batch's units that only a background job runs; a file the job's
/// loop is in and that was not parsed gets its text back.
pub(super) fn mark(
    units: &mut [Unit],
    own: &mut [(FileId, SourceFile)],
    unparsed: Vec<(usize, String)>,
    config: &Config,
) {
    if config.rust.background_jobs == BackgroundJobs::Replicated {
        return;
    }
    let rust = |u: &Unit| u.kind == UnitKind::RustFn;
    let names: Vec<&str> = units
        .iter()
        .filter(|u| rust(u))
        .filter_map(|u| u.name.as_deref())
        .collect();
    if names.is_empty() {
        return;
    }
    let files: HashSet<FileId> = units.iter().flat_map(Unit::files).collect();
    let mut texts: Vec<Text> = own
        .iter()
        .filter(|(_, f)| !f.text().is_empty())
        .map(|(id, f)| Text {
            id: *id,
            text: f.text(),
            test: config.is_test_path(&f.path),
        })
        .collect();
    texts.extend(unparsed.iter().map(|(i, text)| Text {
        id: own[*i].0,
        text,
        test: config.is_test_path(&own[*i].1.path),
    }));
    // Every statement inside a timer loop on the way to it: the loop, if the unit runs one at
    // a time.
    let in_loop = |u: &Unit, found: &Jobs| {
        let mut at = u.transactions.iter().flat_map(|t| &t.steps).map(|s| {
            let chain = s.host().calls.iter().copied().chain([s.span]);
            found.loop_of(chain)
        });
        at.next()?.filter(|_| at.all(|k| k.is_some()))
    };
    let found = find(&texts, &files, &names, |found| {
        let own = units
            .iter()
            .filter(|u| rust(u) && in_loop(u, found).is_some());
        own.filter_map(|u| u.name.clone()).collect()
    });
    drop(texts);
    for u in units.iter_mut().filter(|u| rust(u)) {
        let Some(name) = u.name.as_ref() else {
            continue;
        };
        u.job = found.called.get(name).copied().or_else(|| {
            found
                .once
                .contains(name)
                .then(|| in_loop(u, &found))
                .flatten()
        });
    }
    unmark_queue_workers(units);
    let places: HashSet<FileId> = units.iter().filter_map(|u| u.job).map(|j| j.file).collect();
    for (i, text) in unparsed {
        let (id, f) = &mut own[i];
        if places.contains(id) {
            f.set_text(text);
        }
    }
}

/// A loop whose work claims rows with `SKIP LOCKED` is written for copies of itself running at
/// once (a queue's workers): none of its units is a job.
fn unmark_queue_workers(units: &mut [Unit]) {
    let skips = |u: &Unit| {
        let steps = u.transactions.iter().flat_map(|t| &t.steps);
        let mut locks = steps.flat_map(|s| &s.facts.row_locks);
        locks.any(|l| l.wait == LockWait::SkipLocked)
    };
    let shared: HashSet<Span> = units
        .iter()
        .filter(|u| skips(u))
        .filter_map(|u| u.job)
        .collect();
    for u in units
        .iter_mut()
        .filter(|u| u.job.is_some_and(|j| shared.contains(&j)))
    {
        u.job = None;
    }
}

/// What [`find`] learnt.
#[derive(Default)]
pub(super) struct Jobs {
    /// The timer loop that alone runs functions of the name (see [`Graph::job`]).
    called: HashMap<String, Span>,
    /// Names of functions that run one at a time (see [`Graph::once`]).
    once: HashSet<String>,
    /// The timer loops of functions that drain no channel: the keyword, and the loop from it
    /// to the end of its body.
    loops: Vec<(Span, Span)>,
    /// What runs side by side with other runs of itself: the arguments of a `spawn` in a loop,
    /// of a `map` in a `join_all`.
    side_by_side: Vec<Span>,
}

impl Jobs {
    /// The timer loop a statement runs in, reached through `chain` (the calls of the helpers
    /// it is in, outermost first, then the statement) from a function that runs one at a time;
    /// none if a call on the way is run side by side.
    fn loop_of(&self, mut chain: impl Iterator<Item = Span>) -> Option<Span> {
        let within = |outer: &Span, inner: Span| {
            outer.file == inner.file && outer.start() <= inner.start() && inner.end() <= outer.end()
        };
        let mut found = None;
        chain
            .try_for_each(|at| {
                if self.side_by_side.iter().any(|c| within(c, at)) {
                    return Err(());
                }
                if found.is_none() {
                    found = self
                        .loops
                        .iter()
                        .find(|(_, l)| within(l, at))
                        .map(|(k, _)| *k);
                }
                Ok(())
            })
            .ok()?;
        found
    }
}

/// For the functions named `names` (units of the run, in `files` with the helpers they call),
/// the timer loop that alone runs each, and which of `own` (units with statements in timer
/// loops, see [`Jobs::loop_of`]) run one at a time. Callers are read as the answers need them,
/// round by round; a name still unknown at the end is no job.
pub(super) fn find(
    texts: &[Text],
    files: &HashSet<FileId>,
    names: &[&str],
    own: impl Fn(&Jobs) -> Vec<String>,
) -> Jobs {
    let mut graph = Graph::default();
    let mut scanned = vec![false; texts.len()];
    for (i, t) in texts.iter().enumerate() {
        // One that cannot be read is left to `scan_mentions`, which says whose calls it hides.
        if files.contains(&t.id) && t.text.len() <= MAX_SCAN {
            scanned[i] = graph.scan(t);
        }
    }
    let mut jobs = Jobs {
        loops: graph.loops(),
        side_by_side: graph.side_by_side.clone(),
        ..Jobs::default()
    };
    let own = own(&jobs);
    let (mut read, mut blind) = (HashSet::new(), HashSet::new());
    let mut wanted: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    wanted.extend(own.iter().cloned());
    for round in 0..=MAX_ROUNDS {
        wanted.sort();
        wanted.dedup();
        wanted.retain(|n| !read.contains(n) && !blind.contains(n));
        if round == MAX_ROUNDS || read.len() + wanted.len() > MAX_NAMES {
            break;
        }
        if !wanted.is_empty() {
            let unread = scan_mentions(texts, &wanted, &mut scanned, &mut graph);
            blind.extend(unread.into_iter().map(str::to_string));
            read.extend(wanted.drain(..).filter(|n| !blind.contains(n)));
        }
        let mut ask = Ask {
            read: Some(&read),
            blind: Some(&blind),
            ..Ask::default()
        };
        jobs.called.clear();
        jobs.once.clear();
        for &n in names {
            if let Answer::Yes(Some(at)) = graph.job(n, &mut ask) {
                jobs.called.insert(n.to_string(), at);
            }
        }
        for n in &own {
            if !graph.drains(n) && graph.once(n, &mut ask) == Answer::Yes(None) {
                jobs.once.insert(n.clone());
            }
        }
        if ask.wanted.is_empty() {
            break;
        }
        wanted = ask.wanted;
    }
    jobs.loops = graph.loops();
    jobs.side_by_side = graph.side_by_side;
    jobs
}

/// Text above which a file is not read for calls (generated code): the names it mentions are
/// taken to have callers there that are no job's.
const MAX_SCAN: usize = 4 * 1024 * 1024;

/// Files of a batch that may mention a name before it is taken for a generic one (`new`,
/// `run`, `fmt`): its callers are not looked for, and it is no job's.
const MAX_FILES: usize = 32;

/// The texts not scanned yet that name any of `names` as a word are scanned into `graph`.
/// Returns the names whose mentions could not all be read (too many files, too large, not
/// Rust tokens).
fn scan_mentions<'n>(
    texts: &[Text],
    names: &'n [String],
    scanned: &mut [bool],
    graph: &mut Graph,
) -> Vec<&'n str> {
    let Ok(finder) = AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::DFA))
        .build(names)
    else {
        return names.iter().map(String::as_str).collect();
    };
    // The names each file mentions as a word.
    let mentions: Vec<Vec<usize>> = texts
        .iter()
        .map(|t| {
            let b = t.text.as_bytes();
            let word = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
            let mut named: Vec<usize> = finder
                .find_overlapping_iter(b)
                .filter(|m| {
                    !word(m.start().checked_sub(1).and_then(|s| b.get(s))) && !word(b.get(m.end()))
                })
                .map(|m| m.pattern().as_usize())
                .collect();
            named.sort_unstable();
            named.dedup();
            named
        })
        .collect();
    let mut files = vec![0usize; names.len()];
    mentions.iter().flatten().for_each(|&n| files[n] += 1);
    let mut blind: Vec<bool> = files.iter().map(|&f| f > MAX_FILES).collect();
    for (i, t) in texts.iter().enumerate() {
        let wanted: Vec<usize> = mentions[i].iter().copied().filter(|&n| !blind[n]).collect();
        if scanned[i] || wanted.is_empty() {
            continue;
        }
        scanned[i] = true;
        if t.text.len() > MAX_SCAN || !graph.scan(t) {
            wanted.into_iter().for_each(|n| blind[n] = true);
        }
    }
    let blind = names.iter().zip(blind).filter(|(_, b)| *b);
    blind.map(|(n, _)| n.as_str()).collect()
}

#[derive(Default)]
struct Graph {
    fns: Vec<Func>,
    /// Every function's position in `fns`, by name.
    by_name: HashMap<String, Vec<usize>>,
    /// Where each name is called or passed on, by the name.
    sites: HashMap<String, Vec<Site>>,
    /// See [`Jobs::side_by_side`].
    side_by_side: Vec<Span>,
}

struct Func {
    name: String,
    /// Receives from a channel.
    drains: bool,
    /// Its own timer loops: the keyword, and the loop to the end of its body.
    loops: Vec<(Span, Span)>,
}

#[derive(Clone, Copy)]
struct Site {
    /// The function the site is in (none: an item's initialiser, a static).
    caller: Option<usize>,
    /// The timer loop or scheduler call around the site.
    timer: Option<Span>,
    /// In test code.
    test: bool,
    /// Run side by side with other runs of itself: spawned (or joined) in a loop or a `map`.
    concurrent: bool,
}

#[derive(Clone, Copy)]
struct Ctx {
    func: Option<usize>,
    timer: Option<Span>,
    test: bool,
    /// In a loop's body or a `map`-like call's arguments.
    repeat: bool,
    /// In a `spawn`-like call's arguments inside the innermost loop.
    spawned: bool,
    /// Groups around the tokens: deeper ones are not read (hostile nesting).
    depth: usize,
}

/// Nesting of groups read; real code stays far below.
const MAX_DEPTH: usize = 128;

impl Graph {
    /// Read one file's functions, loops and calls; false if it is no Rust tokens.
    fn scan(&mut self, t: &Text) -> bool {
        let text = t.text.strip_prefix('\u{feff}').unwrap_or(t.text);
        // A shebang line is no Rust token: blanked, keeping offsets.
        let blanked;
        let text = match text.starts_with("#!") && !text.starts_with("#![") {
            true => {
                let end = text.find('\n').unwrap_or(text.len());
                blanked = format!("{}{}", " ".repeat(end), &text[end..]);
                blanked.as_str()
            }
            false => text,
        };
        let Ok(tokens) = text.parse::<TokenStream>() else {
            return false;
        };
        let shift = t.text.len() - text.len();
        let mut s = Scanner {
            graph: self,
            file: t.id,
            lines: LineIndex::at_newlines(text),
            len: text.len(),
            shift,
        };
        let cx = Ctx {
            func: None,
            timer: None,
            test: t.test,
            repeat: false,
            spawned: false,
            depth: 0,
        };
        s.stream(tokens, cx);
        true
    }

    /// The timer loop that alone runs functions named `name` (see [`Ask`]).
    fn job(&self, name: &str, ask: &mut Ask) -> Answer {
        if let Some(known) = ask.job.get(name) {
            return *known;
        }
        // A name on a call cycle is no job (the entry is in progress while it is asked).
        ask.job.insert(name.to_string(), Answer::No);
        let out = self.job_uncached(name, ask);
        ask.job.insert(name.to_string(), out);
        out
    }

    fn job_uncached(&self, name: &str, ask: &mut Ask) -> Answer {
        if let Some(unread) = ask.unread(name) {
            return unread;
        }
        if self.drains(name) {
            return Answer::No;
        }
        let mut out = None;
        for site in self
            .sites
            .get(name)
            .into_iter()
            .flatten()
            .filter(|s| !s.test)
        {
            let found = match (site.concurrent, site.timer, site.caller) {
                (true, ..) => Answer::No,
                (false, Some(t), Some(c)) => match self.once(&self.fns[c].name, ask) {
                    Answer::Yes(_) => Answer::Yes(Some(t)),
                    other => other,
                },
                (false, Some(t), None) => Answer::Yes(Some(t)),
                (false, None, Some(c)) => self.job(&self.fns[c].name, ask),
                (false, None, None) => Answer::No,
            };
            out = Some(match (out, found) {
                (_, Answer::No) => return Answer::No,
                (Some(Answer::Unknown), _) | (_, Answer::Unknown) => Answer::Unknown,
                (Some(Answer::Yes(at)), _) => Answer::Yes(at),
                (None | Some(Answer::No), found) => found,
            });
        }
        // Never called: an entry point, no job.
        out.unwrap_or(Answer::No)
    }

    /// Functions named `name` run one at a time: no path from a function nothing calls
    /// starts them side by side.
    fn once(&self, name: &str, ask: &mut Ask) -> Answer {
        // A binary's entry: the process runs it once.
        if name == "main" {
            return Answer::Yes(None);
        }
        if let Some(known) = ask.once.get(name) {
            return *known;
        }
        if let Some(unread) = ask.unread(name) {
            return unread;
        }
        ask.once.insert(name.to_string(), Answer::Yes(None));
        let mut out = Answer::Yes(None);
        for s in self
            .sites
            .get(name)
            .into_iter()
            .flatten()
            .filter(|s| !s.test)
        {
            let found = match (s.concurrent, s.caller) {
                (true, _) => Answer::No,
                (false, None) => Answer::Yes(None),
                (false, Some(c)) => self.once(&self.fns[c].name, ask),
            };
            match found {
                Answer::No => {
                    out = Answer::No;
                    break;
                }
                Answer::Unknown => out = Answer::Unknown,
                Answer::Yes(_) => {}
            }
        }
        ask.once.insert(name.to_string(), out);
        out
    }

    /// The timer loops of functions that drain no channel.
    fn loops(&self) -> Vec<(Span, Span)> {
        let quiet = self.fns.iter().filter(|f| !f.drains);
        quiet.flat_map(|f| &f.loops).copied().collect()
    }

    fn drains(&self, name: &str) -> bool {
        let own = self.by_name.get(name).into_iter().flatten();
        own.into_iter().any(|&f| self.fns[f].drains)
    }
}

/// What a question about a name comes to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Answer {
    /// Yes (with the timer loop, for [`Graph::job`]).
    Yes(Option<Span>),
    No,
    /// It depends on calls of names not read yet ([`Ask::wanted`]).
    Unknown,
}

/// One round of questions over the files read so far.
#[derive(Default)]
struct Ask<'a> {
    /// Names whose every mention was read.
    read: Option<&'a HashSet<String>>,
    /// Names with a mention that could not be read (see [`scan_mentions`]).
    blind: Option<&'a HashSet<String>>,
    /// Names to read next: their answer is [`Answer::Unknown`] until then.
    wanted: Vec<String>,
    job: HashMap<String, Answer>,
    once: HashMap<String, Answer>,
}

impl Ask<'_> {
    /// The answer for a name whose mentions are not all read: no for one that cannot be,
    /// unknown (and wanted) for one not read yet.
    fn unread(&mut self, name: &str) -> Option<Answer> {
        if self.blind.is_some_and(|b| b.contains(name)) {
            return Some(Answer::No);
        }
        if self.read.is_some_and(|r| r.contains(name)) {
            return None;
        }
        self.wanted.push(name.to_string());
        Some(Answer::Unknown)
    }
}

/// What holds from a statement's start to its `;`.
#[derive(Default)]
struct Level {
    /// A test attribute (`#[test]`, `#[cfg(test)]`) stands before the item.
    test_attr: bool,
    /// The statement hands work to a scheduler (`scheduler.every(..).run(|| ..)`).
    scheduled: Option<Span>,
}

struct Scanner<'g> {
    graph: &'g mut Graph,
    file: FileId,
    lines: LineIndex,
    len: usize,
    shift: usize,
}

/// Words that can stand before `(` and name no function.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while",
];

impl Scanner<'_> {
    fn span(&self, at: proc_macro2::Span) -> Span {
        let (a, b) = (at.start(), at.end());
        let offset = |lc: proc_macro2::LineColumn| {
            self.lines.offset_of_column(lc.line, lc.column, self.len) + self.shift
        };
        Span::new(self.file, offset(a)..offset(b).max(offset(a)))
    }

    /// From the start of `from` to the end of `to`.
    fn span_between(&self, from: proc_macro2::Span, to: proc_macro2::Span) -> Span {
        let (a, b) = (self.span(from), self.span(to));
        Span::new(self.file, a.start()..b.end().max(a.start()))
    }

    fn stream(&mut self, tokens: TokenStream, cx: Ctx) {
        if cx.depth > MAX_DEPTH {
            return;
        }
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut k = 0;
        let mut level = Level::default();
        while k < trees.len() {
            k = match &trees[k] {
                TokenTree::Punct(p) if p.as_char() == '#' => match trees.get(k + 1) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                        level.test_attr |= is_test_attribute(g.stream());
                        k + 2
                    }
                    _ => k + 1,
                },
                TokenTree::Punct(p) if p.as_char() == ';' => {
                    level = Level::default();
                    k + 1
                }
                TokenTree::Ident(i) => self.word(&trees, k, i, cx, &mut level),
                TokenTree::Group(_) => {
                    let timer = cx.timer.or(level.scheduled);
                    self.group(&trees[k], Ctx { timer, ..cx });
                    k + 1
                }
                _ => k + 1,
            };
        }
    }

    /// The word at `k`: an item, a loop, a call or another mention. Returns where to go on.
    fn word(
        &mut self,
        trees: &[TokenTree],
        k: usize,
        i: &proc_macro2::Ident,
        cx: Ctx,
        level: &mut Level,
    ) -> usize {
        let word = i.to_string();
        let test = cx.test || level.test_attr;
        match word.as_str() {
            "use" => {
                level.test_attr = false;
                next_semicolon(trees, k)
            }
            "fn" => {
                level.test_attr = false;
                self.function(trees, k, test, cx.depth)
            }
            "mod" | "impl" | "trait" => {
                level.test_attr = false;
                let Some(b) = body(trees, k + 1) else {
                    return k + 1;
                };
                self.group(&trees[b], Ctx { test, ..cx });
                b + 1
            }
            "loop" | "while" | "for" => match body(trees, k + 1) {
                Some(b) => self.looped(trees, k, b, i, cx),
                None => k + 1,
            },
            _ => self.mention(trees, k, &word, Ctx { test, ..cx }, level),
        }
    }

    /// The loop from `k` to its body at `b`.
    fn looped(
        &mut self,
        trees: &[TokenTree],
        k: usize,
        b: usize,
        keyword: &proc_macro2::Ident,
        cx: Ctx,
    ) -> usize {
        let word = keyword.to_string();
        let timer = cx.timer.or_else(|| {
            let once = !(cx.repeat && cx.spawned) && word != "for";
            let at = (once && wakes_on_timer(&word, &trees[k + 1..=b]))
                .then(|| self.span(keyword.span()))?;
            if let Some(f) = cx.func {
                let whole = self.span_between(keyword.span(), trees[b].span());
                self.graph.fns[f].loops.push((at, whole));
            }
            Some(at)
        });
        // What the body spawns runs beside the body's next runs; a spawn around the loop
        // started it once.
        let inner = Ctx {
            timer,
            repeat: true,
            spawned: false,
            ..cx
        };
        self.stream(trees[k + 1..b].iter().cloned().collect(), inner);
        self.group(&trees[b], inner);
        b + 1
    }

    /// Any other word at `k`: a call or mention of a function (a site), a channel read, a
    /// scheduler, or a call that runs its arguments per item or beside the caller.
    fn mention(
        &mut self,
        trees: &[TokenTree],
        k: usize,
        word: &str,
        cx: Ctx,
        level: &mut Level,
    ) -> usize {
        let call = is_call(trees.get(k + 1));
        if call
            && RECEIVES.contains(&word)
            && let Some(f) = cx.func
        {
            self.graph.fns[f].drains = true;
        }
        if call && schedules(word) {
            level.scheduled = level.scheduled.or(Some(self.span(trees[k].span())));
        }
        let timer = cx.timer.or(level.scheduled);
        let field = !call && is_punct(k.checked_sub(1).map(|j| &trees[j]), '.');
        let mac = is_punct(trees.get(k + 1), '!');
        if !field && !mac && mentions_function(word) {
            let site = Site {
                caller: cx.func,
                timer,
                test: cx.test,
                concurrent: cx.repeat && cx.spawned,
            };
            self.graph
                .sites
                .entry(word.to_string())
                .or_default()
                .push(site);
        }
        let repeats = REPEATS.contains(&word);
        if !call || !(repeats || spawns(word)) {
            return k + 1;
        }
        let repeat = cx.repeat || repeats;
        let spawned = cx.spawned || spawns(word);
        if repeat && spawned && !(cx.repeat && cx.spawned) {
            let region = self.span(trees[k + 1].span());
            self.graph.side_by_side.push(region);
        }
        let inner = Ctx {
            timer,
            repeat,
            spawned,
            ..cx
        };
        self.group(&trees[k + 1], inner);
        k + 2
    }

    fn group(&mut self, tree: &TokenTree, cx: Ctx) {
        if let TokenTree::Group(g) = tree {
            let depth = cx.depth + 1;
            self.stream(g.stream(), Ctx { depth, ..cx });
        }
    }

    /// `fn name .. { body }` at `k`: the function recorded and its body scanned. Returns where
    /// to go on.
    fn function(&mut self, trees: &[TokenTree], k: usize, test: bool, depth: usize) -> usize {
        let Some(TokenTree::Ident(name)) = trees.get(k + 1) else {
            return k + 1;
        };
        let Some(b) = body(trees, k + 2) else {
            return k + 2;
        };
        let f = self.graph.fns.len();
        let name = name.to_string();
        self.graph.by_name.entry(name.clone()).or_default().push(f);
        self.graph.fns.push(Func {
            name,
            drains: false,
            loops: Vec::new(),
        });
        // A function declared inside a loop is not run by it.
        let cx = Ctx {
            func: Some(f),
            timer: None,
            test,
            repeat: false,
            spawned: false,
            depth,
        };
        self.group(&trees[b], cx);
        b + 1
    }
}

/// Calls that run a closure per item: what they spawn runs side by side.
const REPEATS: &[&str] = &["map", "for_each", "flat_map", "filter_map", "try_for_each"];

/// Calls that run their argument beside the caller: `spawn`, `spawn_blocking`, `join_all`,
/// `buffer_unordered`, `for_each_concurrent`.
fn spawns(word: &str) -> bool {
    word.starts_with("spawn")
        || word.ends_with("join_all")
        || word.starts_with("buffer")
        || word.ends_with("_concurrent")
}

/// Types a loop runs its work side by side with.
const SIDE_BY_SIDE: &[&str] = &["FuturesUnordered", "JoinSet", "Semaphore"];

/// Calls that receive from a channel.
const RECEIVES: &[&str] = &[
    "recv",
    "try_recv",
    "recv_many",
    "recv_timeout",
    "blocking_recv",
];

/// A call that waits for a timer: `sleep(..)`, `sleep_until(..)`, `interval.tick()`,
/// `delay_for(..)`, a backoff's `sleep_async()`.
fn waits(word: &str) -> bool {
    word.starts_with("sleep") || word == "tick" || word.starts_with("delay_")
}

/// A call that hands a closure to a scheduler: clokwerk's `every(..)`, `start_async_cron(..)`.
fn schedules(word: &str) -> bool {
    word == "every" || word.to_ascii_lowercase().contains("cron")
}

/// A word that may name a function: lower case, not a keyword.
fn mentions_function(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && word != "_"
        && !KEYWORDS.contains(&word)
}

/// The loop (`while` or `loop`: its condition and body) waits for a timer, receives from no
/// channel, runs no work side by side, and is no retry: it does not leave with a value
/// (`return Ok(row)`, `break conn`) and a `while` does not count its turns (`while tried <
/// retries`).
fn wakes_on_timer(keyword: &str, trees: &[TokenTree]) -> bool {
    let counted = keyword == "while"
        && !matches!(trees.first(), Some(TokenTree::Ident(i)) if i == "let")
        && trees
            .iter()
            .any(|t| is_punct(Some(t), '<') || is_punct(Some(t), '>'));
    let (mut timer, mut other) = (false, counted);
    visit_words(trees, 0, &mut |w, call, next| {
        timer |= call && waits(w);
        other |= (call && RECEIVES.contains(&w)) || SIDE_BY_SIDE.contains(&w);
        other |= matches!(w, "return" | "break") && gives_value(next);
    });
    timer && !other
}

/// What follows `return` or `break` is a value: not nothing, a label, `()` or `Ok(())`.
fn gives_value(next: &[TokenTree]) -> bool {
    let empty = |t: Option<&TokenTree>| {
        matches!(t, Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis
            && (g.stream().is_empty() || g.stream().to_string().replace(' ', "") == "()"))
    };
    match next.first() {
        None => false,
        Some(TokenTree::Punct(p)) => !matches!(p.as_char(), ';' | '\'' | ','),
        Some(TokenTree::Ident(i)) if i == "Ok" => !empty(next.get(1)),
        Some(t) => !empty(Some(t)),
    }
}

/// Every word in `trees`, nested groups included, whether it is called, and what follows it.
fn visit_words(trees: &[TokenTree], depth: usize, f: &mut impl FnMut(&str, bool, &[TokenTree])) {
    if depth > MAX_DEPTH {
        return;
    }
    for (k, t) in trees.iter().enumerate() {
        match t {
            TokenTree::Ident(i) => f(&i.to_string(), is_call(trees.get(k + 1)), &trees[k + 1..]),
            TokenTree::Group(g) => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                visit_words(&inner, depth + 1, f);
            }
            _ => {}
        }
    }
}

fn is_call(next: Option<&TokenTree>) -> bool {
    matches!(next, Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
}

fn is_punct(t: Option<&TokenTree>, c: char) -> bool {
    matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

/// The first `{ .. }` group from `k` on before a `;`: an item's or a loop's body.
fn body(trees: &[TokenTree], k: usize) -> Option<usize> {
    for (j, t) in trees.iter().enumerate().skip(k) {
        match t {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => return Some(j),
            TokenTree::Punct(p) if p.as_char() == ';' => return None,
            _ => {}
        }
    }
    None
}

fn next_semicolon(trees: &[TokenTree], k: usize) -> usize {
    (k..trees.len())
        .find(|&j| is_punct(trees.get(j), ';'))
        .map_or(trees.len(), |j| j + 1)
}

/// `#[test]`, `#[tokio::test]`, `#[cfg(test)]`; not `#[cfg(not(test))]`.
fn is_test_attribute(tokens: TokenStream) -> bool {
    let mut words = Vec::new();
    collect_words(tokens, &mut words);
    words.iter().any(|w| w == "test") && !words.iter().any(|w| w == "not")
}

fn collect_words(tokens: TokenStream, out: &mut Vec<String>) {
    for t in tokens {
        match t {
            TokenTree::Ident(i) => out.push(i.to_string()),
            TokenTree::Group(g) => collect_words(g.stream(), out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(files: &[(&str, bool)], names: &[&str]) -> Vec<String> {
        let texts: Vec<Text> = files
            .iter()
            .enumerate()
            .map(|(id, &(text, test))| Text { id, text, test })
            .collect();
        let found = find(&texts, &HashSet::new(), names, |_| Vec::new());
        let mut found: Vec<String> = found.called.into_keys().collect();
        found.sort();
        found
    }

    #[test]
    fn a_function_only_a_sleeping_loop_calls_is_a_job() {
        let main = "async fn main() { tokio::spawn(async move { loop { purge().await; \
                    tokio::time::sleep(D).await; } }); serve().await }";
        let db = "async fn purge() {} async fn serve() { handle().await } async fn handle() {}";
        assert_eq!(
            jobs(&[(main, false), (db, false)], &["purge", "handle"]),
            ["purge"]
        );
    }

    #[test]
    fn a_job_is_found_through_the_functions_between_the_loop_and_it() {
        let main = "async fn run() { let mut t = interval(D); loop { tokio::select! { _ = \
                    t.tick() => { poll_once(&s).await } } } }";
        let chain = "async fn poll_once(s: &S) { s.store.update_head().await; } \
                     impl Store { async fn update_head(&self) {} }";
        assert_eq!(
            jobs(&[(main, false), (chain, false)], &["update_head"]),
            ["update_head"]
        );
    }

    #[test]
    fn one_caller_outside_a_timer_loop_makes_it_no_job() {
        let main = "async fn run() { loop { refresh().await; sleep(D).await; } } \
                    async fn handler() { refresh().await }";
        assert!(jobs(&[(main, false)], &["refresh"]).is_empty());
        // Passed on by name (a route, a spawn) is a caller too.
        let routes = "async fn run() { loop { refresh().await; sleep(D).await; } } \
                      fn app() -> Router { Router::new().route(\"/r\", post(refresh)) }";
        assert!(jobs(&[(routes, false)], &["refresh"]).is_empty());
    }

    #[test]
    fn tests_calling_a_job_do_not_make_it_a_request() {
        let main = "async fn run() { loop { refresh().await; sleep(D).await; } }";
        let unit = "#[cfg(test)] mod tests { #[tokio::test] async fn t() { refresh().await } }";
        let it = "async fn it() { refresh().await }";
        let files = [(main, false), (unit, false), (it, true)];
        assert_eq!(jobs(&files, &["refresh"]), ["refresh"]);
    }

    #[test]
    fn a_retry_loop_without_a_timer_or_a_channel_consumer_is_no_job() {
        let spin = "async fn run() { loop { if step().await { break } } }";
        assert!(jobs(&[(spin, false)], &["step"]).is_empty());
        // Fed by this process's handlers: runs wherever they run.
        let fed = "async fn run() { loop { select! { m = rx.recv() => keep(m), _ = t.tick() \
                   => flush().await } } }";
        assert!(jobs(&[(fed, false)], &["flush"]).is_empty());
        let drains = "async fn run() { loop { flush().await; sleep(D).await } } \
                      async fn flush() { while let Ok(r) = rx.try_recv() {} write().await }";
        assert!(jobs(&[(drains, false)], &["write"]).is_empty());
    }

    #[test]
    fn a_retry_loop_is_no_job() {
        let found = "async fn load(c: &mut Conn) -> Result<Row> { loop { match get(c).await { \
                     Ok(r) => return Ok(r), Err(_) => sleep(D).await } } }";
        assert!(jobs(&[(found, false)], &["get"]).is_empty());
        let counted = "async fn load(c: &mut Conn) { let mut n = 0; while n < 5 { n += 1; \
                       if get(c).await.is_ok() { break; } sleep(D).await } }";
        assert!(jobs(&[(counted, false)], &["get"]).is_empty());
        let connect = "fn listen() -> Client { loop { if let Ok(c) = connect() { break c; } \
                       backoff.sleep_async(); } }";
        assert!(jobs(&[(connect, false)], &["connect"]).is_empty());
        // Leaving without a value, at shutdown or when run once, is no retry.
        let daemon = "async fn run(daemon: bool) -> Result<()> { loop { harvest().await?; \
                      if stop() { break; } if daemon { sleep(D).await } else { return Ok(()); } } }";
        assert_eq!(jobs(&[(daemon, false)], &["harvest"]), ["harvest"]);
    }

    #[test]
    fn work_a_loop_runs_side_by_side_is_no_job() {
        let spawned = "async fn run() { loop { let item = next().await; \
                       tokio::spawn(process(item)); sleep(D).await } }";
        assert!(jobs(&[(spawned, false)], &["process"]).is_empty());
        let joined = "async fn run() { loop { join_all(ids.iter().map(|i| process(i))).await; \
                      sleep(D).await } }";
        assert!(jobs(&[(joined, false)], &["process"]).is_empty());
        let unordered = "async fn run() { loop { let mut f = FuturesUnordered::new(); \
                         f.push(process(1)); sleep(D).await } }";
        assert!(jobs(&[(unordered, false)], &["process"]).is_empty());
        // A loop over the items, awaiting each, runs one at a time.
        let sequential = "async fn run() { loop { for i in ids { process(i).await } \
                          sleep(D).await } }";
        assert_eq!(jobs(&[(sequential, false)], &["process"]), ["process"]);
    }

    #[test]
    fn a_worker_pool_is_no_job() {
        let pool = "async fn worker() { loop { claim().await; sleep(D).await } } \
                    fn start(n: usize) { for _ in 0..n { tokio::spawn(worker()); } }";
        assert!(jobs(&[(pool, false)], &["claim"]).is_empty());
        let mapped = "async fn worker() { loop { claim().await; sleep(D).await } } \
                      fn start() { let h: Vec<_> = (0..4).map(|_| tokio::spawn(worker())).collect(); }";
        assert!(jobs(&[(mapped, false)], &["claim"]).is_empty());
        // Spawned once, from `main`.
        let one = "async fn worker() { loop { claim().await; sleep(D).await } } \
                   fn main() { tokio::spawn(worker()); }";
        assert_eq!(jobs(&[(one, false)], &["claim"]), ["claim"]);
    }

    /// The span of the first `needle` in `text` (file 0).
    fn at(text: &str, needle: &str) -> Span {
        let start = text.find(needle).unwrap_or(usize::MAX);
        Span::new(0, start..start + needle.len())
    }

    /// The span of the last `needle` in `text` (file 0).
    fn last(text: &str, needle: &str) -> Span {
        let start = text.rfind(needle).unwrap_or(usize::MAX);
        Span::new(0, start..start + needle.len())
    }

    #[test]
    fn statements_in_a_timer_loop_of_a_function_run_once_are_a_job() {
        let text = "async fn purge(pool: PgPool) { setup().await; loop { if due(&pool).await { \
                    clean(&pool).await } sleep(D).await } }\nfn main() { tokio::spawn(purge(p)); }";
        let texts = [Text {
            id: 0,
            text,
            test: false,
        }];
        let jobs = find(&texts, &HashSet::from([0]), &[], |_| vec!["purge".into()]);
        assert!(jobs.once.contains("purge"));
        let [(kw, whole)] = jobs.loops[..] else {
            panic!("one loop expected: {:?}", jobs.loops);
        };
        assert_eq!(kw, at(text, "loop"));
        let body = "loop { if due(&pool).await { clean(&pool).await } sleep(D).await }";
        assert_eq!(whole, at(text, body));
        assert_eq!(
            jobs.loop_of([at(text, "clean(&pool)")].into_iter()),
            Some(kw)
        );
        assert_eq!(jobs.loop_of([at(text, "setup()")].into_iter()), None);
        // Reached from `main` through the spawned function.
        let chain = [at(text, "purge(p)"), at(text, "due(&pool)")];
        assert_eq!(jobs.loop_of(chain.into_iter()), Some(kw));
    }

    #[test]
    fn a_timer_loop_a_pool_of_workers_runs_is_no_job() {
        let text = "async fn purge() { loop { clean().await; sleep(D).await } }\n\
                    fn main() { for _ in 0..4 { tokio::spawn(purge()); } }";
        let texts = [Text {
            id: 0,
            text,
            test: false,
        }];
        let own = |_: &Jobs| vec!["purge".into(), "main".into()];
        let jobs = find(&texts, &HashSet::from([0]), &[], own);
        assert!(!jobs.once.contains("purge"));
        assert!(jobs.once.contains("main"));
        let chain = [last(text, "purge()"), at(text, "clean()")];
        assert_eq!(jobs.loop_of(chain.into_iter()), None);
    }

    #[test]
    fn a_closure_handed_to_a_scheduler_is_a_job() {
        let lemmy = "fn setup() { scheduler.every(1.day()).run(move || async move { \
                     recount(&mut pool).await }); }";
        assert_eq!(jobs(&[(lemmy, false)], &["recount"]), ["recount"]);
    }

    #[test]
    fn a_caller_in_a_file_that_cannot_be_read_is_no_job_s() {
        let main = "async fn run() { loop { refresh().await; sleep(D).await; } }";
        let broken = "fn handler() { refresh(); \"unterminated }";
        assert!(jobs(&[(main, false), (broken, false)], &["refresh"]).is_empty());
    }

    #[test]
    fn an_uncalled_function_and_a_call_cycle_are_no_job() {
        let text = "async fn a() { b().await } async fn b() { a().await } \
                    async fn run() { loop { c().await; sleep(D).await } }";
        assert!(jobs(&[(text, false)], &["a", "lonely"]).is_empty());
    }
}
