//! From SQL text to statement facts: splitting, PL/pgSQL bodies, tokens and sqlparser.

pub mod ast;
pub mod changes;
pub mod dynamic;
pub mod facts;
pub mod feed;
pub mod gaps;
pub mod holes;
pub mod lex;
pub mod plpgsql;
pub mod split;
