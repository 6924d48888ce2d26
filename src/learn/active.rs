//! `smoothe train-cost`: sample, label, train, then rounds of optimising
//! against the model and labelling what it finds.

use super::features::{FeatureKind, Featurizer};
use super::labeler::Labeler;
use super::labels::LabelLog;
use super::model::{train, Mlp, MlpCost, TrainConfig, TrainReport};
use super::sample::{crossover, nudge, perturb};
use crate::egraph::EGraph;
use crate::extract::{random_extraction, DagGreedy, Extractor, Greedy, SmoothE};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::{bail, Result};
use candle_core::Device;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Best labelled extractions that candidates are drawn around.
const PARENTS: usize = 8;
/// Most classes one small move switches.
const MAX_MOVES: usize = 8;

/// Settings of the learned-cost loop; `configs/train-cost.toml` holds the
/// defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainCostConfig {
    /// Most oracle calls in all (labels already in the log are free).
    pub budget: usize,
    /// Extractions sampled and labelled before the first model.
    pub initial: usize,
    /// Share of uniform random samples among the initial ones (the rest
    /// perturb the greedy, dag-greedy and linear-SmoothE results).
    pub uniform_fraction: f64,
    /// Active rounds after the first model.
    pub rounds: usize,
    /// Extractions labelled per round by the model's choice: up to a
    /// quarter are SmoothE's best distinct decodes against the model, the
    /// rest the best predicted of the screened candidates.
    pub per_round: usize,
    /// Candidates the model screens per round: small moves, perturbations
    /// and crossovers of the best labelled extractions, and uniform random
    /// ones, in equal shares.
    pub screen: usize,
    /// Screened candidates labelled per round at random, whatever the model
    /// predicts (keeps an unbiased view of the pool in the data).
    pub explore: usize,
    /// Features the model reads.
    pub features: FeatureKind,
    /// Weight of the linear cost added to the model as SmoothE's objective.
    pub linear_weight: f64,
    /// SmoothE steps per optimisation run (deterministic for a seed).
    pub smoothe_steps: usize,
    /// SmoothE wall-clock limit per run in seconds (0: none).
    pub smoothe_time_limit: f64,
    /// Model training settings.
    pub train: TrainConfig,
}

impl Default for TrainCostConfig {
    fn default() -> Self {
        TrainCostConfig {
            budget: 300,
            initial: 60,
            uniform_fraction: 0.2,
            rounds: 8,
            per_round: 20,
            screen: 2000,
            explore: 10,
            features: FeatureKind::Selection,
            linear_weight: 0.0,
            smoothe_steps: 600,
            smoothe_time_limit: 0.0,
            train: TrainConfig::default(),
        }
    }
}

/// One row of the per-round summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundSummary {
    /// 0 for the initial model, then 1, 2, ...
    pub round: usize,
    /// Successful labels the model was trained on (all splits).
    pub labels: usize,
    /// Labels (oracle calls, failed ones included) this e-graph and oracle
    /// have in the log so far, over all runs.
    pub oracle_calls: usize,
    /// Held-out fit of the model trained this round.
    pub report: TrainReport,
    /// Least real cost labelled so far.
    pub best_real_cost: f64,
    /// Real cost of the (tree-cost) greedy extraction.
    pub greedy_real_cost: Option<f64>,
    /// Real cost of the dag-greedy extraction.
    pub dag_greedy_real_cost: Option<f64>,
    /// Real cost of the linear-cost SmoothE extraction.
    pub linear_smoothe_real_cost: Option<f64>,
}

/// What the loop produced.
pub struct TrainCostOutcome {
    /// The final model.
    pub model: Mlp,
    /// Per-round summary.
    pub rounds: Vec<RoundSummary>,
    /// The labelled extraction with the least real cost (original ids).
    pub best: Extraction,
    /// Its real cost.
    pub best_cost: f64,
}

