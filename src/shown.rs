//! Whether a finding is shown: decided here and nowhere else, in this order.
//!
//! 1. Suppression comments (`-- txlint: ignore <rule> -- <reason>`) drop the findings they
//!    name; a suppression nothing matched is itself reported (`unused-suppression`), unless its
//!    rule is turned off.
//! 2. The configuration: a rule turned off is dropped; the others take their configured
//!    severity. Then the findings are sorted, and repeats merged.
//! 3. A run with context files (`txlint check` on named files, the editor's document) shows a
//!    finding only when its primary span or one of its labels is in a named file.
//! 4. A baseline (`--baseline`) drops the findings it already knows.
//! 5. The command line's `--select` and `--ignore` keep the rules asked for.
//!
//! Steps 1 to 3 are the pipeline's (every caller gets them: the CLI, standard input, the
//! language server); 4 and 5 are what a caller asks of a finished run ([`Choice`]). A baseline
//! is matched before `--select` narrows the list, so that a finding's fingerprint (its rank
//! among equal findings) is the one `--write-baseline` wrote.

use std::collections::HashSet;

use crate::config::Config;
use crate::diagnostic::{self, Diagnostic};
use crate::registry;
use crate::run::Run;
use crate::source::{FileId, SourceFile};
use crate::suppress;

/// Steps 1 and 2: what the suppressions and the configuration let through, sorted, repeats
/// merged.
pub(crate) fn configured(
    files: &[SourceFile],
    suppressions: &mut [suppress::Suppression],
    diagnostics: Vec<Diagnostic>,
    config: &Config,
) -> Vec<Diagnostic> {
    let enabled = |name: &str| registry::find(name).is_some_and(|r| config.severity(r).is_some());
    let mut diagnostics = suppress::apply(files, suppressions, diagnostics, &enabled);
    diagnostics.retain_mut(
        |d| match registry::find(d.rule).and_then(|r| config.severity(r)) {
            Some(severity) => {
                d.severity = severity;
                true
            }
            None => false,
        },
    );
    sort(&mut diagnostics);
    diagnostic::merge_repeats(diagnostics)
}

/// Step 3: of a run over `named` files followed by context files, the findings a named file
/// takes part in (a file a named one brings in, after the context, counts as named).
pub(crate) fn in_named(run: &mut Run, named: usize, context: usize) {
    if context == 0 {
        return;
    }
    let all = named + context;
    let reported = |f: FileId| f < named || f >= all;
    run.diagnostics
        .retain(|d| reported(d.span.file) || d.labels.iter().any(|l| reported(l.span.file)));
    run.context = context;
}

/// Findings in file order, then by position and rule.
pub(crate) fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| (a.span, a.rule).cmp(&(b.span, b.rule)));
}

/// Steps 4 and 5: what a caller asks of a finished run.
#[derive(Debug, Default)]
pub struct Choice {
    /// Only these rules (all when empty).
    select: Vec<&'static str>,
    /// Not these.
    ignore: Vec<&'static str>,
    /// The fingerprints a baseline knows.
    baseline: Option<HashSet<String>>,
}

impl Choice {
    /// `--select` and `--ignore`; an error names a rule txlint does not have.
    pub fn new(select: &[String], ignore: &[String]) -> Result<Choice, String> {
        let rule = |name: &String| {
            registry::find(name)
                .map(|r| r.name)
                .ok_or_else(|| format!("unknown rule `{name}`; `txlint rules` lists the rules"))
        };
        Ok(Choice {
            select: select.iter().map(rule).collect::<Result<_, _>>()?,
            ignore: ignore.iter().map(rule).collect::<Result<_, _>>()?,
            baseline: None,
        })
    }

    /// Leave out the findings whose fingerprints `known` holds (a baseline's).
    pub fn with_baseline(self, known: HashSet<String>) -> Choice {
        Choice {
            baseline: Some(known),
            ..self
        }
    }

    /// Whether the rule's findings are shown (step 5).
    pub fn shows(&self, rule: &str) -> bool {
        (self.select.is_empty() || self.select.contains(&rule)) && !self.ignore.contains(&rule)
    }

    /// Steps 4 and 5 on `run`; `run.baselined` counts what the baseline left out.
    pub fn apply(&self, run: &mut Run) {
        if let Some(known) = &self.baseline {
            crate::baseline::apply(run, known);
        }
        run.diagnostics.retain(|d| self.shows(d.rule));
    }
}
