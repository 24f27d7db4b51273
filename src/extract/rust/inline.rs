//! Helpers walked in place: the arguments a call passes, the function it reaches, its body
//! walked with the caller's handles, and where its errors leave.

use super::emit::data_of;
use super::syntax::peel_ref;
use super::text::plain_path;
use super::*;
use crate::extract::Limit;

/// Calls a function is walked in place through, at most: a helper deeper in a caller's calls
/// is checked alone instead (each level multiplies the walks of a helper called from many
/// places).
pub(super) const MAX_CALLS: usize = 4;

impl<'a, 'w> Walker<'a, 'w> {
    /// The call whose error `e?` passes on as it is: `e` past `.await` and conversions that keep
    /// every error an error (`.map_err(Into::into)`, `.context(..)`). None when a conversion
    /// tells a unique violation or a conflict apart (`.map_err(|e| match e { .. 23505 .. })`).
    pub(super) fn tried_site(&self, e: &syn::Expr) -> Option<Span> {
        let mut e = e;
        loop {
            match e {
                syn::Expr::Await(a) => e = &a.base,
                syn::Expr::Paren(p) => e = &p.expr,
                syn::Expr::MethodCall(m) if PASS_ON.iter().any(|p| m.method == p) => {
                    let told_apart = m.args.iter().any(|a| {
                        let text = self.source_of(a).to_ascii_lowercase();
                        ["unique", "23505", "duplicate", "conflict"]
                            .iter()
                            .any(|w| text.contains(w))
                    });
                    if told_apart {
                        return None;
                    }
                    e = &m.receiver;
                }
                syn::Expr::MethodCall(m) => return Some(self.method_site(m)),
                syn::Expr::Call(c) => return Some(self.call_span(c)),
                _ => return None,
            }
        }
    }

    /// Walk `f` with the calls at `sites` passing their error on (see [`Walker::tried`]).
    pub(super) fn passing_on<R>(
        &mut self,
        sites: impl IntoIterator<Item = Span>,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let n = self.tried.len();
        self.tried.extend(sites);
        let r = f(self);
        self.tried.truncate(n);
        r
    }

    /// The calls whose result `e` is when it is a function's value: [`Walker::tried_site`] of
    /// `e`, or of the last expression of each arm when `e` is an `if` (an `else if` chain
    /// included) or a `match`, a few arms deep.
    pub(super) fn tail_sites(&self, e: &syn::Expr) -> Vec<Span> {
        fn last(b: &syn::Block) -> Option<&syn::Expr> {
            match b.stmts.last() {
                Some(syn::Stmt::Expr(e, None)) => Some(e),
                _ => None,
            }
        }
        let mut sites = Vec::new();
        let mut todo = vec![(e, 0)];
        while let Some((e, depth)) = todo.pop() {
            match e {
                _ if depth > 8 => {}
                syn::Expr::If(i) => {
                    todo.extend(last(&i.then_branch).map(|e| (e, depth + 1)));
                    if let Some((_, other)) = &i.else_branch {
                        // An `else if` is one more arm of this choice, not a level deeper.
                        todo.push((other, depth));
                    }
                }
                syn::Expr::Match(m) => todo.extend(m.arms.iter().map(|a| (&*a.body, depth + 1))),
                syn::Expr::Block(b) => todo.extend(last(&b.block).map(|e| (e, depth + 1))),
                e => sites.extend(self.tried_site(e)),
            }
        }
        sites
    }

    /// `method(args)` of a chain, spanned independent of the chain before it.
    pub(super) fn method_site(&self, m: &syn::ExprMethodCall) -> Span {
        self.span_between(m.method.span(), m.paren_token.span.close())
    }

    /// `path(args)`, spanned without printing the arguments.
    pub(super) fn call_span(&self, c: &syn::ExprCall) -> Span {
        let start = match &*c.func {
            syn::Expr::Path(p) => p
                .path
                .segments
                .first()
                .map_or_else(|| c.paren_token.span.open(), |s| s.ident.span()),
            _ => c.paren_token.span.open(),
        };
        self.span_between(start, c.paren_token.span.close())
    }

