//! SQL text: from macros (`query!`, `format!`, `concat!`, `include_str!`), files, and builders
//! completed piece by piece (sqlx `QueryBuilder`, `push_str`).

use super::syntax::On;
use super::*;
use crate::parse::split::stand_in;

impl<'a, 'w> Walker<'a, 'w> {
    /// SQL completed at run time, piece by piece (sqlx `QueryBuilder`, `String::push_str`):
    /// the piece is added to the text, and to the variable the chain starts from
    /// (`qb.push(..).push_bind(x)`). A piece that is not SQL text becomes a hole; a bound value
    /// becomes the next parameter; `push_values(rows, |b, row| ..)` becomes one row of
    /// parameters, one per `push_bind` in the closure. `None` for any other method.
    pub(super) fn built(
        &mut self,
        name: &str,
        receiver: &Value,
        m: &syn::ExprMethodCall,
        args: &[Value],
    ) -> Option<Value> {
        // Every `.bind(x)` of a chain comes here too: nothing is copied or spanned for it.
        let pushes = matches!(
            name,
            "push" | "push_str" | "push_bind" | "push_values" | "push_tuples" | "separated"
        );
        let (Value::Sql(sql), true) = (receiver, pushes) else {
            return None;
        };
        let dollar = !matches!(self.parsed().dialect, Dialect::Mysql | Dialect::Sqlite);
        let param = |n: usize| {
            if dollar {
                format!("${n}")
            } else {
                "?".to_string()
            }
        };
        let at = self.span(m);
        let mut sql = sql.clone();
        let arg = m.args.first();
        match (name, arg) {
            ("push" | "push_str", Some(e)) => match (args.first(), e) {
                (Some(Value::Sql(piece)), _) => sql = sql.concat(piece.clone()),
                (
                    _,
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Char(c),
                        ..
                    }),
                ) => sql = sql.concat(self.piece(c.value().to_string(), at)),
                _ => {
                    let hole = stand_in(&sql.text, self.source_of(e).len().max(1));
                    sql = sql.concat(self.piece(hole, at));
                }
            },
            ("push_bind", Some(e)) => {
                let b = self.bound(e);
                sql.binds.push(b);
                let p = param(sql.binds.len());
                sql = sql.concat(self.piece(p, at));
            }
            ("push_values" | "push_tuples", Some(rows)) => {
                sql.rows = Some((self.sorted_collection(rows), self.span(rows)));
                let mut row = Vec::new();
                if let Some(syn::Expr::Closure(c)) = m.args.iter().nth(1) {
                    let mut binds = Vec::new();
                    BindCalls(&mut binds).visit_expr(&c.body);
                    for e in binds {
                        let b = self.bound(e);
                        sql.binds.push(b);
                        row.push(param(sql.binds.len()));
                    }
                }
                // `push_values`: `VALUES (..), (..)`; `push_tuples`: `((..), (..))`.
                let text = match name {
                    "push_values" => format!(" VALUES ({})", row.join(", ")),
                    _ => format!(" (({}))", row.join(", ")),
                };
                sql = sql.concat(self.piece(text, at));
            }
            // `separated(", ")` pushes through another value: what it adds is not followed.
            ("separated", _) => {
                sql.template = true;
                self.set_root(&m.receiver, Value::Sql(sql));
                return Some(Value::None);
            }
            _ => return None,
        }
        sql.template = true;
        self.set_root(&m.receiver, Value::Sql(sql.clone()));
        Some(Value::Sql(sql))
    }

    /// Text the code adds (a parameter, a hole), placed at the call that adds it.
    pub(super) fn piece(&self, text: String, at: Span) -> Sql {
        Sql {
            template: true,
            ..Sql::new(at.file, text, OffsetMap::shifted(at.start()))
        }
    }

    /// The variable a method chain starts from (`qb` in `qb.push(..).push(..)`, `&mut qb`) is
    /// given `value`.
    pub(super) fn set_root(&mut self, mut e: &syn::Expr, value: Value) {
        loop {
            e = match e {
                syn::Expr::MethodCall(m) => &m.receiver,
                syn::Expr::Reference(r) => &r.expr,
                syn::Expr::Paren(p) => &p.expr,
                syn::Expr::Path(p) => {
                    if let Some(v) = p.path.get_ident().map(|i| i.to_string())
                        && self.vars.contains_key(&v)
                    {
                        self.vars.insert(v, value);
                    }
                    return;
                }
                _ => return,
            };
        }
    }

    pub(super) fn mac(&mut self, mac: &syn::Macro) -> Value {
        let Some(name) = mac.path.segments.last().map(|s| s.ident.to_string()) else {
            return Value::None;
        };
        if matches!(name.as_str(), "concat" | "concatdoc") {
            return self.concat(mac);
        }
        let Ok(args) =
            mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        else {
            return Value::None;
        };
        if let Some((index, is_file)) = drivers::sql_macro(&name) {
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
                    sql.prepared = true;
                    for e in args.iter().skip(index + 1) {
                        let b = self.bound(e);
                        sql.binds.push(b);
                    }
                    Value::Sql(sql)
                }
                v => v,
            };
        }
        match name.as_str() {
            // `bail!(..)` leaves; `ensure!(cond, ..)` leaves unless `cond` holds.
            "bail" => {
                self.exprs(&args);
                self.exit(mac, None, ExitKind::Return);
                Value::None
            }
            "ensure" => {
                self.exprs(&args);
                let from = args.first().map(|c| self.flow(c)).unwrap_or_default();
                self.in_arm(None, &from, On::Value, |w| {
                    w.exit(mac, None, ExitKind::Return)
                });
                Value::None
            }
            "include_str" => match args.first().map(|a| self.expr(a)) {
                Some(Value::Sql(s)) => self.include_str(&s.text),
                _ => Value::None,
            },
            // `indoc!` (and `concatdoc!`, `formatdoc!` below) only strip indentation, which SQL
            // does not see: the literal is the statement, at its place in the source.
            "indoc" => match args.first().map(|a| self.expr(a)) {
                Some(Value::Sql(s)) => Value::Sql(s),
                _ => Value::None,
            },
            "format" | "formatdoc" => {
                let first = args.first().map(|a| self.expr(a));
                self.exprs(args.iter().skip(1));
                match first {
                    // `format!("SELECT ... {table}")` builds SQL ...
                    Some(Value::Sql(s)) if looks_like_sql(&s.text) => {
                        Value::Sql(self.fill_format(s, &args.iter().skip(1).collect::<Vec<_>>()))
                    }
                    // ... `format!("{}{}", row.name, suffix)` and `format!("{name}")` build
                    // data.
                    _ => {
                        let flow = dataflow::of_macro(&self.vars, &|n| self.ix.self_fields(n), mac);
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

    /// `concat!("UPDATE t ", "SET n = 1")`: SQL when every piece is. Its pieces (literals, or
    /// macros that give one) hold no comma outside brackets, so they are read one at a time
    /// from the tokens: a `concat!` of many pieces is not parsed into a list of expressions
    /// first (syn's expression of a literal is many times its text).
    fn concat(&mut self, mac: &syn::Macro) -> Value {
        let comma = |t: &proc_macro2::TokenTree| matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',');
        let mut out: Option<Sql> = None;
        let mut tokens = mac.tokens.clone().into_iter().peekable();
        while tokens.peek().is_some() {
            // The tokens up to the next comma, which is consumed with them.
            let piece: proc_macro2::TokenStream =
                tokens.by_ref().take_while(|t| !comma(t)).collect();
            if piece.is_empty() {
                continue;
            }
            let Ok(e) = syn::parse2::<syn::Expr>(piece) else {
                return Value::None;
            };
            match (self.expr(&e), out.take()) {
                (Value::Sql(s), None) => out = Some(s),
                (Value::Sql(s), Some(o)) => out = Some(o.concat(s)),
                _ => return Value::None,
            }
        }
        out.map_or(Value::None, Value::Sql)
    }

    /// A `format!` string with its placeholders filled: the text of an argument that is SQL
    /// text itself (a `const TABLE: &str`, a variable holding a literal) is put in; any other
    /// argument becomes a hole of underscores (a name txlint does not know). Positions stay
    /// on the source: filled-in text sits on its placeholder.
    pub(super) fn fill_format(&mut self, fmt: Sql, args: &[&syn::Expr]) -> Sql {
        let mut positional = args
            .iter()
            .filter(|a| !matches!(a, syn::Expr::Assign(_)))
            .copied();
        let positional_list: Vec<&syn::Expr> = positional.clone().collect();
        let named = |name: &str| {
            args.iter().find_map(|a| match a {
                syn::Expr::Assign(x) => match &*x.left {
                    syn::Expr::Path(p) if p.path.is_ident(name) => Some(&*x.right),
                    _ => None,
                },
                _ => None,
            })
        };
        let mut edits = Vec::new();
        let mut template = false;
        let mut filled = false;
        let mut choices: Vec<(usize, Vec<String>)> = Vec::new();
        for (range, what) in placeholders(&fmt.text) {
            let name = match what {
                Err(brace) => {
                    edits.push((range, brace.to_string()));
                    continue;
                }
                Ok(name) => name,
            };
            let arg: Option<syn::Expr> = if name.is_empty() {
                positional.next().cloned()
            } else if let Ok(n) = name.parse::<usize>() {
                positional_list.get(n).map(|e| (*e).clone())
            } else {
                named(&name)
                    .cloned()
                    .or_else(|| syn::parse_str::<syn::Expr>(&name).ok())
            };
            let text = match arg.map(|a| self.sql_only(&a)) {
                Some(Value::Sql(v)) if !v.text.contains(['\n', ';']) => {
                    // A hole filled with one of several texts: each combination is an
                    // alternative of the whole (up to `MAX_ALTS`).
                    if !v.alts.is_empty() {
                        let texts = v.alts.iter().map(|a| a.text.clone());
                        choices.push((edits.len(), texts.collect::<Vec<_>>()));
                    }
                    // The text put in may differ between the places the code is walked from
                    // (a helper given `for_update = false` here, `true` there).
                    filled = true;
                    v.text
                }
                _ => {
                    template = true;
                    stand_in(&fmt.text[..range.start], range.len())
                }
            };
            edits.push((range, text));
        }
        let (text, map) = fmt.map.splice(&fmt.text, &edits);
        let mut combos = vec![edits];
        for (k, texts) in choices {
            let more: Vec<_> = combos
                .iter()
                .flat_map(|e| texts.iter().map(move |t| (e, t)))
                .filter(|(_, t)| !t.contains(['\n', ';']))
                .map(|(e, t)| {
                    let mut e = e.clone();
                    e[k].1 = t.clone();
                    e
                })
                .collect();
            combos.extend(more);
            combos.truncate(MAX_ALTS);
        }
        let alts = combos
            .iter()
            .skip(1)
            .map(|e| {
                let (text, map) = fmt.map.splice(&fmt.text, e);
                Sql {
                    text,
                    map,
                    alts: Vec::new(),
                    ..fmt.clone()
                }
            })
            .collect();
        Sql {
            text,
            map,
            template: fmt.template || template,
            chosen: fmt.chosen || filled,
            alts,
            ..fmt
        }
    }

    /// `query_file!("queries/x.sql")`: the file relative to the crate's manifest folder.
    pub(super) fn query_file(&mut self, rel: &str) -> Value {
        let here = &self.parsed().path;
        match super::package_dir(here) {
            Some(root) => self.sql_file(root.join(rel)),
            None => Value::None,
        }
    }

    /// `include_str!("../queries/x.sql")`: the file relative to the Rust file. Only a SQL file
    /// is SQL (`include_str!("../README.md")` is documentation).
    pub(super) fn include_str(&mut self, rel: &str) -> Value {
        let sql = Path::new(rel).extension().is_some_and(|e| {
            ["sql", "pgsql", "psql"]
                .iter()
                .any(|x| e.eq_ignore_ascii_case(x))
        });
        match self.parsed().path.parent() {
            Some(dir) if sql => self.sql_file(dir.join(rel)),
            _ => Value::None,
        }
    }

    /// A SQL file that Rust code sends: its statements run where the code sends them, so it is
    /// not also read as a script of its own.
    pub(super) fn sql_file(&mut self, path: PathBuf) -> Value {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Value::None;
        };
        // Shown relative to the same folder as the Rust file that names it.
        let p = self.parsed();
        let base = p.path.to_string_lossy();
        let display = match base.strip_suffix(p.display.as_str()) {
            Some(root) => crate::io::display_path(&path, Path::new(root)),
            None => path.to_string_lossy().into_owned(),
        };
        let make = || SourceFile::new(path.clone(), display, text.clone());
        let Some(id) = self.shared.extra.id(self.shared.batch, &path, make) else {
            return Value::None;
        };
        self.front.out.embedded.insert(id);
        Value::Sql(Sql::new(id, text, OffsetMap::shifted(0)))
    }
}

/// Whether a text reads as SQL: its first word, past comments and parentheses, starts a
/// statement.
pub(super) fn looks_like_sql(text: &str) -> bool {
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    let first = rest
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
            | "pragma"
            | "replace"
            | "upsert"
            | "vacuum"
            | "analyze"
            | "grant"
            | "revoke"
            | "comment"
            | "refresh"
            | "listen"
            | "notify"
            | "unlisten"
            | "prepare"
            | "execute"
            | "deallocate"
            | "reset"
            | "show"
            | "declare"
            | "fetch"
            | "close"
            | "discard"
            | "reindex"
            | "cluster"
            | "abort"
            | "end"
    )
}

