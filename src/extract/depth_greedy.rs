//! Least arrival time per class: the exact minimum of the delay.

use super::bottom_up::{finalise_bottom_up, NodeKey};
use super::{Extractor, SmoothE};
use crate::cost::CostModel;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use crate::timing::{OpDelays, TimingGraph};
use anyhow::Result;
use serde_json::{json, Map, Value};

/// Per class, the node of least arrival time (max-plus over the chosen
/// DAG, with per-op delays; unit delays by default). Exact for that cost:
/// a class's least arrival depends only on its own subtree, and a maximum
/// does not care about sharing. Among equally fast nodes the lower index
/// wins, so the DAG cost is not minimised: SmoothE with `--objective
/// dag-cost --constraint delay<=T` does that.
pub struct DepthGreedy {
    /// Per-operator delays.
    pub delays: OpDelays,
}

impl Extractor for DepthGreedy {
    fn name(&self) -> &'static str {
        "depth-greedy"
    }

    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let timing = TimingGraph::new(problem);
        let delay = timing.delay_vector(&self.delays);
        let (all, _) = least_arrival(&timing, &delay);
        let extraction = all.restricted_to_reachable(&problem.graph)?;
        let mut details = Map::new();
        details.insert("delay".into(), json!(timing.arrival(&extraction, &delay)?));
        Ok((extraction, details))
    }
}

/// Per class, the least arrival time over all its acyclic choices under
/// per-op delays `delay`, and an extraction (of every class that has one)
/// attaining it everywhere. Arrival is monotone and never less than a
/// child's, so finalising classes in increasing order (Knuth's
/// generalisation of Dijkstra) is exact, and sharing never matters for a
/// maximum.
pub fn least_arrival(timing: &TimingGraph, delay: &[f64]) -> (Extraction, Vec<f64>) {
    let part_delay = timing.part_delays(delay);
    finalise_bottom_up(timing.graph(), |n, values| {
        let (t, _) = timing.node_arrival(n, &part_delay, |k| values[k.index()]);
        (NodeKey { preferred: true, score: -t }, t)
    })
}

/// SmoothE on an objective that involves arrival time, started from the
/// cheapest by the objective of greedy, dag-greedy and depth-greedy (the
/// last meets any delay bound that any extraction meets).
pub struct TimedSmoothE<'a> {
    /// The optimiser.
    pub smoothe: SmoothE,
    /// The objective (delay, or an objective under bounds).
    pub model: &'a dyn CostModel,
    /// The delays of depth-greedy's start.
    pub delays: OpDelays,
}

impl Extractor for TimedSmoothE<'_> {
    fn name(&self) -> &'static str {
        "smoothe"
    }

    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let fastest = DepthGreedy { delays: self.delays.clone() }.extract(problem)?;
        self.smoothe.optimise_from(problem, self.model, &[fastest])
    }
}
