//! Front-ends: text of one kind of file -> units of the model.

pub mod sql;

use crate::model::Unit;
use crate::parse::facts::ParseFailure;

/// What a front-end learned from one file.
#[derive(Debug, Default)]
pub struct Extracted {
    pub units: Vec<Unit>,
    /// Statements sqlparser rejected (reported as `syntax-error`).
    pub failures: Vec<ParseFailure>,
    pub stats: Stats,
}

/// Counts for the closing summary and for measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub statements: usize,
    /// Parsed by sqlparser.
    pub parsed: usize,
    /// Analysed from tokens only (sqlparser rejected them, or they are `DO` blocks).
    pub fallback: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.statements += o.statements;
        self.parsed += o.parsed;
        self.fallback += o.fallback;
    }
}
