//! diesel's query builder read as SQL. A chain that starts at `<table>::table` (or
//! `diesel::update|delete|insert_into(..)`) is collected as a [`Query`] and, at the call that
//! runs it on a connection (`.first(conn)`, `.load(conn)`, `.execute(conn)`, ...), written out
//! as the statement diesel sends and emitted like a SQL string: same steps, same rules. The
//! statement points at the chain; table and column names in it point at their paths.

mod chain;
mod schema;

use super::*;
pub(super) use schema::{
    Derive, Insertable, flag, insertable, joinable_macro, metas, nested_value, table_macro,
};

/// A builder chain, as far as it has been read.
#[derive(Clone, Debug)]
pub(super) struct Query {
    pub(super) kind: Kind,
    pub(super) table: String,
    /// The table's name in the host (`accounts` of `accounts::table`).
    pub(super) table_at: Span,
    /// `WHERE` conjuncts.
    pub(super) filters: Vec<Cond>,
    /// `SET` items (an `UPDATE`, or `ON CONFLICT .. DO UPDATE`).
    pub(super) sets: Vec<(Column, Part)>,
    /// Columns of an `INSERT` and their values.
    values: Vec<(Column, Part)>,
    /// The select list (`*` when not narrowed).
    pub(super) columns: Vec<Column>,
    order: Vec<Column>,
    pub(super) lock: Option<&'static str>,
    pub(super) wait: Option<&'static str>,
    on_conflict: Option<&'static str>,
    /// The conflict target's columns (`ON CONFLICT (email)`), where the code names them.
    conflict_target: Vec<Column>,
    /// `.values(&rows)` of a list: whether it is sorted, and where it is named.
    rows: Option<(bool, Span)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Select,
    Update,
    Delete,
    Insert,
}

/// A column as written: its name and where (the last segment of `accounts::balance`).
#[derive(Clone, Debug)]
pub(super) struct Column {
    pub(super) name: String,
    pub(super) at: Span,
}

/// A value in the statement: a host value bound to a parameter, or SQL computed from columns
/// (`accounts::balance + 1`) whose host values are parameters too.
#[derive(Clone, Debug)]
pub(super) enum Part {
    Param(Bind),
    Sql(Vec<Piece>),
}

#[derive(Clone, Debug)]
pub(super) enum Piece {
    Text(String),
    Column(Column),
    Param(Bind),
}

#[derive(Clone, Debug)]
pub(super) struct Cond {
    pub(super) column: Column,
    pub(super) op: &'static str,
    pub(super) value: Option<Part>,
    /// `a.is_null().or(a.le(now))`: the conditions any of which holds instead of this one.
    pub(super) or: Vec<Cond>,
}

impl Cond {
    /// `<key> = <value>`: a row by its primary key (`.find(k)`, `find_by_id(k)`, an active
    /// model's key), written where `at` is.
    pub(super) fn key_is(key: &str, value: Part, at: Span) -> Self {
        Cond {
            column: Column {
                name: key.into(),
                at,
            },
            op: "=",
            value: Some(value),
            or: Vec::new(),
        }
    }
}

/// A module or column name (`accounts`, `balance`), not a type or a variant (`Status::Done`,
/// a generic `A::Entity`).
pub(super) fn lower_case(i: &syn::Ident) -> bool {
    !i.to_string().starts_with(|c: char| c.is_uppercase())
}

/// The SQL being written, with where each byte of it is in the host.
struct Writer<'b> {
    text: String,
    map: OffsetMap,
    /// Where text with no place of its own points: the chain.
    at: Span,
    binds: &'b mut Vec<Bind>,
    /// The last thing written was a name: the next byte maps to the end of its host span.
    after_name: bool,
}

impl Writer<'_> {
    fn text(&mut self, s: &str) {
        for (i, _) in s.char_indices() {
            if i == 0 && std::mem::take(&mut self.after_name) {
                continue;
            }
            self.map.push(self.text.len() + i, self.at.start());
        }
        self.text.push_str(s);
    }
    fn column(&mut self, c: &Column) {
        // A name from another file (a macro's argument, its body elsewhere) is placed at the
        // chain.
        let at = if c.at.file == self.at.file {
            c.at
        } else {
            self.at
        };
        self.map.push(self.text.len(), at.start());
        self.text.push_str(&c.name);
        // A name whose host text is not the name (`count(*)` for `.count()`) ends there.
        self.after_name = at.end() - at.start() == c.name.len();
    }
    fn param(&mut self, b: &Bind) {
        self.binds.push(b.clone());
        let p = format!("${}", self.binds.len());
        self.text(&p);
    }
    /// `col op value`, one condition of a `WHERE`.
    fn condition(&mut self, c: &Cond) {
        self.column(&c.column);
        self.text(&format!(" {}", c.op));
        if let Some(v) = &c.value {
            self.text(" ");
            let any = c.op == "= ANY";
            if any {
                self.text("(");
            }
            self.part(v);
            if any {
                self.text(")");
            }
        }
    }
    fn part(&mut self, p: &Part) {
        match p {
            Part::Param(b) => self.param(b),
            Part::Sql(pieces) => {
                for piece in pieces {
                    match piece {
                        Piece::Text(t) => self.text(t),
                        Piece::Column(c) => self.column(c),
                        Piece::Param(b) => self.param(b),
                    }
                }
            }
        }
    }
}

