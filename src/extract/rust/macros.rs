//! `macro_rules!` macros expanded where they are invoked, in item and `impl` positions: the
//! functions and methods a macro generates are then walked like hand-written ones, and their
//! SQL points into the macro's body, in whichever file of the batch defines it.
//!
//! A file's own macros come first; a name it does not define is looked up among the batch's
//! other files (a `#[macro_export]` macro of `model/mod.rs` used in `model/user.rs`), unless two
//! of them define it: then nothing is expanded. Only what can be expanded exactly is: rules
//! without repetitions (`$(..)*`), fragments matched up to the next literal token of the
//! matcher. Anything else is left unexpanded.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aho_corasick::AhoCorasick;
use std::rc::Rc;

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};

/// Expansions per file, and invocations nested in expansions, against macros that expand to
/// themselves.
const MAX_EXPANSIONS: usize = 4_096;
const MAX_NESTING: usize = 8;

pub(super) struct Rule {
    matcher: Vec<TokenTree>,
    body: TokenStream,
}

/// A `macro_rules!` macro: its rules, and a token of the definition (its name), to tell the
/// definition's file by.
#[derive(Clone)]
pub(super) struct Def {
    anchor: proc_macro2::Span,
    rules: Rc<Vec<Rule>>,
}

/// A file's `macro_rules!` macros by name.
pub(super) type Defs = HashMap<String, Def>;

/// The macros of a batch's files, by name, each with the file (an index into the batch) that
/// defines it; `None` where two files define the name.
#[derive(Default)]
pub(super) struct Batch {
    by_name: HashMap<String, Option<(usize, Def)>>,
}

impl Batch {
    /// Add the macros of the batch's file `file`.
    pub fn add(&mut self, file: usize, defs: &Defs) {
        for (name, def) in defs {
            self.by_name
                .entry(name.clone())
                .and_modify(|d| *d = None)
                .or_insert_with(|| Some((file, def.clone())));
        }
    }
}

/// Names of the `macro_rules!` macros a text defines (`macro_rules! name { .. }`), read from
/// bytes, with the text of each definition (to its closing bracket, counted without regard to
/// strings and comments: a wrong count only gives more or less text).
pub(super) fn defined(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.match_indices("macro_rules!").filter_map(|(at, m)| {
        let rest = text[at + m.len()..].trim_start();
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let body = rest[end..].trim_start();
        let (open, close) = match body.as_bytes().first()? {
            b'{' => (b'{', b'}'),
            b'(' => (b'(', b')'),
            b'[' => (b'[', b']'),
            _ => return None,
        };
        let mut depth = 0usize;
        let len = body.bytes().position(|b| {
            if b == open {
                depth += 1;
            } else if b == close {
                depth -= 1;
            }
            depth == 0
        });
        let body = &body[..len.map_or(body.len(), |l| l + 1)];
        (end > 0).then(|| (&rest[..end], body))
    })
}

/// Finds invocations (`name!`) of a set of macros in a text.
pub(super) struct Invocations {
    names: AhoCorasick,
}

impl Invocations {
    pub fn new<'n>(names: impl IntoIterator<Item = &'n str>) -> Option<Self> {
        let patterns: BTreeSet<String> = names.into_iter().map(|n| format!("{n}!")).collect();
        if patterns.is_empty() {
            return None;
        }
        AhoCorasick::new(patterns)
            .ok()
            .map(|names| Invocations { names })
    }

    /// The text invokes one of the macros (a name not preceded by more of a name).
    pub fn in_text(&self, text: &str) -> bool {
        self.names.find_overlapping_iter(text).any(|m| {
            !text[..m.start()]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !text[..m.start()].trim_end().ends_with("macro_rules!")
        })
    }
}

/// The file's own `macro_rules!` macros (in nested modules too).
pub(super) fn definitions(ast: &syn::File) -> Defs {
    let mut defs = Defs::new();
    collect(&ast.items, &mut defs);
    defs
}

