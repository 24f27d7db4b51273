//! A Rust file as syn read it: its text, the map from syn's positions to byte offsets, and
//! its syntax tree (read item by item for a large file, thinned to what can matter), with the
//! `macro_rules!` invocations of a batch expanded (see [`super::macros`]).

use super::*;

/// A parsed Rust file, with what is needed to turn syn positions into byte offsets.
pub(super) struct Parsed {
    pub(super) id: FileId,
    pub(super) path: PathBuf,
    /// The path as shown in reports.
    pub(super) display: String,
    /// The text syn saw: the file without a BOM, a shebang line blanked.
    pub(super) text: String,
    pub(super) lines: LineIndex,
    /// Bytes stripped in front (a UTF-8 BOM).
    pub(super) shift: usize,
    pub(super) ast: syn::File,
    /// The database its SQL is for, unless a handle's type or a `cfg` feature says otherwise.
    pub(super) dialect: Dialect,
    /// Files of the batch (indexes into it) whose `macro_rules!` this file's expansions copied
    /// tokens from, each with a token of the definition: see [`home`].
    pub(super) foreign: Vec<(usize, proc_macro2::Span)>,
}

impl Parsed {
    pub(super) fn offset(&self, lc: LineColumn) -> usize {
        self.lines
            .offset_of_column(lc.line, lc.column, self.text.len())
    }

    /// Byte range (in the stripped text) of a syntax node.
    pub(super) fn range(&self, node: &impl Spanned) -> std::ops::Range<usize> {
        self.range_at(node.span())
    }

    pub(super) fn range_at(&self, s: proc_macro2::Span) -> std::ops::Range<usize> {
        let (a, b) = (self.offset(s.start()), self.offset(s.end()));
        a..b.max(a)
    }

    pub(super) fn span_at(&self, s: proc_macro2::Span) -> Span {
        let r = self.range_at(s);
        Span::new(self.id, r.start + self.shift..r.end + self.shift)
    }

    /// From the start of `from` to the end of `to`, without printing any syntax tree (a node's
    /// own span is computed from all its tokens, which costs its size).
    pub(super) fn span_between(&self, from: proc_macro2::Span, to: proc_macro2::Span) -> Span {
        let (a, b) = (self.offset(from.start()), self.offset(to.end()));
        Span::new(self.id, a + self.shift..b.max(a) + self.shift)
    }
}

/// The parsed file a token of `parsed[i]` is from: that file, or the one whose `macro_rules!`
/// body an expansion there copied the token from (told by proc-macro2, which knows a token's
/// file: two tokens join only within one).
pub(super) fn home(parsed: &[Parsed], i: usize, s: proc_macro2::Span) -> &Parsed {
    let p = &parsed[i];
    p.foreign
        .iter()
        .find(|(_, anchor)| anchor.join(s).is_some())
        .and_then(|&(file, _)| parsed.get(file))
        .unwrap_or(p)
}

/// Expand the `macro_rules!` invocations of a batch's parsed files, with the macros of the
/// batch's other files too (see [`macros`]).
pub(super) fn expand_macros(parsed: &mut [Parsed]) {
    let own: Vec<macros::Defs> = parsed.iter().map(|p| macros::definitions(&p.ast)).collect();
    let mut batch = macros::Batch::default();
    for (i, defs) in own.iter().enumerate() {
        batch.add(i, defs);
    }
    for (p, defs) in parsed.iter_mut().zip(&own) {
        p.foreign = macros::expand(&mut p.ast, defs, &batch);
    }
}

/// Why syn could not read a file: where, and the message.
pub(super) struct Unparsed {
    pub(super) at: Option<LineColumn>,
    pub(super) message: String,
    /// txlint's own limit (nesting) stopped it, not the file's syntax.
    pub(super) limit: bool,
    pub(super) text: String,
    pub(super) shift: usize,
}

pub(super) fn parse(
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
pub(super) fn thin_items(
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
    pub(super) fn word(head: &[String], i: usize) -> Option<&str> {
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
pub(super) fn read_whole(
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
pub(super) const THIN_ABOVE: usize = 64 * 1024;

/// Whether an item of a large file can matter: the pre-scan, applied to the item's own text.
/// What a batch holds is then the code that talks to a database, not every binding beside it.
/// Imports, type aliases and text constants are kept whatever they say (others refer to them
/// by name); modules and `impl` blocks keep the items inside that can matter.
pub(super) fn keep(p: &Parsed, item: &mut syn::Item, cfg: &crate::config::RustConfig) -> bool {
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
pub(super) fn mentions_text(ty: &syn::Type) -> bool {
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
