//! `macro_rules!` macros expanded where their file invokes them, in item and `impl` positions:
//! the functions and methods a macro generates are then walked like hand-written ones, and
//! their SQL points into the macro's body.
//!
//! Only what can be expanded exactly is: rules without repetitions (`$(..)*`), fragments
//! matched up to the next literal token of the matcher. Anything else is left unexpanded.

use std::collections::HashMap;

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};

/// Expansions per file, and invocations nested in expansions, against macros that expand to
/// themselves.
const MAX_EXPANSIONS: usize = 4_096;
const MAX_NESTING: usize = 8;

struct Rule {
    matcher: Vec<TokenTree>,
    body: TokenStream,
}

type Defs = HashMap<String, Vec<Rule>>;

/// Expand, in place, the invocations of the file's own `macro_rules!` macros.
pub(super) fn expand(ast: &mut syn::File) {
    let mut defs = Defs::new();
    collect(&ast.items, &mut defs);
    if !defs.is_empty() {
        let mut budget = MAX_EXPANSIONS;
        items(&mut ast.items, &defs, &mut budget, 0);
    }
}

fn collect(items: &[syn::Item], defs: &mut Defs) {
    for item in items {
        match item {
            syn::Item::Macro(m) if m.mac.path.is_ident("macro_rules") => {
                if let (Some(name), Some(rules)) = (&m.ident, rules(m.mac.tokens.clone())) {
                    defs.insert(name.to_string(), rules);
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

/// Expand the invocations among `items`; what they expand to goes after them.
fn items(items: &mut Vec<syn::Item>, defs: &Defs, budget: &mut usize, nesting: usize) {
    let mut i = 0;
    while i < items.len() {
        match &mut items[i] {
            syn::Item::Macro(m) if m.ident.is_none() && nesting < MAX_NESTING => {
                if let Some(tokens) = invocation(&m.mac, defs, budget)
                    && let Ok(file) = syn::parse2::<syn::File>(tokens)
                {
                    let mut new = file.items;
                    self::items(&mut new, defs, budget, nesting + 1);
                    let n = new.len();
                    items.splice(i + 1..i + 1, new);
                    i += n;
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &mut m.content {
                    self::items(inner, defs, budget, nesting);
                }
            }
            syn::Item::Impl(imp) => impl_items(&mut imp.items, defs, budget, nesting),
            _ => {}
        }
        i += 1;
    }
}

fn impl_items(items: &mut Vec<syn::ImplItem>, defs: &Defs, budget: &mut usize, nesting: usize) {
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
            && let Some(tokens) = invocation(&m.mac, defs, budget)
            && let Ok(mut new) = syn::parse::Parser::parse2(parse, tokens)
        {
            impl_items(&mut new, defs, budget, nesting + 1);
            let n = new.len();
            items.splice(i + 1..i + 1, new);
            i += n;
        }
        i += 1;
    }
}

/// The expansion of `name!(..)` by the first rule whose matcher takes its tokens.
fn invocation(mac: &syn::Macro, defs: &Defs, budget: &mut usize) -> Option<TokenStream> {
    let rules = defs.get(&mac.path.get_ident()?.to_string())?;
    if *budget == 0 {
        return None;
    }
    let input: Vec<TokenTree> = mac.tokens.clone().into_iter().collect();
    let (binds, rule) = rules
        .iter()
        .find_map(|r| matched(&r.matcher, &input).map(|b| (b, r)))?;
    *budget -= 1;
    transcribe(rule.body.clone(), &binds)
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
        expand(&mut ast);
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
}
