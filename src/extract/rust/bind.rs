//! Bindings: what `let`, patterns and parameters bind a name to (values, handles, aliases of a
//! row key, the type a variable holds, whether it is sorted).

use super::syntax::*;
use super::text::plain_path;
use super::*;

/// Collections visited in an order of their hash (it differs from one process to the next).
const HASHED: &[&str] = &["HashMap", "HashSet", "DashMap", "DashSet"];

/// Besides the steps that keep an order ([`super::order::KEEPS_ORDER`]), those that visit a
/// map or set in its own order.
const VISITS_HASH: &[&str] = &[
    "iter_mut",
    "drain",
    "keys",
    "values",
    "into_keys",
    "into_values",
    "clone",
];

impl<'a, 'w> Walker<'a, 'w> {
    /// Remember the type a `let` gives a plain variable: a struct literal's (`let persist =
    /// NewCrate { .. }`) or the annotation's; forget an older one of the name.
    pub(super) fn note_type(&mut self, pat: &syn::Pat, init: Option<&syn::Expr>) {
        let (pat, annotated) = match pat {
            syn::Pat::Type(t) => (&*t.pat, types::type_name(&t.ty)),
            p => (p, None),
        };
        let syn::Pat::Ident(p) = pat else {
            return;
        };
        let literal = match init {
            Some(syn::Expr::Struct(s)) => s.path.segments.last().map(|s| s.ident.to_string()),
            // `sqlx::query_as!(Task, ..).fetch_all(..).await?`: rows of `Task`.
            Some(e) => types::row_type(e),
            None => None,
        };
        match annotated.or(literal).filter(|t| t != "Self") {
            Some(t) => self.types.insert(p.ident.to_string(), t.into()),
            None => self.types.remove(&p.ident.to_string()),
        };
    }

    /// `let id = krate.id;`, or an `if`/`match` whose every arm ends in one value (`let id = if
    /// let Some(k) = found { ..; k.id } else { ..; k.id }`): `id` names what that path names, so
    /// a row keyed by either is one row. Any other binding of the name ends its alias (an
    /// inlined helper's parameter rebound in its body is no longer the caller's value).
    pub(super) fn note_alias(&mut self, pat: &syn::Pat, init: Option<&syn::Expr>) {
        let pat = match pat {
            syn::Pat::Type(t) => &*t.pat,
            p => p,
        };
        let mut names = Vec::new();
        collect_idents(pat, &mut names);
        for n in &names {
            self.aliases.remove(n);
        }
        let (syn::Pat::Ident(id), Some(init)) = (pat, init) else {
            return;
        };
        if id.mutability.is_some() || id.by_ref.is_some() || id.subpat.is_some() {
            return;
        }
        let mut tails = Vec::new();
        if !arm_tails(init, &mut tails) {
            return;
        }
        let mut texts = tails.iter().map(|t| self.text_of(t));
        let Some(first) = texts.next() else {
            return;
        };
        let name = id.ident.to_string();
        if plain_path(&first) && first != name && texts.all(|t| t == first) {
            self.aliases.insert(name, first);
        }
    }

    /// `let rows = ids.iter().map(|id| Row { owner, id: *id }).collect()` (or one `Row { .. }`):
    /// a field every element sets from something other than the closure's parameters has that
    /// value in every row, so `rows.owner` is written as `owner` is. A sea-orm row found by its
    /// primary key (`Entity::find_by_id(k).one(db)`) has that key: `row.id` is `k`.
    pub(super) fn note_fields(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        let pat = match pat {
            syn::Pat::Type(t) => &*t.pat,
            p => p,
        };
        let syn::Pat::Ident(var) = pat else {
            return;
        };
        let var = var.ident.to_string();
        let prefix = format!("{var}.");
        self.aliases.retain(|k, _| !k.starts_with(&prefix));
        if let Some((key, k)) = self.seaorm_found_key(init) {
            let text = self.text_of(k);
            self.aliases.insert(format!("{var}.{key}"), text);
            return;
        }
        let mut e = init;
        let mut params = Vec::new();
        let lit = loop {
            match e {
                syn::Expr::Struct(s) => break s,
                syn::Expr::Reference(r) => e = &r.expr,
                syn::Expr::Paren(p) => e = &p.expr,
                syn::Expr::MethodCall(m) if m.method == "map" => match m.args.first() {
                    Some(syn::Expr::Closure(c)) => {
                        for input in &c.inputs {
                            collect_idents(input, &mut params);
                        }
                        e = &c.body;
                    }
                    _ => return,
                },
                syn::Expr::MethodCall(m) => e = &m.receiver,
                syn::Expr::Block(b) => match b.block.stmts.last() {
                    Some(syn::Stmt::Expr(tail, None)) => e = tail,
                    _ => return,
                },
                _ => return,
            }
        };
        for f in &lit.fields {
            let syn::Member::Named(name) = &f.member else {
                continue;
            };
            if used_names(&f.expr).iter().any(|n| params.contains(n)) {
                continue;
            }
            let text = self.text_of(&f.expr);
            self.aliases.insert(format!("{var}.{name}"), text);
        }
    }

