//! Walking a function body: statements, bindings, branches and expressions, in program order.

use super::syntax::*;
use super::*;

impl<'a, 'w> Walker<'a, 'w> {
    pub(super) fn new(
        ix: &'w Index<'a>,
        front: &'w mut Front,
        shared: &'w mut Shared<'a>,
        file: usize,
    ) -> Self {
        Walker {
            ix,
            front,
            shared,
            file,
            vars: HashMap::new(),
            walkers: vec![
                SessionWalker::unknown(),
                SessionWalker::host(Executor::Pool),
            ],
            sessions: Vec::new(),
            field_sessions: HashMap::new(),
            built: HashMap::new(),
            arm_sql: Vec::new(),
            guarded: HashMap::new(),
            returned: Vec::new(),
            closures: Vec::new(),
            let_closures: Vec::new(),
            seq: 0,
            message: 0,
            branch: Vec::new(),
            next_branch: 0,
            exits: Vec::new(),
            frame_exits: Vec::new(),
            frames: 0,
            async_tried: false,
            conditions: Vec::new(),
            loops: Vec::new(),
            open_loops: Vec::new(),
            choices: Vec::new(),
            truths: Default::default(),
            sorted: HashSet::new(),
            hashed: HashSet::new(),
            hash_loops: 0,
            ordered: HashMap::new(),
            assigned: HashMap::new(),
            aliases: HashMap::new(),
            calls: Vec::new(),
            tried: Vec::new(),
            passes_on: true,
            test: false,
            in_async: false,
            borrowed: Vec::new(),
            const_depth: 0,
            depth: 0,
            backends: HashMap::new(),
            last_step: None,
            optional: HashSet::new(),
            required: HashSet::new(),
            stack: Vec::new(),
            types: HashMap::new(),
            held: Vec::new(),
        }
    }