/// Runs the loop. `smoothe` carries the device, seed and optimiser
/// settings used for the linear and model-driven SmoothE runs.
#[allow(clippy::too_many_arguments)]
pub fn train_cost(
    original: &EGraph,
    problem: &Reduced,
    labeler: &Labeler,
    log: &mut LabelLog,
    config: &TrainCostConfig,
    smoothe: &SmoothE,
    device: &Device,
) -> Result<TrainCostOutcome> {
    let g = &problem.graph;
    let oracle_id = labeler.oracle.identity();
    let fingerprint = original.fingerprint();
    // The budget caps the labels this e-graph and oracle have in the log
    // over all runs, so a resumed run finishes the same job instead of
    // starting a new one; asking again for a logged label is free.
    let logged = log.labels().iter().filter(|l| l.egraph == fingerprint && l.oracle == oracle_id).count();
    let mut budget = config.budget.saturating_sub(logged);
    let mut rng = StdRng::seed_from_u64(smoothe.seed);
    let run_smoothe = |seed: u64| -> SmoothE {
        let mut s = SmoothE { config: smoothe.config.clone(), seed, device: smoothe.device.clone(), progress: false };
        s.config.steps = config.smoothe_steps;
        s.config.time_limit = config.smoothe_time_limit;
        s
    };
    // Baselines, labelled first.
    let greedy = Greedy.extract(problem)?;
    let dag = DagGreedy.extract(problem)?;
    let linear = run_smoothe(smoothe.seed).extract(problem)?;
    let bases = [greedy, dag, linear];
    let base_originals: Vec<Extraction> = bases.iter().map(|e| problem.to_original(e)).collect();
    let (base_costs, _) = labeler.label(log, &base_originals, &mut budget)?;
    // Initial samples: distinct, mostly perturbations of the baselines
    // (the real cost often favours another of them than the node costs do).
    let mut seen: HashSet<Extraction> = bases.iter().cloned().collect();
    let mut samples = Vec::new();
    let want = config.initial.saturating_sub(bases.len());
    let mut attempts = 0;
    while samples.len() < want && attempts < 50 * want.max(1) {
        attempts += 1;
        let e = if rng.random_bool(config.uniform_fraction.clamp(0.0, 1.0)) {
            random_extraction(g, &mut rng)
        } else {
            let base = &bases[rng.random_range(0..bases.len())];
            let rate = rng.random_range(0.01..0.2);
            perturb(g, base, rate, &mut rng)
        };
        if seen.insert(e.clone()) {
            samples.push(e);
        }
    }
    let originals: Vec<Extraction> = samples.iter().map(|e| problem.to_original(e)).collect();
    labeler.label(log, &originals, &mut budget)?;
    let mut rounds = Vec::new();
    // The labelled extractions (log order), read again after each labelling.
    let labelled = |log: &LabelLog| dataset(original, problem, log, &fingerprint, &oracle_id);
    let mut data = labelled(log)?;
    let mut model = fit(original, problem, &data, config, &fingerprint, &oracle_id, smoothe.seed, device)?;
    let summary = |round: usize, model: &Mlp, log: &LabelLog| -> Result<RoundSummary> {
        let best = log.costs_for(&fingerprint, &oracle_id).iter().filter_map(|l| l.cost).fold(f64::INFINITY, f64::min);
        Ok(RoundSummary {
            round,
            labels: model.meta.report.train + model.meta.report.holdout,
            oracle_calls: log.labels().iter().filter(|l| l.egraph == fingerprint && l.oracle == oracle_id).count(),
            report: model.meta.report.clone(),
            best_real_cost: best,
            greedy_real_cost: base_costs[0],
            dag_greedy_real_cost: base_costs[1],
            linear_smoothe_real_cost: base_costs[2],
        })
    };
    rounds.push(summary(0, &model, log)?);
    for round in 1..=config.rounds {
        if budget == 0 {
            break;
        }
        let cost = MlpCost::new(model.clone(), problem, original, config.linear_weight, device)?;
        let mut ranked: Vec<&(Extraction, f64)> = data.iter().collect();
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        seen.extend(data.iter().map(|(e, _)| e.clone()));
        let parents: Vec<Extraction> = ranked.into_iter().take(PARENTS).map(|(e, _)| e.clone()).collect();
        if parents.is_empty() {
            bail!("no labelled extraction of this e-graph to start a round from; see the label log for errors");
        }
        let (_, pool, _) =
            run_smoothe(smoothe.seed + round as u64).optimise_pool(problem, &cost, config.per_round, &parents[..1])?;
        let mut batch: Vec<Extraction> = Vec::new();
        for (e, _) in pool {
            let e = e.restricted_to_reachable(g)?;
            if batch.len() < config.per_round / 4 && seen.insert(e.clone()) {
                batch.push(e);
            }
        }
        // The model screens a mix of new candidates; a few of them are also
        // labelled unscreened, so the data keep an unbiased view.
        let mut candidates = screening_pool(g, &parents, config.screen, &seen, &mut rng);
        let predicted = cost.costs_of(&candidates)?;
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]));
        let picked = config.per_round.saturating_sub(batch.len()).min(order.len());
        order[picked..].shuffle(&mut rng);
        for &i in order.iter().take(picked + config.explore) {
            batch.push(std::mem::replace(&mut candidates[i], Extraction::empty(0)));
        }
        for e in &batch {
            seen.insert(e.clone());
        }
        let originals: Vec<Extraction> = batch.iter().map(|e| problem.to_original(e)).collect();
        labeler.label(log, &originals, &mut budget)?;
        data = labelled(log)?;
        model = fit(original, problem, &data, config, &fingerprint, &oracle_id, smoothe.seed + round as u64, device)?;
        rounds.push(summary(round, &model, log)?);
    }
    let Some((best, _)) = data.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else {
        bail!("no oracle call succeeded; see the label log for the errors");
    };
    let best = problem.to_original(best).restricted_to_reachable(original)?;
    let best_cost = rounds.last().map_or(f64::INFINITY, |r| r.best_real_cost);
    Ok(TrainCostOutcome { model, rounds, best, best_cost })
}