/// Expand, in place, the invocations of macros the file defines or the batch does (see
/// [`Batch`]); the batch files whose macros were expanded here, in order.
pub(super) fn expand(
    ast: &mut syn::File,
    own: &Defs,
    batch: &Batch,
) -> Vec<(usize, proc_macro2::Span)> {
    let mut x = Expander {
        own,
        batch,
        budget: MAX_EXPANSIONS,
        used: BTreeMap::new(),
    };
    if !own.is_empty() || !batch.by_name.is_empty() {
        x.items(&mut ast.items, 0);
    }
    x.used.into_iter().collect()
}

fn collect(items: &[syn::Item], defs: &mut Defs) {
    for item in items {
        match item {
            syn::Item::Macro(m) if m.mac.path.is_ident("macro_rules") => {
                if let (Some(name), Some(rules)) = (&m.ident, rules(m.mac.tokens.clone())) {
                    let rules = Rc::new(rules);
                    let anchor = name.span();
                    defs.insert(name.to_string(), Def { anchor, rules });
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    collect(inner, defs);
                }
            }
            _ => {}
        }
    }
}

/// `(matcher) => { body };` ...
fn rules(tokens: TokenStream) -> Option<Vec<Rule>> {
    let mut out = Vec::new();
    let mut it = tokens.into_iter().peekable();
    while let Some(t) = it.next() {
        let TokenTree::Group(matcher) = t else {
            return None;
        };
        match (it.next(), it.next(), it.next()) {
            (
                Some(TokenTree::Punct(a)),
                Some(TokenTree::Punct(b)),
                Some(TokenTree::Group(body)),
            ) if a.as_char() == '=' && b.as_char() == '>' => {
                out.push(Rule {
                    matcher: matcher.stream().into_iter().collect(),
                    body: body.stream(),
                });
            }
            _ => return None,
        }
        if matches!(it.peek(), Some(TokenTree::Punct(p)) if p.as_char() == ';') {
            it.next();
        }
    }
    Some(out)
}

struct Expander<'d> {
    own: &'d Defs,
    batch: &'d Batch,
    budget: usize,
    /// Batch files whose macros were expanded, with a token of each definition.
    used: BTreeMap<usize, proc_macro2::Span>,
}

impl Expander<'_> {
    /// Expand the invocations among `items`; what they expand to goes after them.
    fn items(&mut self, items: &mut Vec<syn::Item>, nesting: usize) {
        let mut i = 0;
        while i < items.len() {
            match &mut items[i] {
                syn::Item::Macro(m) if m.ident.is_none() && nesting < MAX_NESTING => {
                    if let Some(tokens) = self.invocation(&m.mac)
                        && let Ok(file) = syn::parse2::<syn::File>(tokens)
                    {
                        let mut new = file.items;
                        self.items(&mut new, nesting + 1);
                        let n = new.len();
                        items.splice(i + 1..i + 1, new);
                        i += n;
                    }
                }
                syn::Item::Mod(m) => {
                    if let Some((_, inner)) = &mut m.content {
                        self.items(inner, nesting);
                    }
                }
                syn::Item::Impl(imp) => self.impl_items(&mut imp.items, nesting),
                _ => {}
            }
            i += 1;
        }
    }

    fn impl_items(&mut self, items: &mut Vec<syn::ImplItem>, nesting: usize) {
        let parse = |input: syn::parse::ParseStream| {
            let mut out = Vec::new();
            while !input.is_empty() {
                out.push(input.parse::<syn::ImplItem>()?);
            }
            Ok(out)
        };
        let mut i = 0;
        while i < items.len() {
            if let syn::ImplItem::Macro(m) = &items[i]
                && nesting < MAX_NESTING
                && let Some(tokens) = self.invocation(&m.mac)
                && let Ok(mut new) = syn::parse::Parser::parse2(parse, tokens)
            {
                self.impl_items(&mut new, nesting + 1);
                let n = new.len();
                items.splice(i + 1..i + 1, new);
                i += n;
            }
            i += 1;
        }
    }

    /// The expansion of `name!(..)` by the first rule whose matcher takes its tokens: the
    /// file's own macro of that name, else the batch's.
    fn invocation(&mut self, mac: &syn::Macro) -> Option<TokenStream> {
        let name = mac.path.get_ident()?.to_string();
        let (def, from) = match self.own.get(&name) {
            Some(def) => (def, None),
            None => {
                let (file, def) = self.batch.by_name.get(&name)?.as_ref()?;
                (def, Some((*file, def.anchor)))
            }
        };
        if self.budget == 0 {
            return None;
        }
        let input: Vec<TokenTree> = mac.tokens.clone().into_iter().collect();
        let (binds, rule) = def
            .rules
            .iter()
            .find_map(|r| matched(&r.matcher, &input).map(|b| (b, r)))?;
        self.budget -= 1;
        let out = transcribe(rule.body.clone(), &binds)?;
        if let Some((file, anchor)) = from {
            self.used.insert(file, anchor);
        }
        Some(out)
    }
}