impl Query {
    pub(super) fn new(kind: Kind, table: String, table_at: Span) -> Self {
        Query {
            kind,
            table,
            table_at,
            filters: Vec::new(),
            sets: Vec::new(),
            values: Vec::new(),
            columns: Vec::new(),
            order: Vec::new(),
            lock: None,
            wait: None,
            on_conflict: None,
            conflict_target: Vec::new(),
            rows: None,
        }
    }

    /// An `INSERT` of these columns (an `UPDATE`'s `SET` items become its values).
    pub(super) fn into_insert(mut self) -> Self {
        self.kind = Kind::Insert;
        self.values = std::mem::take(&mut self.sets);
        self.values.extend(
            self.filters
                .drain(..)
                .filter_map(|c| c.value.map(|v| (c.column, v))),
        );
        self
    }

    fn write(&self, at: Span) -> (String, OffsetMap, Vec<Bind>) {
        let mut binds = Vec::new();
        let mut w = Writer {
            text: String::new(),
            map: OffsetMap::shifted(at.start()),
            at,
            binds: &mut binds,
            after_name: false,
        };
        // A `#[sql_name]` may be any identifier (`"quote'table"`): quoted unless plain.
        let plain = self
            .table
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
        let table = Column {
            name: if plain {
                self.table.clone()
            } else {
                format!("\"{}\"", self.table.replace('"', "\"\""))
            },
            at: self.table_at,
        };
        match self.kind {
            Kind::Select => {
                w.text("SELECT ");
                if self.columns.is_empty() {
                    w.text("*");
                }
                for (i, c) in self.columns.iter().enumerate() {
                    if i > 0 {
                        w.text(", ");
                    }
                    w.column(c);
                }
                w.text(" FROM ");
                w.column(&table);
            }
            Kind::Update => {
                w.text("UPDATE ");
                w.column(&table);
                w.text(" SET ");
                self.assignments(&mut w, &self.sets);
            }
            Kind::Delete => {
                w.text("DELETE FROM ");
                w.column(&table);
            }
            Kind::Insert => self.insert(&mut w, &table),
        }
        self.filters_and_locks(&mut w);
        let (text, mut map) = (w.text, w.map);
        // The statement ends where the chain does.
        map.push(text.len(), at.end());
        (text, map, binds)
    }

    /// `INSERT INTO t (..) VALUES (..)` and its `ON CONFLICT`.
    fn insert(&self, w: &mut Writer, table: &Column) {
        w.text("INSERT INTO ");
        w.column(table);
        if self.values.is_empty() {
            // `.values(&new_row)`: columns txlint does not see.
            w.text(" DEFAULT VALUES");
        }
        w.text(if self.values.is_empty() { "" } else { " (" });
        for (i, (c, _)) in self.values.iter().enumerate() {
            if i > 0 {
                w.text(", ");
            }
            w.column(c);
        }
        if !self.values.is_empty() {
            w.text(") VALUES (");
            for (i, (_, v)) in self.values.iter().enumerate() {
                if i > 0 {
                    w.text(", ");
                }
                w.part(v);
            }
            w.text(")");
        }
        if let Some(what) = self.on_conflict {
            w.text(" ON CONFLICT ");
            for (i, c) in self.conflict_target.iter().enumerate() {
                w.text(if i == 0 { "(" } else { ", " });
                w.column(c);
            }
            if !self.conflict_target.is_empty() {
                w.text(") ");
            }
            w.text(what);
            if what == "DO UPDATE" {
                w.text(" SET ");
                self.assignments(w, &self.sets);
            }
        }
    }

    /// `WHERE`, `ORDER BY` and the row lock.
    fn filters_and_locks(&self, w: &mut Writer) {
        for (i, c) in self.filters.iter().enumerate() {
            w.text(if i == 0 { " WHERE " } else { " AND " });
            if c.or.is_empty() {
                w.condition(c);
                continue;
            }
            w.text("(");
            for (j, c) in std::iter::once(c).chain(&c.or).enumerate() {
                if j > 0 {
                    w.text(" OR ");
                }
                w.condition(c);
            }
            w.text(")");
        }
        for (i, c) in self.order.iter().enumerate() {
            w.text(if i == 0 { " ORDER BY " } else { ", " });
            w.column(c);
        }
        if let Some(lock) = self.lock {
            w.text(&format!(" {lock}"));
            if let Some(wait) = self.wait {
                w.text(&format!(" {wait}"));
            }
        }
    }

    fn assignments(&self, w: &mut Writer, sets: &[(Column, Part)]) {
        // `.set(&changeset)`: columns txlint does not see, written as a hole (see
        // [`crate::model::is_hole`]) so the statement still reads as an `UPDATE` of these rows.
        if sets.is_empty() {
            w.text("___ = ___");
        }
        for (i, (c, v)) in sets.iter().enumerate() {
            if i > 0 {
                w.text(", ");
            }
            w.column(c);
            w.text(" = ");
            w.part(v);
        }
    }
}
