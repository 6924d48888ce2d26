//! Shrinking an e-graph before extraction, with a map back to original ids.
//!
//! For a real-cost oracle ([`preprocess_for_oracle`]), first drop *twins*:
//! a node that another node of its class repeats with the same operator,
//! cost and child classes, in another order (the `+(a, b)` and `+(b, a)`
//! that commutativity rules leave in one class). An extraction can always
//! take the first of them instead, at the same DAG and tree cost and with
//! the same child classes, so the learned loop does not spend oracle calls
//! on operand orders: it measures the first order only (for a circuit from
//! `smoothe saturate`, the input's own where the input has that node). A
//! labelled extraction that used a dropped twin maps onto its kept twin.
//! Plain extraction ([`preprocess`]) keeps them: SmoothE's linear results
//! come out slightly better with them, an effect of the optimiser's
//! dynamics, not of the cost.
//!
//! Then, repeated until nothing changes: drop nodes that have their own
//! class as a child; drop nodes that can head no acyclic sub-extraction;
//! drop classes the roots cannot reach; merge a non-root class that has a
//! single node and a single incoming edge into the node holding that edge
//! (adding its cost and splicing in its children). Any extraction of the
//! reduced graph maps back to an extraction of the original with the same
//! DAG cost.

// Loops here walk several parallel per-node arrays by index.
#![allow(clippy::needless_range_loop)]

use crate::egraph::{ClassIdx, EGraph, NodeIdx, NodeSpec};
use crate::extraction::{Extraction, OriginalExtraction};
use crate::merged::MergedParts;
use crate::scc::Sccs;
use anyhow::{bail, Result};
use std::collections::hash_map::{Entry, HashMap};

/// What preprocessing removed, for `smoothe info` and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreprocessStats {
    /// Nodes dropped as twins of an earlier node of their class (same
    /// operator, cost and child classes, in another order).
    pub twin_nodes: usize,
    /// Nodes dropped because they have their own class as a child.
    pub self_loop_nodes: usize,
    /// Nodes dropped because no acyclic sub-extraction starts at them.
    pub underivable_nodes: usize,
    /// Nodes dropped because the roots cannot reach their class.
    pub unreachable_nodes: usize,
    /// Single-node classes merged into their only parent node.
    pub merged_classes: usize,
}

/// A preprocessed e-graph plus everything needed to map results back.
#[derive(Debug, Clone)]
pub struct Reduced {
    /// The reduced graph extractors run on. Node and class names are those
    /// of the original nodes and classes they stand for.
    pub graph: EGraph,
    /// Components of the reduced class graph.
    pub sccs: Sccs,
    /// What was removed.
    pub stats: PreprocessStats,
    /// The original nodes inside each reduced node, as trees.
    pub parts: MergedParts,
    /// For each reduced node, the original (class, node) pairs it stands
    /// for: itself first, then every class merged into it.
    origin: Vec<Vec<(ClassIdx, NodeIdx)>>,
    /// For each original node, the node it stands for: its kept twin, or
    /// itself.
    twin_of: Vec<NodeIdx>,
    num_original_classes: usize,
}

impl Reduced {
    /// The original (class, node) pairs reduced node `n` stands for: the
    /// node itself first, then every class merged into it.
    pub fn origin(&self, n: NodeIdx) -> &[(ClassIdx, NodeIdx)] {
        &self.origin[n.index()]
    }

    /// Maps an extraction of the reduced graph back to the original graph.
    pub fn to_original(&self, reduced: &Extraction) -> OriginalExtraction {
        let mut out = Extraction::empty(self.num_original_classes);
        for n in reduced.choices.iter().flatten() {
            for &(c, orig) in &self.origin[(*n).index()] {
                out.choices[c.index()] = Some(orig);
            }
        }
        OriginalExtraction::of_original(out)
    }

    /// Maps an extraction of the original graph onto the reduced graph; a
    /// dropped twin counts as its kept twin. `None` when it uses a node
    /// that preprocessing removed otherwise.
    pub fn from_original(&self, original: &OriginalExtraction) -> Option<Extraction> {
        let mut out = Extraction::empty(self.graph.num_classes());
        for (n, pairs) in self.graph.nodes().zip(&self.origin) {
            let (c, orig) = pairs[0];
            let chosen = original.choices().get(c.index()).copied().flatten();
            if chosen.map(|m| self.twin_of[m.index()]) == Some(orig) {
                out.choices[self.graph.class_of(n).index()] = Some(n);
            }
        }
        out.is_valid(&self.graph).then_some(out)
    }
}