/// What each `$name:fragment` of `matcher` takes of `input`, if it takes all of it.
fn matched(matcher: &[TokenTree], input: &[TokenTree]) -> Option<HashMap<String, TokenStream>> {
    let mut binds = HashMap::new();
    let (mut i, mut j) = (0, 0);
    while i < matcher.len() {
        match &matcher[i] {
            TokenTree::Punct(p) if p.as_char() == '$' => {
                // `$name:fragment`; `$(..)` repetitions are not expanded.
                let (
                    Some(TokenTree::Ident(name)),
                    Some(TokenTree::Punct(colon)),
                    Some(TokenTree::Ident(fragment)),
                ) = (matcher.get(i + 1), matcher.get(i + 2), matcher.get(i + 3))
                else {
                    return None;
                };
                if colon.as_char() != ':' {
                    return None;
                }
                i += 4;
                let n = match fragment.to_string().as_str() {
                    "ident" | "literal" | "tt" => 1,
                    "lifetime" => 2,
                    // Up to the next literal token of the matcher (a `,`), or to the end.
                    _ => (j..input.len())
                        .take_while(|&k| !matcher.get(i).is_some_and(|s| same(s, &input[k])))
                        .count(),
                };
                if n == 0 || j + n > input.len() {
                    return None;
                }
                binds.insert(name.to_string(), input[j..j + n].iter().cloned().collect());
                j += n;
            }
            TokenTree::Group(g) => {
                let TokenTree::Group(h) = input.get(j)? else {
                    return None;
                };
                if g.delimiter() != h.delimiter() {
                    return None;
                }
                let m: Vec<TokenTree> = g.stream().into_iter().collect();
                let x: Vec<TokenTree> = h.stream().into_iter().collect();
                binds.extend(matched(&m, &x)?);
                i += 1;
                j += 1;
            }
            t => {
                if !same(t, input.get(j)?) {
                    return None;
                }
                i += 1;
                j += 1;
            }
        }
    }
    (j == input.len()).then_some(binds)
}

fn same(a: &TokenTree, b: &TokenTree) -> bool {
    match (a, b) {
        (TokenTree::Punct(x), TokenTree::Punct(y)) => x.as_char() == y.as_char(),
        (TokenTree::Ident(x), TokenTree::Ident(y)) => x == y,
        (TokenTree::Literal(x), TokenTree::Literal(y)) => x.to_string() == y.to_string(),
        _ => false,
    }
}

