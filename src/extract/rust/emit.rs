//! Sending a statement: the step it becomes on its handle's session, its bound values, its
//! dialect, and the rows it gives back.

use super::syntax::On;
use super::*;

impl<'a, 'w> Walker<'a, 'w> {
    /// Whether a collection is visited in sorted order: it was sorted first or is sorted on
    /// the way (`ids.sort()`, `.sorted()`, a `BTreeSet`).
    pub(super) fn sorted_collection(&self, e: &syn::Expr) -> bool {
        let over = self.source_of(e);
        let base = over
            .trim_start_matches(['&', '*'])
            .split(['.', ' '])
            .next()
            .unwrap_or("");
        let mut at = order::strip(e);
        while let syn::Expr::MethodCall(m) = at {
            at = order::strip(&m.receiver);
        }
        over.contains("sort") || self.sorted.contains(base) || self.sorted_field(at)
    }

    /// The handle a value stands for; unknown if it is none.
    pub(super) fn handle(&mut self, v: &Value, e: &syn::Expr) -> Handle {
        match v {
            Value::Handle(h) => *h,
            _ => match types::of_variable_name(&self.source_of(e)) {
                Some(kind) => self.handle_of_kind(kind),
                None => Walker::unknown_handle(),
            },
        }
    }

    /// A value bound to a statement parameter.
    pub(super) fn bound(&self, e: &syn::Expr) -> Bind {
        let local = value_text(&self.source_of(e));
        let base = local.split(['.', '[']).next().unwrap_or(&local);
        // An element of a sorted collection, or the whole collection bound as an array, as it
        // is, cast (`&ids as &[Uuid]`) or through adapters that keep its order
        // (`ids.iter().copied().collect()`).
        let uncast = match e {
            syn::Expr::Cast(c) => &c.expr,
            _ => e,
        };
        let name = value_text(&self.source_of(uncast));
        let sorted_element = ((name.contains('[') || !name.contains('.'))
            && self
                .sorted
                .contains(name.split(['.', '[']).next().unwrap_or(&name)))
            || self.sorted_value(uncast);
        let sources = self.ordered.get(base).cloned().unwrap_or_default();
        Bind {
            from: self.flow(e),
            ordered: sorted_element || self.ordered.contains_key(base),
            sources,
            text: self.resolved(local.clone()),
        }
    }

    /// The database `sql` sent through `handle` is for: what the code says of the statement
    /// (sea-orm's backend), else of the handle (its type), else of the function (`cfg`
    /// feature), else of the file (configuration, imports, crate).
    /// A statement PostgreSQL cannot run (`?` placeholders, backticks) is not PostgreSQL,
    /// whatever the code around it suggests: a crate for several databases, a file of tests.
    pub(super) fn dialect(&self, sql: &Sql, handle: Handle) -> Dialect {
        let in_fn = self.stack.last().and_then(|&i| self.ix.fns[i].dialect);
        let dialect = sql
            .dialect
            .or(handle.dialect)
            .or(in_fn)
            .unwrap_or(self.parsed().dialect);
        match dialect {
            Dialect::Postgres => dialects::of_text(&sql.text).unwrap_or(dialect),
            _ => dialect,
        }
    }

    /// The rows a call `name` fetched, noted as one or none where it fetches so.
    pub(super) fn fetched(&mut self, name: &str, rows: Value) -> Value {
        if let Value::Data(f) = &rows
            && drivers::is(name, Role::OneOrNone)
        {
            self.optional.extend(f.iter());
        }
        self.note_required(name, &rows);
        rows
    }

    /// `rows` came from a call that fails when there is none (see [`Host::required`]).
    pub(super) fn note_required(&mut self, name: &str, rows: &Value) {
        if let Value::Data(f) = rows
            && drivers::is(name, Role::One)
        {
            self.required.extend(f.iter());
        }
    }

    /// Send `sql` through `handle` by the call at `site`: one step per statement, in the
    /// handle's session walker. The result is the data the statements return.
    pub(super) fn emit(&mut self, sql: &Sql, handle: Handle, via: String, site: Span) -> Value {
        // Texts chosen at run time: one arm each.
        if !sql.alts.is_empty() {
            let c = self.choice();
            let mut results = Flow::new();
            for v in sql.variants() {
                let via = via.clone();
                if let Value::Data(f) = self.in_arm(Some(c), &Flow::new(), On::Value, |w| {
                    w.emit(&v, handle, via, site)
                }) {
                    results.extend(f);
                }
            }
            return Value::Data(results);
        }
        let propagated = self.passes_on && self.tried.contains(&site);
        let dialect = self.dialect(sql, handle);
        let key = (sql.key(), dialect);
        if !self.shared.cache.contains_key(&key) {
            self.front.file = sql.file;
            self.front.dialect = dialect;
            let mut statements = split(&sql.text, dialect, false).statements;
            for s in &mut statements {
                s.template |= sql.template;
            }
            let steps = statements
                .iter()
                .map(|s| {
                    (
                        self.front.step(&sql.text, &sql.map, s, Vec::new()),
                        s.message,
                    )
                })
                .collect();
            self.shared.cache.insert(key, steps);
        }
        let steps = self.shared.cache[&key].clone();
        self.message += 1;
        let mut results = Flow::new();
        for (mut step, _) in steps {
            step.seq = self.next_seq();
            step.session = handle.session;
            step.branch = self.branch.as_slice().into();
            let host = step.host.get_or_insert_with(Box::default);
            host.via = Some(via.as_str().into());
            host.calls = self.calls.as_slice().into();
            host.propagated = propagated;
            host.inputs = sql
                .binds
                .iter()
                .enumerate()
                .map(|(i, b)| Input {
                    param: i + 1,
                    from: b.from.iter().collect(),
                    through: b
                        .from
                        .iter()
                        .filter_map(|s| {
                            Some((s, b.from.fields(s)?.iter().map(|f| f.to_string()).collect()))
                        })
                        .collect(),
                    text: b.text.clone(),
                    ordered: b.ordered,
                    sources: b.sources.clone(),
                })
                .collect();
            // Rows from a collection: a set of keys, locked in the collection's order.
            if let Some((sorted, at)) = sql.rows
                && step.facts.kind == StmtKind::Insert
            {
                step.facts.key_set = true;
                step.facts.ordered |= sorted;
                host.rows = Some(at);
            }
            results.insert(step.seq);
            self.last_step = Some(step.seq);
            // One call is one message unless it sends several statements in a batch.
            if !sql.batch {
                self.message += 1;
            }
            self.walkers[handle.walker].push(step, self.message);
        }
        Value::Data(results)
    }
}

/// Data computed from any of `values` (the union of their flows), or nothing.
pub(super) fn data_of<'v>(values: impl IntoIterator<Item = &'v Value>) -> Value {
    let mut flow = Flow::new();
    for v in values {
        if let Value::Data(f) = v {
            flow.extend(f.clone());
        }
    }
    if flow.is_empty() {
        Value::None
    } else {
        Value::Data(flow)
    }
}
