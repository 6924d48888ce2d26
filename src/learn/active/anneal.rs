//! Search with the oracle in the loop: simulated annealing over valid
//! extractions, every step an oracle call (as E-morphic does with its cost
//! model). Without a model, the strongest baseline a learned model has to
//! beat at equal oracle calls; with one screening each step's moves, the
//! clean test of what the model adds to it.

use crate::egraph::EGraph;
use crate::extract::moves::nudge;
use crate::extract::{as_extracted, DagGreedy, DepthGreedy, Extractor, Greedy};
use crate::extraction::{Extraction, OriginalExtraction};
use crate::learn::active::config::linear_baseline;
use crate::learn::active::goal::{Goal, MeasuredBound};
use crate::learn::model::dataset::{dataset, Labelled};
use crate::learn::model::features::{FeatureKind, Featurizer};
use crate::learn::model::fit::TrainConfig;
use crate::learn::model::objective::LearnedCost;
use crate::learn::model::train::train_on_labels;
use crate::learn::model::trust::Conservatism;
use crate::learn::oracle::labeler::Labeler;
use crate::learn::oracle::labels::LabelLog;
use crate::preprocess::Reduced;
use crate::timing::OpDelays;
use anyhow::{bail, Result};
use candle_core::Device;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// A Metropolis chain over valid extractions with geometric cooling: where
/// an annealing search stands.
struct Chain {
    /// The current extraction.
    current: Extraction,
    /// Its real cost.
    current_cost: f64,
    temperature: f64,
    cooling: f64,
    moves: usize,
}

impl Chain {
    /// A chain at `start` (of real cost `cost`) that cools from
    /// `config.temperature` to `config.final_temperature` of that cost over
    /// `steps` steps.
    fn new(start: Extraction, cost: f64, config: &AnnealConfig, steps: usize) -> Self {
        let temperature = config.temperature.max(0.0) * cost.abs().max(1e-9);
        let cooling = config.final_temperature.clamp(1e-12, 1.0).powf(1.0 / steps.max(1) as f64);
        Chain { current: start, current_cost: cost, temperature, cooling, moves: config.moves.max(1) }
    }

