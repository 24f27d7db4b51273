//! What one run gives: the model, the findings as shown, and the counts reporters print.

use std::time::Duration;

use crate::diagnostic::Diagnostic;
use crate::extract::Stats;
use crate::model::Program;
use crate::source::Span;

/// The result of one run.
#[derive(Debug)]
pub struct Run {
    pub program: Program,
    /// Sorted by file and position, severities as configured, suppressions applied.
    pub diagnostics: Vec<Diagnostic>,
    pub stats: Stats,
    /// Files that could not be read at all.
    pub unreadable: usize,
    /// Files read only as context (the schema, routines, the other side of a lock cycle),
    /// not reported on: the last `context` of the named ones in `program.files`.
    pub context: usize,
    /// Findings left out because the `--baseline` file has them.
    pub baselined: usize,
    /// With `check --witness`: for each diagnostic of a core rule, its witness or what is
    /// missing for one (in the order of `diagnostics`; `None` for the other rules).
    pub witnesses: Vec<Option<Result<crate::witness::Witness, String>>>,
    pub elapsed: Duration,
}

impl Run {
    /// Add another run's files and findings after this one's (the CLI runs each project, as
    /// its nearest `txlint.toml` says, on its own). The model is not merged: reports of
    /// findings need only files and diagnostics.
    pub fn merge(&mut self, other: Run) {
        let n = self.program.files.len();
        let shift = |s: &mut Span| s.file += n;
        for mut d in other.diagnostics {
            shift(&mut d.span);
            d.labels.iter_mut().for_each(|l| shift(&mut l.span));
            d.statement.iter_mut().for_each(shift);
            d.calls.iter_mut().for_each(shift);
            self.diagnostics.push(d);
        }
        self.program.files.extend(other.program.files);
        self.stats += other.stats;
        self.unreadable += other.unreadable;
        self.context += other.context;
        self.baselined += other.baselined;
        self.elapsed += other.elapsed;
    }
}
