//! `txlint graph`: the lock-order graph as Graphviz DOT or Mermaid, cycles in red.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::model::lockgraph::{self, LockGraph};
use crate::run::Run;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}

/// One arrow per ordered pair of resources: which units take them in that order, and where.
struct Arrow {
    from: usize,
    to: usize,
    sites: Vec<String>,
    cycle: bool,
}

fn arrows(run: &Run, g: &LockGraph) -> Vec<Arrow> {
    let in_cycle: BTreeSet<usize> = g.cycles.iter().flatten().copied().collect();
    let mut by_pair: BTreeMap<(usize, usize), Arrow> = BTreeMap::new();
    for (i, e) in g.edges.iter().enumerate() {
        let at = g.requested(e);
        let file = &run.program.files[at.file];
        let name = g.txs[e.tx].unit.name.as_deref().unwrap_or("script");
        let site = format!("{name} ({}:{})", file.display, file.line(at.start()));
        let a = by_pair.entry((e.from, e.to)).or_insert(Arrow {
            from: e.from,
            to: e.to,
            sites: Vec::new(),
            cycle: false,
        });
        a.cycle |= in_cycle.contains(&i);
        if !a.sites.contains(&site) {
            a.sites.push(site);
        }
    }
    by_pair.into_values().collect()
}

fn label(sites: &[String]) -> String {
    let mut shown: Vec<String> = sites.iter().take(3).cloned().collect();
    if sites.len() > 3 {
        shown.push(format!("and {} more", sites.len() - 3));
    }
    shown.join("\\n").replace('"', "'")
}

pub fn render(run: &Run, format: GraphFormat) -> String {
    let g = lockgraph::build(&run.program);
    let arrows = arrows(run, &g);
    let cyclic: BTreeSet<usize> = arrows
        .iter()
        .filter(|a| a.cycle)
        .flat_map(|a| [a.from, a.to])
        .collect();
    let name = |r: usize| g.resources[r].label().replace('`', "").replace('"', "'");
    let mut out = String::new();
    match format {
        GraphFormat::Dot => {
            out += "digraph locks {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n";
            for r in 0..g.resources.len() {
                let style = if cyclic.contains(&r) {
                    ", color=red, fontcolor=red"
                } else {
                    ""
                };
                let _ = writeln!(out, "  n{r} [label=\"{}\"{style}];", name(r));
            }
            for a in &arrows {
                let style = if a.cycle {
                    ", color=red, fontcolor=red, penwidth=2"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "  n{} -> n{} [label=\"{}\"{style}];",
                    a.from,
                    a.to,
                    label(&a.sites)
                );
            }
            out += "}\n";
        }
        GraphFormat::Mermaid => {
            out += "flowchart LR\n";
            for r in 0..g.resources.len() {
                let _ = writeln!(out, "  n{r}[\"{}\"]", name(r));
            }
            for a in &arrows {
                let _ = writeln!(
                    out,
                    "  n{} -->|\"{}\"| n{}",
                    a.from,
                    label(&a.sites).replace("\\n", "<br/>"),
                    a.to
                );
            }
            for (i, _) in arrows.iter().enumerate().filter(|(_, a)| a.cycle) {
                let _ = writeln!(out, "  linkStyle {i} stroke:red,stroke-width:2px");
            }
            if !cyclic.is_empty() {
                out += "  classDef cycle stroke:red,color:red\n";
                let nodes: Vec<String> = cyclic.iter().map(|r| format!("n{r}")).collect();
                let _ = writeln!(out, "  class {} cycle", nodes.join(","));
            }
        }
    }
    out
}