/// `size` distinct candidates not in `seen`: in equal shares, small moves
/// (1 to 8 classes switched) and perturbations (1-20% of classes) of the
/// `parents` (the best labelled, best first), crossovers of two parents,
/// and uniform random extractions.
fn screening_pool(
    g: &EGraph,
    parents: &[Extraction],
    size: usize,
    seen: &HashSet<Extraction>,
    rng: &mut StdRng,
) -> Vec<Extraction> {
    let mut fresh: HashSet<Extraction> = HashSet::new();
    let mut out = Vec::new();
    for i in 0..size * 2 {
        if out.len() == size {
            break;
        }
        let parent = &parents[rng.random_range(0..parents.len())];
        let e = match i % 4 {
            0 => nudge(g, parent, rng.random_range(1..=MAX_MOVES), rng),
            1 => perturb(g, parent, rng.random_range(0.01..0.2), rng),
            2 => crossover(g, parent, &parents[rng.random_range(0..parents.len())], rng),
            _ => random_extraction(g, rng),
        };
        if !seen.contains(&e) && fresh.insert(e.clone()) {
            out.push(e);
        }
    }
    out
}

/// The labelled extractions of this graph and oracle, as reduced-graph
/// extractions with their costs (labels using removed nodes are skipped).
pub fn dataset(
    original: &EGraph,
    problem: &Reduced,
    log: &LabelLog,
    fingerprint: &str,
    oracle_id: &str,
) -> Result<Vec<(Extraction, f64)>> {
    let mut out = Vec::new();
    for label in log.costs_for(fingerprint, oracle_id) {
        let ex = Extraction::from_json(original, &serde_json::Value::Object(label.choices.clone()))?;
        if let (Some(reduced), Some(cost)) = (problem.from_original(&ex), label.cost) {
            out.push((reduced, cost));
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn fit(
    original: &EGraph,
    problem: &Reduced,
    data: &[(Extraction, f64)],
    config: &TrainCostConfig,
    fingerprint: &str,
    oracle_id: &str,
    seed: u64,
    device: &Device,
) -> Result<Mlp> {
    let featurizer = Featurizer::new(config.features, problem, original, None);
    let x: Vec<Vec<f32>> = data.iter().map(|(e, _)| featurizer.of_extraction(e)).collect();
    let y: Vec<f64> = data.iter().map(|(_, c)| *c).collect();
    let (mut model, _) = train(&x, &y, featurizer.layout.clone(), &config.train, seed, device)?;
    model.meta.egraph_fingerprint = fingerprint.to_string();
    model.meta.oracle = oracle_id.to_string();
    Ok(model)
}
