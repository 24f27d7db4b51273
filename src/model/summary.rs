//! Summaries of Rust helpers: what a function that other functions call does to the handles it
//! gets. A summary is the function's own walk, its parameters bound to handles by their types
//! (the walk every function gets, see `extract/rust`), kept for each function some caller walks
//! in place. `txlint model` shows them; the rules read the callers' units, where each call of the
//! helper is walked in place with the caller's handles and values.

use super::*;

/// What a helper does, from its own walk.
#[derive(Debug)]
pub struct Summary {
    /// The walk: its sessions, transactions and statements, as if it were called on handles of
    /// the parameters' types.
    pub unit: Unit,
    /// The calls of it that callers' walks followed, in source order.
    pub callers: Vec<Span>,
    pub returns: Returns,
    /// The transactions still open when the helper returns (by the `seq` of their first step):
    /// its caller's, unless the helper ends it, and any it opens and leaves open. The others
    /// ended in the helper, where it says so or where their scope ends (a closure, a drop).
    pub open: Vec<usize>,
}

/// What a helper returns, as far as the database is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Returns {
    /// Nothing read from the database.
    Nothing,
    /// A handle: the caller goes on with it (a transaction the helper opened, a field's pool).
    Handle(Executor),
    /// Values computed from the results of these steps (by [`Step::seq`]).
    Data(Vec<usize>),
}

/// One handle a helper uses, and what it does through it.
#[derive(Debug)]
pub struct HandleUse<'u> {
    /// The session (see [`Unit::sessions`]); `None` for a pool, where each statement has a
    /// connection of its own.
    pub session: Option<usize>,
    /// The handle as the code writes it at its first statement (`&mut **conn`, `&self.pool`).
    pub via: &'u str,
    /// Where the helper takes the session itself (`pool.acquire()`, `pool.begin()`); `None`
    /// when it gets it from its caller.
    pub acquired: Option<Span>,
    pub transactions: Vec<&'u Transaction>,
    /// Locks still held when the helper returns: session advisory locks it does not release,
    /// and the transaction-scoped locks (advisory and row locks) of a transaction it does not
    /// end (its caller's, or one it leaves open).
    pub held: Vec<(Span, String)>,
}

impl Summary {
    /// Per handle (in the order of first use): the transactions the helper runs through it and
    /// the locks it still holds on return.
    pub fn handles(&self) -> Vec<HandleUse<'_>> {
        let mut uses: Vec<HandleUse> = Vec::new();
        for tx in &self.unit.transactions {
            let Some(first) = tx.steps.first() else {
                continue;
            };
            let session = first.session;
            let i = match uses
                .iter()
                .position(|u| session.is_some() && u.session == session)
            {
                Some(i) => i,
                None => {
                    uses.push(HandleUse {
                        session,
                        via: first.host().via.as_deref().unwrap_or(""),
                        acquired: session
                            .and_then(|s| self.unit.sessions.get(s))
                            .and_then(|s| s.acquired),
                        transactions: Vec::new(),
                        held: Vec::new(),
                    });
                    uses.len() - 1
                }
            };
            uses[i].transactions.push(tx);
        }
        for u in &mut uses {
            u.held = held(&u.transactions, |tx| self.left_open(tx));
        }
        uses
    }

    /// The helper's step with this `seq`.
    pub fn step(&self, seq: usize) -> Option<&Step> {
        self.unit
            .transactions
            .iter()
            .flat_map(|t| &t.steps)
            .find(|s| s.seq == seq)
    }

    /// Whether `tx` is still open when the helper returns.
    pub fn left_open(&self, tx: &Transaction) -> bool {
        tx.steps.first().is_some_and(|s| self.open.contains(&s.seq))
    }
}

/// Locks a helper's transactions on one handle still hold when it returns.
fn held(
    transactions: &[&Transaction],
    left_open: impl Fn(&Transaction) -> bool,
) -> Vec<(Span, String)> {
    let mut session: Vec<(Span, &AdvisoryCall)> = Vec::new();
    let mut out = Vec::new();
    for tx in transactions {
        let open = left_open(tx);
        for step in &tx.steps {
            for call in &step.facts.extra().advisory {
                if call.takes_session_lock() {
                    session.push((call.span, call));
                } else if call.takes_xact_lock() && open {
                    out.push((call.span, format!("{}({})", call.function, call.key)));
                }
                session.retain(|(_, lock)| !call.releases(lock));
            }
            if open {
                out.extend(
                    step.facts
                        .row_locks
                        .iter()
                        .map(|l| (l.span, l.clause.clone())),
                );
            }
        }
    }
    out.extend(
        session
            .into_iter()
            .map(|(span, c)| (span, format!("{}({})", c.function, c.key))),
    );
    out.sort_by_key(|(span, _)| (span.file, span.start()));
    out
}