/// Working copy of a graph during preprocessing: per node its children
/// (classes of the original graph), cost and origin list.
struct Work {
    class: Vec<ClassIdx>,
    children: Vec<Vec<ClassIdx>>,
    cost: Vec<f64>,
    origin: Vec<Vec<(ClassIdx, NodeIdx)>>,
    alive: Vec<bool>,
}

/// Preprocesses `g`, keeping twins. Errors when some root class has no
/// valid extraction.
pub fn preprocess(g: &EGraph) -> Result<Reduced> {
    preprocess_with(g, false)
}

/// Preprocesses `g` for extractions that a real-cost oracle will measure
/// (or a model learned from one will judge): as [`preprocess`], and twins
/// are dropped first (see the module docs). Errors when some root class
/// has no valid extraction.
pub fn preprocess_for_oracle(g: &EGraph) -> Result<Reduced> {
    preprocess_with(g, true)
}

fn preprocess_with(g: &EGraph, drop_twins_first: bool) -> Result<Reduced> {
    let nn = g.num_nodes();
    let mut w = Work {
        class: NodeIdx::range(nn).map(|n| g.class_of(n)).collect(),
        children: NodeIdx::range(nn).map(|n| g.children(n).to_vec()).collect(),
        cost: g.costs().to_vec(),
        origin: NodeIdx::range(nn).map(|n| vec![(g.class_of(n), n)]).collect(),
        alive: vec![true; nn],
    };
    let mut stats = PreprocessStats::default();
    let twin_of = if drop_twins_first { drop_twins(g, &mut w, &mut stats) } else { NodeIdx::range(nn).collect() };
    let mut is_root = vec![false; g.num_classes()];
    for &r in g.roots() {
        is_root[r.index()] = true;
    }
    loop {
        let before = stats.clone();
        prune(g, &mut w, &mut stats)?;
        merge_single_parent_classes(g.num_classes(), &is_root, &mut w, &mut stats);
        if stats == before {
            break;
        }
    }
    // Rebuild a dense graph from the surviving nodes.
    let mut class_map: Vec<Option<ClassIdx>> = vec![None; g.num_classes()];
    let mut class_names = Vec::new();
    for n in 0..nn {
        if w.alive[n] && class_map[w.class[n].index()].is_none() {
            class_map[w.class[n].index()] = Some(ClassIdx::new(class_names.len()));
            class_names.push(g.class_name(w.class[n]).to_string());
        }
    }
    let mut specs = Vec::new();
    let mut origin = Vec::new();
    for n in 0..nn {
        if !w.alive[n] {
            continue;
        }
        specs.push(NodeSpec {
            name: g.node_name(NodeIdx::new(n)).to_string(),
            op: g.op(NodeIdx::new(n)).to_string(),
            cost: w.cost[n],
            class: class_map[w.class[n].index()].expect("a live node's class is kept"),
            children: w.children[n]
                .iter()
                .map(|&c| class_map[c.index()].expect("a live node's children are kept"))
                .collect(),
        });
        origin.push(std::mem::take(&mut w.origin[n]));
    }
    let roots = g.roots().iter().map(|&r| class_map[r.index()].expect("roots are kept")).collect();
    let graph = EGraph::new(class_names, specs, roots)?;
    let sccs = Sccs::new(&graph);
    let parts = MergedParts::new(g, &graph, &origin)?;
    Ok(Reduced { graph, sccs, stats, parts, origin, twin_of, num_original_classes: g.num_classes() })
}

/// Drops every node that repeats an earlier node of its class with the same
/// operator, cost and multiset of child classes; returns, per original
/// node, the node it stands for (the first of its twins, or itself).
fn drop_twins(g: &EGraph, w: &mut Work, stats: &mut PreprocessStats) -> Vec<NodeIdx> {
    let nn = w.class.len();
    let mut twin_of: Vec<NodeIdx> = NodeIdx::range(nn).collect();
    let mut first: HashMap<(ClassIdx, &str, u64, Vec<ClassIdx>), NodeIdx> = HashMap::new();
    for n in 0..nn {
        let mut kids = w.children[n].clone();
        kids.sort_unstable();
        let key = (w.class[n], g.op(NodeIdx::new(n)), w.cost[n].to_bits(), kids);
        match first.entry(key) {
            Entry::Occupied(kept) => {
                twin_of[n] = *kept.get();
                w.alive[n] = false;
                stats.twin_nodes += 1;
            }
            Entry::Vacant(slot) => {
                slot.insert(NodeIdx::new(n));
            }
        }
    }
    twin_of
}

