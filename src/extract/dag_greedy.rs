//! Greedy extraction by DAG cost, as extraction-gym's faster-greedy-dag.

use super::bottom_up::complete_acyclic;
use super::Extractor;
use crate::egraph::{ClassIdx, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::Result;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Per class, the node whose *set* of needed classes (itself plus the union
/// of its children's sets) has the least total cost, so shared subterms
/// are counted once. Nodes are revisited from a queue ordered by their own
/// cost until no class improves; a node whose children's sets contain its
/// own class is refused (it would close a cycle).
pub struct DagGreedy;

/// The classes a choice needs, each with the cost of its chosen node.
struct CostSet {
    members: Vec<(ClassIdx, f64)>,
    total: f64,
    choice: NodeIdx,
}

impl Extractor for DagGreedy {
    fn name(&self) -> &'static str {
        "dag-greedy"
    }

    fn extract(&self, problem: &Reduced) -> Result<Extraction> {
        let g = &problem.graph;
        let nc = g.num_classes();
        let mut sets: Vec<Option<CostSet>> = (0..nc).map(|_| None).collect();
        let mut queued = vec![false; g.num_nodes()];
        // Min-heap on (own cost, node).
        let mut queue: BinaryHeap<Reverse<(OrdF64, NodeIdx)>> = BinaryHeap::new();
        for n in g.nodes() {
            if g.children(n).is_empty() {
                queue.push(Reverse((OrdF64(g.cost(n)), n)));
                queued[n.index()] = true;
            }
        }
        // Scratch membership stamps for set unions.
        let mut stamp = vec![0u32; nc];
        let mut epoch = 0u32;
        let mut kids: Vec<ClassIdx> = Vec::new();
        while let Some(Reverse((_, n))) = queue.pop() {
            queued[n.index()] = false;
            let c = g.class_of(n);
            let best = sets[c.index()].as_ref().map_or(f64::INFINITY, |s| s.total);
            kids.clear();
            kids.extend_from_slice(g.children(n));
            kids.sort_unstable();
            kids.dedup();
            if kids.contains(&c) {
                continue;
            }
            let candidate = if kids.is_empty() {
                CostSet { members: vec![(c, g.cost(n))], total: g.cost(n), choice: n }
            } else {
                if kids.len() == 1 && g.cost(n) + sets[kids[0].index()].as_ref().expect("ready").total > best {
                    continue;
                }
                epoch += 1;
                let biggest = *kids
                    .iter()
                    .max_by_key(|&&k| sets[k.index()].as_ref().expect("ready").members.len())
                    .expect("non-empty");
                let mut members = sets[biggest.index()].as_ref().expect("ready").members.clone();
                for &(m, _) in &members {
                    stamp[m.index()] = epoch;
                }
                for &k in &kids {
                    if k == biggest {
                        continue;
                    }
                    for &(m, cost) in &sets[k.index()].as_ref().expect("ready").members {
                        if stamp[m.index()] != epoch {
                            stamp[m.index()] = epoch;
                            members.push((m, cost));
                        }
                    }
                }
                if stamp[c.index()] == epoch {
                    continue; // the children already need this class: a cycle
                }
                members.push((c, g.cost(n)));
                let total = members.iter().map(|&(_, cost)| cost).sum();
                CostSet { members, total, choice: n }
            };
            if candidate.total < best {
                sets[c.index()] = Some(candidate);
                for &p in g.parents(c) {
                    if !queued[p.index()] && g.children(p).iter().all(|&k| sets[k.index()].is_some()) {
                        queued[p.index()] = true;
                        queue.push(Reverse((OrdF64(g.cost(p)), p)));
                    }
                }
            }
        }
        // The fixed point's choices can still disagree along shared paths;
        // completing them bottom-up keeps them when valid and repairs
        // anything cyclic.
        let preferred: Vec<Option<NodeIdx>> = sets.iter().map(|s| s.as_ref().map(|s| s.choice)).collect();
        Ok(complete_acyclic(g, &preferred, |n| -g.cost(n)))
    }
}

/// `f64` ordered by `total_cmp`, for heap keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
