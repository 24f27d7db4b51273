//! txlint: a static linter for concurrency bugs in SQL.
//!
//! The pipeline (`pipeline.rs`, whose entry points this file re-exports), as `txlint check`
//! runs it:
//! files -> front-ends (`extract`: split, parse, facts, PL/pgSQL bodies) -> the transaction
//! model (`model`) -> rules (`rules`, reading only the model) -> suppressions -> diagnostics,
//! which `report` prints as text, JSON or SARIF.

pub mod baseline;
pub mod config;
pub mod diagnostic;
pub mod discover;
pub mod extract;
pub mod io;
pub mod lsp;
pub mod model;
pub mod parse;
mod pipeline;
pub mod registry;
pub mod report;
pub mod rules;
pub mod run;
pub mod shown;
pub mod source;
pub mod suppress;
pub mod witness;
pub mod workspace;

pub use io::{MAX_FILE_SIZE, STACK, display_path};
pub use pipeline::{
    check_discovered, check_document, check_files, check_in_context, check_paths, check_source,
};
pub use run::Run;
