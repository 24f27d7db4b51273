//! Reading one file's tokens: its functions, their timer loops, and every call or mention of a
//! function, with what is around it (a timer loop, a spawn in a loop, test code).

use std::collections::HashMap;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

use super::Text;
use super::reach::Reach;
use super::words::*;
use crate::source::{FileId, LineIndex, Span};

#[derive(Default)]
pub(super) struct Graph {
    pub(super) fns: Vec<Func>,
    /// Every function's position in `fns`, by name.
    pub(super) by_name: HashMap<String, Vec<usize>>,
    /// Where each name is called or passed on, by the name.
    pub(super) sites: HashMap<String, Vec<Site>>,
    /// See [`Jobs::side_by_side`].
    pub(super) side_by_side: Vec<Span>,
    /// Whether to keep [`Graph::calls_at`] (only a run with a session lock asks).
    pub(super) keep_calls: bool,
    /// Every call, by its file and the end of its arguments, where the front-end's span of
    /// the call (`path::name(..)`, `name(..)` of a method call) ends too.
    pub(super) calls_at: HashMap<(FileId, usize), CallAt>,
    /// The packages that can call whom (see [`Reach`]).
    pub(super) reach: Reach,
    /// Each scanned file's package (see [`Text::package`]).
    pub(super) package: HashMap<FileId, Option<usize>>,
    /// Type names of `impl`s and of calls' qualifiers, by their number.
    pub(super) types: Vec<String>,
    pub(super) type_ids: HashMap<String, u32>,
}

/// What [`Graph::calls_at`] knows of a call.
#[derive(Clone, Debug)]
pub(super) struct CallAt {
    pub(super) name: String,
    /// See [`Site::method`].
    pub(super) method: bool,
    /// See [`Site::awaited`].
    pub(super) awaited: bool,
}

pub(super) struct Func {
    pub(super) name: String,
    pub(super) file: FileId,
    /// Its name where it is declared.
    pub(super) at: Span,
    /// Declared in an `impl` or a `trait`: called as `x.name(..)` or `Type::name(..)`.
    pub(super) method: bool,
    /// Declared in a `trait` or in its `impl .. for`: called through the trait, also from
    /// packages that do not depend on this one.
    pub(super) dispatched: bool,
    /// The type of its `impl` (`Collector` of `impl<T> Collector<T>`, of `impl Job for
    /// Collector`; see [`Graph::types`]).
    pub(super) owner: Option<u32>,
    /// Receives from a channel.
    pub(super) drains: bool,
    /// Its own timer loops.
    pub(super) loops: Vec<TimerLoop>,
    /// Its parameters and the names its `let`s bind so far (`let start = Instant::now()`):
    /// a later mention of one that is no call is the variable, not a function passed on.
    locals: Vec<String>,
}

/// A loop woken by a timer, in a function.
#[derive(Clone, Copy, Debug)]
pub(super) struct TimerLoop {
    /// The keyword (`loop`, `while`).
    pub(super) at: Span,
    /// The loop to the end of its body.
    pub(super) whole: Span,
    /// What the loop's block runs before it, from the block's start to the keyword, when the
    /// block runs nothing beside the loop: that runs before the loop's first turn.
    pub(super) lead: Option<Span>,
}

impl TimerLoop {
    /// `site` runs in the loop, or before its first turn.
    pub(super) fn runs(&self, site: Span) -> bool {
        self.whole.contains(site) || self.before(site)
    }

    /// `site` runs before the loop's first turn (see [`TimerLoop::lead`]).
    pub(super) fn before(&self, site: Span) -> bool {
        self.lead.is_some_and(|l| l.contains(site))
    }
}

