//! The lock-order graph over every transaction of the run: an edge A -> B means some
//! transaction holds A when it requests B. A cycle between transactions that can run at the
//! same time is a possible deadlock.
//!
//! Nodes are tables (rows written, locked with `FOR ...` or `LOCK TABLE`: a table's rows and the
//! table itself are one node, since which rows two transactions touch is rarely known) and
//! advisory keys (equal constants or equal key expressions). Built once per run, in time linear
//! in acquisitions plus edges.

use std::collections::{HashMap, HashSet};

use super::*;
use crate::source::Span;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Table(String),
    Advisory(String),
}

impl Resource {
    pub fn label(&self) -> String {
        match self {
            Resource::Table(t) => format!("`{t}`"),
            Resource::Advisory(k) => format!("advisory key `{k}`"),
        }
    }
}

/// One lock a step takes.
#[derive(Clone, Debug)]
pub struct Acquisition<'p> {
    pub resource: usize,
    pub span: Span,
    pub step: &'p Step,
}

/// A transaction of the run with its acquisitions in order.
#[derive(Debug)]
pub struct TxLocks<'p> {
    pub unit: &'p Unit,
    pub tx: &'p Transaction,
    pub acquisitions: Vec<Acquisition<'p>>,
    /// Distinct resources in the order the transaction first took them.
    pub held: Vec<usize>,
}

/// Kept small: a dense transaction has one edge per pair of the resources it holds.
#[derive(Clone, Debug)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// Index into [`LockGraph::txs`].
    pub tx: usize,
    /// The acquisitions (indices into the transaction's) where `from` was taken, and where
    /// `to` is requested while holding it; see [`LockGraph::held`] and [`LockGraph::requested`].
    held: u32,
    requested: u32,
    /// How many resources the transaction already held before taking `from` (a prefix of its
    /// [`TxLocks::held`]; see [`LockGraph::gates`]).
    gates: u32,
}

#[derive(Debug, Default)]
pub struct LockGraph<'p> {
    pub resources: Vec<Resource>,
    pub txs: Vec<TxLocks<'p>>,
    pub edges: Vec<Edge>,
    /// Each cycle as edge indices, in order around the cycle.
    pub cycles: Vec<Vec<usize>>,
    /// Transactions (where they begin) that held more resources than [`HELD`], or where the
    /// graph reached [`EDGES`]: later acquisitions there add no edges.
    pub limited: Vec<Span>,
}

impl LockGraph<'_> {
    /// Resources the edge's transaction already held before taking `from`: two transactions that
    /// both hold one of them first cannot interleave here.
    pub fn gates(&self, e: &Edge) -> &[usize] {
        &self.txs[e.tx].held[..e.gates as usize]
    }

    /// Where the edge's `from` was acquired.
    pub fn held(&self, e: &Edge) -> Span {
        self.txs[e.tx].acquisitions[e.held as usize].span
    }

    /// Where the edge's `to` is requested while `from` is held.
    pub fn requested(&self, e: &Edge) -> Span {
        self.txs[e.tx].acquisitions[e.requested as usize].span
    }

    /// The statements of the edge's two acquisitions, with their unit: `from`'s, then `to`'s.
    pub fn steps(&self, e: &Edge) -> [(&Unit, &Step); 2] {
        let t = &self.txs[e.tx];
        let at = |i: u32| (t.unit, t.acquisitions[i as usize].step);
        [at(e.held), at(e.requested)]
    }
}

/// Distinct resources one transaction can hold in the graph.
pub const HELD: usize = 256;
/// Edges of the whole graph: 40 bytes each, 10 MB in all.
pub const EDGES: usize = 250_000;

/// The `$n` of an advisory key replaced by the host value bound to it (as messages show it).
fn key_text(key: &str, step: &Step) -> String {
    let mut k = key.to_string();
    let mut inputs: Vec<&Input> = step.host().inputs.iter().collect();
    inputs.sort_by_key(|i| std::cmp::Reverse(i.param));
    for i in inputs {
        k = k.replace(&format!("${}", i.param), &i.shown());
    }
    k
}