    /// Names bound in a loop's body from a value computed from the loop's variables
    /// (`let row = map.get(&id)` in `for id in ids`) change with every iteration like them.
    pub(super) fn derive_loop_vars(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        if self.open_loops.is_empty() {
            return;
        }
        let used = used_names(init);
        for &i in self.open_loops.iter() {
            let Some(lp) = self.loops.get_mut(i) else {
                continue;
            };
            if used.iter().any(|u| lp.vars.contains(u)) {
                let mut names = Vec::new();
                collect_idents(pat, &mut names);
                for n in names {
                    if !lp.vars.contains(&n) {
                        lp.vars.push(n);
                    }
                }
            }
        }
    }

    /// `row.f = ..` (or `row.f += ..`): field `f` of `row` now carries `flow` (see
    /// [`Walker::assigned`]).
    pub(super) fn note_assigned(&mut self, left: &syn::Expr, flow: Flow) {
        if let syn::Expr::Field(f) = left
            && let syn::Expr::Path(p) = &*f.base
            && let Some(var) = p.path.get_ident()
            && let syn::Member::Named(field) = &f.member
        {
            let key = self.resolved(format!("{var}.{field}"));
            self.assigned.insert(key, flow);
        }
    }

    /// `let row = ..`: the fields assigned to an earlier `row` are not this one's.
    pub(super) fn forget_assigned(&mut self, pat: &syn::Pat) {
        if self.assigned.is_empty() {
            return;
        }
        let mut names = Vec::new();
        collect_idents(pat, &mut names);
        for name in names {
            let prefix = format!("{}.", self.resolved(name));
            self.assigned.retain(|k, _| !k.starts_with(&prefix));
        }
    }

    /// Bind a pattern to a value; a type annotation tells the handle kind.
    pub(super) fn bind(&mut self, pat: &syn::Pat, value: Value) {
        // Data spreads to every name of a destructuring pattern.
        if let Value::Data(flow) = &value {
            let mut names = Vec::new();
            collect_idents(pat, &mut names);
            for name in names {
                self.vars.insert(name, Value::Data(flow.clone()));
            }
            return;
        }
        match pat {
            syn::Pat::Ident(p) => {
                let name = p.ident.to_string();
                let value = match value {
                    // A name that can change is not a constant.
                    Value::Bool(_) if p.mutability.is_some() => Value::None,
                    Value::None => match types::of_variable_name(&name) {
                        Some(kind) => Value::Handle(self.handle_of_kind(kind)),
                        None => Value::None,
                    },
                    v => v,
                };
                self.vars.insert(name, value);
            }
            syn::Pat::Type(t) => {
                self.note_sorted(&t.pat, &t.ty);
                let value = match value {
                    Value::None => self.typed(&t.ty).map_or(Value::None, Value::Handle),
                    v => v,
                };
                self.bind(&t.pat, value);
            }
            // `let (client, connection) = tokio_postgres::connect(..)`: the client is first.
            syn::Pat::Tuple(t) => {
                let mut first = Some(value);
                for p in &t.elems {
                    self.bind(p, first.take().unwrap_or_default());
                }
            }
            syn::Pat::Reference(r) => self.bind(&r.pat, value),
            // `let DbConnection(mut conn) = db;`: a newtype's one field is the handle it holds.
            syn::Pat::TupleStruct(t) if t.elems.len() == 1 => {
                let value = match value {
                    Value::Object(owner) if !matches!(t.elems[0], syn::Pat::Rest(_)) => {
                        match self.ix.handle_structs.get(&*owner) {
                            Some(&(kind, dialect)) => {
                                let mut h = self.handle_of_kind(kind);
                                h.dialect = dialect;
                                Value::Handle(h)
                            }
                            None => Value::Object(owner),
                        }
                    }
                    v => v,
                };
                self.bind(&t.elems[0], value)
            }
            _ => {}
        }
    }

