//! Fields and statics: the SQL, handles and lock names reached through `self.field`, a struct
//! of the run, or a `static`.

use super::text::looks_like_sql;
use super::*;

impl<'a, 'w> Walker<'a, 'w> {
    /// SQL that struct literals of the run keep in a field of this name (`Queue { claim:
    /// format!("UPDATE {TABLE} ..") }`): the one literal there is, or the one in this file. Read
    /// where it was written, without this function's variables (they are not the ones the
    /// literal saw: a name it used there is a hole here).
    pub(super) fn field_sql(&mut self, name: &str) -> Value {
        let key = (self.file, name.to_string());
        match self.shared.field_sql.get(&key) {
            Some(Some(known)) => return known.clone(),
            Some(None) => return Value::None,
            None => {}
        }
        self.shared.field_sql.insert(key.clone(), None);
        let v = self.read_field_sql(name);
        self.shared.field_sql.insert(key, Some(v.clone()));
        v
    }

    fn read_field_sql(&mut self, name: &str) -> Value {
        let Some(all) = self.ix.field_values.get(name) else {
            return Value::None;
        };
        let here: Vec<_> = all.iter().filter(|(f, _)| *f == self.file).collect();
        let (file, expr) = match (here.as_slice(), all.as_slice()) {
            (&[&one], _) | (&[], &[one]) => one,
            _ => return Value::None,
        };
        let vars = std::mem::take(&mut self.vars);
        let here = std::mem::replace(&mut self.file, file);
        let v = self.sql_only(expr);
        self.file = here;
        self.vars = vars;
        match v {
            Value::Sql(s) if looks_like_sql(&s.text) => Value::Sql(s),
            _ => Value::None,
        }
    }

    /// A static that holds a handle (`static POOL: Lazy<PgPool>`): one handle per function,
    /// as a field's.
    pub(super) fn static_handle(&mut self, name: &str) -> Option<Handle> {
        if let Some(h) = self.field_sessions.get(name) {
            return Some(*h);
        }
        let &(kind, dialect, _) = self.ix.statics.get(name)?;
        let mut h = self.handle_of_kind(kind);
        h.dialect = dialect;
        self.field_sessions.insert(name.to_string(), h);
        Some(h)
    }

    /// A lock named as code of any method of its type names it: `self.inner` in a method of
    /// `Controller` is `Controller.inner`.
    pub(super) fn lock_name(&self, e: &syn::Expr) -> crate::model::Name {
        let text: String = self.source_of(e).split_whitespace().collect();
        let owner = self
            .stack
            .last()
            .and_then(|&i| self.ix.fns[i].owner)
            .and_then(types::type_name);
        match (text.strip_prefix("self."), owner) {
            (Some(rest), Some(owner)) => format!("{owner}.{rest}").into(),
            _ => text.into(),
        }
    }

    /// A once-cell static that holds a handle (`POOL` of `static POOL: OnceCell<PgPool>`): its
    /// `get` is the handle itself.
    pub(super) fn is_once_static(&self, e: &syn::Expr) -> bool {
        matches!(e, syn::Expr::Path(p) if p.path.get_ident().is_some_and(|i| {
            let name = i.to_string();
            !self.vars.contains_key(&name)
                && self.ix.statics.get(&name).is_some_and(|s| s.2)
        }))
    }

    /// The struct a literal builds (`PgTx { .. }`, `Self { .. }` in a method of `PgTx`).
    pub(super) fn struct_name(&self, path: &syn::Path) -> Option<std::rc::Rc<str>> {
        let last = path.segments.last()?.ident.to_string();
        match last.as_str() {
            "Self" => self
                .stack
                .last()
                .and_then(|&i| self.ix.fns[i].owner)
                .and_then(types::type_name)
                .map(Into::into),
            _ => Some(last.into()),
        }
    }