/// The locks a statement takes, in statement order, each with whether taking it can wait: rows
/// claimed with `SKIP LOCKED` are held until commit (another transaction can wait for them)
/// but the claim itself never waits.
pub fn acquisitions(step: &Step) -> Vec<(Resource, Span, bool)> {
    let f = &step.facts;
    let mut out = Vec::new();
    for a in &f.extra().advisory {
        if matches!(a.op, AdvisoryOp::Lock | AdvisoryOp::TryLock) {
            out.push((Resource::Advisory(key_text(&a.key, step)), a.span, true));
        }
    }
    for l in &f.row_locks {
        let waits = l.wait != LockWait::SkipLocked;
        if l.of.is_empty() {
            out.extend(
                f.reads
                    .iter()
                    .map(|t| (Resource::Table(t.name.to_string()), l.span, waits)),
            );
        } else {
            out.extend(l.of.iter().filter_map(|alias| {
                f.reads
                    .iter()
                    .find(|t| t.name == *alias)
                    .map(|t| (Resource::Table(t.name.to_string()), l.span, waits))
            }));
        }
    }
    let writes = matches!(
        f.kind,
        StmtKind::Update | StmtKind::Delete | StmtKind::Merge
    ) || f.upsert;
    // `WITH c AS (SELECT ... FOR UPDATE SKIP LOCKED) UPDATE t ... FROM c`: the write touches
    // only rows the statement already locked without waiting.
    let claimed = |table: &str| {
        f.row_locks.iter().any(|l| {
            l.wait != LockWait::Block
                && (l.of.iter().any(|o| o == table)
                    || (l.of.is_empty() && f.reads.iter().any(|t| t.name == table)))
        })
    };
    if writes {
        out.extend(
            f.writes
                .iter()
                .filter(|t| !claimed(&t.name))
                .map(|t| (Resource::Table(t.name.to_string()), t.span, true)),
        );
    }
    if let Some(l) = &f.extra().table_lock {
        out.extend(
            l.tables
                .iter()
                .map(|t| (Resource::Table(t.name.to_string()), t.span, true)),
        );
    }
    out.retain(|(r, ..)| !matches!(r, Resource::Table(t) if is_hole(t)));
    out
}

pub fn build(program: &Program) -> LockGraph<'_> {
    let mut g = LockGraph::default();
    let mut ids: HashMap<Resource, usize> = HashMap::new();
    for unit in program.units.iter().filter(|u| !u.runs_once()) {
        let created = flow::Created::of(unit);
        for (ti, tx) in unit.transactions.iter().enumerate() {
            if tx.scope == Scope::Unknown {
                continue;
            }
            let t = g.txs.len();
            let mut locks = TxLocks {
                unit,
                tx,
                acquisitions: Vec::new(),
                held: Vec::new(),
            };
            // Resources held, with the acquisition that first took each and its statement.
            let mut held: Vec<(usize, u32, &Step)> = Vec::new();
            for step in &tx.steps {
                // Rows keyed by a row this transaction created, or in a table it created: no
                // other one can reach them.
                let private = |r: &Resource| {
                    matches!(r, Resource::Table(t) if flow::fresh_rows(program.schema(step.span.file), &tx.steps, step, t)
                        || created.private(ti, step.seq, t))
                };
                for (resource, span, waits) in
                    acquisitions(step).into_iter().filter(|a| !private(&a.0))
                {
                    let next = ids.len();
                    let r = *ids.entry(resource.clone()).or_insert(next);
                    if r == g.resources.len() {
                        g.resources.push(resource);
                    }
                    // At most `HELD` resources times the statements of a unit: fits.
                    let here = locks.acquisitions.len() as u32;
                    locks.acquisitions.push(Acquisition {
                        resource: r,
                        span,
                        step,
                    });
                    if held.iter().any(|(h, ..)| *h == r) {
                        continue;
                    }
                    if held.len() >= HELD || g.edges.len() >= EDGES {
                        let at = tx.begin().unwrap_or(tx.steps[0].span);
                        if g.limited.last() != Some(&at) {
                            g.limited.push(at);
                        }
                        continue;
                    }
                    // `r` is new to this transaction, so each pair is one edge; a claim that
                    // skips locked rows waits for nothing it holds, so no edge leads to it.
                    for (i, &(h, at, by)) in held.iter().enumerate().filter(|_| waits) {
                        // Alternative arms (`IF ... ELSE`) never hold one while taking the
                        // other, nor does an arm that returns hold its locks past its end.
                        // The parts of one statement (its data-modifying `WITH` queries, its
                        // main query) run in no order PostgreSQL promises: they order nothing.
                        if unit.exclusive(&by.branch, &step.branch)
                            || unit.leaves_between(by, step)
                            || std::ptr::eq(by, step)
                        {
                            continue;
                        }
                        g.edges.push(Edge {
                            from: h,
                            to: r,
                            tx: t,
                            held: at,
                            requested: here,
                            gates: i as u32,
                        });
                    }
                    held.push((r, here, step));
                }
            }
            // One lock orders nothing: most autocommit statements need no entry.
            if locks.acquisitions.len() > 1 {
                locks.held = held.iter().map(|(r, ..)| *r).collect();
                g.txs.push(locks);
            }
        }
    }
    g.cycles = cycles(&g);
    g
}