    /// Arguments as a function walked in place receives them: a value computed from query
    /// results (`n - qty`) is data.
    pub(super) fn passed<'e>(
        &self,
        args: &[Value],
        exprs: impl Iterator<Item = &'e syn::Expr>,
    ) -> Vec<Value> {
        args.iter()
            .zip(exprs)
            .map(|(v, e)| match (self.or_data(v.clone(), e), peel_ref(e)) {
                (Value::None | Value::Data(_), syn::Expr::Array(a)) => {
                    Value::Params(a.elems.iter().map(|e| self.bound(e)).collect())
                }
                (v, _) => v,
            })
            .collect()
    }

    /// Walk the function `name` in place, its parameters bound to `args` (written `texts` in
    /// the caller's terms); `at` is the call.
    pub(super) fn inline(
        &mut self,
        name: &str,
        args: &[Value],
        texts: &[String],
        at: Span,
    ) -> Value {
        match self.ix.function(name, self.file) {
            Some(i) => self.inline_fn(i, None, args, texts, at),
            None => Value::None,
        }
    }

    /// An expression as the outermost caller writes it (see [`Walker::aliases`]).
    pub(super) fn text_of(&self, e: &syn::Expr) -> String {
        self.resolved(value_text(&self.source_of(e)))
    }

    pub(super) fn arg_texts<'e>(&self, exprs: impl Iterator<Item = &'e syn::Expr>) -> Vec<String> {
        exprs.map(|e| self.text_of(e)).collect()
    }

    /// `text` with its first name (or its first field: `rows.owner`) replaced by what it stands
    /// for, if it is an alias.
    pub(super) fn resolved(&self, text: String) -> String {
        let end = text.find(['.', '[']).unwrap_or(text.len());
        let field = text[end..]
            .strip_prefix('.')
            .map(|rest| end + 1 + rest.find(['.', '[']).unwrap_or(rest.len()));
        if let Some(f) = field
            && let Some(a) = self.aliases.get(&text[..f])
        {
            return format!("{a}{}", &text[f..]);
        }
        match self.aliases.get(&text[..end]) {
            Some(a) => format!("{a}{}", &text[end..]),
            None => text,
        }
    }

    /// Walk function `i` in place (`self` bound to `receiver`, its parameters to `args`): its
    /// statements join the caller's sessions, and what it returns computed from query results
    /// is data in the caller.
    pub(super) fn inline_fn(
        &mut self,
        i: usize,
        receiver: Option<(Value, String)>,
        args: &[Value],
        texts: &[String],
        at: Span,
    ) -> Value {
        if self.stack.contains(&i) {
            return Value::None;
        }
        // A helper that calls no function of the run adds one level to the walk, not a
        // multiple of it: walked in place at any depth.
        if self.stack.len() > MAX_CALLS && !self.is_leaf(i) {
            let values = receiver.iter().map(|(v, _)| v).chain(args);
            self.cut(at, i, values);
            return Value::None;
        }
        // A helper that only skipped test code calls is still analysed on its own.
        if !self.test {
            self.shared.inlined.entry(i).or_default().push(at);
        }
        let f = &self.ix.fns[i];
        let mut aliases: HashMap<String, String> = f
            .sig
            .inputs
            .iter()
            .filter_map(|input| match input {
                syn::FnArg::Typed(t) => Some(&t.pat),
                syn::FnArg::Receiver(_) => None,
            })
            .zip(texts)
            .filter_map(|(pat, text)| match &**pat {
                syn::Pat::Ident(id) if plain_path(text) => {
                    Some((id.ident.to_string(), text.clone()))
                }
                _ => None,
            })
            .collect();
        let (receiver, this) = match receiver {
            Some((v, t)) => (Some(v), Some(t)),
            None => (None, None),
        };
        if let Some(this) = this.filter(|t| plain_path(t)) {
            aliases.insert("self".to_string(), this);
        }
        // The fields the caller knows of what it passes keep their meaning: after `let patch =
        // Patch { id: subscription_id, .. }`, `self.id` in `patch.apply(conn)` is
        // `subscription_id`.
        let fields: Vec<(String, String)> = aliases
            .iter()
            .flat_map(|(name, text)| {
                let prefix = format!("{text}.");
                self.aliases.iter().filter_map(move |(k, v)| {
                    let field = k.strip_prefix(&prefix)?;
                    Some((format!("{name}.{field}"), v.clone()))
                })
            })
            .collect();
        aliases.extend(fields);
        let saved_aliases = std::mem::replace(&mut self.aliases, aliases);
        let saved_vars = std::mem::take(&mut self.vars);
        let saved_types = std::mem::take(&mut self.types);
        let saved_file = std::mem::replace(&mut self.file, f.file);
        let saved_ordered = std::mem::take(&mut self.ordered);
        self.stack.push(i);
        let passed_on = self.passes_on;
        self.passes_on &= self.tried.contains(&at);
        self.calls.push(at);
        self.frames += 1;
        self.params(f.sig, f.owner, receiver, Some(args));
        let exits = self.exits.len();
        let value = self.body(f.block);
        // Its own exits leave it here: the caller's steps follow them, its own do not.
        self.end_frame(exits);
        self.calls.pop();
        self.passes_on = passed_on;
        self.stack.pop();
        self.file = saved_file;
        self.vars = saved_vars;
        self.types = saved_types;
        self.ordered = saved_ordered;
        self.aliases = saved_aliases;
        value
    }

    /// Whether function `i` calls no function or method of the run (by name: any of that
    /// name counts), in its body or in the macros there.
    fn is_leaf(&mut self, i: usize) -> bool {
        if let Some(&leaf) = self.shared.leaves.get(&i) {
            return leaf;
        }
        let mut calls = CallsOfRun {
            ix: self.ix,
            found: false,
        };
        calls.visit_block(self.ix.fns[i].block);
        self.shared.leaves.insert(i, !calls.found);
        !calls.found
    }

    /// A call too deep to walk in place, passing `values`: the function it is written in (a
    /// closure's, when a helper calls it) is checked alone, from where the call is near enough
    /// to be walked, when alone it knows the sessions the call works on as they are here: no
    /// transaction open but those it opens itself, and pools or those transactions passed (a
    /// connection from its caller would be read as autocommit, the caller's locks missed).
    fn cut<'v>(&mut self, at: Span, callee: usize, values: impl Iterator<Item = &'v Value>) {
        let Some(pos) = self
            .stack
            .iter()
            .rposition(|&j| self.ix.fns[j].span.contains(at))
        else {
            return;
        };
        let inside = &self.stack[pos..];
        let opened_inside = |open: Option<Span>| {
            open.is_some_and(|b| inside.iter().any(|&j| self.ix.fns[j].span.contains(b)))
        };
        // Every transaction open here (on the handles passed, or on others the function
        // reaches through its fields) was opened inside it, and the handles passed are pools
        // or those transactions; and it does open one here, or is passed a pool (with neither,
        // the call's handle is one its caller gave it, as far as txlint can tell).
        let open: Vec<Option<Span>> = self
            .walkers
            .iter()
            .filter_map(SessionWalker::open_at)
            .collect();
        // Per handle passed: whether this function knows it alone, and whether it is a pool.
        let handles: Vec<(bool, bool)> = values
            .filter_map(|v| match v {
                Value::Handle(h) => Some(h),
                _ => None,
            })
            .map(
                |h| match self.walkers.get(h.walker).and_then(|s| s.open_at()) {
                    Some(begin) => (opened_inside(begin), false),
                    None => (h.kind == Executor::Pool, h.kind == Executor::Pool),
                },
            )
            .collect();
        let pool = handles.iter().any(|&(_, pool)| pool);
        let known = handles.iter().all(|&(known, _)| known)
            && open.iter().all(|&b| opened_inside(b))
            && (pool || !open.is_empty());
        if self.test {
            return;
        }
        let (root, holder) = (self.stack[0], self.stack[pos]);
        if known {
            self.shared.cut.insert((root, holder));
        } else if handles.iter().any(|&(known, _)| !known) {
            let top = self.calls.first().copied().unwrap_or(at);
            self.shared.deep.push(Deep {
                root,
                holder,
                callee,
                at,
                top,
            });
        }
    }

    /// Walk a function's body (its parameters bound): what it gives its caller. A helper that
    /// returns a handle (`begin_write()` opening a transaction, `pool()` giving a field) gives
    /// the caller that handle, on its session and transaction; otherwise what it returns
    /// (its tail and its `return`s) computed from query results is data.
    pub(super) fn body(&mut self, block: &syn::Block) -> Value {
        self.returned.push(Vec::new());
        self.note_prefix_lists(block);
        // The calls whose result is the function's value (`helper(conn).await` last, also as
        // the last expression of an `if` or `match` arm there) pass their error on, as `?` does.
        let sites = match block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => self.tail_sites(e),
            _ => Vec::new(),
        };
        let tail = self.passing_on(sites, |w| w.block_value(block));
        let mut returned = self.returned.pop().unwrap_or_default();
        returned.push(tail);
        if let Some(h) = returned.iter().find(|v| matches!(v, Value::Handle(_))) {
            return h.clone();
        }
        // A struct of the run built here around a handle (`Ok(Self { transaction })`).
        if let Some(o) = returned.iter().find(|v| matches!(v, Value::Object(_))) {
            return o.clone();
        }
        // Text returned on every path (`fn q(shared: bool) -> String`): each text it may be.
        let texts = returned.iter().map(|v| match v {
            Value::Sql(s) => Some(s.clone()),
            _ => None,
        });
        match texts.collect::<Option<Vec<Sql>>>() {
            Some(all) => all
                .into_iter()
                .reduce(Sql::or)
                .map_or(Value::None, Value::Sql),
            None => data_of(&returned),
        }
    }
}

