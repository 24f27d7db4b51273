//! What an expression evaluates to: SQL text with its source map, a handle, data read from
//! the database, a guard.

use super::*;

/// SQL text: its value and where each byte of it is in a host file.
#[derive(Clone, Debug)]
pub(super) struct Sql {
    pub(super) file: FileId,
    pub(super) text: String,
    pub(super) map: OffsetMap,
    /// Sent as one simple-query message (several statements, one implicit transaction).
    pub(super) batch: bool,
    /// Made a prepared statement (`sqlx::query(..)`, `query!`, sea-orm `Statement`): sent
    /// with the extended protocol, one statement.
    pub(super) prepared: bool,
    /// Values bound so far, in parameter order.
    pub(super) binds: Vec<Bind>,
    /// The database it is written for, when the code says (sea-orm's `DbBackend::Sqlite`).
    pub(super) dialect: Option<Dialect>,
    /// Built with holes that run-time values fill (`format!("... {where_clause}")`).
    pub(super) template: bool,
    /// Its `VALUES` rows come from a collection (`push_values`): whether that is sorted, and
    /// where the collection is named.
    pub(super) rows: Option<(bool, Span)>,
    /// Other texts it may be, chosen at run time (`if shared { "..SHARE" } else { "..UPDATE" }`,
    /// a `format!` hole filled so): sent, each is one arm of a choice.
    pub(super) alts: Vec<Sql>,
    /// One of several texts written at one place: its text is part of its key.
    pub(super) chosen: bool,
}

/// Texts one value may be, at most (the first ones written are kept).
pub(super) const MAX_ALTS: usize = 4;

/// A host value bound to a parameter.
#[derive(Clone, Debug)]
pub(super) struct Bind {
    /// The steps whose results it is computed from.
    pub(super) from: Flow,
    /// The value, normalised (see [`value_text`]).
    pub(super) text: String,
    /// In key order with the other keys (see [`Input::ordered`]).
    pub(super) ordered: bool,
    /// What it was put in order from (see [`Input::sources`]).
    pub(super) sources: Vec<String>,
}

/// A host expression as a value: `&x`, `*x`, `x.clone()`, `x.as_str()`, `x.to_string()` and
/// the like are all `x`.
pub(super) fn value_text(source: &str) -> String {
    let mut t = source.trim();
    loop {
        let before = t;
        t = t.trim_start_matches('&').trim_start();
        t = t.strip_prefix("mut ").unwrap_or(t).trim_start();
        t = t.trim_start_matches('*');
        for suffix in [
            ".clone()",
            ".as_str()",
            ".to_string()",
            ".to_owned()",
            ".as_ref()",
            ".into()",
            ".as_slice()",
            ".borrow()",
            ".deref()",
            ".as_deref()",
        ] {
            t = t.strip_suffix(suffix).unwrap_or(t);
        }
        if let Some(inner) = t.strip_prefix('(').and_then(|x| x.strip_suffix(')'))
            && !inner.contains(',')
        {
            t = inner;
        }
        if t == before {
            return t.to_string();
        }
    }
}

impl Sql {
    /// Text at the places `map` gives, sent as it is: not yet a prepared statement, nothing
    /// bound, no template.
    pub(super) fn new(file: FileId, text: String, map: OffsetMap) -> Sql {
        Sql {
            file,
            text,
            map,
            batch: false,
            prepared: false,
            binds: Vec::new(),
            dialect: None,
            template: false,
            rows: None,
            alts: Vec::new(),
            chosen: false,
        }
    }

    /// One text at one place is read once. A template's head can be completed differently at
    /// different calls (`format!(HEAD, table)`, a `QueryBuilder` pushed to), so what it
    /// became is part of its key.
    pub(super) fn key(&self) -> (FileId, usize, u64) {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let text = match self.template || self.chosen {
            true => BuildHasherDefault::<DefaultHasher>::default().hash_one(&self.text),
            false => 0,
        };
        (self.file, self.map.host(0), text)
    }