/// Drops self-loop, underivable and unreachable nodes; errors when a root
/// loses all its nodes.
fn prune(g: &EGraph, w: &mut Work, stats: &mut PreprocessStats) -> Result<()> {
    let nn = w.class.len();
    let nc = g.num_classes();
    for n in 0..nn {
        if w.alive[n] && w.children[n].contains(&w.class[n]) {
            w.alive[n] = false;
            stats.self_loop_nodes += 1;
        }
    }
    // Derivable: least fixed point of "every child class has a derivable node".
    let mut parents: Vec<Vec<u32>> = vec![Vec::new(); nc];
    let mut missing = vec![0u32; nn];
    for n in 0..nn {
        if !w.alive[n] {
            continue;
        }
        let mut kids = w.children[n].clone();
        kids.sort_unstable();
        kids.dedup();
        missing[n] = kids.len() as u32;
        for k in kids {
            parents[k.index()].push(n as u32);
        }
    }
    let mut derivable_class = vec![false; nc];
    let mut derivable = vec![false; nn];
    let mut queue: Vec<usize> = (0..nn).filter(|&n| w.alive[n] && missing[n] == 0).collect();
    while let Some(n) = queue.pop() {
        derivable[n] = true;
        let c = w.class[n].index();
        if std::mem::replace(&mut derivable_class[c], true) {
            continue;
        }
        for &p in &parents[c] {
            missing[p as usize] -= 1;
            if missing[p as usize] == 0 {
                queue.push(p as usize);
            }
        }
    }
    for &r in g.roots() {
        if !derivable_class[r.index()] {
            bail!("no valid extraction exists: every choice for root class {:?} leads to a cycle", g.class_name(r));
        }
    }
    for n in 0..nn {
        if w.alive[n] && !derivable[n] {
            w.alive[n] = false;
            stats.underivable_nodes += 1;
        }
    }
    // Reachable from the roots through surviving nodes.
    let mut nodes_of: Vec<Vec<u32>> = vec![Vec::new(); nc];
    for n in 0..nn {
        if w.alive[n] {
            nodes_of[w.class[n].index()].push(n as u32);
        }
    }
    let mut reached = vec![false; nc];
    let mut stack: Vec<ClassIdx> = Vec::new();
    for &r in g.roots() {
        if !std::mem::replace(&mut reached[r.index()], true) {
            stack.push(r);
        }
    }
    while let Some(c) = stack.pop() {
        for &n in &nodes_of[c.index()] {
            for &k in &w.children[n as usize] {
                if !std::mem::replace(&mut reached[k.index()], true) {
                    stack.push(k);
                }
            }
        }
    }
    for n in 0..nn {
        if w.alive[n] && !reached[w.class[n].index()] {
            w.alive[n] = false;
            stats.unreachable_nodes += 1;
        }
    }
    Ok(())
}

/// Merges each non-root class with one node and one incoming edge into the
/// node that holds that edge.
fn merge_single_parent_classes(nc: usize, is_root: &[bool], w: &mut Work, stats: &mut PreprocessStats) {
    let nn = w.class.len();
    let mut node_count = vec![0u32; nc];
    let mut only_node = vec![u32::MAX; nc];
    let mut in_edges = vec![0u32; nc];
    let mut edge_holder = vec![u32::MAX; nc];
    for n in 0..nn {
        if !w.alive[n] {
            continue;
        }
        node_count[w.class[n].index()] += 1;
        only_node[w.class[n].index()] = n as u32;
        for &k in &w.children[n] {
            in_edges[k.index()] += 1;
            edge_holder[k.index()] = n as u32;
        }
    }
    // A node merged away forwards to the node that absorbed it.
    let mut absorbed_into: Vec<u32> = (0..nn as u32).collect();
    fn holder(absorbed_into: &mut [u32], mut n: u32) -> u32 {
        while absorbed_into[n as usize] != n {
            let next = absorbed_into[n as usize];
            absorbed_into[n as usize] = absorbed_into[next as usize];
            n = next;
        }
        n
    }
    for c in 0..nc {
        if is_root[c] || node_count[c] != 1 || in_edges[c] != 1 {
            continue;
        }
        let m = only_node[c] as usize;
        let p = holder(&mut absorbed_into, edge_holder[c]) as usize;
        if p == m {
            continue; // cannot happen without a self-loop; be safe
        }
        let pos = w.children[p].iter().position(|&k| k.index() == c).expect("edge holder has the child");
        let spliced = std::mem::take(&mut w.children[m]);
        w.children[p].splice(pos..pos + 1, spliced);
        w.cost[p] += w.cost[m];
        let moved = std::mem::take(&mut w.origin[m]);
        w.origin[p].extend(moved);
        w.alive[m] = false;
        absorbed_into[m] = p as u32;
        stats.merged_classes += 1;
    }
}
