//! Bottom-up finalisation: the engine behind tree-cost greedy and behind
//! turning any per-node preference into a valid extraction.
//!
//! A class is finalised with one of its nodes only once every child class
//! of that node is finalised, so the result is acyclic by construction and
//! every class that has an acyclic choice gets one. Among the ready nodes,
//! the one with the largest key is finalised first.

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::{restricted_if_valid, Extraction};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Priority of a ready node: preferred nodes come before all others, then
/// larger scores first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeKey {
    /// Whether this node is its class's preferred choice.
    pub preferred: bool,
    /// Larger is better.
    pub score: f64,
}

struct Entry {
    key: NodeKey,
    value: f64,
    node: NodeIdx,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .preferred
            .cmp(&other.key.preferred)
            .then(self.key.score.total_cmp(&other.key.score))
            // Lower node index wins ties, for determinism.
            .then(other.node.cmp(&self.node))
    }
}

/// Finalises every class that has an acyclic choice. `key(n, values)` is
/// called once when node `n` becomes ready (all its child classes final,
/// their values in `values`) and returns the node's priority and the value
/// its class takes if `n` is chosen. Returns the choices and class values.
pub fn finalise_bottom_up(
    g: &EGraph,
    mut key: impl FnMut(NodeIdx, &[f64]) -> (NodeKey, f64),
) -> (Extraction, Vec<f64>) {
    let nn = g.num_nodes();
    let nc = g.num_classes();
    let mut missing: Vec<u32> = NodeIdx::range(nn).map(|n| distinct_count(g.children(n))).collect();
    let mut values = vec![f64::NAN; nc];
    let mut out = Extraction::empty(nc);
    let mut heap = BinaryHeap::new();
    for n in NodeIdx::range(nn) {
        if missing[n.index()] == 0 {
            let (k, value) = key(n, &values);
            heap.push(Entry { key: k, value, node: n });
        }
    }
    while let Some(Entry { value, node, .. }) = heap.pop() {
        let c = g.class_of(node);
        if out.choices[c.index()].is_some() {
            continue;
        }
        out.choices[c.index()] = Some(node);
        values[c.index()] = value;
        for &p in g.parents(c) {
            missing[p.index()] -= 1;
            if missing[p.index()] == 0 && out.choices[g.class_of(p).index()].is_none() {
                let (k, value) = key(p, &values);
                heap.push(Entry { key: k, value, node: p });
            }
        }
    }
    (out, values)
}

/// Turns a per-class preference into a valid extraction of the classes
/// the roots need: each class gets its preferred node unless that would
/// close a cycle, in which case the best-scoring acyclic alternative is
/// used. When the preferred choices are already a valid extraction from the
/// roots, they are returned unchanged (for the reachable classes).
///
/// `preferred[c]` is the preferred node of class `c` (if any); `score(n)`
/// ranks alternatives (larger is better).
pub fn complete_acyclic(g: &EGraph, preferred: &[Option<NodeIdx>], score: impl Fn(NodeIdx) -> f64) -> Extraction {
    // Fast path with the same result: when the preferred choices reachable
    // from the roots are complete and acyclic, the pass below gives each of
    // those classes its preferred node. (Suppose it first gave one another
    // node. Then no preferred node was ready in the heap, yet the lowest
    // reachable class not finalised had its preferred node ready.) One walk
    // instead of a heap over the whole graph: most moves of the active loop
    // and of the model-guided search are already acyclic.
    if let Some(out) = restricted_if_valid(g, preferred) {
        return out;
    }
    let (all, _) = finalise_bottom_up(g, |n, _| {
        let c = g.class_of(n).index();
        (NodeKey { preferred: preferred[c] == Some(n), score: score(n) }, 0.0)
    });
    all.restricted_to_reachable(g).unwrap_or(all)
}

/// How many distinct classes `kids` holds (a node's child list is short,
/// so a quadratic scan beats sorting a copy).
fn distinct_count(kids: &[ClassIdx]) -> u32 {
    kids.iter().enumerate().filter(|&(i, k)| !kids[..i].contains(k)).count() as u32
}

/// Cycles among the preferred choices reachable from the roots: for each
/// edge back to a class on the current depth-first path, the classes of
/// that cycle in order. Classes without a preference are skipped. At most
/// `limit`.
pub fn choice_cycles(g: &EGraph, preferred: &[Option<NodeIdx>], limit: usize) -> Vec<Vec<ClassIdx>> {
    let mut cycles = Vec::new();
    let _ = crate::extraction::walk_choices(
        g,
        preferred,
        |_, _| Ok(()),
        |cycle| {
            if cycles.len() < limit {
                cycles.push(cycle.to_vec());
            }
            Ok(())
        },
    );
    cycles
}
