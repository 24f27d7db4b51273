//! Rust sources: the SQL strings sent through sqlx, tokio-postgres/postgres, deadpool/bb8,
//! diesel and sea-orm, with the session and transaction each statement runs on.
//!
//! Every function body becomes a unit. Its statements are walked in program order (both arms
//! of a branch, a loop body once); each value is followed just far enough to know whether it is
//! a database handle (and of which kind) or SQL text. A call to a function of the run that is
//! given a handle is walked in place, with its parameter bound to the caller's handle, so a
//! helper's statements join the caller's transaction; such a helper is then not reported on
//! its own.

mod lit;
mod types;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::{LineColumn, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;

use super::session::SessionWalker;
use super::{Extracted, Front, parser_dialect};
use crate::config::Config;
use crate::model::*;
use crate::parse::facts::ParseFailure;
use crate::parse::split::split;
use crate::source::{FileId, LineIndex, OffsetMap, SourceFile, Span};

/// Methods that send the SQL given as their first argument on their receiver.
const CLIENT_METHODS: &[&str] = &[
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "query_typed",
    "query_typed_raw",
    "execute",
    "execute_raw",
    "batch_execute",
    "simple_query",
    "execute_unprepared",
    "query_all",
    "copy_in",
    "copy_out",
];
/// Of those, the ones that send a whole script in one simple-query message.
const BATCH_METHODS: &[&str] = &["batch_execute", "simple_query", "execute_unprepared"];
/// Builder methods that run the query on the executor given as their argument.
const TERMINALS: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
    "load",
    "get_result",
    "get_results",
    "first",
    "one",
    "all",
];
/// Functions that start a query builder from SQL (sqlx, diesel).
const BUILDERS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_with",
    "query_as_with",
    "query_scalar_with",
    "raw_sql",
    "sql_query",
];
/// sqlx query macros: (name, index of the SQL argument, SQL is a file path).
const MACROS: &[(&str, usize, bool)] = &[
    ("query", 0, false),
    ("query_unchecked", 0, false),
    ("query_scalar", 0, false),
    ("query_scalar_unchecked", 0, false),
    ("query_as", 1, false),
    ("query_as_unchecked", 1, false),
    ("query_file", 0, true),
    ("query_file_unchecked", 0, true),
    ("query_file_scalar", 0, true),
    ("query_file_scalar_unchecked", 0, true),
    ("query_file_as", 1, true),
    ("query_file_as_unchecked", 1, true),
];

/// Read the Rust files `ids` of `files`; SQL files named by `query_file!` are added to `files`.
pub fn extract(files: &mut Vec<SourceFile>, ids: &[FileId], config: &Config) -> Extracted {
    let parser = parser_dialect(config.dialect);
    let mut front = Front {
        file: 0,
        dialect: config.dialect,
        parser: parser.as_ref(),
        out: Extracted::default(),
    };
    let mut parsed = Vec::new();
    for &id in ids {
        match parse(id, &files[id]) {
            Ok(p) => parsed.push(p),
            Err(fallback) => fallback_walk(&mut front, &files[id], id, fallback),
        }
    }
    let index = Index::build(&parsed, config);
    let mut shared = Shared {
        cache: HashMap::new(),
        inlined: HashSet::new(),
        extra: Vec::new(),
        known: files.iter().map(|f| f.path.clone()).collect(),
        first_extra: files.len(),
    };
    // SQL files that constants include are query files of the code, whether or not a call
    // using the constant is recognised.
    for ((file, _), expr) in &index.consts {
        Walker::new(&index, &mut front, &mut shared, *file).sql_only(expr);
    }
    let mut units = Vec::new();
    for (i, f) in index.fns.iter().enumerate() {
        let mut w = Walker::new(&index, &mut front, &mut shared, f.file);
        w.stack.push(i);
        w.params(f.sig, None);
        w.block(f.block);
        units.push((i, w.finish(f)));
    }
    units.retain(|(i, _)| !shared.inlined.contains(i));
    front.out.units.extend(units.into_iter().map(|(_, u)| u));
    files.extend(shared.extra);
    // proc-macro2 keeps every parsed file in a thread-local source map.
    proc_macro2::extra::invalidate_current_thread_spans();
    front.out
}

/// A parsed Rust file, with what is needed to turn syn positions into byte offsets.
struct Parsed {
    id: FileId,
    path: PathBuf,
    /// The path as shown in reports.
    display: String,
    /// The text syn saw: the file without a BOM, a shebang line blanked.
    text: String,
    lines: LineIndex,
    /// Bytes stripped in front (a UTF-8 BOM).
    shift: usize,
    ast: syn::File,
}

impl Parsed {
    fn offset(&self, lc: LineColumn) -> usize {
        let start = self.lines.line_start(lc.line).unwrap_or(self.text.len());
        let in_line: usize = self.text[start..]
            .chars()
            .take(lc.column)
            .map(char::len_utf8)
            .sum();
        start + in_line
    }

    /// Byte range (in the stripped text) of a syntax node.
    fn range(&self, node: &impl Spanned) -> std::ops::Range<usize> {
        let s = node.span();
        let (a, b) = (self.offset(s.start()), self.offset(s.end()));
        a..b.max(a)
    }

    fn span(&self, node: &impl Spanned) -> Span {
        let r = self.range(node);
        Span::new(self.id, r.start + self.shift..r.end + self.shift)
    }
}

/// Why syn could not read a file: where, and the message.
struct Unparsed {
    at: Option<LineColumn>,
    message: String,
    text: String,
    shift: usize,
}

