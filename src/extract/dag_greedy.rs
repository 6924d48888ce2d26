//! Greedy extraction by DAG cost, as extraction-gym's faster-greedy-dag.

use super::bottom_up::complete_acyclic;
use super::Extractor;
use crate::egraph::{ClassIdx, EGraph, NodeIdx};
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

/// The classes a choice needs, as the node chosen for each (its class and
/// cost are the graph's: four bytes a member).
struct CostSet {
    members: Vec<NodeIdx>,
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
        let mut unions = Unions { stamp: vec![0; nc], epoch: 0 };
        let mut kids: Vec<ClassIdx> = Vec::new();
        let nonnegative = g.nodes().all(|n| g.cost(n) >= 0.0);
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
                CostSet { members: vec![n], total: g.cost(n), choice: n }
            } else {
                if kids.len() == 1 && g.cost(n) + sets[kids[0].index()].as_ref().expect("ready").total > best {
                    continue;
                }
                let biggest = *kids
                    .iter()
                    .max_by_key(|&&k| sets[k.index()].as_ref().expect("ready").members.len())
                    .expect("non-empty");
                let Some(total) = unions.total(g, &sets, &kids, biggest, best, nonnegative) else {
                    continue; // no better
                };
                if unions.stamp[c.index()] == unions.epoch {
                    continue; // the children already need this class: a cycle
                }
                let total = total + g.cost(n);
                if total >= best {
                    continue;
                }
                let mut members = unions.members(g, &sets, &kids, biggest);
                members.push(n);
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

/// Scratch membership stamps for unions of the children's sets: a class
/// is in the current union when its stamp is the current epoch.
struct Unions {
    stamp: Vec<u32>,
    epoch: u32,
}

impl Unions {
    /// The total cost of the union of the sets of `kids` (`biggest` the
    /// one with the most members), summed in the order [`Unions::members`]
    /// lists them, so that it is that set's exact total; its members stay
    /// stamped. `None` once a partial sum reaches `best` where every cost
    /// is at least 0 (`nonnegative`: a partial sum then only grows).
    fn total(
        &mut self,
        g: &EGraph,
        sets: &[Option<CostSet>],
        kids: &[ClassIdx],
        biggest: ClassIdx,
        best: f64,
        nonnegative: bool,
    ) -> Option<f64> {
        self.epoch += 1;
        let mut total = 0.0;
        for &n in members_of(sets, biggest) {
            self.stamp[g.class_of(n).index()] = self.epoch;
            total += g.cost(n);
        }
        for &k in kids.iter().filter(|&&k| k != biggest) {
            for &n in members_of(sets, k) {
                let m = g.class_of(n);
                if self.stamp[m.index()] != self.epoch {
                    self.stamp[m.index()] = self.epoch;
                    total += g.cost(n);
                    if nonnegative && total >= best {
                        return None;
                    }
                }
            }
        }
        Some(total)
    }

    /// The union itself: `biggest`'s members, then the other sets' new
    /// ones in the order of `kids`.
    fn members(&mut self, g: &EGraph, sets: &[Option<CostSet>], kids: &[ClassIdx], biggest: ClassIdx) -> Vec<NodeIdx> {
        self.epoch += 1;
        let mut members = members_of(sets, biggest).to_vec();
        for &n in &members {
            self.stamp[g.class_of(n).index()] = self.epoch;
        }
        for &k in kids.iter().filter(|&&k| k != biggest) {
            for &n in members_of(sets, k) {
                let m = g.class_of(n);
                if self.stamp[m.index()] != self.epoch {
                    self.stamp[m.index()] = self.epoch;
                    members.push(n);
                }
            }
        }
        members
    }
}

/// The members of class `k`'s set, which must be ready.
fn members_of(sets: &[Option<CostSet>], k: ClassIdx) -> &[NodeIdx] {
    sets[k.index()].as_ref().expect("ready").members.as_slice()
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