/// The rule's body with every `$name` replaced by what it matched (a fragment of several
/// tokens stays one group, as the compiler keeps it). Tokens keep their places in the file.
fn transcribe(body: TokenStream, binds: &HashMap<String, TokenStream>) -> Option<TokenStream> {
    let mut out: Vec<TokenTree> = Vec::new();
    let mut it = body.into_iter();
    while let Some(t) = it.next() {
        match t {
            TokenTree::Punct(p) if p.as_char() == '$' => match it.next()? {
                TokenTree::Ident(name) if name == "crate" => {
                    out.push(TokenTree::Ident(Ident::new("crate", name.span())));
                }
                TokenTree::Ident(name) => {
                    let value = binds.get(&name.to_string())?;
                    let mut tokens = value.clone().into_iter();
                    match (tokens.next(), tokens.next()) {
                        (Some(one), None) => out.push(one),
                        _ => out.push(TokenTree::Group(Group::new(Delimiter::None, value.clone()))),
                    }
                }
                _ => return None,
            },
            TokenTree::Group(g) => {
                let mut group = Group::new(g.delimiter(), transcribe(g.stream(), binds)?);
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
            }
            t => out.push(t),
        }
    }
    Some(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(src: &str) -> Vec<String> {
        let mut ast: syn::File = syn::parse_str(src).unwrap();
        let own = definitions(&ast);
        assert!(expand(&mut ast, &own, &Batch::default()).is_empty());
        names(&ast)
    }

    fn names(ast: &syn::File) -> Vec<String> {
        let mut names = Vec::new();
        for item in &ast.items {
            match item {
                syn::Item::Fn(f) => names.push(f.sig.ident.to_string()),
                syn::Item::Impl(i) => names.extend(i.items.iter().filter_map(|it| match it {
                    syn::ImplItem::Fn(f) => Some(format!("impl {}", f.sig.ident)),
                    _ => None,
                })),
                _ => {}
            }
        }
        names
    }

    #[test]
    fn items_and_methods() {
        let src = r#"
            macro_rules! getter {
                ($name:ident, $table:literal) => {
                    fn $name() -> &'static str { concat!("SELECT * FROM ", $table) }
                };
            }
            getter!(users, "users");
            struct S;
            impl S { getter!(orders, "orders"); }
        "#;
        assert_eq!(expanded(src), ["users", "impl orders"]);
    }

    #[test]
    fn what_cannot_be_expanded_exactly_is_left() {
        let src = r#"
            macro_rules! many { ($($name:ident),*) => { $(fn $name() {})* }; }
            many!(a, b);
            macro_rules! me { () => { me!(); }; }
            me!();
            macro_rules! typed { ($t:ty, $n:ident) => { fn $n(x: $t) {} }; }
            typed!(Vec<u8>, f);
        "#;
        // The repetition is not expanded; the self-expanding macro stops a few levels down.
        assert_eq!(expanded(src), ["f"]);
    }

    /// A macro of another file of the batch is expanded, its tokens still that file's; a name
    /// two files define is not.
    #[test]
    fn macros_of_other_files() {
        let def = r#"
            #[macro_export]
            macro_rules! reorder { ($t:ident) => { fn $t(&self) { sqlx::query("UPDATE t") } }; }
            macro_rules! twice { () => { fn one() {} }; }
        "#;
        let other = "macro_rules! twice { () => { fn two() {} }; }";
        let user = "struct S; impl S { reorder!(moved); } twice!();";
        let (def, other): (syn::File, syn::File) =
            (syn::parse_str(def).unwrap(), syn::parse_str(other).unwrap());
        let mut batch = Batch::default();
        batch.add(3, &definitions(&def));
        batch.add(4, &definitions(&other));
        let mut ast: syn::File = syn::parse_str(user).unwrap();
        let used = expand(&mut ast, &Defs::new(), &batch);
        assert_eq!(names(&ast), ["impl moved"]);
        assert_eq!(used.len(), 1);
        let (file, anchor) = used[0];
        assert_eq!(file, 3);
        // The generated method's `fn` is a token of the defining file, its name one of the
        // invocation's.
        let syn::Item::Impl(imp) = &ast.items[1] else {
            panic!("no impl");
        };
        let syn::ImplItem::Fn(f) = &imp.items[1] else {
            panic!("no method");
        };
        assert!(anchor.join(f.sig.fn_token.span).is_some());
        assert!(anchor.join(f.sig.ident.span()).is_none());
    }
}
