//! Greedy extraction by tree cost, as egg's `Extractor` does.

use super::bottom_up::{finalise_bottom_up, NodeKey};
use super::Extractor;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::Result;

/// Per class, the node minimising its own cost plus its children's best
/// tree costs. Classes are finalised in increasing order of cost (Knuth's
/// generalisation of Dijkstra), which reaches the same fixed point as
/// egg's iteration for non-negative costs, is acyclic by construction, and
/// still terminates with negative costs.
pub struct Greedy;

impl Extractor for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn extract(&self, problem: &Reduced) -> Result<Extraction> {
        let g = &problem.graph;
        let (all, _) = finalise_bottom_up(g, |n, values| {
            let tree = g.cost(n) + g.children(n).iter().map(|&k| values[k.index()]).sum::<f64>();
            (NodeKey { preferred: true, score: -tree }, tree)
        });
        all.restricted_to_reachable(g)
    }
}