    /// Bind a function's parameters: to the caller's handles (`args`) when walked in place,
    /// else by their types.
    /// Bind the parameters: to `args` (and `self` to `receiver`) when walked in place, else by
    /// their types; `owner` is the type of the method's `impl` block.
    pub(super) fn params(
        &mut self,
        sig: &syn::Signature,
        owner: Option<&syn::Type>,
        receiver: Option<Value>,
        args: Option<&[Value]>,
    ) {
        let mut i = 0;
        for input in &sig.inputs {
            let t = match input {
                syn::FnArg::Typed(t) => t,
                syn::FnArg::Receiver(_) => {
                    let value = match (receiver.clone(), owner) {
                        (Some(v), _) => v,
                        (None, Some(ty)) => self.typed_value(sig, ty),
                        (None, None) => Value::None,
                    };
                    self.vars.insert("self".to_string(), value);
                    if let Some(ty) = owner.and_then(types::type_name) {
                        self.types.insert("self".to_string(), ty.into());
                    }
                    continue;
                }
            };
            let given = args.and_then(|a| a.get(i)).cloned().unwrap_or_default();
            i += 1;
            let value = match given {
                Value::None => match self.typed_value(sig, &t.ty) {
                    // Checked alone: its text comes from its callers.
                    Value::None if args.is_none() && generics::is_text(sig, &t.ty) => Value::Caller,
                    v => v,
                },
                v => v,
            };
            self.note_sorted(&t.pat, &t.ty);
            self.note_hash_param(&t.pat, &t.ty);
            if let (syn::Pat::Ident(p), Some(ty)) = (&*t.pat, types::type_name(&t.ty)) {
                self.types.insert(p.ident.to_string(), ty.into());
            }
            self.bind(&t.pat, value);
        }
    }

    /// What a parameter of this type holds: a handle, or a struct that holds one.
    fn typed_value(&mut self, sig: &syn::Signature, ty: &syn::Type) -> Value {
        if let Some(h) = self.typed(ty) {
            return Value::Handle(h);
        }
        if let Some(kind) = generics::generic_executor(sig, ty) {
            return Value::Handle(self.handle_of_kind(kind));
        }
        let outer = self
            .stack
            .last()
            .and_then(|&f| self.ix.fns[f].impl_generics);
        if let Some(kind) = generics::associated_handle(sig, outer, ty) {
            let h = self.handle_of_kind(kind);
            self.inherit(h);
            return Value::Handle(h);
        }
        if let Some(h) = generics::generic_target(sig, ty).and_then(|t| self.typed(t)) {
            return Value::Handle(h);
        }
        match types::type_name(ty) {
            Some(name) if self.ix.handle_structs.contains_key(&name) => Value::Object(name.into()),
            // `repo: &R` with `R: Accounts`, `impl Accounts`, `&dyn Accounts`: the type of the
            // run that implements the trait.
            _ => match self.implementor(&generics::bound_traits(sig, ty)) {
                Some(t) => Value::Object(t.into()),
                None => Value::None,
            },
        }
    }

    /// The type of the run a value known only by `traits` is: the one implementing the first
    /// of them that holds a handle (an in-memory double beside it does not count). Of several,
    /// the one this walk was given (each is walked in turn: see
    /// [`super::batch::walk_each_impl`]); else none, and the walk says which.
    pub(super) fn implementor(&mut self, traits: &[String]) -> Option<String> {
        let (t, impls) = self.ix.implementors(traits)?;
        let holding: Vec<&String> = impls
            .iter()
            .filter(|i| self.ix.handle_structs.contains_key(*i))
            .collect();
        if let ([_], [only]) = (impls, holding.as_slice()) {
            return Some(only.to_string());
        }
        // Of several, those of a trait the run declares (not `Iterator`, `Display`) whose
        // handles talk to a database the rules judge: the one, or each in its own walk.
        let judged = |ty: &&String| {
            let dialect = self.ix.handle_structs.get(*ty).and_then(|h| h.1);
            dialect.is_none_or(|d| d.has_rules())
        };
        let each: Vec<&String> = match self.ix.traits.contains(t) {
            true => holding.into_iter().filter(judged).collect(),
            false => Vec::new(),
        };
        if let [only] = each.as_slice() {
            return Some(only.to_string());
        }
        let each = each.into_iter().map(|s| s.to_string()).collect();
        self.chosen(t, each)
    }