    /// Up to `n` distinct neighbours of the current extraction (1 to
    /// `moves` classes switched) that are not in `seen`.
    fn neighbours(
        &self,
        g: &EGraph,
        n: usize,
        seen: &HashSet<Extraction>,
        rng: &mut StdRng,
    ) -> Result<Vec<Extraction>> {
        let mut drawn: HashSet<Extraction> = HashSet::new();
        let mut out = Vec::new();
        for _ in 0..50 * n {
            if out.len() == n {
                break;
            }
            let e = nudge(g, &self.current, rng.random_range(1..=self.moves), rng).restricted_to_reachable(g)?;
            if !seen.contains(&e) && drawn.insert(e.clone()) {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Moves to `e` (of real cost `cost`) by the Metropolis rule, then
    /// cools.
    fn observe(&mut self, e: Extraction, cost: f64, rng: &mut StdRng) {
        let t = self.temperature;
        let accept =
            cost <= self.current_cost || (t > 0.0 && rng.random::<f64>() < (-(cost - self.current_cost) / t).exp());
        if accept {
            self.current = e;
            self.current_cost = cost;
        }
        self.temperature *= self.cooling;
    }
}

/// The `k` of `candidates` with the least lower confidence bound
/// (`mean - beta * std`, plus the charge for leaving the training box) by
/// `model`, best first.
fn screen(model: &LearnedCost, candidates: Vec<Extraction>, k: usize, beta: f64) -> Result<Vec<Extraction>> {
    let preds = model.predict(&candidates)?;
    let rank: Vec<f64> = preds.iter().map(|p| model.lower_bound(p, beta)).collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| rank[a].total_cmp(&rank[b]));
    order.truncate(k);
    let mut slots: Vec<Option<Extraction>> = candidates.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// The screening model of a model-screened search: an ensemble fitted by
/// `config`, through `featurizer`, on this design's labels so far (`None`
/// below [`MIN_SCREEN_LABELS`]).
fn fit_screen(
    problem: &Reduced,
    original: &EGraph,
    featurizer: &Featurizer,
    data: &[Labelled],
    config: &TrainConfig,
    seed: u64,
    device: &Device,
) -> Result<Option<LearnedCost>> {
    if data.len() < MIN_SCREEN_LABELS {
        return Ok(None);
    }
    let ensemble = train_on_labels(featurizer, data, config, seed, device)?;
    Ok(Some(LearnedCost::new(ensemble, problem, original, Conservatism::ACTIVE)?))
}

/// Labels before the first screening model.
pub const MIN_SCREEN_LABELS: usize = 20;

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
    /// With a model (> 0): neighbours drawn per step, of which the model,
    /// refitted on the labels so far, picks the `proposals` to label by
    /// its lower confidence bound. 0: no model, every proposal unscreened.
    pub screen: usize,
    /// Labels between refits of the screening model.
    pub refit_every: usize,
}

impl Default for AnnealConfig {
    fn default() -> Self {
        AnnealConfig {
            budget: 300,
            moves: 4,
            temperature: 0.01,
            final_temperature: 0.01,
            proposals: 2,
            screen: 0,
            refit_every: 30,
        }
    }
}

/// What the search found.
pub struct SearchOutcome {
    /// The extraction with the least real cost.
    pub best: OriginalExtraction,
    /// Its score: its real cost, or under a [`Goal`] with bounds its
    /// [`Goal::score`].
    pub best_cost: f64,
    /// Every metric the oracle measured on it.
    pub measured: std::collections::BTreeMap<String, f64>,
    /// How it stands against the goal's bounds.
    pub constraints: Vec<MeasuredBound>,
    /// Oracle calls made by this run (labels reused from the log excluded).
    pub calls: usize,
    /// Best real cost after each step: (labels asked for so far, best).
    pub trajectory: Vec<(usize, f64)>,
}

/// Simulated annealing from the best of the greedy, dag-greedy and linear
/// SmoothE extractions (labelled first, as `train-cost` does), or from the
/// cheapest extraction already labelled in the log when that is cheaper (a
/// search resumed, or continuing from `train-cost`'s labels). Each step
/// labels `proposals` distinct neighbours of the current extraction (1 to
/// `moves` classes switched) and moves to the best of them by the
/// Metropolis rule. With `screen` > 0, once the log holds
/// [`MIN_SCREEN_LABELS`] labels of the design, an ensemble fitted on them
/// (refitted every `refit_every` labels) chooses each step's `proposals`
/// among `screen` neighbours, by the lower confidence bound; the chain,
/// its moves and its acceptance stay those of plain annealing, so the
/// difference measures what the model adds. `seed` draws the moves, the
/// acceptances and the linear start (made as [`linear_baseline`] makes the
/// loop's); `device` holds the start's and the screening models' tensors.
///
/// Every cost is `goal`'s [`Goal::score`] of the label. With bounds, the
/// least-depth extraction (depth-greedy with unit delays) is a fourth
/// start, and screening is refused (its model learns one metric).
pub fn anneal(
    problem: &Reduced,
    labeler: &Labeler,
    log: &mut LabelLog,
    config: &AnnealConfig,
    goal: &Goal,
    seed: u64,
    device: &Device,
) -> Result<SearchOutcome> {
    let bounded = !goal.constraints.is_empty() || goal.objective.is_some();
    if bounded && config.screen > 0 {
        bail!("a screened search learns one metric; it takes no --objective or --constraint");
    }
    let primary = labeler.oracle.primary();
    let score = |l: &crate::learn::oracle::labels::Label| goal.score(l, primary);
    let g: &EGraph = &problem.graph;
    let original = labeler.graph;
    let oracle_id = labeler.oracle.identity();
    let fingerprint = original.fingerprint();
    let logged = log.calls(&fingerprint, &oracle_id).total;
    let mut budget = config.budget.saturating_sub(logged);
    let mut rng = StdRng::seed_from_u64(seed);
    let starts = search_starts(problem, original, goal, seed, device)?;
    let mut asked = 0;
    let mut calls = 0;
    let label = |log: &mut LabelLog,
                 items: &[Extraction],
                 budget: &mut usize,
                 asked: &mut usize,
                 calls: &mut usize|
     -> Result<Vec<Option<f64>>> {
        let originals: Vec<OriginalExtraction> = items.iter().map(|e| problem.to_original(e)).collect();
        let (costs, stats) = labeler.label_scored(log, &originals, budget, &score)?;
        *asked += items.len();
        *calls += stats.calls;
        Ok(costs)
    };
    let costs = label(log, &starts, &mut budget, &mut asked, &mut calls)?;
    // Every labelled extraction of the design, an earlier run's
    // (`train-cost`'s or another search's) too: the chain starts at the
    // cheapest start, or at a logged one that is cheaper still, and never
    // proposes a labelled one again.
    let mut labelled = Vec::new();
    for (label, cost) in log.scored_for(&fingerprint, &oracle_id, score) {
        labelled.extend(problem.from_original(&label.to_extraction(original)?).map(|e| (e, cost)));
    }
    let Some((current, current_cost)) = cheapest(&starts, &costs, &labelled) else {
        bail!("the oracle failed on every starting extraction; see the label log for the errors");
    };
    let mut best = (current.clone(), current_cost);
    let mut trajectory = vec![(starts.len(), best.1)];
    let mut seen: HashSet<Extraction> = starts.iter().cloned().chain(labelled.into_iter().map(|(e, _)| e)).collect();
    let mut chain = Chain::new(current, current_cost, config, budget / config.proposals.max(1));
    let mut stale = 0;
    // The design's feature layout, built once for every refit.
    let featurizer = (config.screen > 0).then(|| Featurizer::fresh(FeatureKind::Structure, problem, original));
    let mut model: Option<LearnedCost> = None;
    let mut fitted_at = 0;
    while budget > 0 && stale < 100 {
        let refit = model.is_none() || asked >= fitted_at + config.refit_every.max(1);
        if let (Some(featurizer), true) = (&featurizer, refit) {
            // The loop's defaults; the starts always train.
            let train = TrainConfig::default();
            let data = dataset(original, problem, log, &fingerprint, labeler.oracle, train.test_fraction, &starts)?;
            model = fit_screen(problem, original, featurizer, &data, &train, seed + asked as u64, device)?;
            fitted_at = asked;
        }
        let proposals = match &model {
            Some(m) => {
                let pool = chain.neighbours(g, config.screen.max(config.proposals), &seen, &mut rng)?;
                screen(m, pool, config.proposals.max(1), 1.0)?
            }
            None => chain.neighbours(g, config.proposals.max(1), &seen, &mut rng)?,
        };
        seen.extend(proposals.iter().cloned());
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
        if c < best.1 {
            best = (e.clone(), c);
        }
        chain.observe(e, c, &mut rng);
        trajectory.push((asked, best.1));
    }
    let best_original = problem.to_original(&best.0).restricted_to_reachable(original)?;
    let label = log.get(&labeler.key(&best_original, &oracle_id)?);
    let measured = label.map(|l| l.measured()).unwrap_or_default();
    let constraints = label.map(|l| goal.report(l)).unwrap_or_default();
    Ok(SearchOutcome { best: best_original, best_cost: best.1, measured, constraints, calls, trajectory })
}

/// The chain's starting extractions: greedy, dag-greedy and the linear
/// start (as [`linear_baseline`] makes it), and under bounds also the
/// least-depth extraction.
fn search_starts(
    problem: &Reduced,
    original: &EGraph,
    goal: &Goal,
    seed: u64,
    device: &Device,
) -> Result<Vec<Extraction>> {
    let depth = DepthGreedy { delays: OpDelays::unit() };
    let mut extractors: Vec<&dyn Extractor> = vec![&Greedy, &DagGreedy];
    if !goal.constraints.is_empty() {
        extractors.push(&depth);
    }
    let mut starts = as_extracted(original, problem, &extractors)?;
    starts.insert(2, linear_baseline(original, problem, seed, device)?);
    Ok(starts)
}

/// The cheapest of the labelled `starts` (their `costs`, `None` where the
/// call failed) and the design's other `labelled` extractions.
fn cheapest(starts: &[Extraction], costs: &[Option<f64>], labelled: &[(Extraction, f64)]) -> Option<(Extraction, f64)> {
    starts
        .iter()
        .zip(costs)
        .filter_map(|(e, c)| c.map(|c| (e, c)))
        .chain(labelled.iter().map(|(e, c)| (e, *c)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(e, c)| (e.clone(), c))
}
