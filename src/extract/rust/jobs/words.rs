//! The words a file's tokens are read for: what drops, repeats, spawns, receives, waits and
//! schedules, and how a call or a mention looks.

use proc_macro2::{Delimiter, TokenStream, TokenTree};

use super::scan::{KEYWORDS, MAX_DEPTH};
use crate::extract::rust::collect::words;

/// Macros and calls that drop the futures they run part way: the branches of a `select!`
/// that lose, the rest of a `try_join!` when one fails, what a `timeout` cuts off.
pub(super) const DROPS: &[&str] = &[
    "select",
    "select_biased",
    "try_join",
    "try_join_all",
    "timeout",
    "timeout_at",
    "abortable",
];

/// Calls that run a closure per item: what they spawn runs side by side.
pub(super) const REPEATS: &[&str] = &["map", "for_each", "flat_map", "filter_map", "try_for_each"];

/// Calls that run their argument beside the caller: `spawn`, `spawn_blocking`, `join_all`,
/// `buffer_unordered`, `for_each_concurrent`.
pub(super) fn spawns(word: &str) -> bool {
    word.starts_with("spawn")
        || word.ends_with("join_all")
        || word.starts_with("buffer")
        || word.ends_with("_concurrent")
}

/// Types a loop runs its work side by side with.
pub(super) const SIDE_BY_SIDE: &[&str] = &["FuturesUnordered", "JoinSet", "Semaphore"];

/// Calls that receive from a channel.
pub(super) const RECEIVES: &[&str] = &[
    "recv",
    "try_recv",
    "recv_many",
    "recv_timeout",
    "blocking_recv",
];

/// A call that waits for a timer: `sleep(..)`, `sleep_until(..)`, `interval.tick()`,
/// `delay_for(..)`, a backoff's `sleep_async()`.
pub(super) fn waits(word: &str) -> bool {
    word.starts_with("sleep") || word == "tick" || word.starts_with("delay_")
}

/// `timeout(every, stop.changed())`, `timeout(every, token.cancelled())`: a sleep that a
/// shutdown signal ends early.
pub(super) fn sleeps_until_stopped(word: &str, next: &[TokenTree]) -> bool {
    let Some(TokenTree::Group(args)) = next.first().filter(|_| word == "timeout") else {
        return false;
    };
    let text = args.stream().to_string();
    words(&text, "changed") + words(&text, "cancelled") > 0
}

/// `text` may hold a call of [`waits`], [`sleeps_until_stopped`] or [`schedules`] (a byte
/// search, before any tokens).
pub(super) fn may_wait(text: &str) -> bool {
    static WORDS: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    let words = WORDS.get_or_init(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(["sleep", "tick", "delay_", "timeout", "every", "cron"])
            .ok()
    });
    words.as_ref().is_none_or(|w| w.is_match(text))
}

/// A call that hands a closure to a scheduler: clokwerk's `every(..)`, `start_async_cron(..)`.
pub(super) fn schedules(word: &str) -> bool {
    word == "every" || word.to_ascii_lowercase().contains("cron")
}

/// A word that may name a function: lower case, not a keyword.
pub(super) fn mentions_function(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && word != "_"
        && !KEYWORDS.contains(&word)
}

/// The loop (`while` or `loop`: its condition and body) waits for a timer, receives from no
/// channel, runs no work side by side, and is no retry: it does not leave with a value
/// (`return Ok(row)`, `break conn`), a `while` does not count its turns (`while tried <
/// retries`) nor wait for a success (`while let Err(e) = op()`).
pub(super) fn wakes_on_timer(keyword: &str, trees: &[TokenTree], budget: &mut usize) -> bool {
    let word = |j: usize| {
        matches!(trees.get(j), Some(TokenTree::Ident(i)) if i == "let")
            .then(|| trees.get(j + 1).map(|t| t.to_string()))
            .flatten()
    };
    let counted = keyword == "while"
        && word(0).is_none()
        && trees
            .iter()
            .any(|t| is_punct(Some(t), '<') || is_punct(Some(t), '>'));
    // `while let Err(e) = op().await { sleep(..) }`: until it succeeds.
    let counted = counted || (keyword == "while" && word(0).as_deref() == Some("Err"));
    let (mut timer, mut other) = (false, counted);
    visit_words(trees, 0, budget, &mut |w, call, next| {
        timer |= call && (waits(w) || sleeps_until_stopped(w, next));
        other |= (call && RECEIVES.contains(&w)) || SIDE_BY_SIDE.contains(&w);
        other |= matches!(w, "return" | "break") && gives_value(next);
    });
    timer && !other
}

/// Something in `trees` may run beside what follows it: a spawn-like call (see [`spawns`]), a
/// call that polls several futures at once ([`DROPS`]), a set of tasks ([`SIDE_BY_SIDE`]).
pub(super) fn runs_beside(trees: &[TokenTree], budget: &mut usize) -> bool {
    let mut beside = false;
    visit_words(trees, 0, budget, &mut |w, call, _| {
        beside |= (call && spawns(w)) || DROPS.contains(&w) || SIDE_BY_SIDE.contains(&w);
    });
    beside
}

