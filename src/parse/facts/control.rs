//! Transaction control: `BEGIN`/`COMMIT`/`ROLLBACK`/savepoints, isolation levels, `SET`.

use super::*;

pub(super) fn isolation_at(c: &Cursor, i: usize) -> Option<Isolation> {
    if c.is(i, "serializable") {
        Some(Isolation::Serializable)
    } else if c.is(i, "repeatable") {
        Some(Isolation::RepeatableRead)
    } else if c.is(i, "read") {
        Some(Isolation::ReadCommitted)
    } else {
        let t = c.t.get(i)?;
        isolation_from_str(t.text(c.src).trim_matches(['\'', '"']))
    }
}

pub(super) fn isolation_from_str(s: &str) -> Option<Isolation> {
    let s = s.to_ascii_lowercase().replace(['-', '_'], " ");
    match s.trim() {
        "serializable" => Some(Isolation::Serializable),
        "repeatable read" => Some(Isolation::RepeatableRead),
        "read committed" | "read uncommitted" => Some(Isolation::ReadCommitted),
        _ => None,
    }
}

/// `ISOLATION LEVEL x` anywhere in the statement.
pub(super) fn isolation_clause(c: &Cursor) -> Option<Isolation> {
    (0..c.t.len())
        .find(|&i| c.is(i, "isolation") && c.is(i + 1, "level"))
        .and_then(|i| isolation_at(c, i + 2))
}

pub(super) fn set_fact(c: &Cursor) -> Option<SetFact> {
    if !c.is(0, "set") {
        return None;
    }
    let local = c.is(1, "local");
    let at = if local || c.is(1, "session") { 2 } else { 1 };
    Some(SetFact {
        name: c.name(at)?.0,
        local,
    })
}

impl Reader<'_> {
    pub(super) fn tx_control(&self, c: &Cursor) -> Option<TxControl> {
        let word = |i| c.word(i).unwrap_or_default();
        let name_at = |i: usize| c.name(i).map(|(n, _)| n).unwrap_or_default();
        let skip_work = |i: usize| {
            if c.is(i, "work") || c.is(i, "transaction") {
                i + 1
            } else {
                i
            }
        };
        Some(match word(0).as_str() {
            "begin" | "start" => TxControl::Begin {
                isolation: isolation_clause(c),
            },
            "commit" | "end" => TxControl::Commit,
            "rollback" | "abort" => {
                let i = skip_work(1);
                if c.is(i, "to") {
                    let i = if c.is(i + 1, "savepoint") {
                        i + 2
                    } else {
                        i + 1
                    };
                    TxControl::RollbackTo(name_at(i))
                } else {
                    TxControl::Rollback
                }
            }
            "savepoint" => TxControl::Savepoint(name_at(1)),
            "release" => TxControl::Release(name_at(if c.is(1, "savepoint") { 2 } else { 1 })),
            "prepare" => TxControl::PrepareTransaction,
            _ => return None,
        })
    }

    /// `SET TRANSACTION ISOLATION LEVEL`, `SET SESSION CHARACTERISTICS AS TRANSACTION ...`,
    /// MySQL `SET SESSION TRANSACTION ...`, `SET default_transaction_isolation = ...`.
    pub(super) fn set_isolation(&self, c: &Cursor) -> Option<TxControl> {
        if !c.is(0, "set") {
            return None;
        }
        let session_word = c.is(1, "session");
        if (1..5).any(|i| c.is(i, "transaction")) && !c.is(1, "global") {
            let isolation = isolation_clause(c)?;
            return Some(TxControl::SetIsolation {
                isolation,
                session: session_word,
            });
        }
        let at = if session_word || c.is(1, "local") {
            2
        } else {
            1
        };
        let var = c.word(at)?;
        let session = match var.as_str() {
            "default_transaction_isolation" => true,
            "transaction_isolation" | "tx_isolation" => self.dialect == Dialect::Mysql,
            _ => return None,
        };
        let value = if c.punct(at + 1, "=") || c.is(at + 1, "to") {
            at + 2
        } else {
            at + 1
        };
        let isolation = isolation_at(c, value)?;
        Some(TxControl::SetIsolation { isolation, session })
    }
}

#[cfg(test)]
mod tests {
    use super::super::facts_of;
    use crate::model::*;

    #[test]
    fn transaction_control_and_isolation() {
        let tx = |sql: &str| facts_of(sql).0.extra().tx.clone();
        assert!(matches!(
            tx("BEGIN ISOLATION LEVEL SERIALIZABLE"),
            Some(TxControl::Begin {
                isolation: Some(Isolation::Serializable)
            })
        ));
        assert!(matches!(
            tx("START TRANSACTION"),
            Some(TxControl::Begin { isolation: None })
        ));
        assert!(matches!(tx("SAVEPOINT s1"), Some(TxControl::Savepoint(s)) if s == "s1"));
        assert!(matches!(tx("COMMIT"), Some(TxControl::Commit)));
        assert!(tx("SELECT 1").is_none());
    }
}
