//! What a rule reports: plain data, turned into text, JSON or SARIF by `report`.

use crate::source::Span;

pub use crate::registry::Severity;

/// A secondary location with a short note ("the lock is taken here").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub rule: &'static str,
    pub severity: Severity,
    /// One lower-case sentence, no final period: why this is a race.
    pub message: String,
    /// The exact token or statement the finding is about.
    pub span: Span,
    /// Note on the primary span, shown under it.
    pub note: Option<String>,
    pub labels: Vec<Label>,
    /// How to fix it.
    pub help: Option<String>,
    /// The statement containing `span`: a suppression comment above it applies too.
    pub statement: Option<Span>,
    /// Call sites through which the code of `span` was reached (a helper walked in place from
    /// a caller), outermost first.
    pub calls: Vec<Span>,
    /// The race's statements, set by the rule that reports it: what `txlint witness` replays.
    pub subject: Option<Subject>,
}

/// What a finding is about: which race, on which statements of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    pub race: Race,
    /// The statements, in the order the race names them (see [`Race`]).
    pub steps: Vec<StepRef>,
}

/// The schedules of two sessions that show a race, as far as a witness can replay them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Race {
    /// A transaction-scoped lock that ends with its own statement: `[the statement]`.
    LockEndsWithStatement,
    /// A session advisory lock left on a pooled connection: `[the statement that takes it]`.
    SessionLockOnPool,
    /// Two transactions that lock two things in opposite orders: `[first, then]` of the one
    /// reported, then `[first, then]` of the other.
    Deadlock,
    /// A value read and written back: `[read, write]`.
    LostUpdate,
    /// A check and the write it allows (a routine's: two calls of it): `[check, write]`.
    CheckThenWrite,
    /// `FOR UPDATE` where no row exists yet, and the insert after it: `[lock, insert]`.
    InsertAfterEmptyLock,
    /// Two runs insert the key a check found free; a unique key fails the second:
    /// `[check, insert]`.
    UniqueViolation,
}

/// One statement of the model: the unit that runs it (by its span) and its place there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRef {
    pub unit: Span,
    pub seq: usize,
}

impl StepRef {
    pub fn of(unit: &crate::model::Unit, step: &crate::model::Step) -> Self {
        StepRef {
            unit: unit.span,
            seq: step.seq,
        }
    }
}

impl Diagnostic {
    pub fn new(rule: &crate::registry::Rule, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            rule: rule.name,
            severity: rule.severity,
            message: message.into(),
            span,
            note: None,
            labels: Vec::new(),
            help: None,
            statement: None,
            calls: Vec::new(),
            subject: None,
        }
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    pub fn label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn in_statement(mut self, statement: Span) -> Self {
        self.statement = Some(statement);
        self
    }

    /// The finding is about this statement: its span, and the calls that reached it.
    pub fn in_step(mut self, step: &crate::model::Step) -> Self {
        self.statement = Some(step.span);
        self.calls = step.host().calls.to_vec();
        self
    }

    /// The race this finding shows, on these statements (in the order [`Race`] names them).
    pub fn about(
        mut self,
        race: Race,
        steps: &[(&crate::model::Unit, &crate::model::Step)],
    ) -> Self {
        self.subject = Some(Subject {
            race,
            steps: steps.iter().map(|(u, s)| StepRef::of(u, s)).collect(),
        });
        self
    }
}

/// Call sites shown as labels on a finding reached from several callers; the rest are counted.
const CALL_LABELS: usize = 3;

/// One diagnostic per rule and primary span. `diagnostics` is sorted by span and rule, so
/// repeats are adjacent: a helper walked in place from N callers gives its finding once, with
/// the call sites as labels ("called from here", the last with "and N more"; a single caller
/// when it is in another file), and the labels of the repeats folded in.
pub fn merge_repeats(diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::with_capacity(diagnostics.len());
    let mut calls: Vec<Vec<Span>> = Vec::new();
    for d in diagnostics {
        match out.last_mut() {
            Some(last) if last.rule == d.rule && last.span == d.span => {
                for l in d.labels {
                    if !last.labels.contains(&l) {
                        last.labels.push(l);
                    }
                }
                if let (Some(&c), Some(seen)) = (d.calls.first(), calls.last_mut())
                    && !seen.contains(&c)
                {
                    seen.push(c);
                }
            }
            _ => {
                calls.push(d.calls.first().copied().into_iter().collect());
                out.push(d);
            }
        }
    }
    for (d, sites) in out.iter_mut().zip(calls) {
        // One caller is labelled when it is in another file (the reader would not see it).
        let elsewhere = sites.first().is_some_and(|c| c.file != d.span.file);
        if sites.len() < 2 && !elsewhere {
            continue;
        }
        let shown = sites.len().min(CALL_LABELS);
        for (i, &site) in sites.iter().take(shown).enumerate() {
            if d.labels.iter().any(|l| l.span == site) {
                continue;
            }
            let more = sites.len() - shown;
            let message = if i + 1 == shown && more > 0 {
                format!("called from here (and {more} more)")
            } else {
                "called from here".to_string()
            };
            d.labels.push(Label {
                span: site,
                message,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(span: std::ops::Range<usize>, call: Option<usize>, label: usize) -> Diagnostic {
        Diagnostic {
            rule: "lost-update",
            severity: Severity::Error,
            message: "m".into(),
            span: Span::new(0, span),
            note: None,
            labels: vec![Label {
                span: Span::new(0, label..label + 1),
                message: "read here".into(),
            }],
            help: None,
            statement: None,
            calls: call.map(|c| Span::new(1, c..c + 1)).into_iter().collect(),
            subject: None,
        }
    }

    #[test]
    fn repeats_become_one_with_call_sites() {
        let merged = merge_repeats(vec![
            d(0..1, Some(10), 5),
            d(0..1, Some(20), 5),
            d(0..1, Some(30), 6),
            d(0..1, Some(40), 5),
            d(0..1, Some(20), 5),
            d(2..3, None, 5),
        ]);
        assert_eq!(merged.len(), 2);
        let labels: Vec<(usize, &str)> = merged[0]
            .labels
            .iter()
            .map(|l| (l.span.start(), l.message.as_str()))
            .collect();
        assert_eq!(
            labels,
            vec![
                (5, "read here"),
                (6, "read here"),
                (10, "called from here"),
                (20, "called from here"),
                (30, "called from here (and 1 more)"),
            ]
        );
        assert!(merged[1].labels.iter().all(|l| l.message == "read here"));
    }
}