/// What follows `return` or `break` is a value: not nothing, a label, `()` or `Ok(())`.
pub(super) fn gives_value(next: &[TokenTree]) -> bool {
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
pub(super) fn visit_words(
    trees: &[TokenTree],
    depth: usize,
    budget: &mut usize,
    f: &mut impl FnMut(&str, bool, &[TokenTree]),
) {
    if depth > MAX_DEPTH || *budget < trees.len() {
        *budget = 0;
        return;
    }
    *budget -= trees.len();
    for (k, t) in trees.iter().enumerate() {
        match t {
            TokenTree::Ident(i) => f(&i.to_string(), is_call(trees.get(k + 1)), &trees[k + 1..]),
            TokenTree::Group(g) => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                visit_words(&inner, depth + 1, budget, f);
            }
            _ => {}
        }
    }
}

pub(super) fn is_call(next: Option<&TokenTree>) -> bool {
    matches!(next, Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
}

pub(super) fn is_punct(t: Option<&TokenTree>, c: char) -> bool {
    matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

pub(super) fn next_semicolon(trees: &[TokenTree], k: usize) -> usize {
    (k..trees.len())
        .find(|&j| is_punct(trees.get(j), ';'))
        .map_or(trees.len(), |j| j + 1)
}

/// `#[..]` (the bracket group after `#`) marks test code, as the front-end reads attributes
/// (`#[test]`, `#[tokio::test]`, `#[rstest]`, `#[cfg(test)]`; not `#[cfg(not(test))]`).
pub(super) fn is_test_attribute(group: &proc_macro2::Group) -> bool {
    let tokens: TokenStream = [
        TokenTree::Punct(proc_macro2::Punct::new('#', proc_macro2::Spacing::Alone)),
        TokenTree::Group(group.clone()),
    ]
    .into_iter()
    .collect();
    syn::parse::Parser::parse2(syn::Attribute::parse_outer, tokens)
        .is_ok_and(|attrs| crate::extract::rust::is_test(&attrs))
}

/// The names a `let` (or a closure's `|..|`) binds, from the tokens after it to the `=` (or
/// the closing `|`): every plain name of the pattern, in groups too (`start`, `mut start`,
/// `(Some(start), end)`). Type names come along, and name no function of a loop's.
pub(super) fn bindings(after: &[TokenTree], until: char) -> Vec<String> {
    fn names(tokens: &[TokenTree], out: &mut Vec<String>, depth: usize) {
        for t in tokens {
            match t {
                TokenTree::Ident(i) if i != "mut" && i != "ref" => out.push(i.to_string()),
                TokenTree::Group(g) if depth < 4 => {
                    let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                    names(&inner, out, depth + 1);
                }
                _ => {}
            }
        }
    }
    let stop = |t: &TokenTree| match t {
        TokenTree::Punct(p) => p.as_char() == until || p.as_char() == ';',
        TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
        _ => false,
    };
    let end = after.iter().position(stop).unwrap_or(after.len()).min(64);
    let mut out = Vec::new();
    names(&after[..end], &mut out, 0);
    out
}

/// A function's parameter names, from its parenthesised parameter list: each name before a
/// `:` at the list's top level (`start: Instant`, `mut n: u32`).
pub(super) fn parameters(tree: &TokenTree) -> Vec<String> {
    let TokenTree::Group(g) = tree else {
        return Vec::new();
    };
    if g.delimiter() != Delimiter::Parenthesis {
        return Vec::new();
    }
    let tokens: Vec<TokenTree> = g.stream().into_iter().collect();
    let colon = |t: Option<&TokenTree>| matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == proc_macro2::Spacing::Alone);
    let names = tokens.iter().enumerate().filter_map(|(i, t)| match t {
        TokenTree::Ident(name) if colon(tokens.get(i + 1)) => Some(name.to_string()),
        _ => None,
    });
    names.collect()
}

/// The `|` at `k` opens a closure's parameters: it starts an expression (the group's first
/// token, after `,`, `=` or `move`), where no `a | b` can stand.
pub(super) fn opens_closure(trees: &[TokenTree], k: usize) -> bool {
    match k.checked_sub(1).map(|j| &trees[j]) {
        None => true,
        Some(TokenTree::Punct(p)) => matches!(p.as_char(), ',' | '='),
        Some(TokenTree::Ident(i)) => i == "move" || i == "return",
        _ => false,
    }
}

/// The type an `impl` is for, from the tokens between `impl` and its body: the last name at
/// the top level of the type (after `for` in a trait's `impl`), outside generic arguments
/// and before `where` (`Collector` of `impl<T: Db> worker::Collector<T> where ..`).
pub(super) fn self_type(tokens: &[TokenTree]) -> Option<&proc_macro2::Ident> {
    let from = tokens
        .iter()
        .position(|t| matches!(t, TokenTree::Ident(i) if i == "for"))
        .map_or(0, |f| f + 1);
    let (mut depth, mut last) = (0i32, None);
    for t in &tokens[from..] {
        match t {
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' => depth -= 1,
            TokenTree::Ident(i) if i == "where" && depth == 0 => break,
            TokenTree::Ident(i) if depth == 0 => last = Some(i),
            _ => {}
        }
    }
    last
}