/// Finds a call of a function or method the run defines (see [`Walker::is_leaf`]).
struct CallsOfRun<'i, 'a> {
    ix: &'i Index<'a>,
    found: bool,
}

impl CallsOfRun<'_, '_> {
    fn named(&mut self, name: &syn::Ident) {
        self.found |= self.ix.by_name.contains_key(&name.to_string());
    }

    /// `name(..)` anywhere in a macro's tokens (`join!(load(conn), save(conn))`).
    fn tokens(&mut self, tokens: TokenStream) {
        let mut last: Option<proc_macro2::Ident> = None;
        for t in tokens {
            match t {
                TokenTree::Group(g) => {
                    if g.delimiter() == proc_macro2::Delimiter::Parenthesis
                        && let Some(name) = &last
                    {
                        self.named(name);
                    }
                    self.tokens(g.stream());
                    last = None;
                }
                TokenTree::Ident(i) => last = Some(i),
                _ => last = None,
            }
        }
    }
}

impl<'ast> Visit<'ast> for CallsOfRun<'_, '_> {
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func
            && let Some(last) = p.path.segments.last()
        {
            self.named(&last.ident);
        }
        syn::visit::visit_expr_call(self, c);
    }
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        self.named(&m.method);
        syn::visit::visit_expr_method_call(self, m);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
    }
    // A function's value handed on (`.map(load)`) may be called.
    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if let Some(last) = p.path.segments.last() {
            self.named(&last.ident);
        }
    }
}

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