/// Cycles between different transactions that do not share a gate: every pair of opposite
/// edges, then one cycle for each larger strongly connected group without such a pair.
fn cycles(g: &LockGraph) -> Vec<Vec<usize>> {
    // Edge indices grouped by (from, to).
    let mut order: Vec<u32> = (0..g.edges.len() as u32).collect();
    let pair = |i: &u32| (g.edges[*i as usize].from, g.edges[*i as usize].to);
    order.sort_by_key(pair);
    let group = |key: (usize, usize)| {
        let lo = order.partition_point(|i| pair(i) < key);
        let hi = order.partition_point(|i| pair(i) <= key);
        &order[lo..hi]
    };
    let mut out = Vec::new();
    let mut in_pair = vec![false; g.resources.len()];
    // Two transactions that can deadlock over several pairs of resources are one race: the
    // pair requested earliest in the files is reported (where the cycle's finding goes).
    let mut by_txs: HashMap<(usize, usize), usize> = HashMap::new();
    let first = |c: &[usize]| {
        c.iter()
            .map(|&e| g.requested(&g.edges[e]))
            .min()
            .map(|s| (s.file, s.start()))
    };
    for run in order.chunk_by(|x, y| pair(x) == pair(y)) {
        let (a, b) = pair(&run[0]);
        if a >= b {
            continue;
        }
        let back = group((b, a));
        let found = run.iter().find_map(|&x| {
            back.iter()
                .find(|&&y| {
                    let (ex, ey) = (&g.edges[x as usize], &g.edges[y as usize]);
                    ex.tx != ey.tx && disjoint(g.gates(ex), g.gates(ey))
                })
                .map(|&y| vec![x as usize, y as usize])
        });
        if let Some(c) = found {
            in_pair[a] = true;
            in_pair[b] = true;
            let (tx, ty) = (g.edges[c[0]].tx, g.edges[c[1]].tx);
            match by_txs.entry((tx.min(ty), tx.max(ty))) {
                std::collections::hash_map::Entry::Occupied(o) => {
                    let kept: &mut Vec<usize> = &mut out[*o.get()];
                    if first(&c) < first(kept) {
                        *kept = c;
                    }
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(out.len());
                    out.push(c);
                }
            }
        }
    }
    for component in strongly_connected(g) {
        if component.len() < 3 || component.iter().any(|&n| in_pair[n]) {
            continue;
        }
        if let Some(c) = cycle_in(g, &component) {
            out.push(c);
        }
    }
    out
}

fn disjoint(a: &[usize], b: &[usize]) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if small.len() <= 8 {
        return !large.iter().any(|x| small.contains(x));
    }
    let small: HashSet<usize> = small.iter().copied().collect();
    !large.iter().any(|x| small.contains(x))
}

/// Tarjan's algorithm, iteratively: components with more than one node.
fn strongly_connected(g: &LockGraph) -> Vec<Vec<usize>> {
    let n = g.resources.len();
    let mut adj = vec![Vec::new(); n];
    for e in &g.edges {
        adj[e.from].push(e.to);
    }
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if *child == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = adj[v].get(*child) {
                *child += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}

/// A simple cycle through the component's first node, as edge indices.
fn cycle_in(g: &LockGraph, component: &[usize]) -> Option<Vec<usize>> {
    let start = component[0];
    let inside: std::collections::HashSet<usize> = component.iter().copied().collect();
    let mut out: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, e) in g.edges.iter().enumerate() {
        if inside.contains(&e.from) && inside.contains(&e.to) {
            out.entry(e.from).or_default().push(i);
        }
    }
    let mut prev: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for (i, e) in out.get(&v).into_iter().flatten().map(|&i| (i, &g.edges[i])) {
            if e.to == start {
                let mut path = vec![i];
                let mut at = v;
                while at != start {
                    let j = prev[&at];
                    path.push(j);
                    at = g.edges[j].from;
                }
                path.reverse();
                return Some(path);
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = prev.entry(e.to) {
                slot.insert(i);
                queue.push_back(e.to);
            }
        }
    }
    None
}