fn parse(id: FileId, file: &SourceFile) -> Result<Parsed, Unparsed> {
    let (text, shift) = match file.text.strip_prefix('\u{feff}') {
        Some(rest) => (rest.to_string(), 3),
        None => (file.text.clone(), 0),
    };
    let mut text = text;
    // `#!...` on the first line (not `#![attr]`) is a shebang: blank it, keeping offsets.
    if text.starts_with("#!") && !text.starts_with("#![") {
        let end = text.find('\n').unwrap_or(text.len());
        text.replace_range(..end, &" ".repeat(end));
    }
    match syn::parse_str::<syn::File>(&text) {
        Ok(ast) => Ok(Parsed {
            id,
            path: file.path.clone(),
            display: file.display.clone(),
            lines: LineIndex::new(&text),
            text,
            shift,
            ast,
        }),
        Err(e) => Err(Unparsed {
            at: Some(e.span().start()),
            message: e.to_string(),
            text,
            shift,
        }),
    }
}

/// A function body to walk.
struct FnDef<'a> {
    file: usize,
    name: String,
    sig: &'a syn::Signature,
    block: &'a syn::Block,
    span: Span,
}

/// What the whole run's Rust code declares: functions, string constants, struct fields that
/// hold database handles.
struct Index<'a> {
    parsed: &'a [Parsed],
    config: &'a Config,
    fns: Vec<FnDef<'a>>,
    by_name: HashMap<String, Vec<usize>>,
    consts: HashMap<(usize, String), &'a syn::Expr>,
    fields: HashMap<String, Executor>,
}

struct Collector<'a, 'i> {
    ix: &'i mut Index<'a>,
    file: usize,
}

impl<'a> Visit<'a> for Collector<'a, '_> {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.add(&f.sig, &f.block, f);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.add(&f.sig, &f.block, f);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.add(&f.sig, block, f);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
    fn visit_item_const(&mut self, c: &'a syn::ItemConst) {
        self.ix
            .consts
            .insert((self.file, c.ident.to_string()), &c.expr);
    }
    fn visit_item_static(&mut self, s: &'a syn::ItemStatic) {
        self.ix
            .consts
            .insert((self.file, s.ident.to_string()), &s.expr);
    }
    fn visit_field(&mut self, f: &'a syn::Field) {
        if let Some(name) = &f.ident
            && let Some(kind) = types::of_type(&f.ty, &self.ix.config.rust)
        {
            self.ix.fields.insert(name.to_string(), kind);
        }
    }
}

impl<'a> Collector<'a, '_> {
    fn add(&mut self, sig: &'a syn::Signature, block: &'a syn::Block, node: &impl Spanned) {
        let p = &self.ix.parsed[self.file];
        let i = self.ix.fns.len();
        self.ix.fns.push(FnDef {
            file: self.file,
            name: sig.ident.to_string(),
            sig,
            block,
            span: p.span(node),
        });
        self.ix
            .by_name
            .entry(sig.ident.to_string())
            .or_default()
            .push(i);
    }
}

impl<'a> Index<'a> {
    fn build(parsed: &'a [Parsed], config: &'a Config) -> Self {
        let mut ix = Index {
            parsed,
            config,
            fns: Vec::new(),
            by_name: HashMap::new(),
            consts: HashMap::new(),
            fields: HashMap::new(),
        };
        for (file, p) in parsed.iter().enumerate() {
            Collector { ix: &mut ix, file }.visit_file(&p.ast);
        }
        ix
    }

    /// The function a call names: one in the caller's file first, else the only one anywhere.
    fn function(&self, name: &str, file: usize) -> Option<usize> {
        let candidates = self.by_name.get(name)?;
        candidates
            .iter()
            .copied()
            .find(|&i| self.fns[i].file == file)
            .or_else(|| (candidates.len() == 1).then(|| candidates[0]))
    }
}

/// State shared by every walk of the run.
struct Shared {
    /// Steps of each SQL literal, read once: (host file, host offset) -> steps and messages.
    cache: HashMap<(FileId, usize), Vec<(Step, usize)>>,
    /// Functions walked in place in some caller.
    inlined: HashSet<usize>,
    /// SQL files read for `query_file!`.
    extra: Vec<SourceFile>,
    known: Vec<PathBuf>,
    first_extra: usize,
}

/// SQL text: its value and where each byte of it is in a host file.
#[derive(Clone, Debug)]
struct Sql {
    file: FileId,
    text: String,
    map: OffsetMap,
    /// Sent as one simple-query message (several statements, one implicit transaction).
    batch: bool,
    /// Values bound so far, in parameter order: where they come from, and their text.
    binds: Vec<(Flow, String)>,
}

/// The steps whose results a host value is computed from.
type Flow = std::collections::BTreeSet<usize>;

impl Sql {
    fn key(&self) -> (FileId, usize) {
        (self.file, self.map.host(0))
    }

    fn concat(mut self, other: Sql) -> Sql {
        let at = self.text.len();
        self.text += &other.text;
        if other.file == self.file {
            self.map.extend(at, &other.map);
        }
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Handle {
    kind: Executor,
    /// Index of the session walker statements on this handle go to.
    walker: usize,
    session: Option<usize>,
}

#[derive(Clone, Debug, Default)]
enum Value {
    #[default]
    None,
    Handle(Handle),
    Sql(Sql),
    /// Data computed from the results of these steps.
    Data(Flow),
}

const UNKNOWN: usize = 0;
const POOL: usize = 1;

struct Walker<'a, 'w> {
    ix: &'w Index<'a>,
    front: &'w mut Front<'a>,
    shared: &'w mut Shared,
    file: usize,
    vars: HashMap<String, Value>,
    walkers: Vec<SessionWalker>,
    sessions: Vec<Session>,
    /// Sessions of `self.<field>` connections.
    field_sessions: HashMap<String, Handle>,
    seq: usize,
    message: usize,
    branch: Vec<usize>,
    next_branch: usize,
    exits: Vec<Exit>,
    conditions: Vec<Condition>,
    loops: Vec<Loop>,
    /// Collections sorted in place so far (`ids.sort()`).
    sorted: HashSet<String>,
    /// Sequence number of the last step emitted.
    last_step: Option<usize>,
    /// Functions being walked (outermost first), against recursion.
    stack: Vec<usize>,
}

impl<'a, 'w> Walker<'a, 'w> {
    fn new(
        ix: &'w Index<'a>,
        front: &'w mut Front<'a>,
        shared: &'w mut Shared,
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
            seq: 0,
            message: 0,
            branch: Vec::new(),
            next_branch: 0,
            exits: Vec::new(),
            conditions: Vec::new(),
            loops: Vec::new(),
            sorted: HashSet::new(),
            last_step: None,
            stack: Vec::new(),
        }
    }

    fn parsed(&self) -> &'a Parsed {
        &self.ix.parsed[self.file]
    }