/// Functions checked alone although callers walk them in place: those holding a call too deep
/// for the walk of a function checked alone (one no caller walks, or one of these).
pub(super) fn checked_alone(shared: &Shared) -> HashSet<usize> {
    let mut alone = HashSet::new();
    loop {
        let more: Vec<usize> = shared
            .cut
            .iter()
            .filter(|&&(root, _)| is_alone(shared, &alone, root))
            .map(|&(_, f)| f)
            .filter(|f| !alone.contains(f))
            .collect();
        if more.is_empty() {
            return alone;
        }
        alone.extend(more);
    }
}

/// Whether function `f` is checked alone: no caller walks it in place, or it holds a call too
/// deep for such a walk (`alone`, so far).
fn is_alone(shared: &Shared, alone: &HashSet<usize>, f: usize) -> bool {
    !shared.inlined.contains_key(&f) || alone.contains(&f)
}

/// One note per function checked alone whose walk reached calls too deep to walk in place, on
/// a connection or transaction passed down from it, of helpers that send statements: what those
/// calls do is not analysed as part of its transactions. At the function's call they are
/// reached through (the first such call's).
pub(super) fn lost_calls(
    index: &Index,
    shared: &Shared,
    alone: &HashSet<usize>,
    sends: &HashSet<usize>,
) -> Vec<Limit> {
    let lost = shared
        .deep
        .iter()
        .filter(|d| is_alone(shared, alone, d.root) && sends.contains(&d.callee));
    // Per root, in the order the walks reached them: its first lost call and the calls' sites.
    let mut roots: Vec<(&Deep, HashSet<Span>)> = Vec::new();
    let mut place: HashMap<usize, usize> = HashMap::new();
    for d in lost {
        let k = *place.entry(d.root).or_insert_with(|| {
            roots.push((d, HashSet::new()));
            roots.len() - 1
        });
        roots[k].1.insert(d.at);
    }
    let name = |f: usize| index.fns[f].sig.ident.to_string();
    let deep = MAX_CALLS;
    roots
        .into_iter()
        .map(|(d, sites)| {
            let (root, first) = (name(d.root), format!("`{}` in `{}`", name(d.callee), name(d.holder)));
            let (what, why) = match sites.len() {
                1 => (
                    format!("what the call of {first} does in the transactions of `{root}`"),
                    format!("it is more than {deep} helper calls below `{root}` (through this call), on a connection passed down from it"),
                ),
                n => (
                    format!("what {n} calls more than {deep} helper calls below `{root}` do in its transactions (the first: {first})"),
                    format!("they are reached through this call, on a connection passed down from `{root}`, and helpers are walked {deep} calls deep"),
                ),
            };
            Limit {
                span: d.top,
                what,
                why,
                fix: "review by hand what those calls do in that function's transactions; the rest of the run was analysed in full",
            }
        })
        .collect()
}
