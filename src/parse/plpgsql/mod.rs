//! PL/pgSQL bodies (functions, procedures, triggers, `DO` blocks) -> the SQL they run.
//!
//! A light reader, not a PL/pgSQL grammar: it cuts the body at `;`, reads the block and
//! control-flow syntax in front of each piece (`DECLARE`, `BEGIN`, `IF ... THEN`, `LOOP`,
//! `EXCEPTION WHEN ... THEN`, `END IF`, ...) and keeps what reaches the database: SQL
//! statements, `PERFORM` (sent as `SELECT`), conditions and assignments (evaluated as
//! `SELECT <expression>`), the queries of `FOR ... IN <query> LOOP` and `RETURN QUERY`.
//! `SELECT ... INTO v` targets are recorded and blanked so sqlparser sees plain SQL.
//!
//! The control flow is kept as branch arms (the arms of one `IF`/`ELSIF`/`ELSE` or `CASE`
//! are alternatives; a loop body is an arm of its own), the conditions they are taken on, and
//! the exits (`RETURN`, `RAISE EXCEPTION`), in one program order with the statements.

mod piece;
mod reader;

use super::changes::{ColumnTest, column_test};
use super::lex::{Kind, Lexer, Token};
use super::split::RawStatement;
use crate::source::Dialect;

/// A statement of a body and the variables it assigns.
#[derive(Debug)]
pub struct PlStatement {
    pub raw: RawStatement,
    pub assigns: Vec<String>,
    /// Position in program order (statements and exits share the numbering).
    pub seq: usize,
    /// Branch arms enclosing it, outermost first.
    pub branch: Vec<usize>,
}

/// `RETURN` or `RAISE EXCEPTION`: the rest of the body does not run.
#[derive(Debug)]
pub struct PlExit {
    pub seq: usize,
    pub branch: Vec<usize>,
    /// Byte range of the keyword in the body.
    pub range: std::ops::Range<usize>,
    /// `RAISE`: it leaves with an error.
    pub fails: bool,
}

/// `BEGIN .. EXCEPTION WHEN .. THEN .. END`: a block that catches errors runs as a savepoint.
/// When a handler runs, what the block's body did, its locks included, was rolled back.
#[derive(Debug)]
pub struct PlHandler {
    /// The body is what runs after position `after` up to `upto` (see [`PlStatement::seq`]).
    pub after: usize,
    pub upto: usize,
    /// The handlers' branch arms (one per `WHEN`).
    pub arms: Vec<usize>,
    /// Byte range of the `EXCEPTION` keyword in the body.
    pub range: std::ops::Range<usize>,
    /// One of its `WHEN`s catches a unique violation (`unique_violation`, `SQLSTATE '23505'`, its
    /// class, `OTHERS`).
    pub unique: bool,
}

/// `FOR target IN <query> LOOP`: the body runs once per row, in the query's order.
#[derive(Debug)]
pub struct PlLoop {
    /// The body's branch arm.
    pub arm: usize,
    pub vars: Vec<String>,
    /// The query's position (see [`PlStatement::seq`]).
    pub query: usize,
}

/// A branch arm and the statements its condition is computed from (by [`PlStatement::seq`]).
#[derive(Debug)]
pub struct PlCondition {
    pub arm: usize,
    pub from: Vec<usize>,
}

#[derive(Debug, Default)]
pub struct Body {
    pub statements: Vec<PlStatement>,
    /// Variables declared in `DECLARE` sections.
    pub declared: Vec<String>,
    pub exits: Vec<PlExit>,
    pub conditions: Vec<PlCondition>,
    /// Groups of arms of which one run takes at most one.
    pub choices: Vec<Vec<usize>>,
    pub handlers: Vec<PlHandler>,
    pub loops: Vec<PlLoop>,
    /// The arms that are loop bodies (`LOOP`, `WHILE`, `FOR`).
    pub loop_arms: Vec<usize>,
    /// Arms of a trigger function that run only for some events (`IF TG_OP = 'INSERT' THEN`,
    /// and the `ELSE` after it), with the events as [`TG_INSERT`] | [`TG_UPDATE`] | ... bits.
    pub events: Vec<(usize, u8)>,
    /// Arms of a trigger function that run only when the firing `UPDATE` changes one of these
    /// columns (`IF NEW.a IS DISTINCT FROM OLD.a THEN`, the `ELSE` of `IF NEW.a = OLD.a THEN`).
    pub change_arms: Vec<(usize, Vec<String>)>,
    /// `IF NEW.a IS NOT DISTINCT FROM OLD.a [AND ..] THEN RETURN ..; END IF;` at the top of the
    /// body: what runs after that exit (by position) runs only when one of the columns changed.
    pub changed_after: Option<(usize, Vec<String>)>,
    /// Where a statement sits in more than [`MAX_NESTING`] open structures (body offset): the
    /// arms deeper than that are read as the one enclosing them.
    pub too_deep: Option<usize>,
}

/// Control structures nested deeper than this (in bodies nobody writes by hand: PostgreSQL's
/// regression suite nests fewer than 6, the 119 applications of `benches/realworld` at most 10)
/// are read as the arm that encloses them at this depth.
pub const MAX_NESTING: usize = 16;

pub const TG_INSERT: u8 = 1;
pub const TG_UPDATE: u8 = 2;
pub const TG_DELETE: u8 = 4;
pub const TG_TRUNCATE: u8 = 8;
const TG_ALL: u8 = TG_INSERT | TG_UPDATE | TG_DELETE | TG_TRUNCATE;

/// An open control structure.
#[derive(Debug)]
enum Frame {
    /// `IF`: its choice group, the condition statements of the chain so far, and the trigger
    /// events the conditions so far that test only `TG_OP` claimed.
    If {
        group: usize,
        conds: Vec<usize>,
        claimed: u8,
        /// The chain's first condition holds only when none of these columns changed: the arms
        /// after the first run only when one did.
        unchanged: Option<Vec<String>>,
    },
    /// `CASE`: its choice group, the selector statement, whether a `WHEN` started.
    Case {
        group: usize,
        conds: Vec<usize>,
    },
    Loop,
    /// `BEGIN ... [EXCEPTION ...] END`: the position before its body; once `EXCEPTION` is
    /// seen, the handlers' choice group and their [`PlHandler`].
    Block {
        after: usize,
        handlers: Option<(usize, usize)>,
    },
}

struct Reader<'a> {
    src: &'a str,
    t: Vec<Token>,
    out: Body,
    /// Open structures with their current arm.
    frames: Vec<(Frame, Option<usize>)>,
    next_arm: usize,
    seq: usize,
}

/// Read a PL/pgSQL body (the text between the quotes).
pub fn read_body(body: &str, dialect: Dialect) -> Body {
    let t: Vec<Token> = Lexer::new(body, dialect, false)
        .filter(|t| t.kind != Kind::Comment)
        .collect();
    let mut r = Reader {
        src: body,
        t,
        out: Body::default(),
        frames: Vec::new(),
        next_arm: 0,
        seq: 0,
    };
    let mut in_declare = false;
    let mut start = 0;
    for i in 0..r.t.len() {
        if r.t[i].kind == Kind::Semicolon {
            r.piece(start, i, &mut in_declare);
            start = i + 1;
        }
    }
    let n = r.t.len();
    r.piece(start, n, &mut in_declare);
    r.out
}

#[cfg(test)]
mod tests;