    pub(super) fn parsed(&self) -> &'a Parsed {
        &self.ix.parsed[self.file]
    }

    /// The parsed file a token is from: this one, or another whose macro an expansion here
    /// copied it from.
    pub(super) fn home(&self, s: proc_macro2::Span) -> &'a Parsed {
        super::home(self.ix.parsed, self.file, s)
    }

    pub(super) fn span(&self, node: &impl Spanned) -> Span {
        let s = node.span();
        self.home(s).span_at(s)
    }

    /// From the start of `from` to the end of `to` (only `from` where they are in two files).
    pub(super) fn span_between(&self, from: proc_macro2::Span, to: proc_macro2::Span) -> Span {
        let p = self.home(from);
        if std::ptr::eq(p, self.home(to)) {
            p.span_between(from, to)
        } else {
            p.span_at(from)
        }
    }

    /// The node's text as written.
    pub(super) fn written(&self, node: &impl Spanned) -> &'a str {
        let s = node.span();
        let p = self.home(s);
        p.text.get(p.range_at(s)).unwrap_or("")
    }

    /// The expression as written (`&mut *tx`), whitespace folded, for messages.
    pub(super) fn source_of(&self, e: &syn::Expr) -> String {
        self.written(e)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub(super) fn next_seq(&mut self) -> usize {
        self.seq += 1;
        self.seq
    }

    pub(super) fn finish(mut self, f: &FnDef) -> Unit {
        let mut transactions: Vec<Transaction> = self
            .walkers
            .drain(..)
            .flat_map(SessionWalker::finish)
            .filter(|t| !t.steps.is_empty())
            .collect();
        transactions.sort_by_key(|t| t.steps[0].seq);
        for s in transactions.iter_mut().flat_map(|t| t.steps.iter_mut()) {
            if self.required.contains(&s.seq)
                && !self.optional.contains(&s.seq)
                && let Some(h) = s.host.as_mut()
            {
                h.required = true;
            }
        }
        let mut unit = Unit::new(UnitKind::RustFn, Some(f.name.clone()), f.span);
        unit.unused = f.unused;
        if f.migration {
            unit.runner = Some(crate::model::Runner {
                name: "sea-orm migration",
                evidence: "`impl MigrationTrait for ..`",
                runs: "once per database, by the migrator",
                migration: true,
                called: None,
            });
        }
        unit.transactions = transactions;
        unit.exits = self
            .exits
            .into_iter()
            .filter_map(|(e, frame)| frame.is_none().then_some(e))
            .collect();
        unit.frame_exits = self.frame_exits;
        // A run keeps every unit until its rules are done: what growing these lists
        // over-allocated is given back (helpers walked in place add many exits).
        unit.exits.shrink_to_fit();
        unit.frame_exits.shrink_to_fit();
        unit.transactions.shrink_to_fit();
        unit.conditions = self.conditions;
        unit.loops = self.loops;
        unit.sessions = self.sessions;
        unit.choices = self.choices;
        unit.requires = self.truths.requires();
        unit.test = f.test;
        unit
    }

    // ---- statements ----

    pub(super) fn block(&mut self, block: &syn::Block) {
        self.block_value(block);
    }

    /// Walk a block; the value of its tail expression.
    pub(super) fn block_value(&mut self, block: &syn::Block) -> Value {
        let outer = self.vars.clone();
        let before: HashSet<usize> = self.open_transactions();
        let mut tail = Value::None;
        // The function's own body, not a block in it nor a helper's.
        let top = matches!(&self.stack[..], [f] if std::ptr::eq(block, self.ix.fns[*f].block));
        let let_closures = self.let_closures.len();
        for stmt in &block.stmts {
            match stmt {
                syn::Stmt::Expr(e, None) => {
                    let v = self.expr(e);
                    tail = self.or_data(v, e);
                }
                _ => self.stmt(stmt),
            }
            if top {
                self.note_held(stmt);
            }
        }
        // A closure a `let` bound and nothing called nor handed on is walked where its scope
        // ends, as a branch: its statements are not lost.
        let unran = self.let_closures.split_off(let_closures);
        self.run_unran(&unran);
        // Transactions opened in this block and still open are rolled back when dropped here,
        // unless the block gives them away: its value or a `return` is the handle, or a struct
        // of the run built around it (`Ok(Self { transaction })`).
        let opened: Vec<usize> = self
            .open_transactions()
            .difference(&before)
            .copied()
            .collect();
        let kept = match opened.is_empty() {
            true => HashSet::new(),
            false => self.kept_walkers(&tail),
        };
        for w in opened.iter().filter(|w| !kept.contains(w)) {
            let declared_here = self
                .vars
                .values()
                .any(|v| matches!(v, Value::Handle(h) if h.walker == *w))
                && !outer
                    .values()
                    .any(|v| matches!(v, Value::Handle(h) if h.walker == *w));
            if declared_here {
                self.walkers[*w].end(None);
            }
        }
        // The block's own names go; text built on an outer variable (`{ qb.push(..) }`) stays.
        let mut declared = Vec::new();
        for stmt in &block.stmts {
            if let syn::Stmt::Local(l) = stmt {
                collect_idents(&l.pat, &mut declared);
            }
        }
        let inner = std::mem::replace(&mut self.vars, outer);
        for (name, v) in inner {
            if let (Value::Sql(_), Some(Value::Sql(_))) = (&v, self.vars.get(&name))
                && !declared.contains(&name)
            {
                self.vars.insert(name, v);
            }
        }
        tail
    }

    /// The session walkers of the handles `tail` and the function's `return`s so far give
    /// away, directly or in a struct of the run built around them.
    fn kept_walkers(&self, tail: &Value) -> HashSet<usize> {
        let mut kept = HashSet::new();
        let returned = self.returned.last().into_iter().flatten();
        for v in std::iter::once(tail).chain(returned) {
            match v {
                Value::Handle(h) => {
                    kept.insert(h.walker);
                }
                Value::Object(o) => kept.extend(
                    self.built
                        .iter()
                        .filter(|((owner, _), _)| owner == o)
                        .filter_map(|(_, h)| h.map(|h| h.walker)),
                ),
                _ => {}
            }
        }
        kept
    }

    pub(super) fn open_transactions(&self) -> HashSet<usize> {
        self.vars
            .values()
            .filter_map(|v| match v {
                Value::Handle(h) if h.kind == Executor::Transaction => Some(h.walker),
                _ => None,
            })
            .collect()
    }

    pub(super) fn stmt(&mut self, stmt: &syn::Stmt) {
        match stmt {
            syn::Stmt::Local(local) if self.let_closure(local) => {}
            syn::Stmt::Local(local) => {
                let value = match &local.init {
                    Some(init) => {
                        let v = self.expr(&init.expr);
                        // `let Some(row) = row else { return .. }`: the else arm is taken on the
                        // value, and leaves; `let Ok(..) = x else` is taken when `x` failed.
                        if let Some((_, diverge)) = &init.diverge {
                            let from = self.flow_of(&v, &init.expr);
                            let on = On::of_pattern(&local.pat, "Ok");
                            self.in_arm(None, &from, on, |w| {
                                w.expr(diverge);
                                w.exit_as(diverge, None, ExitKind::Return, true, false);
                            });
                        }
                        self.derive_loop_vars(&local.pat, &init.expr);
                        self.note_type(&local.pat, Some(&init.expr));
                        self.note_fields(&local.pat, &init.expr);
                        self.note_alias(&local.pat, Some(&init.expr));
                        if self.sorted_value(&init.expr) {
                            let mut names = Vec::new();
                            collect_idents(&local.pat, &mut names);
                            self.sorted.extend(names);
                        }
                        self.note_hash_order(&local.pat, &init.expr);
                        if orders(&init.expr) {
                            let mut names = Vec::new();
                            collect_idents(&local.pat, &mut names);
                            let sources = used_names(&init.expr);
                            for n in names {
                                self.ordered.insert(n, sources.clone());
                            }
                        }
                        match &local.pat {
                            syn::Pat::Type(t) => self.seaorm_typed(&t.ty, &init.expr),
                            _ => None,
                        }
                        .unwrap_or_else(|| self.or_data(v, &init.expr))
                    }
                    None => Value::None,
                };
                self.note_truth(&local.pat, local.init.as_ref().map(|i| &*i.expr));
                self.forget_assigned(&local.pat);
                self.bind(&local.pat, value);
            }
            syn::Stmt::Expr(e, _) => {
                self.expr(e);
            }
            syn::Stmt::Macro(m) => {
                self.mac(&m.mac);
            }
            syn::Stmt::Item(_) => {}
        }
    }

    /// `let bump = |conn: &mut PgConnection| async move { .. };`: the closure is held, and its
    /// body walked where it is called (`bump(&mut tx)`), on the handles given there, or where
    /// it is handed on; whether the `let` was such a binding.
    fn let_closure(&mut self, local: &syn::Local) -> bool {
        let (syn::Pat::Ident(_), Some(init)) = (&local.pat, &local.init) else {
            return false;
        };
        let syn::Expr::Closure(c) = &*init.expr else {
            return false;
        };
        if init.diverge.is_some() || c.inputs.is_empty() {
            return false;
        }
        let held = self.hold(c);
        if let Value::Closure(k) = held {
            self.let_closures.push(k);
        }
        self.bind(&local.pat, held);
        true
    }

    /// A value with no meaning of its own is data if it is computed from query results.
    pub(super) fn or_data(&self, v: Value, e: &syn::Expr) -> Value {
        match v {
            Value::None => {
                let flow = self.flow(e);
                if flow.is_empty() {
                    Value::None
                } else {
                    Value::Data(flow)
                }
            }
            v => v,
        }
    }

    /// The steps whose results `e`, which evaluated to `v`, carries: the statements it ran
    /// itself and the variables it uses.
    pub(super) fn flow_of(&self, v: &Value, e: &syn::Expr) -> Flow {
        let mut flow = self.flow(e);
        if let Value::Data(f) = v {
            flow.extend(f.clone());
        }
        flow
    }

    /// The steps whose results the variables used in `e` carry, through the fields it names
    /// (`row.start`, `row.get("start")`).
    pub(super) fn flow(&self, e: &syn::Expr) -> Flow {
        dataflow::of_expr(&self.vars, &|n| self.ix.self_fields(n), e)
    }

    /// A closure's body. An `async` block that is the closure's result (`|tx| async move {
    /// .. }`, `Box::pin(async move { .. })`) passes its errors on as the closure does.
    pub(super) fn closure_body(&mut self, body: &syn::Expr) -> Value {
        let is_async = |e: &syn::Expr| matches!(e, syn::Expr::Async(_));
        self.async_tried = match body {
            syn::Expr::Call(c) => c.args.len() == 1 && c.args.iter().all(is_async),
            e => is_async(e),
        };
        let v = self.expr(body);
        self.async_tried = false;
        v
    }

    pub(super) fn in_branch<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.in_arm(None, &Flow::new(), On::Value, f)
    }

    /// A new group of alternative arms (`if`/`else`, `match`).
    pub(super) fn choice(&mut self) -> usize {
        self.choices.push(Vec::new());
        self.choices.len() - 1
    }

    /// A branch arm, one of the alternatives of `choice` if given, taken on a condition computed
    /// from the results of the steps in `from` (see [`On`]). Names bound inside do not outlive
    /// it.
    pub(super) fn in_arm<R>(
        &mut self,
        choice: Option<usize>,
        from: &Flow,
        on: On,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        self.next_branch += 1;
        let arm = self.next_branch;
        self.branch.push(arm);
        if let Some(c) = choice {
            self.choices[c].push(arm);
        }
        self.truths.arm(arm);
        // An `Option` tells whether a row was found only of rows fetched as one or none.
        let on = match on {
            On::Presence if !from.iter().all(|s| self.optional.contains(&s)) => On::Value,
            on => on,
        };
        if !from.is_empty() {
            self.conditions.push(Condition {
                branch: arm,
                from: from.iter().collect(),
                failed: on == On::Failed,
                presence: on == On::Presence,
            });
        }
        let outer = self.vars.clone();
        let bound = self.truths.save();
        let exits = self.exits.len();
        let marks: Vec<_> = self.walkers.iter().map(SessionWalker::mark).collect();
        let r = f(self);
        // An arm that leaves (`return`, a diverging `let .. else`) ends nothing for the code
        // after it: a `tx.rollback()` before its `return` closes the transaction on that
        // path only.
        // A helper's own return leaves the helper's arms, not its caller's.
        let depth = self.frames;
        let leaves = self.exits[exits..].iter().any(|(e, frame)| {
            e.kind == ExitKind::Return
                && e.branch.last() == Some(&arm)
                && frame.is_none_or(|d| d == depth)
        });
        if leaves {
            for (w, m) in self.walkers.iter_mut().zip(marks) {
                w.reopen(m);
            }
        }
        // What the arm built on text it found (a query builder's pushes): the caller of an
        // `if`/`else` keeps each arm's text as an alternative.
        self.arm_sql = self
            .vars
            .iter()
            .filter_map(|(name, v)| match (v, outer.get(name)) {
                (Value::Sql(now), Some(Value::Sql(was))) if now.text != was.text => {
                    Some((name.clone(), now.clone()))
                }
                _ => None,
            })
            .collect();
        self.vars = outer;
        self.truths.restore(bound);
        self.branch.pop();
        r
    }

    /// Leave the innermost frame (a helper walked in place, an `async` block): the exits since
    /// `exits` that leave only it end here (see [`crate::model::Unit::frame_exits`]).
    pub(super) fn end_frame(&mut self, exits: usize) {
        // The first position after the frame: its own steps are all before it.
        let (depth, seq) = (self.frames, self.seq + 1);
        let own = self.exits[exits..]
            .iter()
            .filter(|(_, frame)| *frame == Some(depth))
            .map(|(e, _)| (e.clone(), seq));
        self.frame_exits.extend(own);
        self.frames -= 1;
    }

    /// An exit that leaves with an error (`?`, `bail!`, `.ok_or(..)?`).
    pub(super) fn exit(&mut self, node: &impl Spanned, owner: Option<usize>, kind: ExitKind) {
        self.exit_as(node, owner, kind, true, true);
    }

    /// An exit; `error` when it may leave with an error (`?`, `return Err(..)`, `bail!`, a
    /// `return` of something not `Ok`), which a helper's caller passes on when it calls the
    /// helper with `?`. Any other return of a helper, and an error its caller handles, leaves
    /// only the helper. `fails` when it surely leaves with an error.
    pub(super) fn exit_as(
        &mut self,
        node: &impl Spanned,
        owner: Option<usize>,
        kind: ExitKind,
        error: bool,
        fails: bool,
    ) {
        let frame = (self.frames > 0 && !(error && self.passes_on)).then_some(self.frames);
        let seq = self.next_seq();
        let span = self.span(node);
        let exit = Exit {
            seq,
            span,
            owner,
            branch: self.branch.as_slice().into(),
            kind,
            fails,
        };
        self.exits.push((exit, frame));
    }
}