#[derive(Clone, Copy)]
pub(super) struct Site {
    /// The name called or mentioned (its file is the site's).
    pub(super) at: Span,
    /// The function the site is in (none: an item's initialiser, a static).
    pub(super) caller: Option<usize>,
    /// The timer loop or scheduler call around the site.
    pub(super) timer: Option<Span>,
    /// In test code.
    pub(super) test: bool,
    /// Run side by side with other runs of itself: spawned (or joined) in a loop or a `map`.
    pub(super) concurrent: bool,
    /// A call awaited where it stands (`name(..).await`), under nothing that drops futures
    /// part way (`select!`, `timeout`): the caller runs it to its end unless its own future
    /// is dropped.
    pub(super) awaited: bool,
    /// A method call (`x.name(..)`), which no free function answers.
    pub(super) method: bool,
    /// The type a path call names (`Metrics::start(..)`; see [`Graph::types`]): only a
    /// method of that type's `impl` answers it.
    pub(super) qualifier: Option<u32>,
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
    /// Under something that drops the futures it runs part way (see [`DROPS`]).
    dropping: bool,
    /// Directly in an `impl` or a `trait`: its functions are methods.
    in_impl: bool,
    /// Directly in a `trait` or a trait's `impl .. for` (see [`Func::dispatched`]).
    dispatched: bool,
    /// Directly in an `impl` of this type (see [`Func::owner`]).
    owner: Option<u32>,
    /// Directly the argument of an awaited `Box::pin(..)`: a call that is the whole of it is
    /// awaited too.
    pinned: bool,
    /// Groups around the tokens: deeper ones are not read (hostile nesting).
    depth: usize,
}

/// Nesting of groups read; real code stays far below.
pub(super) const MAX_DEPTH: usize = 128;

impl Graph {
    /// The number of a type name (see [`Graph::types`]).
    pub(super) fn type_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.type_ids.get(name) {
            return id;
        }
        let id = self.types.len() as u32;
        self.types.push(name.to_string());
        self.type_ids.insert(name.to_string(), id);
        id
    }

    /// Read one file's functions, loops and calls; false if it is no Rust tokens.
    pub(super) fn scan(&mut self, t: &Text) -> bool {
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
        self.package.insert(t.id, t.package);
        let shift = t.text.len() - text.len();
        let mut s = Scanner {
            graph: self,
            file: t.id,
            lines: LineIndex::at_newlines(text),
            len: text.len(),
            shift,
            budget: WORK_PER_BYTE * text.len() + 4096,
            exhausted: false,
        };
        let cx = Ctx {
            func: None,
            timer: None,
            test: t.test,
            repeat: false,
            spawned: false,
            dropping: false,
            in_impl: false,
            dispatched: false,
            owner: None,
            pinned: false,
            depth: 0,
        };
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        s.stream(&trees, cx);
        !s.exhausted
    }
}

/// One group's tokens as they are read: what holds from a statement's start to its `;`, and
/// where each item's or loop's body is.
#[derive(Default)]
struct Level {
    /// A test attribute (`#[test]`, `#[cfg(test)]`) stands before the item.
    test_attr: bool,
    /// The statement hands work to a scheduler (`scheduler.every(..).run(|| ..)`).
    scheduled: Option<Span>,
    /// For each position, the first `{ .. }` group or `;` from there on (the length if none):
    /// a body is found in one step, not by a scan per keyword (`while while ..` is
    /// quadratic otherwise).
    stops: Vec<usize>,
}

impl Level {
    fn new(trees: &[TokenTree]) -> Level {
        let mut stops = vec![trees.len(); trees.len() + 1];
        for j in (0..trees.len()).rev() {
            let stop = match &trees[j] {
                TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
                TokenTree::Punct(p) => p.as_char() == ';',
                _ => false,
            };
            stops[j] = if stop { j } else { stops[j + 1] };
        }
        Level {
            stops,
            ..Level::default()
        }
    }

    /// The first `{ .. }` group from `k` on before a `;`: an item's or a loop's body.
    fn body(&self, trees: &[TokenTree], k: usize) -> Option<usize> {
        let j = *self.stops.get(k)?;
        matches!(trees.get(j), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace)
            .then_some(j)
    }
}

/// Tokens a file's reading may visit per byte of it: each token is read once, and again by
/// the loops around it that ask whether they wait for a timer; hostile nesting (`while while
/// ..`) would read it once per level.
const WORK_PER_BYTE: usize = 16;

struct Scanner<'g> {
    graph: &'g mut Graph,
    file: FileId,
    lines: LineIndex,
    len: usize,
    shift: usize,
    /// Tokens still to visit (see [`WORK_PER_BYTE`]).
    budget: usize,
    /// The budget ran out: the file's calls were not all read.
    exhausted: bool,
}

