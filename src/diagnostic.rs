//! What a rule reports: plain data, turned into text, JSON or SARIF by `report`.

use serde::Serialize;

use crate::source::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

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
}

impl Diagnostic {
    pub fn new(rule: &crate::rules::Rule, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            rule: rule.name,
            severity: rule.severity,
            message: message.into(),
            span,
            note: None,
            labels: Vec::new(),
            help: None,
            statement: None,
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
}