    /// Of several `options` for `key`, the one this walk was given (see
    /// [`super::batch::walk_each_impl`]); else none, and the walk says which there are, so that
    /// the function is walked once per option.
    fn chosen(&mut self, key: &str, options: Vec<String>) -> Option<String> {
        if let Some((_, chosen)) = self.shared.chosen.iter().find(|(c, _)| c == key) {
            return Some(chosen.clone());
        }
        if self.shared.ambiguous.is_none() && !options.is_empty() {
            self.shared.ambiguous = Some((key.to_string(), options));
        }
        None
    }

    /// The method `self.name(..)` reaches in a default method of trait `owner` when the trait
    /// declares it without a body (see [`super::index::Index::implemented`]): the one
    /// implementation, or of several the one this walk was given, the same `impl`'s type for
    /// every such call (each is walked in turn, as for [`Walker::implementor`]); else none, and
    /// the walk says which.
    pub(super) fn implemented_method(&mut self, name: &str, owner: &str) -> Option<usize> {
        let found = self.ix.implemented(name, owner, self.test);
        if let [(_, only)] = found.as_slice() {
            return Some(*only);
        }
        let written = found.iter().map(|(w, _)| w.clone()).collect();
        let chosen = self.chosen(&format!("impl {owner}"), written)?;
        found
            .into_iter()
            .find(|(w, _)| *w == chosen)
            .map(|(_, i)| i)
    }

    /// `let` of a name whose iteration order is a hash's: a `HashMap` or `HashSet` (by its
    /// annotation, `HashMap::new()`, `.collect::<HashSet<_>>()`), or what an iterator chain
    /// over one collects (`map.iter().map(..).collect()`). Any other binding of the name ends
    /// that; a list the code sorts later is sorted (see [`Walker::sorted`]).
    pub(super) fn note_hash_order(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        let (pat, annotated) = match pat {
            syn::Pat::Type(t) => (&*t.pat, self.is_hash_type(&t.ty)),
            p => (p, false),
        };
        let syn::Pat::Ident(id) = pat else {
            return;
        };
        let made = match init {
            syn::Expr::Call(c) => matches!(&*c.func, syn::Expr::Path(p)
                if p.path.segments.len() >= 2
                    && p.path.segments.iter().rev().nth(1).is_some_and(|s| HASHED.contains(&s.ident.to_string().as_str()))),
            syn::Expr::MethodCall(m) if m.method == "collect" && m.turbofish.is_some() => {
                let t = m.turbofish.as_ref().map(|t| self.written(t)).unwrap_or("");
                HASHED.iter().any(|h| t.contains(h)) || self.hash_ordered(&m.receiver)
            }
            e => self.hash_ordered(e),
        };
        let name = id.ident.to_string();
        match annotated || made {
            true => self.hashed.insert(name),
            false => self.hashed.remove(&name),
        };
    }

    /// A parameter's type says its order is a hash's.
    fn note_hash_param(&mut self, pat: &syn::Pat, ty: &syn::Type) {
        if let syn::Pat::Ident(p) = pat {
            let name = p.ident.to_string();
            match self.is_hash_type(ty) {
                true => self.hashed.insert(name),
                false => self.hashed.remove(&name),
            };
        }
    }

    fn is_hash_type(&self, ty: &syn::Type) -> bool {
        let written = self.written(ty);
        let t = written.trim_start_matches('&').trim_start();
        let t = t.strip_prefix("mut ").unwrap_or(t).trim_start();
        let t = t.rsplit("::").next().unwrap_or(t);
        HASHED.iter().any(|h| t.starts_with(h))
    }

    /// What `e` visits comes in a hash's order: an iterator chain (`iter`, `map`, `collect`,
    /// ..) over a name of [`Walker::hashed`], or that name itself.
    pub(super) fn hash_ordered(&self, e: &syn::Expr) -> bool {
        let mut at = e;
        loop {
            match at {
                syn::Expr::Reference(r) => at = &r.expr,
                syn::Expr::Paren(p) => at = &p.expr,
                syn::Expr::MethodCall(m)
                    if [super::order::KEEPS_ORDER, VISITS_HASH]
                        .iter()
                        .any(|l| l.contains(&m.method.to_string().as_str())) =>
                {
                    at = &m.receiver
                }
                syn::Expr::Path(p) => {
                    return p
                        .path
                        .get_ident()
                        .is_some_and(|i| self.hashed.contains(&i.to_string()));
                }
                _ => return false,
            }
        }
    }

    /// A `BTreeSet`/`BTreeMap` is visited in key order.
    pub(super) fn note_sorted(&mut self, pat: &syn::Pat, ty: &syn::Type) {
        if self.written(ty).contains("BTree")
            && let syn::Pat::Ident(id) = pat
        {
            self.sorted.insert(id.ident.to_string());
        }
    }
}