/// Words that can stand before `(` and name no function.
pub(super) const KEYWORDS: &[&str] = &[
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

    /// Takes `n` tokens from the budget; false (and the file is not read whole) when it is out.
    fn spend(&mut self, n: usize) -> bool {
        match self.budget.checked_sub(n) {
            Some(left) => self.budget = left,
            None => self.exhausted = true,
        }
        !self.exhausted
    }

    fn stream(&mut self, trees: &[TokenTree], cx: Ctx) {
        if cx.depth > MAX_DEPTH || !self.spend(trees.len()) {
            return;
        }
        let mut k = 0;
        let mut level = Level::new(trees);
        while k < trees.len() {
            k = match &trees[k] {
                TokenTree::Punct(p) if p.as_char() == '#' => match trees.get(k + 1) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                        level.test_attr |= is_test_attribute(g);
                        k + 2
                    }
                    _ => k + 1,
                },
                TokenTree::Punct(p) if p.as_char() == '|' && opens_closure(trees, k) => {
                    if let Some(f) = cx.func {
                        let bound = bindings(trees.get(k + 1..).unwrap_or_default(), '|');
                        self.graph.fns[f].locals.extend(bound);
                    }
                    k + 1
                }
                TokenTree::Punct(p) if p.as_char() == ';' => {
                    (level.test_attr, level.scheduled) = (false, None);
                    k + 1
                }
                TokenTree::Ident(i) => self.word(trees, k, i, cx, &mut level),
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
                self.function(trees, k, Ctx { test, ..cx }, level)
            }
            "let" => {
                if let Some(f) = cx.func {
                    let bound = bindings(trees.get(k + 1..).unwrap_or_default(), '=');
                    self.graph.fns[f].locals.extend(bound);
                }
                k + 1
            }
            "mod" | "impl" | "trait" => {
                level.test_attr = false;
                let Some(b) = level.body(trees, k + 1) else {
                    return k + 1;
                };
                let in_impl = word != "mod";
                let of_trait = |t: &TokenTree| matches!(t, TokenTree::Ident(i) if i == "for");
                let dispatched =
                    word == "trait" || (word == "impl" && trees[k..b].iter().any(of_trait));
                let owner = match word.as_str() {
                    "impl" => {
                        self_type(&trees[k + 1..b]).map(|t| self.graph.type_id(&t.to_string()))
                    }
                    _ => None,
                };
                self.group(
                    &trees[b],
                    Ctx {
                        test,
                        in_impl,
                        dispatched,
                        owner,
                        ..cx
                    },
                );
                b + 1
            }
            "loop" | "while" | "for" => match level.body(trees, k + 1) {
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
            if !once {
                return None;
            }
            let wakes = wakes_on_timer(&word, &trees[k + 1..=b], &mut self.budget);
            self.exhausted |= self.budget == 0;
            let at = wakes.then(|| self.span(keyword.span()))?;
            if let Some(f) = cx.func {
                let whole = self.span_between(keyword.span(), trees[b].span());
                // What the loop's block runs before it, one thing after the other, runs
                // before the loop's first turn.
                let lead = (!runs_beside(&trees[..k], &mut self.budget))
                    .then(|| self.span_between(trees[0].span(), keyword.span()));
                self.exhausted |= self.budget == 0;
                self.graph.fns[f].loops.push(TimerLoop { at, whole, lead });
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
        // The condition read as one level deeper: a chain of `while while ..` is nesting too.
        let condition = Ctx {
            depth: cx.depth + 1,
            ..inner
        };
        self.stream(&trees[k + 1..b], condition);
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
        let dotted = is_punct(k.checked_sub(1).map(|j| &trees[j]), '.');
        // `name: T` in a struct, `Foo { name: v }`: a field, not a function.
        let declared = matches!(trees.get(k + 1), Some(TokenTree::Punct(p))
            if p.as_char() == ':' && p.spacing() == proc_macro2::Spacing::Alone);
        let field = (!call && dotted) || declared;
        let mac = is_punct(trees.get(k + 1), '!');
        if mac
            && DROPS.contains(&word)
            && let Some(g @ TokenTree::Group(_)) = trees.get(k + 2)
        {
            self.group(
                g,
                Ctx {
                    timer,
                    dropping: true,
                    ..cx
                },
            );
            return k + 3;
        }
        let awaited = call
            && is_punct(trees.get(k + 2), '.')
            && matches!(trees.get(k + 3), Some(TokenTree::Ident(i)) if i == "await");
        let local = !call
            && cx
                .func
                .is_some_and(|f| self.graph.fns[f].locals.iter().any(|l| l == word));
        if !field && !mac && !local && mentions_function(word) {
            self.site(trees, k, word, (cx, timer), (call, dotted, awaited));
        }
        // `Box::pin(walk(d - 1)).await`: the recursion's way of awaiting a call.
        if awaited && word == "pin" {
            let pinned = Ctx {
                timer,
                pinned: true,
                ..cx
            };
            self.inside(&trees[k + 1], pinned);
            return k + 2;
        }
        if call && DROPS.contains(&word) {
            self.group(
                &trees[k + 1],
                Ctx {
                    timer,
                    dropping: true,
                    ..cx
                },
            );
            return k + 2;
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

    /// A call or mention of a function: a site of the call graph (and, where calls are kept,
    /// how the call at its end is written).
    fn site(
        &mut self,
        trees: &[TokenTree],
        k: usize,
        word: &str,
        (cx, timer): (Ctx, Option<Span>),
        (call, dotted, awaited): (bool, bool, bool),
    ) {
        let pinned = call && cx.pinned && k + 2 == trees.len();
        let awaited = (awaited || pinned) && !cx.dropping;
        if call && self.graph.keep_calls {
            let end = self.span(trees[k + 1].span()).end();
            let at = CallAt {
                name: word.to_string(),
                method: dotted,
                awaited,
            };
            self.graph.calls_at.insert((self.file, end), at);
        }
        // `Type::name(..)`: a method of that type's (`Self` is the `impl`'s own).
        let before = |back: usize| k.checked_sub(back).map(|j| &trees[j]);
        let qualifier = match (before(3), is_punct(before(1), ':')) {
            (Some(TokenTree::Ident(q)), true) => {
                let q = q.to_string();
                match q.as_str() {
                    "Self" => cx.owner,
                    _ if q.starts_with(|c: char| c.is_ascii_uppercase()) => {
                        Some(self.graph.type_id(&q))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let site = Site {
            at: self.span(trees[k].span()),
            qualifier,
            caller: cx.func,
            timer,
            test: cx.test,
            concurrent: cx.repeat && cx.spawned,
            awaited,
            method: dotted,
        };
        self.graph
            .sites
            .entry(word.to_string())
            .or_default()
            .push(site);
    }

    fn group(&mut self, tree: &TokenTree, cx: Ctx) {
        self.inside(
            tree,
            Ctx {
                pinned: false,
                ..cx
            },
        );
    }

    /// A group's tokens, one level deeper, read in `cx` as it is (only `Box::pin(..)`'s
    /// argument is read [`Ctx::pinned`]; [`Scanner::group`] is every other group).
    fn inside(&mut self, tree: &TokenTree, cx: Ctx) {
        if let TokenTree::Group(g) = tree {
            let depth = cx.depth + 1;
            let inner: Vec<TokenTree> = g.stream().into_iter().collect();
            self.stream(&inner, Ctx { depth, ..cx });
        }
    }

    /// `fn name .. { body }` at `k`: the function recorded and its body scanned. Returns where
    /// to go on.
    fn function(&mut self, trees: &[TokenTree], k: usize, cx: Ctx, level: &Level) -> usize {
        let Some(TokenTree::Ident(name)) = trees.get(k + 1) else {
            return k + 1;
        };
        let Some(b) = level.body(trees, k + 2) else {
            return k + 2;
        };
        let f = self.graph.fns.len();
        let at = self.span(name.span());
        let name = name.to_string();
        self.graph.by_name.entry(name.clone()).or_default().push(f);
        self.graph.fns.push(Func {
            name,
            file: self.file,
            at,
            method: cx.in_impl,
            dispatched: cx.dispatched,
            owner: cx.owner,
            drains: false,
            loops: Vec::new(),
            locals: trees[k + 2..b].iter().flat_map(parameters).collect(),
        });
        // A function declared inside a loop is not run by it.
        let cx = Ctx {
            func: Some(f),
            timer: None,
            repeat: false,
            spawned: false,
            dropping: false,
            in_impl: false,
            dispatched: false,
            owner: None,
            pinned: false,
            ..cx
        };
        self.group(&trees[b], cx);
        b + 1
    }
}