    /// A literal of `owner` puts `h` in `field`; a different handle there before makes the
    /// field no one handle.
    pub(super) fn built_field(&mut self, owner: std::rc::Rc<str>, field: String, h: Handle) {
        let same = |a: &Handle| a.walker == h.walker && a.session == h.session;
        self.built
            .entry((owner, field))
            .and_modify(|was| {
                if !was.as_ref().is_some_and(same) {
                    *was = None;
                }
            })
            .or_insert(Some(h));
    }

    /// `self.pool`, `state.db`: a handle by the field's declared type, or its name.
    pub(super) fn field(&mut self, f: &syn::ExprField) -> Value {
        let base = self.expr(&f.base);
        let syn::Member::Named(name) = &f.member else {
            return base;
        };
        if let Value::Object(owner) = &base {
            let field = name.to_string();
            // `tx.transaction` of `let tx = PgTx::begin(&pool).await?`: the handle the literal
            // put there.
            if let Some(Some(h)) = self.built.get(&(owner.clone(), field.clone())) {
                return Value::Handle(*h);
            }
            // `state.pools` of `struct State { pools: Pools }`: the struct that holds one.
            if let Some(inner) = self.ix.handle_struct_field(owner, &field) {
                return Value::Object(inner.into());
            }
        }
        let v = self.field_of(f, name);
        // `inner.db` of `let inner = self.inner.write().await`: the handle is used under the lock.
        if let (Value::Guard(lock), Value::Handle(h)) = (&base, &v) {
            self.guarded.insert(h.walker, lock.clone());
        }
        v
    }

    /// The type of the run a field of `owner` whose type is a generic parameter stands for,
    /// by the parameter's bounds on the struct, the method's `impl` block or the method.
    fn generic_field(&mut self, owner: Option<&syn::Type>, name: &str) -> Option<String> {
        let (_, s, ty) = self.ix.field_decl(owner?, name, self.file)?;
        let f = &self.ix.fns[*self.stack.last()?];
        let generics = [Some(&s.generics), f.impl_generics, Some(&f.sig.generics)];
        let traits = generics::field_traits(ty, generics.into_iter().flatten());
        self.implementor(&traits)
    }

    pub(super) fn field_of(&mut self, f: &syn::ExprField, name: &syn::Ident) -> Value {
        let name = name.to_string();
        let of_self = matches!(&*f.base, syn::Expr::Path(p) if p.path.is_ident("self"));
        let owner = self.stack.last().and_then(|&i| self.ix.fns[i].owner);
        // `self.transaction` in a method of a struct whose literal this walk built with a handle.
        if of_self
            && let Some(o) = owner.and_then(types::type_name)
            && let Some(Some(h)) = self.built.get(&(o.into(), name.clone()))
        {
            return Value::Handle(*h);
        }
        if let Some(h) = self.field_sessions.get(&name) {
            return Value::Handle(*h);
        }
        // `self.inner` in a method: the field its own struct declares, when the run has it.
        let own = match of_self {
            true => owner.and_then(|o| self.ix.field_type(o, &name, self.file)),
            false => None,
        };
        let (kind, dialect, shares) = match (own, self.ix.fields.get(&name)) {
            (Some((at, ty)), _) => {
                let found = self.ix.handle_type(ty, at);
                let shares = self.ix.shares_transactions(ty, at);
                (found.map(|f| f.0), found.and_then(|f| f.1), shares)
            }
            (None, Some(&(kind, dialect, shares))) => (Some(kind), dialect, shares),
            (None, None) => (types::of_variable_name(&name), None, false),
        };
        // `self.views` of `struct Query<R> { views: Arc<R> }` in `impl<R: Views> Query<R>`: the
        // type of the run implementing `Views`.
        if kind.is_none()
            && of_self
            && let Some(t) = self.generic_field(owner, &name)
        {
            return Value::Object(t.into());
        }
        match kind {
            Some(kind) => {
                let mut h = self.handle_of_kind(kind);
                h.dialect = dialect;
                if shares {
                    self.inherit(h);
                }
                self.field_sessions.insert(name, h);
                Value::Handle(h)
            }
            None => self.field_sql(&name),
        }
    }
}