    /// This text or `other`'s (the arms of an `if` or a `match`): alternatives, one per
    /// distinct text.
    pub(super) fn or(mut self, other: Sql) -> Sql {
        let mut other = other;
        let more = std::mem::take(&mut other.alts);
        for s in std::iter::once(other).chain(more) {
            if s.text != self.text && !self.alts.iter().any(|a| a.text == s.text) {
                self.alts.push(s);
            }
        }
        self.alts.truncate(MAX_ALTS - 1);
        self
    }

    /// The texts it may be: itself, then its alternatives, each with its flags and binds.
    pub(super) fn variants(&self) -> Vec<Sql> {
        let mut first = self.clone();
        let alts = std::mem::take(&mut first.alts);
        let mut out = vec![first.clone()];
        out.extend(alts.into_iter().map(|a| Sql {
            file: a.file,
            text: a.text,
            map: a.map,
            template: self.template || a.template,
            ..first.clone()
        }));
        for v in &mut out {
            v.chosen = true;
        }
        out
    }

    pub(super) fn concat(mut self, other: Sql) -> Sql {
        // Each text it may be goes on the same way (`if a { b.push(x) } else { b.push(y) };
        // b.push(rest)`).
        let alts = std::mem::take(&mut self.alts);
        self.alts = alts.into_iter().map(|a| a.concat(other.clone())).collect();
        let at = self.text.len();
        self.text += &other.text;
        self.template |= other.template;
        self.rows = self.rows.or(other.rows);
        if other.file == self.file {
            self.map.extend(at, &other.map);
        }
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Handle {
    pub(super) kind: Executor,
    /// Index of the session walker statements on this handle go to.
    pub(super) walker: usize,
    pub(super) session: Option<usize>,
    /// The database it talks to, when its type tells (`SqlitePool`, `Transaction<'_, MySql>`).
    pub(super) dialect: Option<Dialect>,
}

#[derive(Clone, Debug, Default)]
pub(super) enum Value {
    #[default]
    None,
    Handle(Handle),
    Sql(Sql),
    /// Data computed from the results of these steps.
    Data(Flow),
    /// A value of a struct of the run that holds a database handle in a field (`Repo { pool:
    /// PgPool }`): its methods reach the handle through `self`, so a call is walked in place.
    Object(std::rc::Rc<str>),
    /// A closure handed to a function of the run, held until that function calls it (an index
    /// into [`Walker::closures`]).
    Closure(usize),
    /// A diesel query builder chain (see `diesel.rs`).
    Diesel(Box<diesel::Query>),
    /// The guard of an exclusive in-process lock (`self.inner.write().await`, `m.lock()`),
    /// named by the lock (`Controller.inner`): handles reached through it are used under it.
    Guard(crate::model::Name),
    /// `true` or `false` as written, or a name bound to one that cannot change (an argument
    /// of a call walked in place, a `let` without `mut`): an `if` on it takes one arm.
    Bool(bool),
    /// tokio-postgres parameters written as an array (`&[&id, &n]`) and handed to a helper of
    /// the run that sends them (`self.inner.query_one(&statement, params)`): the caller's
    /// binds.
    Params(std::rc::Rc<[Bind]>),
    /// Text the function checked alone is given by its callers (`sql: &str`, `query: &T`
    /// with `T: ToStatement`), and a statement prepared from it: SQL its callers write, which
    /// each caller that walks the function in place reads; sent here, it is not SQL txlint
    /// failed to read.
    Caller,
}

/// A closure held for the function it was handed to: its syntax, the variables it sees and
/// its file; whether it ran.
pub(super) struct Held {
    pub(super) closure: std::rc::Rc<syn::ExprClosure>,
    pub(super) vars: HashMap<String, Value>,
    pub(super) aliases: HashMap<String, String>,
    pub(super) file: usize,
    pub(super) ran: bool,
}