    fn span(&self, node: &impl Spanned) -> Span {
        self.parsed().span(node)
    }

    /// The expression as written (`&mut *tx`), whitespace folded, for messages.
    fn source_of(&self, e: &syn::Expr) -> String {
        let p = self.parsed();
        p.text
            .get(p.range(e))
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn next_seq(&mut self) -> usize {
        self.seq += 1;
        self.seq
    }

    fn finish(mut self, f: &FnDef) -> Unit {
        let mut transactions: Vec<Transaction> = self
            .walkers
            .drain(..)
            .flat_map(SessionWalker::finish)
            .filter(|t| !t.steps.is_empty())
            .collect();
        transactions.sort_by_key(|t| t.steps[0].seq);
        Unit {
            kind: UnitKind::RustFn,
            name: Some(f.name.clone()),
            span: f.span,
            transactions,
            exits: self.exits,
            conditions: self.conditions,
            loops: self.loops,
            sessions: self.sessions,
        }
    }

    // ---- handles ----

    fn unknown_handle() -> Handle {
        Handle {
            kind: Executor::Unknown,
            walker: UNKNOWN,
            session: None,
        }
    }

    /// A handle of `kind` that this function does not know the origin of (a parameter, a field).
    fn handle_of_kind(&mut self, kind: Executor) -> Handle {
        match kind {
            Executor::Pool => Handle {
                kind,
                walker: POOL,
                session: None,
            },
            Executor::Connection | Executor::PooledConnection => {
                self.new_session(kind, Executor::Unknown, None)
            }
            Executor::Transaction => {
                let session = self.session(Executor::Unknown, None);
                self.walkers.push(SessionWalker::host_transaction(None));
                Handle {
                    kind,
                    walker: self.walkers.len() - 1,
                    session: Some(session),
                }
            }
            _ => Walker::unknown_handle(),
        }
    }

    fn session(&mut self, kind: Executor, acquired: Option<Span>) -> usize {
        let id = self.sessions.len();
        self.sessions.push(Session { id, kind, acquired });
        id
    }

    /// A connection handle on a new session; `origin` is the session's kind for the rules
    /// (pooled or dedicated).
    fn new_session(&mut self, kind: Executor, origin: Executor, acquired: Option<Span>) -> Handle {
        let session = self.session(origin, acquired);
        self.walkers.push(SessionWalker::host(kind));
        Handle {
            kind,
            walker: self.walkers.len() - 1,
            session: Some(session),
        }
    }

    /// `x.begin()`: a transaction on `parent`'s session, or on a new pooled session.
    fn begin(&mut self, parent: Handle, at: Span) -> Handle {
        let session = match (parent.kind, parent.session) {
            (Executor::Pool, _) | (_, None) => self.session(Executor::PooledConnection, Some(at)),
            (_, Some(s)) => s,
        };
        self.walkers.push(SessionWalker::host_transaction(Some(at)));
        Handle {
            kind: Executor::Transaction,
            walker: self.walkers.len() - 1,
            session: Some(session),
        }
    }

    // ---- statements ----

    fn block(&mut self, block: &syn::Block) {
        let outer = self.vars.clone();
        let before: HashSet<usize> = self.open_transactions();
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
        // Transactions opened in this block and still open are rolled back when dropped here.
        for w in self.open_transactions().difference(&before) {
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
        self.vars = outer;
    }

    fn open_transactions(&self) -> HashSet<usize> {
        self.vars
            .values()
            .filter_map(|v| match v {
                Value::Handle(h) if h.kind == Executor::Transaction => Some(h.walker),
                _ => None,
            })
            .collect()
    }

    fn stmt(&mut self, stmt: &syn::Stmt) {
        match stmt {
            syn::Stmt::Local(local) => {
                let value = match &local.init {
                    Some(init) => {
                        let v = self.expr(&init.expr);
                        if let Some((_, diverge)) = &init.diverge {
                            self.in_branch(|w| {
                                w.expr(diverge);
                            });
                        }
                        self.or_data(v, &init.expr)
                    }
                    None => Value::None,
                };
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

    /// A value with no meaning of its own is data if it is computed from query results.
    fn or_data(&self, v: Value, e: &syn::Expr) -> Value {
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

    /// The steps whose results the variables used in `e` carry.
    fn flow(&self, e: &syn::Expr) -> Flow {
        struct Names<'v>(&'v HashMap<String, Value>, Flow);
        impl<'a> Visit<'a> for Names<'_> {
            fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
                if let Some(id) = p.path.get_ident()
                    && let Some(Value::Data(f)) = self.0.get(&id.to_string())
                {
                    self.1.extend(f.iter().copied());
                }
            }
        }
        let mut names = Names(&self.vars, Flow::new());
        names.visit_expr(e);
        names.1
    }

    /// Bind a pattern to a value; a type annotation tells the handle kind.
    fn bind(&mut self, pat: &syn::Pat, value: Value) {
        // Data spreads to every name of a destructuring pattern.
        if let Value::Data(flow) = &value {
            struct Idents(Vec<String>);
            impl<'a> Visit<'a> for Idents {
                fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
                    self.0.push(p.ident.to_string());
                }
            }
            let mut idents = Idents(Vec::new());
            idents.visit_pat(pat);
            for name in idents.0 {
                self.vars.insert(name, Value::Data(flow.clone()));
            }
            return;
        }
        match pat {
            syn::Pat::Ident(p) => {
                let name = p.ident.to_string();
                let value = match value {
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
                let value = match (value, types::of_type(&t.ty, &self.ix.config.rust)) {
                    (Value::None, Some(kind)) => Value::Handle(self.handle_of_kind(kind)),
                    (v, _) => v,
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
            syn::Pat::TupleStruct(t) if t.elems.len() == 1 => self.bind(&t.elems[0], value),
            _ => {}
        }
    }

    /// Bind a function's parameters: to the caller's handles (`args`) when walked in place,
    /// else by their types.
    fn params(&mut self, sig: &syn::Signature, args: Option<&[Value]>) {
        let mut i = 0;
        for input in &sig.inputs {
            let syn::FnArg::Typed(t) = input else {
                continue;
            };
            let given = args.and_then(|a| a.get(i)).cloned().unwrap_or_default();
            i += 1;
            let value = match given {
                Value::None => match types::of_type(&t.ty, &self.ix.config.rust)
                    .or_else(|| generic_executor(sig, &t.ty))
                {
                    Some(kind) => Value::Handle(self.handle_of_kind(kind)),
                    None => Value::None,
                },
                v => v,
            };
            self.note_sorted(&t.pat, &t.ty);
            self.bind(&t.pat, value);
        }
    }

    /// A `BTreeSet`/`BTreeMap` is visited in key order.
    fn note_sorted(&mut self, pat: &syn::Pat, ty: &syn::Type) {
        let p = self.parsed();
        if p.text.get(p.range(ty)).is_some_and(|t| t.contains("BTree"))
            && let syn::Pat::Ident(id) = pat
        {
            self.sorted.insert(id.ident.to_string());
        }
    }

    fn in_branch<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.in_branch_on(&Flow::new(), f)
    }

    /// A branch arm taken on a condition computed from the results of the steps in `from`.
    fn in_branch_on<R>(&mut self, from: &Flow, f: impl FnOnce(&mut Self) -> R) -> R {
        self.next_branch += 1;
        self.branch.push(self.next_branch);
        if !from.is_empty() {
            self.conditions.push(Condition {
                branch: self.next_branch,
                from: from.iter().copied().collect(),
            });
        }
        let r = f(self);
        self.branch.pop();
        r
    }

    fn exit(&mut self, node: &impl Spanned, owner: Option<usize>) {
        let seq = self.next_seq();
        let span = self.span(node);
        self.exits.push(Exit {
            seq,
            span,
            owner,
            branch: self.branch.clone(),
        });
    }

    // ---- expressions ----

    fn exprs<'e>(&mut self, exprs: impl IntoIterator<Item = &'e syn::Expr>) -> Vec<Value> {
        exprs.into_iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&mut self, e: &syn::Expr) -> Value {
        use syn::Expr as E;
        match e {
            E::MethodCall(m) => self.method_call(m),
            E::Call(c) => self.call(c),
            E::Macro(m) => self.mac(&m.mac),
            E::Lit(l) => self.literal(&l.lit),
            E::Path(p) => self.path(&p.path),
            E::Field(f) => self.field(f),
            E::Reference(r) => self.expr(&r.expr),
            E::Paren(p) => self.expr(&p.expr),
            E::Group(g) => self.expr(&g.expr),
            E::Await(a) => self.expr(&a.base),
            E::Cast(c) => self.expr(&c.expr),
            E::Unary(u) => self.expr(&u.expr),
            E::Try(t) => {
                let before = self.seq;
                let v = self.expr(&t.expr);
                let owner = self.last_step.filter(|&s| s > before);
                self.exit(&t.question_token, owner);
                v
            }
            E::Return(r) => {
                if let Some(x) = &r.expr {
                    self.expr(x);
                }
                self.exit(r, None);
                Value::None
            }
            E::Binary(b) => {
                let (l, r) = (self.expr(&b.left), self.expr(&b.right));
                match (l, r, &b.op) {
                    (Value::Sql(a), Value::Sql(b), syn::BinOp::Add(_)) => Value::Sql(a.concat(b)),
                    _ => Value::None,
                }
            }
            E::If(i) => {
                self.expr(&i.cond);
                let from = self.flow(&i.cond);
                self.in_branch_on(&from, |w| w.block(&i.then_branch));
                if let Some((_, other)) = &i.else_branch {
                    self.in_branch_on(&from, |w| w.expr(other));
                }
                Value::None
            }
            E::Match(m) => {
                self.expr(&m.expr);
                let from = self.flow(&m.expr);
                for arm in &m.arms {
                    self.in_branch_on(&from, |w| {
                        if let Some((_, g)) = &arm.guard {
                            w.expr(g);
                        }
                        w.expr(&arm.body);
                    });
                }
                Value::None
            }
            E::ForLoop(f) => {
                self.expr(&f.expr);
                // The order the loop visits keys in: sorted if the collection was sorted first
                // or is sorted on the way (`ids.sort()`, `.sorted()`, a `BTreeSet`).
                let over = self.source_of(&f.expr);
                let base = over
                    .trim_start_matches(['&', '*'])
                    .split(['.', ' '])
                    .next()
                    .unwrap_or("")
                    .to_string();
                let sorted = over.contains("sort") || self.sorted.contains(&base);
                let mut names = Vec::new();
                collect_idents(&f.pat, &mut names);
                let at = self.span(&f.expr);
                self.in_branch(|w| {
                    w.loops.push(Loop {
                        branch: w.next_branch,
                        vars: names,
                        sorted,
                        span: at,
                    });
                    w.block(&f.body)
                });
                Value::None
            }
            E::While(l) => {
                self.expr(&l.cond);
                self.in_branch(|w| w.block(&l.body));
                Value::None
            }
            E::Loop(l) => {
                self.in_branch(|w| w.block(&l.body));
                Value::None
            }
            E::Block(syn::ExprBlock { block, .. })
            | E::Async(syn::ExprAsync { block, .. })
            | E::Unsafe(syn::ExprUnsafe { block, .. })
            | E::TryBlock(syn::ExprTryBlock { block, .. }) => {
                self.block(block);
                Value::None
            }
            E::Closure(c) => {
                // A closure may run any number of times, or not at all.
                self.in_branch(|w| w.expr(&c.body));
                Value::None
            }
            E::Let(l) => self.expr(&l.expr),
            E::Assign(a) => {
                let v = self.expr(&a.right);
                let v = self.or_data(v, &a.right);
                if let E::Path(p) = &*a.left
                    && let Some(id) = p.path.get_ident()
                {
                    self.vars.insert(id.to_string(), v);
                }
                Value::None
            }
            E::Tuple(t) => {
                let mut vals = self.exprs(&t.elems);
                if vals.is_empty() {
                    Value::None
                } else {
                    vals.swap_remove(0)
                }
            }
            E::Array(a) => {
                self.exprs(&a.elems);
                Value::None
            }
            E::Struct(s) => {
                for f in &s.fields {
                    self.expr(&f.expr);
                }
                Value::None
            }
            E::Index(i) => {
                self.expr(&i.expr);
                self.expr(&i.index);
                Value::None
            }
            E::Break(b) => {
                if let Some(x) = &b.expr {
                    self.expr(x);
                }
                Value::None
            }
            _ => Value::None,
        }
    }

    fn literal(&mut self, lit: &syn::Lit) -> Value {
        let syn::Lit::Str(s) = lit else {
            return Value::None;
        };
        let p = self.parsed();
        let r = p.range(s);
        let Some(text) = p.text.get(r.clone()) else {
            return Value::None;
        };
        match lit::decode(text, r.start + p.shift) {
            Some((text, map)) => Value::Sql(Sql {
                file: p.id,
                text,
                map,
                batch: false,
                binds: Vec::new(),
            }),
            None => Value::None,
        }
    }

    fn path(&mut self, path: &syn::Path) -> Value {
        let Some(last) = path.segments.last() else {
            return Value::None;
        };
        let name = last.ident.to_string();
        if path.segments.len() == 1
            && let Some(v) = self.vars.get(&name)
        {
            return v.clone();
        }
        // A string constant of this file (or, if unique, of another).
        let konst = self
            .ix
            .consts
            .get(&(self.file, name.clone()))
            .map(|e| (self.file, *e))
            .or_else(|| {
                let mut all = self.ix.consts.iter().filter(|((_, n), _)| *n == name);
                match (all.next(), all.next()) {
                    (Some(((f, _), e)), None) => Some((*f, *e)),
                    _ => None,
                }
            });
        if let Some((file, expr)) = konst {
            let here = std::mem::replace(&mut self.file, file);
            let v = self.sql_only(expr);
            self.file = here;
            return v;
        }
        Value::None
    }

    /// The SQL value of a constant's expression, without walking anything else.
    fn sql_only(&mut self, e: &syn::Expr) -> Value {
        match e {
            syn::Expr::Lit(l) => self.literal(&l.lit),
            syn::Expr::Macro(m) => self.mac(&m.mac),
            syn::Expr::Reference(r) => self.sql_only(&r.expr),
            syn::Expr::Paren(p) => self.sql_only(&p.expr),
            _ => Value::None,
        }
    }

    /// `self.pool`, `state.db`: a handle by the field's declared type, or its name.
    fn field(&mut self, f: &syn::ExprField) -> Value {
        let base = self.expr(&f.base);
        let syn::Member::Named(name) = &f.member else {
            return base;
        };
        let name = name.to_string();
        if let Some(h) = self.field_sessions.get(&name) {
            return Value::Handle(*h);
        }
        let kind = self
            .ix
            .fields
            .get(&name)
            .copied()
            .or_else(|| types::of_variable_name(&name));
        match kind {
            Some(kind) => {
                let h = self.handle_of_kind(kind);
                self.field_sessions.insert(name, h);
                Value::Handle(h)
            }
            None => Value::None,
        }
    }

    fn method_call(&mut self, m: &syn::ExprMethodCall) -> Value {
        let name = m.method.to_string();
        let at = self.span(m);
        // `conn.transaction(|tx| async move { ... })`: the closure runs in a transaction.
        if name == "transaction"
            && let Some(syn::Expr::Closure(c)) =
                m.args.iter().find(|a| matches!(a, syn::Expr::Closure(_)))
        {
            let parent = match self.expr(&m.receiver) {
                Value::Handle(h) => h,
                _ => self.handle_of_kind(Executor::Pool),
            };
            let tx = self.begin(parent, at);
            let outer = self.vars.clone();
            if let Some(p) = c.inputs.first() {
                self.bind(p, Value::Handle(tx));
            }
            self.expr(&c.body);
            self.walkers[tx.walker].end(None);
            self.vars = outer;
            return Value::None;
        }
        let receiver = self.expr(&m.receiver);
        let args = self.exprs(&m.args);
        if name.starts_with("sort") {
            let base = self.source_of(&m.receiver);
            self.sorted
                .insert(base.trim_start_matches(['&', '*']).to_string());
        }
        let arg_sql = match args.first() {
            Some(Value::Sql(s)) => Some(s.clone()),
            _ => None,
        };
        // client.query("...", &[]), tx.batch_execute("BEGIN; ..."), db.execute(Statement::..)
        if let Some(mut sql) = arg_sql.clone()
            && (CLIENT_METHODS.contains(&name.as_str())
                || self.ix.config.rust.query_functions.contains(&name))
        {
            sql.batch |= BATCH_METHODS.contains(&name.as_str());
            // tokio-postgres parameters: `&[&a, &b]`.
            if let Some(params) = m.args.iter().nth(1) {
                let params = match params {
                    syn::Expr::Reference(r) => &*r.expr,
                    p => p,
                };
                if let syn::Expr::Array(a) = params {
                    for e in &a.elems {
                        sql.binds.push((self.flow(e), self.source_of(e)));
                    }
                }
            }
            let handle = self.handle(&receiver, &m.receiver);
            let text = self.source_of(&m.receiver);
            return self.emit(&sql, handle, text);
        }
        // sqlx::query("...").bind(x).fetch_one(&mut *tx)
        if let Value::Sql(sql) = &receiver
            && TERMINALS.contains(&name.as_str())
        {
            let (handle, text) = match (args.first(), m.args.first()) {
                (Some(v), Some(e)) => (self.handle(v, e), self.source_of(e)),
                _ => (Walker::unknown_handle(), String::new()),
            };
            let sql = sql.clone();
            return self.emit(&sql, handle, text);
        }
        match (name.as_str(), &receiver) {
            // Builders and prepared statements carry their SQL to where they run.
            ("prepare" | "prepare_cached" | "prepare_typed", _) if arg_sql.is_some() => {
                Value::Sql(arg_sql.unwrap_or_else(|| unreachable!()))
            }
            ("bind", Value::Sql(sql)) => {
                let mut sql = sql.clone();
                if let Some(e) = m.args.first() {
                    sql.binds.push((self.flow(e), self.source_of(e)));
                }
                Value::Sql(sql)
            }
            (
                "bind_all" | "persistent" | "map" | "try_map" | "as_str" | "to_string" | "to_owned"
                | "into" | "clone" | "build" | "sql",
                Value::Sql(_),
            ) => receiver,
            (
                "as_mut" | "as_ref" | "deref_mut" | "deref" | "clone" | "borrow_mut" | "lock"
                | "unwrap" | "expect",
                Value::Handle(_),
            ) => receiver,
            ("begin" | "transaction" | "start_transaction" | "begin_with", Value::Handle(h)) => {
                Value::Handle(self.begin(*h, at))
            }
            (
                "acquire"
                | "get"
                | "get_owned"
                | "try_acquire"
                | "try_get"
                | "dedicated_connection",
                Value::Handle(h),
            ) if h.kind == Executor::Pool => Value::Handle(self.new_session(
                Executor::PooledConnection,
                Executor::PooledConnection,
                Some(at),
            )),
            ("commit" | "rollback", Value::Handle(h)) if h.kind == Executor::Transaction => {
                self.walkers[h.walker].end(Some(at));
                Value::None
            }
            // A helper method given a handle: walk it in place.
            _ => {
                if args.iter().any(|a| matches!(a, Value::Handle(_))) {
                    self.inline(&name, &args);
                }
                // `row.get("balance")`, `rows.first().map(|r| ..)`: data stays data.
                data_of(std::iter::once(&receiver).chain(&args))
            }
        }
    }

    fn call(&mut self, c: &syn::ExprCall) -> Value {
        let args = self.exprs(&c.args);
        let syn::Expr::Path(p) = &*c.func else {
            self.expr(&c.func);
            return Value::None;
        };
        let segments: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let Some(name) = segments.last().map(String::as_str) else {
            return Value::None;
        };
        let owner = segments.len().checked_sub(2).map(|i| segments[i].as_str());
        let first_sql = |i: usize| match args.get(i) {
            Some(Value::Sql(s)) => Some(s.clone()),
            _ => None,
        };
        if BUILDERS.contains(&name)
            && let Some(mut sql) = first_sql(0)
        {
            sql.batch = name == "raw_sql";
            return Value::Sql(sql);
        }
        if matches!(name, "from_string" | "from_sql_and_values")
            && let Some(sql) = first_sql(1)
        {
            return Value::Sql(sql);
        }
        if matches!(name, "from" | "new" | "Some" | "Ok")
            && let Some(sql) = first_sql(0)
        {
            return Value::Sql(sql);
        }
        if self
            .ix
            .config
            .rust
            .query_functions
            .iter()
            .any(|f| f == name)
            && let Some(Value::Handle(h)) = args.first()
            && let Some(sql) = args.iter().find_map(|a| match a {
                Value::Sql(s) => Some(s.clone()),
                _ => None,
            })
        {
            let h = *h;
            let text = c
                .args
                .first()
                .map(|e| self.source_of(e))
                .unwrap_or_default();
            self.emit(&sql, h, text);
            return Value::None;
        }
        // Constructors: PgPool::connect, PgConnection::connect, tokio_postgres::connect, ...
        if matches!(
            name,
            "connect" | "connect_lazy" | "connect_with" | "establish" | "build" | "create_pool"
        ) {
            let at = self.span(c);
            let qualified: Vec<String> = segments[..segments.len() - 1].to_vec();
            let kind = match owner {
                Some("tokio_postgres" | "postgres") => Some(Executor::Connection),
                Some("Database") => Some(Executor::Pool),
                Some(t) => types::of_name(t, &qualified, &self.ix.config.rust),
                None => None,
            };
            return match kind {
                Some(Executor::Pool) => Value::Handle(self.handle_of_kind(Executor::Pool)),
                Some(Executor::Connection) => Value::Handle(self.new_session(
                    Executor::Connection,
                    Executor::Connection,
                    Some(at),
                )),
                _ => Value::None,
            };
        }
        if args.iter().any(|a| matches!(a, Value::Handle(_))) {
            self.inline(name, &args);
        }
        match name {
            // Box::pin(async move {..}), Ok(x): the value passes through.
            "pin" | "Ok" | "Some" | "from" | "new" => args.into_iter().next().unwrap_or_default(),
            _ => data_of(&args),
        }
    }

    fn mac(&mut self, mac: &syn::Macro) -> Value {
        let Some(name) = mac.path.segments.last().map(|s| s.ident.to_string()) else {
            return Value::None;
        };
        let Ok(args) =
            mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        else {
            return Value::None;
        };
        if let Some(&(_, index, is_file)) = MACROS.iter().find(|(n, ..)| *n == name) {
            let Some(arg) = args.iter().nth(index) else {
                return Value::None;
            };
            let v = self.expr(arg);
            self.exprs(args.iter().skip(index + 1));
            let v = match v {
                Value::Sql(s) if is_file => self.query_file(&s.text),
                v => v,
            };
            return match v {
                Value::Sql(mut sql) => {
                    for e in args.iter().skip(index + 1) {
                        sql.binds.push((self.flow(e), self.source_of(e)));
                    }
                    Value::Sql(sql)
                }
                v => v,
            };
        }
        match name.as_str() {
            "include_str" => match args.first().map(|a| self.expr(a)) {
                Some(Value::Sql(s)) => self.include_str(&s.text),
                _ => Value::None,
            },
            "concat" => {
                let mut out: Option<Sql> = None;
                for a in &args {
                    match (self.expr(a), out.take()) {
                        (Value::Sql(s), None) => out = Some(s),
                        (Value::Sql(s), Some(o)) => out = Some(o.concat(s)),
                        _ => return Value::None,
                    }
                }
                out.map_or(Value::None, Value::Sql)
            }
            "format" => {
                let first = args.first().map(|a| self.expr(a));
                self.exprs(args.iter().skip(1));
                match first {
                    // `format!("SELECT ... {table}")` builds SQL ...
                    Some(Value::Sql(mut s)) if looks_like_sql(&s.text) => {
                        s.text = blank_format_placeholders(&s.text);
                        Value::Sql(s)
                    }
                    // ... `format!("{}{}", row.name, suffix)` builds data.
                    _ => {
                        let flow: Flow = args.iter().skip(1).flat_map(|a| self.flow(a)).collect();
                        if flow.is_empty() {
                            Value::None
                        } else {
                            Value::Data(flow)
                        }
                    }
                }
            }
            _ => {
                // println!, tokio::try_join!(..), vec![..]: walk the arguments.
                self.exprs(&args);
                Value::None
            }
        }
    }

    /// `query_file!("queries/x.sql")`: the file relative to the crate's manifest folder.
    fn query_file(&mut self, rel: &str) -> Value {
        let here = &self.parsed().path;
        match here
            .ancestors()
            .skip(1)
            .find(|d| d.join("Cargo.toml").is_file())
        {
            Some(root) => self.sql_file(root.join(rel)),
            None => Value::None,
        }
    }

    /// `include_str!("../queries/x.sql")`: the file relative to the Rust file.
    fn include_str(&mut self, rel: &str) -> Value {
        match self.parsed().path.parent() {
            Some(dir) => self.sql_file(dir.join(rel)),
            None => Value::None,
        }
    }

    /// A SQL file that Rust code sends: its statements run where the code sends them, so it is
    /// not also read as a script of its own.
    fn sql_file(&mut self, path: PathBuf) -> Value {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Value::None;
        };
        let id = match self.shared.known.iter().position(|p| same_file(p, &path)) {
            Some(i) => i,
            None => {
                // Shown relative to the same folder as the Rust file that names it.
                let p = self.parsed();
                let base = p.path.to_string_lossy();
                let display = match base.strip_suffix(p.display.as_str()) {
                    Some(root) => crate::display_path(&path, Path::new(root)),
                    None => path.to_string_lossy().into_owned(),
                };
                self.shared
                    .extra
                    .push(SourceFile::new(path.clone(), display, text.clone()));
                self.shared.known.push(path);
                self.shared.first_extra + self.shared.extra.len() - 1
            }
        };
        self.front.out.embedded.insert(id);
        Value::Sql(Sql {
            file: id,
            text,
            map: OffsetMap::shifted(0),
            batch: false,
            binds: Vec::new(),
        })
    }

    /// The handle a value stands for; unknown if it is none.
    fn handle(&mut self, v: &Value, e: &syn::Expr) -> Handle {
        match v {
            Value::Handle(h) => *h,
            _ => match types::of_variable_name(&self.source_of(e)) {
                Some(kind) => self.handle_of_kind(kind),
                None => Walker::unknown_handle(),
            },
        }
    }

    /// Walk the function `name` in place, its parameters bound to `args`.
    fn inline(&mut self, name: &str, args: &[Value]) {
        let Some(i) = self.ix.function(name, self.file) else {
            return;
        };
        if self.stack.contains(&i) || self.stack.len() > 4 {
            return;
        }
        self.shared.inlined.insert(i);
        let f = &self.ix.fns[i];
        let saved_vars = std::mem::take(&mut self.vars);
        let saved_file = std::mem::replace(&mut self.file, f.file);
        self.stack.push(i);
        self.params(f.sig, Some(args));
        self.block(f.block);
        self.stack.pop();
        self.file = saved_file;
        self.vars = saved_vars;
    }

    /// Send `sql` through `handle`: one step per statement, in the handle's session walker.
    /// The result is the data the statements return.
    fn emit(&mut self, sql: &Sql, handle: Handle, via: String) -> Value {
        let key = sql.key();
        if !self.shared.cache.contains_key(&key) {
            self.front.file = sql.file;
            let statements = split(&sql.text, self.front.dialect, false).statements;
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
            step.branch = self.branch.clone();
            step.via = Some(via.clone());
            step.inputs = sql
                .binds
                .iter()
                .enumerate()
                .map(|(i, (from, text))| Input {
                    param: i + 1,
                    from: from.iter().copied().collect(),
                    text: text.clone(),
                })
                .collect();
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

/// Whether a format string is SQL: it starts with a statement keyword.
fn looks_like_sql(text: &str) -> bool {
    let first = text
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.as_str(),
        "select"
            | "insert"
            | "update"
            | "delete"
            | "with"
            | "merge"
            | "lock"
            | "begin"
            | "start"
            | "commit"
            | "rollback"
            | "set"
            | "call"
            | "create"
            | "alter"
            | "drop"
            | "truncate"
            | "values"
            | "table"
            | "do"
            | "savepoint"
            | "release"
            | "copy"
            | "explain"
    )
}

/// Data computed from any of `values` (the union of their flows), or nothing.
fn data_of<'v>(values: impl IntoIterator<Item = &'v Value>) -> Value {
    let flow: Flow = values
        .into_iter()
        .filter_map(|v| match v {
            Value::Data(f) => Some(f.iter().copied()),
            _ => None,
        })
        .flatten()
        .collect();
    if flow.is_empty() {
        Value::None
    } else {
        Value::Data(flow)
    }
}

/// `E: PgExecutor<'_>` and `where E: Executor`: a parameter of a generic executor type.
fn generic_executor(sig: &syn::Signature, ty: &syn::Type) -> Option<Executor> {
    let ty = match ty {
        syn::Type::Reference(r) => &*r.elem,
        t => t,
    };
    let syn::Type::Path(p) = ty else {
        return None;
    };
    let name = p.path.get_ident()?;
    let bounded = sig.generics.params.iter().any(|g| {
        matches!(g, syn::GenericParam::Type(t) if t.ident == *name && t.bounds.iter().any(|b| matches!(b, syn::TypeParamBound::Trait(t) if types::is_executor_trait(&t.path))))
    }) || sig.generics.where_clause.iter().flat_map(|w| &w.predicates).any(|p| {
        matches!(p, syn::WherePredicate::Type(t) if matches!(&t.bounded_ty, syn::Type::Path(b) if b.path.get_ident() == Some(name)) && t.bounds.iter().any(|b| matches!(b, syn::TypeParamBound::Trait(t) if types::is_executor_trait(&t.path))))
    });
    bounded.then_some(Executor::Unknown)
}

/// `format!` placeholders (`{}`, `{name}`) become underscores and `{{`/`}}` one brace and a
/// space, so the literal parts keep their positions.
fn blank_format_placeholders(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
                out.push(c);
                out.push(' ');
            }
            ('{', _) => {
                let mut n = 1;
                for d in chars.by_ref() {
                    n += d.len_utf8();
                    if d == '}' {
                        break;
                    }
                }
                out.push_str(&"_".repeat(n));
            }
            _ => out.push(c),
        }
    }
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// syn could not parse the file: find SQL in the token stream instead (executor unknown), and
/// say so. If even the tokens cannot be read, say where.
fn fallback_walk(front: &mut Front, file: &SourceFile, id: FileId, why: Unparsed) {
    let lines = LineIndex::new(&why.text);
    let offset = |lc: LineColumn| {
        let start = lines.line_start(lc.line).unwrap_or(why.text.len());
        start
            + why.text[start..]
                .chars()
                .take(lc.column)
                .map(char::len_utf8)
                .sum::<usize>()
            + why.shift
    };
    let at = why.at.map_or(0, offset).min(file.text.len());
    front.out.failures.push(ParseFailure {
        span: Span::new(id, at..at),
        message: why.message,
        host: true,
    });
    let Ok(tokens) = why.text.parse::<TokenStream>() else {
        return;
    };
    let mut walker = SessionWalker::unknown();
    let mut seq = 0;
    let mut literals = Vec::new();
    sql_literals(tokens, false, &mut literals);
    front.file = id;
    for lit in literals {
        let (a, b) = (offset(lit.span().start()), offset(lit.span().end()));
        let Some((text, map)) = file.text.get(a..b).and_then(|t| lit::decode(t, a)) else {
            continue;
        };
        for s in split(&text, front.dialect, false).statements {
            let mut step = front.step(&text, &map, &s, Vec::new());
            seq += 1;
            step.seq = seq;
            walker.push(step, seq);
        }
    }
    front.out.units.push(Unit {
        kind: UnitKind::RustFn,
        name: None,
        span: Span::new(id, 0..file.text.len()),
        transactions: walker.finish(),
        exits: Vec::new(),
        conditions: Vec::new(),
        loops: Vec::new(),
        sessions: Vec::new(),
    });
}

/// Names bound by a pattern.
fn collect_idents(pat: &syn::Pat, out: &mut Vec<String>) {
    struct Idents<'o>(&'o mut Vec<String>);
    impl<'a> Visit<'a> for Idents<'_> {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.to_string());
        }
    }
    Idents(out).visit_pat(pat);
}

/// String literals that are the first argument of a query macro or method in a token stream.
fn sql_literals(ts: TokenStream, in_query: bool, out: &mut Vec<proc_macro2::Literal>) {
    let mut prev: Option<String> = None;
    let mut first = in_query;
    for t in ts {
        match t {
            TokenTree::Group(g) => {
                let q = prev.as_deref().is_some_and(|p| {
                    CLIENT_METHODS.contains(&p)
                        || BUILDERS.contains(&p)
                        || MACROS.iter().any(|(n, ..)| *n == p)
                });
                sql_literals(g.stream(), q, out);
                first = false;
            }
            TokenTree::Literal(l) => {
                if first && l.to_string().ends_with('"') {
                    out.push(l);
                }
                first = false;
            }
            TokenTree::Ident(i) => {
                prev = Some(i.to_string());
                continue;
            }
            TokenTree::Punct(p) if p.as_char() == '!' => continue,
            TokenTree::Punct(_) => {}
        }
        prev = None;
    }
}