/// The placeholders of a `format!` string: byte range, and what names the argument (`""` for
/// the next positional one, a number, or a name). `{{` and `}}` come as ranges to replace with
/// one brace (`Some('{')`).
pub(super) fn placeholders(s: &str) -> Vec<(std::ops::Range<usize>, Result<String, char>)> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'{', Some(b'{')) | (b'}', Some(b'}')) => {
                out.push((i..i + 2, Err(b[i] as char)));
                i += 2;
            }
            (b'{', _) => {
                let end = s[i..].find('}').map_or(s.len(), |j| i + j + 1);
                let inner = &s[i + 1..end.saturating_sub(1).max(i + 1)];
                let name = inner.split(':').next().unwrap_or("").trim().to_string();
                out.push((i..end, Ok(name)));
                i = end;
            }
            _ => i += 1,
        }
    }
    out
}

/// `a`, `a.b.c`, `self.id`: a value that names itself, safe to stand for a parameter.
pub(super) fn plain_path(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
}

/// The values a `push_values` closure binds (`b.push_bind(x)`), in order.
struct BindCalls<'e, 'v>(&'v mut Vec<&'e syn::Expr>);

impl<'e> syn::visit::Visit<'e> for BindCalls<'e, '_> {
    fn visit_expr_method_call(&mut self, m: &'e syn::ExprMethodCall) {
        // The receiver first: `b.push_bind(x).push_bind(y)` binds `x` before `y`.
        self.visit_expr(&m.receiver);
        if m.method == "push_bind"
            && let Some(e) = m.args.first()
        {
            self.0.push(e);
        }
        for a in &m.args {
            self.visit_expr(a);
        }
    }
}
