//! The rule registry: every rule's name, default severity and documentation
//! (`rules/<name>.md`, which is also its test suite), listed in [`ALL`] once. Configuration,
//! diagnostics, suppressions, SARIF and the language server read it; the checks over the model
//! are in `rules` (see `rules::CHECKS`), above it. `read-error`, `syntax-error`,
//! `analysis-limit` and `unused-suppression` are reported by the pipeline itself; they are rules
//! so that they can be documented, configured and suppressed like the others.

use serde::{Deserialize, Serialize};

/// How the connection pool hands out sessions (`pool_mode`, read by `session-lock-on-pool`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolMode {
    /// A client keeps its server session while it holds the connection.
    #[default]
    Session,
    /// PgBouncer transaction pooling: the server session can change after every transaction.
    Transaction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// txlint's own limits (a statement it could not parse): never fails a run by default.
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

pub struct Rule {
    pub name: &'static str,
    pub severity: Severity,
    /// `rules/<name>.md`: first paragraph after the title is the one-line summary.
    pub doc: &'static str,
    /// A check over the model (see `rules::CHECKS`); the others are reported by the pipeline.
    pub core: bool,
}

/// Where txlint's sources and documentation are published (`repository` in Cargo.toml).
pub const HOME: &str = env!("CARGO_PKG_REPOSITORY");

impl Rule {
    /// The rule's page, published with the sources: `rules/<name>.md`.
    pub fn url(&self) -> String {
        format!("{HOME}/blob/main/rules/{}.md", self.name)
    }

    /// The page's text for a viewer outside the repository: code blocks without the marks the
    /// documentation tests read (`sql,expect_diagnostic` is `sql`), relative links absolute.
    pub fn published(&self) -> String {
        let mut out = String::new();
        for line in self.body().lines() {
            match line
                .strip_prefix("```")
                .and_then(|info| info.split_once(','))
            {
                Some((lang, _)) => out += &format!("```{lang}"),
                None => out += &line.replace("](../", &format!("]({HOME}/blob/main/")),
            }
            out.push('\n');
        }
        out
    }

    /// The one-line summary: the first paragraph after the `# name` title.
    pub fn summary(&self) -> String {
        self.doc
            .split("\n\n")
            .map(str::trim)
            .find(|p| !p.is_empty() && !p.starts_with('#'))
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The text of a `## heading` section of the documentation.
    pub fn section(&self, heading: &str) -> Option<&'static str> {
        let start = self.doc.find(&format!("\n## {heading}\n"))? + heading.len() + 5;
        let rest = &self.doc[start..];
        Some(rest[..rest.find("\n## ").unwrap_or(rest.len())].trim())
    }

    /// The documentation without its `# name` title.
    pub fn body(&self) -> &'static str {
        self.doc
            .trim_start()
            .strip_prefix('#')
            .and_then(|d| d.split_once('\n'))
            .map_or(self.doc, |(_, rest)| rest.trim_start())
    }
}

pub const ANALYSIS_LIMIT: Rule = Rule {
    name: "analysis-limit",
    severity: Severity::Info,
    doc: include_str!("../rules/analysis-limit.md"),
    core: false,
};

pub const CHECK_THEN_ACT: Rule = Rule {
    name: "check-then-act",
    severity: Severity::Error,
    doc: include_str!("../rules/check-then-act.md"),
    core: true,
};

pub const LOCK_ORDER_INVERSION: Rule = Rule {
    name: "lock-order-inversion",
    severity: Severity::Error,
    doc: include_str!("../rules/lock-order-inversion.md"),
    core: true,
};

pub const LOST_UPDATE: Rule = Rule {
    name: "lost-update",
    severity: Severity::Error,
    doc: include_str!("../rules/lost-update.md"),
    core: true,
};

pub const READ_ERROR: Rule = Rule {
    name: "read-error",
    severity: Severity::Error,
    doc: include_str!("../rules/read-error.md"),
    core: false,
};

pub const ROW_LOCK_PREDICATE_GAP: Rule = Rule {
    name: "row-lock-predicate-gap",
    severity: Severity::Error,
    doc: include_str!("../rules/row-lock-predicate-gap.md"),
    core: true,
};

pub const SESSION_LOCK_ON_POOL: Rule = Rule {
    name: "session-lock-on-pool",
    severity: Severity::Error,
    doc: include_str!("../rules/session-lock-on-pool.md"),
    core: true,
};

pub const SYNTAX_ERROR: Rule = Rule {
    name: "syntax-error",
    severity: Severity::Info,
    doc: include_str!("../rules/syntax-error.md"),
    core: false,
};

pub const UNIQUE_VIOLATION_UNHANDLED: Rule = Rule {
    name: "unique-violation-unhandled",
    severity: Severity::Warning,
    doc: include_str!("../rules/unique-violation-unhandled.md"),
    core: true,
};

pub const UNUSED_SUPPRESSION: Rule = Rule {
    name: "unused-suppression",
    severity: Severity::Warning,
    doc: include_str!("../rules/unused-suppression.md"),
    core: false,
};

pub const XACT_LOCK_OUTSIDE_TRANSACTION: Rule = Rule {
    name: "xact-lock-outside-transaction",
    severity: Severity::Error,
    doc: include_str!("../rules/xact-lock-outside-transaction.md"),
    core: true,
};

pub const ALL: &[Rule] = &[
    ANALYSIS_LIMIT,
    CHECK_THEN_ACT,
    LOCK_ORDER_INVERSION,
    LOST_UPDATE,
    READ_ERROR,
    ROW_LOCK_PREDICATE_GAP,
    SESSION_LOCK_ON_POOL,
    SYNTAX_ERROR,
    UNIQUE_VIOLATION_UNHANDLED,
    UNUSED_SUPPRESSION,
    XACT_LOCK_OUTSIDE_TRANSACTION,
];

pub fn find(name: &str) -> Option<&'static Rule> {
    ALL.iter().find(|r| r.name == name)
}

/// The rule index `docs/rules.md` (a test keeps the file equal to this).
pub fn index_markdown() -> String {
    let mut s = String::from(
        "# Rules\n\nGenerated by `txlint rules --markdown`; `txlint explain <rule>` prints a rule's page.\n\n| rule | default | summary |\n| --- | --- | --- |\n",
    );
    for r in ALL {
        s += &format!(
            "| [`{}`](../rules/{}.md) | {} | {} |\n",
            r.name,
            r.name,
            r.severity.as_str(),
            r.summary()
        );
    }
    s
}
