//! Model-free search with the oracle in the loop: simulated annealing over
//! valid extractions, every step an oracle call (as E-morphic does with its
//! cost model). The strongest baseline a learned model has to beat at
//! equal oracle calls.

use super::labeler::Labeler;
use super::labels::LabelLog;
use crate::egraph::EGraph;
use crate::extract::moves::nudge;
use crate::extract::{DagGreedy, Extractor, Greedy, SmoothE};
use crate::extraction::{Extraction, OriginalExtraction};
use crate::preprocess::Reduced;
use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Settings of [`anneal`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnnealConfig {
    /// Most oracle calls in all, the three starting points included
    /// (labels already in the log are free).
    pub budget: usize,
    /// Most classes one move switches.
    pub moves: usize,
    /// Starting temperature, as a share of the starting real cost.
    pub temperature: f64,
    /// Final temperature, as a share of the starting one (geometric cooling).
    pub final_temperature: f64,
    /// Neighbours labelled together per step (in parallel); the best of
    /// them is the step's proposal.
    pub proposals: usize,
}

impl Default for AnnealConfig {
    fn default() -> Self {
        AnnealConfig { budget: 300, moves: 4, temperature: 0.01, final_temperature: 0.01, proposals: 2 }
    }
}

/// What the search found.
pub struct SearchOutcome {
    /// The extraction with the least real cost.
    pub best: OriginalExtraction,
    /// Its real cost.
    pub best_cost: f64,
    /// Oracle calls made by this run (labels reused from the log excluded).
    pub calls: usize,
    /// Best real cost after each step: (labels asked for so far, best).
    pub trajectory: Vec<(usize, f64)>,
}

/// Simulated annealing from the best of the greedy, dag-greedy and linear
/// SmoothE extractions (labelled first, as `train-cost` does). Each step
/// labels `proposals` distinct neighbours of the current extraction (1 to
/// `moves` classes switched) and moves to the best of them by the
/// Metropolis rule.
pub fn anneal(
    problem: &Reduced,
    labeler: &Labeler,
    log: &mut LabelLog,
    config: &AnnealConfig,
    smoothe: &SmoothE,
) -> Result<SearchOutcome> {
    let g: &EGraph = &problem.graph;
    let original = labeler.graph;
    let oracle_id = labeler.oracle.identity();
    let fingerprint = original.fingerprint();
    let logged = log.calls(&fingerprint, &oracle_id).total;
    let mut budget = config.budget.saturating_sub(logged);
    let mut rng = StdRng::seed_from_u64(smoothe.seed);
    let starts = [Greedy.extract(problem)?, DagGreedy.extract(problem)?, smoothe.extract(problem)?];
    let mut asked = 0;
    let mut calls = 0;
    let label = |log: &mut LabelLog,
                 items: &[Extraction],
                 budget: &mut usize,
                 asked: &mut usize,
                 calls: &mut usize|
     -> Result<Vec<Option<f64>>> {
        let originals: Vec<OriginalExtraction> = items.iter().map(|e| problem.to_original(e)).collect();
        let (costs, stats) = labeler.label(log, &originals, budget)?;
        *asked += items.len();
        *calls += stats.calls;
        Ok(costs)
    };
    let costs = label(log, &starts, &mut budget, &mut asked, &mut calls)?;
    let Some((mut current, mut current_cost)) =
        starts.iter().zip(&costs).filter_map(|(e, c)| c.map(|c| (e.clone(), c))).min_by(|a, b| a.1.total_cmp(&b.1))
    else {
        bail!("the oracle failed on every starting extraction; see the label log for the errors");
    };
    let mut best = (current.clone(), current_cost);
    let mut trajectory = vec![(starts.len(), best.1)];
    let mut seen: HashSet<Extraction> = starts.iter().cloned().collect();
    let steps = (budget / config.proposals.max(1)).max(1) as f64;
    let t0 = config.temperature.max(0.0) * current_cost.abs().max(1e-9);
    let cooling = config.final_temperature.clamp(1e-12, 1.0).powf(1.0 / steps);
    let mut temperature = t0;
    let mut stale = 0;
    while budget > 0 && stale < 100 {
        let mut proposals = Vec::new();
        for _ in 0..50 * config.proposals.max(1) {
            if proposals.len() == config.proposals.max(1) {
                break;
            }
            let e =
                nudge(g, &current, rng.random_range(1..=config.moves.max(1)), &mut rng).restricted_to_reachable(g)?;
            if seen.insert(e.clone()) {
                proposals.push(e);
            }
        }
        if proposals.is_empty() {
            stale += 1;
            continue;
        }
        let costs = label(log, &proposals, &mut budget, &mut asked, &mut calls)?;
        let Some((e, c)) =
            proposals.into_iter().zip(costs).filter_map(|(e, c)| c.map(|c| (e, c))).min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            continue;
        };
        let accept =
            c <= current_cost || (temperature > 0.0 && rng.random::<f64>() < (-(c - current_cost) / temperature).exp());
        if accept {
            current = e.clone();
            current_cost = c;
        }
        if c < best.1 {
            best = (e, c);
        }
        trajectory.push((asked, best.1));
        temperature *= cooling;
    }
    let best_original = problem.to_original(&best.0).restricted_to_reachable(original)?;
    Ok(SearchOutcome { best: best_original, best_cost: best.1, calls, trajectory })
}
