//! `smoothe train-cost`: sample, label, train an ensemble, then rounds in
//! which the model picks what to label next by an acquisition rule, inside
//! a trust region around the best labelled extractions.

use super::acquisition::{expected_improvement, Acquisition};
use super::dataset::{dataset, Labelled};
use super::features::{FeatureKind, Featurizer};
use super::front;
use super::labeler::Labeler;
use super::labels::LabelLog;
use super::measured::{self, MeasuredDesign};
use super::metrics::TrainReport;
use super::network::{Ensemble, OptimumError};
use super::objective::{Conservatism, LearnedCost, Prediction};
use super::reference::Reference;
use super::selection_gp::SelectionGp;
use super::train::{fine_tune, train_on_labels, TrainConfig};
use crate::cost::CostModel;
use crate::egraph::EGraph;
use crate::extract::moves::{broad_sample, screening_pool};
use crate::extract::{guided_search, linear_start, DagGreedy, Extractor, Greedy, GuidedSearch, SmoothE, SmoothEConfig};
use crate::extraction::{Extraction, OriginalExtraction};
use crate::preprocess::Reduced;
use crate::progress::quiet;
use anyhow::{bail, Result};
use candle_core::Device;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Best labelled extractions that candidates are drawn around.
const PARENTS: usize = 8;
/// Bounds of the trust-region radius (classes switched by a small move).
const RADIUS_BOUNDS: (usize, usize) = (1, 64);

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
    /// Extractions labelled per round by the model's choice: the model's
    /// own optimum (SmoothE against the conservative objective, from the
    /// best labelled extraction), up to a quarter more of SmoothE's best
    /// distinct decodes, `search_picks` from the model-guided search, and
    /// the rest by the acquisition rule from the screened candidates. A
    /// round labels one extraction per feature row: a candidate whose
    /// features equal a labelled extraction's or another pick's is skipped.
    /// A round with fewer calls left than `per_round + explore` keeps the
    /// same proportions.
    pub per_round: usize,
    /// Extractions labelled per round from a model-guided evolutionary
    /// search ([`guided_search`]) started at the best labelled ones: the
    /// model's optima among discrete moves, which gradient descent cannot
    /// reach (0: none).
    pub search_picks: usize,
    /// Candidates the model screens per round: small moves (up to the
    /// trust-region radius), perturbations and crossovers of the best
    /// labelled extractions, and uniform random ones, in equal shares.
    pub screen: usize,
    /// Screened candidates labelled per round at random, whatever the model
    /// predicts (keeps an unbiased view of the pool in the data).
    pub explore: usize,
    /// How screened candidates are ranked (default: the selection
    /// process, which ended lower than the ensemble's `lcb` more often
    /// than not).
    pub acquisition: Acquisition,
    /// `beta` of the lower confidence bound.
    pub beta: f64,
    /// Starting trust-region radius: most classes a small move switches.
    /// Doubles after a round that improves the best real cost, halves
    /// after one that does not.
    pub radius: usize,
    /// Features the model reads.
    pub features: FeatureKind,
    /// How conservative SmoothE's objective is in the loop.
    pub conservatism: Conservatism,
    /// Weight of the linear cost added to the model as SmoothE's objective.
    pub linear_weight: f64,
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
            per_round: 25,
            search_picks: 6,
            screen: 2000,
            explore: 5,
            acquisition: Acquisition::SelectionGp,
            beta: 1.0,
            radius: 8,
            features: FeatureKind::Structure,
            conservatism: Conservatism::default(),
            linear_weight: 0.0,
            train: TrainConfig::default(),
        }
    }
}

/// SmoothE's settings inside the loop unless set otherwise: 600 steps and
/// no wall-clock limit, so a run is the same for a seed on any machine.
pub fn loop_smoothe() -> SmoothEConfig {
    SmoothEConfig { steps: 600, time_limit: 0.0, ..SmoothEConfig::default() }
}

/// The linear-SmoothE baseline the loop (and `smoothe search`) labels, an
/// extraction of `problem` (preprocessed from `original`): the start
/// `extract --model` runs at its defaults ([`linear_start`] with
/// [`SmoothEConfig::default`], `seed` and `device`), so that a
/// frozen model finds that extraction measured, whatever settings the
/// loop's own SmoothE runs use. Here the time limit does not bind at all:
/// the baseline is the same for a seed however loaded the machine. The
/// 600-step run on the oracle's graph that the loop labelled before
/// measured worse than `extract --method smoothe` in 28 of 54 runs over
/// three oracles.
pub fn linear_baseline(original: &EGraph, problem: &Reduced, seed: u64, device: &Device) -> Result<Extraction> {
    let config = SmoothEConfig { time_limit: 0.0, ..SmoothEConfig::default() };
    linear_start(original, problem, &SmoothE { config, seed, device: device.clone(), progress: quiet() })
}

/// The model's own optimum in a round: what it predicted, what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptimumCheck {
    /// The model's prediction for it.
    pub predicted: Prediction,
    /// Its real cost (`None` when the call failed or the budget ran out).
    pub real: Option<f64>,
}

/// Why a round labelled an extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PickSource {
    /// The model's own optimum (SmoothE against the model).
    Optimum,
    /// Another of SmoothE's best distinct decodes.
    Decode,
    /// A survivor of the model-guided search.
    Search,
    /// Ranked first in the screened pool by the acquisition rule.
    Acquisition,
    /// Drawn at random from the rest of the same screened pool (the
    /// round's own control for what the ranking adds).
    Explore,
}

/// One extraction a round labelled: where it came from, what the model
/// predicted for it before it was labelled, and what the oracle measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundPick {
    /// Why it was labelled.
    pub source: PickSource,
    /// The model's prediction, before the label.
    pub predicted: Prediction,
    /// Its real cost (`None` when the call failed or the budget ran out).
    pub real: Option<f64>,
}

/// One row of the per-round summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundSummary {
    /// 0 for the initial model, then 1, 2, ...
    pub round: usize,
    /// Successful labels the model saw (training and test splits).
    pub labels: usize,
    /// Labels (oracle calls, failed ones included) this e-graph and oracle
    /// have in the log so far, over all runs.
    pub oracle_calls: usize,
    /// Fit of the model trained at the end of this round.
    pub report: TrainReport,
    /// Least real cost labelled so far.
    pub best_real_cost: f64,
    /// The previous model's optimum this round, predicted and measured.
    pub optimum: Option<OptimumCheck>,
    /// Trust-region radius used this round.
    pub radius: usize,
    /// Real cost of the (tree-cost) greedy extraction.
    pub greedy_real_cost: Option<f64>,
    /// Real cost of the dag-greedy extraction.
    pub dag_greedy_real_cost: Option<f64>,
    /// Real cost of the linear-cost SmoothE extraction.
    pub linear_smoothe_real_cost: Option<f64>,
    /// What this round labelled, in order, each with the previous model's
    /// prediction: whether the model's picks beat the random ones from the
    /// same pool shows as the loop runs (empty for round 0).
    #[serde(default)]
    pub picks: Vec<RoundPick>,
    /// Wall-clock seconds spent fitting this round's model (0 when the
    /// round kept the previous one).
    #[serde(default)]
    pub fit_seconds: f64,
}

/// The feature rows a round's labels and picks already have. Extractions
/// with equal rows are the same point to the model (it cannot rank them
/// apart), and most such twins measure alike, so a round labels one row once:
/// its picks and its screened pool skip rows the data or the batch hold.
struct Novelty<'a> {
    featurizer: &'a Featurizer,
    rows: HashSet<Vec<u64>>,
}

impl<'a> Novelty<'a> {
    /// The rows of the labelled data.
    fn of(featurizer: &'a Featurizer, data: &[Labelled]) -> Result<Self> {
        let mut novelty = Novelty { featurizer, rows: HashSet::new() };
        for l in data {
            novelty.admit(&l.extraction)?;
        }
        Ok(novelty)
    }

    /// `e`'s row, as bits (rows are compared exactly).
    fn key(&self, e: &Extraction) -> Result<Vec<u64>> {
        Ok(self.featurizer.of_extraction(e)?.into_iter().map(f64::to_bits).collect())
    }

    /// Records `e`'s row; whether it was new.
    fn admit(&mut self, e: &Extraction) -> Result<bool> {
        let key = self.key(e)?;
        Ok(self.rows.insert(key))
    }

    /// Takes `e` as a pick when it is neither in `seen` nor a twin of a
    /// row held (then records it in both); its row is computed only when
    /// it is unseen.
    fn take(&mut self, seen: &mut HashSet<Extraction>, e: &Extraction) -> Result<bool> {
        if seen.contains(e) || !self.admit(e)? {
            return Ok(false);
        }
        seen.insert(e.clone());
        Ok(true)
    }

    /// The candidates whose rows are new, one per row, in order; their rows
    /// are not recorded (a candidate is only a pick once it is chosen).
    fn only_new(&self, candidates: Vec<Extraction>) -> Result<Vec<Extraction>> {
        let mut fresh = HashSet::new();
        let mut out = Vec::with_capacity(candidates.len());
        for e in candidates {
            let key = self.key(&e)?;
            if !self.rows.contains(&key) && fresh.insert(key) {
                out.push(e);
            }
        }
        Ok(out)
    }
}

/// The most a pick of the model's own (its optimum, SmoothE's other
/// decodes, the guided search's survivors) may be predicted to cost for a
/// round to label it, when the loop adapts a library model (`adapting`) that
/// has not yet been fitted to any of this design's labels (`model` kept the
/// library model's weights: fewer labels than validation folds need): the
/// incumbent's real cost less the library model's transfer margin (see
/// [`super::reference::transfer_margin`]) in units of the design's
/// dag-greedy label, `reference_cost`. Such a model's optimum on a design
/// it never saw is chosen because it scores low there, so its error leans
/// the cheap way by about that margin, the bar `extract --model` sets an
/// optimum it cannot measure. Without this bar such picks measured above
/// the baselines and never improved the incumbent, while the screened
/// pool's picks gave every gain, so their calls go to the pool. Infinite (no bar) otherwise: a model
/// trained on this design, or one fine-tuned on its labels, is checked by
/// them, and a model without a margin (one not calibrated over designs) or
/// a design whose dag-greedy call failed has no bar to set.
fn prior_bar(adapting: bool, model: &Ensemble, incumbent: f64, reference_cost: Option<f64>) -> f64 {
    match (adapting, model.meta.report.epochs == 0.0, model.meta.transfer_margin, reference_cost) {
        (true, true, Some(margin), Some(reference)) if incumbent.is_finite() => incumbent - margin * reference,
        _ => f64::INFINITY,
    }
}

/// Extractions to sample broadly before the first model, `budget` calls
/// being left after the `bases` baselines: the configured initial number
/// less the baselines or, when the loop adapts a library model
/// (`adapting`), at most half the calls left. Adapting, the rest go to the
/// rounds, so the first model-guided round reads a model already fitted
/// to this design's labels (with none but the baselines, too few for
/// validation folds, its first round read the library model's weights
/// alone, whose picks on a new design lean cheap by its transfer margin,
/// [`prior_bar`]). The broad samples are what a model from scratch labels
/// all its calls on; without any, an adapted loop cannot leave the three
/// baselines' neighbourhood where it holds no better extraction.
fn initial_samples(config: &TrainCostConfig, adapting: bool, budget: usize, bases: usize) -> usize {
    let configured = config.initial.saturating_sub(bases);
    if adapting {
        configured.min(budget / 2)
    } else {
        configured
    }
}

/// How one round spends its calls: the configured `per_round` picks,
/// `search_picks` of them from the guided search and `explore` random
/// ones, or, when fewer calls are left than the round would label, the
/// same proportions of those left (at least one pick), so a short last
/// round keeps its mix instead of losing its random and
/// acquisition picks to the budget's cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RoundShare {
    per_round: usize,
    search_picks: usize,
    explore: usize,
}

impl RoundShare {
    fn of(config: &TrainCostConfig, budget: usize) -> Self {
        let full = config.per_round + config.explore;
        if budget >= full || full == 0 {
            return RoundShare {
                per_round: config.per_round,
                search_picks: config.search_picks,
                explore: config.explore,
            };
        }
        let scaled = |n: usize| (n as f64 * budget as f64 / full as f64).round() as usize;
        let per_round = scaled(config.per_round).clamp(budget.min(1), budget);
        RoundShare {
            per_round,
            search_picks: scaled(config.search_picks).min(per_round.saturating_sub(1)),
            explore: budget - per_round,
        }
    }
}

/// What the loop produced.
pub struct TrainCostOutcome {
    /// The final model.
    pub model: Ensemble,
    /// Per-round summary.
    pub rounds: Vec<RoundSummary>,
    /// The labelled extraction with the least real cost.
    pub best: OriginalExtraction,
    /// Its real cost.
    pub best_cost: f64,
}

/// Runs the loop. `smoothe` carries the device and seed of every SmoothE
/// run and the settings of the model-driven ones (the loop's defaults are
/// [`loop_smoothe`]); the linear baseline is [`linear_baseline`].
///
/// With `init` (a relative model, such as one trained on other designs,
/// see [`super::reference`]), the loop adapts it instead of starting from
/// nothing: at most half the calls left after the baselines go to broad
/// initial samples, and every model is `init` fine-tuned on this design's
/// labels, relative to its dag-greedy extraction.
#[allow(clippy::too_many_arguments)]
pub fn train_cost(
    original: &EGraph,
    problem: &Reduced,
    labeler: &Labeler,
    log: &mut LabelLog,
    config: &TrainCostConfig,
    smoothe: &SmoothE,
    init: Option<&Ensemble>,
    device: &Device,
) -> Result<TrainCostOutcome> {
    if let Some(m) = init {
        if m.meta.relative.is_none() {
            bail!(
                "the initial model was trained on one design in absolute units and cannot adapt to another; \
                 train it on several designs (train-cost A.json B.json ...) to get a model that transfers"
            );
        }
        // Refuses, naming them, operators the model has never seen.
        LearnedCost::new(m.clone(), problem, original, config.conservatism, 0.0, device)?;
    }
    let g = &problem.graph;
    let oracle_id = labeler.oracle.identity();
    let fingerprint = original.fingerprint();
    // The budget caps the labels this e-graph and oracle have in the log
    // over all runs, so a resumed run finishes the same job instead of
    // starting a new one; asking again for a logged label is free.
    let calls = |log: &LabelLog| log.calls(&fingerprint, &oracle_id).total;
    let mut budget = config.budget.saturating_sub(calls(log));
    let mut rng = StdRng::seed_from_u64(smoothe.seed);
    let run_smoothe = |seed: u64| -> SmoothE {
        SmoothE { config: smoothe.config.clone(), seed, device: smoothe.device.clone(), progress: quiet() }
    };
    // Baselines, labelled first: the greedy ones at once, so the oracle
    // is at work (and a broken one found) before linear SmoothE's start,
    // which takes tens of seconds, is made.
    let greedy = Greedy.extract(problem)?;
    let dag = DagGreedy.extract(problem)?;
    let to_original =
        |es: &[Extraction]| -> Vec<OriginalExtraction> { es.iter().map(|e| problem.to_original(e)).collect() };
    let (mut base_costs, _) = labeler.label(log, &to_original(&[greedy.clone(), dag.clone()]), &mut budget)?;
    // An oracle that fails on both is broken (a missing tool, a bad path);
    // every further call would fail too, each up to its timeout.
    if base_costs.iter().all(Option::is_none) {
        if let Some(why) = log.calls(&fingerprint, &oracle_id).last_failure.and_then(|l| l.error.as_deref()) {
            bail!(
                "the oracle failed on the greedy and dag-greedy extractions alike; stopping (the last failure: {why})"
            );
        }
    }
    let linear = linear_baseline(original, problem, smoothe.seed, &smoothe.device)?;
    base_costs.extend(labeler.label(log, &to_original(std::slice::from_ref(&linear)), &mut budget)?.0);
    let bases = [greedy, dag, linear];
    // Initial samples: distinct, mostly perturbations of the baselines
    // (the real cost often favours another of them than the node costs do).
    let mut seen: HashSet<Extraction> = bases.iter().cloned().collect();
    let mut samples = Vec::new();
    let want = initial_samples(config, init.is_some(), budget, bases.len());
    let mut attempts = 0;
    while samples.len() < want && attempts < 50 * want.max(1) {
        attempts += 1;
        let e = broad_sample(g, &bases, config.uniform_fraction, &mut rng);
        if seen.insert(e.clone()) {
            samples.push(e);
        }
    }
    labeler.label(log, &to_original(&samples), &mut budget)?;
    let mut rounds = Vec::new();
    let labelled = |log: &LabelLog| {
        dataset(original, problem, log, &fingerprint, labeler.oracle, config.train.test_fraction, &bases)
    };
    let mut data = labelled(log)?;
    // The layout every fit of this design reads, built once: the design's
    // own vocabulary, or the initial model's (with the design's reference
    // extraction, which relative features are measured from).
    let featurizer = match init {
        None => Featurizer::fresh(config.features, problem, original),
        Some(m) => Featurizer::new(m.meta.features.kind, problem, original, &m.meta.features.names),
    };
    let reference = init.map(|_| Reference::of(problem, &featurizer)).transpose()?;
    let refit = |data: &[Labelled], seed: u64| -> Result<Ensemble> {
        let mut model = match (init, &reference) {
            (Some(init), Some(reference)) => {
                let Some(reference_cost) = base_costs[1] else {
                    bail!("the oracle call on the dag-greedy extraction failed; adapting a model needs its cost");
                };
                let d = reference.relative_data(&featurizer, data, reference_cost)?;
                let mut model = fine_tune(init, &d.rows, &d.targets, &d.test, &config.train, seed, device)?;
                let frame = model.meta.relative.get_or_insert_with(Default::default);
                frame.record(&fingerprint, reference_cost, reference.nodes);
                if !model.meta.egraphs.contains(&fingerprint) {
                    model.meta.egraphs.push(fingerprint.clone());
                }
                model
            }
            _ => {
                let mut model = train_on_labels(&featurizer, data, &config.train, seed, device)?;
                model.meta.egraphs = vec![fingerprint.clone()];
                model
            }
        };
        model.meta.oracle = oracle_id.clone();
        model.meta.metric = labeler.oracle.primary().map(String::from);
        measured::record(&mut model.meta.measured, MeasuredDesign::of(&fingerprint, &problem.graph, data)?);
        Ok(model)
    };
    let fit_started = std::time::Instant::now();
    let mut model = refit(&data, smoothe.seed).map_err(|e| {
        // Too few labels to train is most often an oracle that fails.
        let calls = log.calls(&fingerprint, &oracle_id);
        match calls.last_failure {
            Some(last) => e.context(format!(
                "{} of the {} oracle calls on this design failed (the last: {})",
                calls.failed,
                calls.total,
                last.error.as_deref().unwrap_or("no reason recorded")
            )),
            None => e,
        }
    })?;
    // With a delay metric beside the one the ensemble learns, rounds
    // explore the trade-off between them (see [`front`]).
    let mut front = front::Front::of(&labeler.oracle.metrics, problem);
    let mut radius = config.radius.clamp(RADIUS_BOUNDS.0, RADIUS_BOUNDS.1);
    let best_of = |data: &[Labelled]| data.iter().map(|l| l.cost).fold(f64::INFINITY, f64::min);
    let summary =
        |round: usize, model: &Ensemble, log: &LabelLog, data: &[Labelled], optimum, radius, picks, fit_seconds| {
            RoundSummary {
                round,
                labels: data.len(),
                oracle_calls: calls(log),
                report: model.meta.report.clone(),
                best_real_cost: best_of(data),
                optimum,
                radius,
                greedy_real_cost: base_costs[0],
                dag_greedy_real_cost: base_costs[1],
                linear_smoothe_real_cost: base_costs[2],
                picks,
                fit_seconds,
            }
        };
    let fit_seconds = fit_started.elapsed().as_secs_f64();
    rounds.push(summary(0, &model, log, &data, None, radius, Vec::new(), fit_seconds));
    for round in 1..=config.rounds {
        if budget == 0 {
            break;
        }
        let best_before = best_of(&data);
        let cost =
            LearnedCost::new(model.clone(), problem, original, config.conservatism, config.linear_weight, device)?;
        let mut ranked: Vec<&Labelled> = data.iter().collect();
        ranked.sort_by(|a, b| a.cost.total_cmp(&b.cost));
        seen.extend(data.iter().map(|l| l.extraction.clone()));
        let parents: Vec<Extraction> = ranked.into_iter().take(PARENTS).map(|l| l.extraction.clone()).collect();
        if parents.is_empty() {
            bail!("no labelled extraction of this e-graph to start a round from; see the label log for errors");
        }
        let mut batch: Vec<Extraction> = Vec::new();
        let mut sources: Vec<PickSource> = Vec::new();
        let mut optimum = None;
        let mut novel = Novelty::of(&featurizer, &data)?;
        let share = RoundShare::of(config, budget);
        let bar = prior_bar(init.is_some(), &model, best_before, base_costs[1]);
        let below_bar = |mean: f64| bar.is_infinite() || mean < bar;
        // Predicts only where there is a bar to clear.
        let clears = |e: &Extraction| -> Result<bool> {
            Ok(bar.is_infinite() || below_bar(cost.predict_unmeasured(std::slice::from_ref(e))?[0].mean))
        };
        if config.acquisition != Acquisition::Random {
            // The model's own optimum, from the incumbent, and a few more
            // of SmoothE's best distinct decodes; with a delay metric
            // beside, under a delay bound drawn for the round.
            let front_round = match front.as_mut() {
                Some(front) => {
                    let bases_and_best = [&bases[..], &parents[..1]].concat();
                    front.draw(original, problem, log, &oracle_id, &cost, &bases_and_best, &mut rng, device)?
                }
                None => None,
            };
            let (objective, starts): (&dyn CostModel, Vec<Extraction>) = match &front_round {
                Some(f) => (&f.objective, vec![parents[0].clone(), f.fastest.clone()]),
                None => (&cost, parents[..1].to_vec()),
            };
            let (best, pool, _) =
                run_smoothe(smoothe.seed + round as u64).optimise_pool(problem, objective, share.per_round, &starts)?;
            let best = best.restricted_to_reachable(g)?;
            let predicted = cost.predict(std::slice::from_ref(&best))?[0];
            optimum = Some((best.clone(), predicted));
            if below_bar(predicted.mean) && seen.insert(best.clone()) {
                novel.admit(&best)?;
                batch.push(best);
                sources.push(PickSource::Optimum);
            }
            for (e, _) in pool {
                let e = e.restricted_to_reachable(g)?;
                if batch.len() < share.per_round / 4 && clears(&e)? && novel.take(&mut seen, &e)? {
                    batch.push(e);
                    sources.push(PickSource::Decode);
                }
            }
            if share.search_picks > 0 {
                let settings = GuidedSearch {
                    survivors: share.search_picks.max(GuidedSearch::default().survivors),
                    ..GuidedSearch::default()
                };
                let (survivors, _) = guided_search(g, &cost, &parents, settings, smoothe.seed + round as u64, None);
                let mut picked = 0;
                for (e, _) in survivors {
                    let e = e.restricted_to_reachable(g)?;
                    if picked < share.search_picks && clears(&e)? && novel.take(&mut seen, &e)? {
                        batch.push(e);
                        sources.push(PickSource::Search);
                        picked += 1;
                    }
                }
            }
        }
        // The acquisition rule ranks a screened pool of new candidates; a
        // few more are labelled unranked, so the data keep an unbiased view.
        let mut candidates = screening_pool(g, &parents, config.screen, radius, &seen, &mut rng);
        candidates = novel.only_new(candidates)?;
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        if config.acquisition == Acquisition::Random {
            order.shuffle(&mut rng);
        } else if config.acquisition == Acquisition::SelectionGp {
            let labels: Vec<(&Extraction, f64)> = data.iter().map(|l| (&l.extraction, l.cost)).collect();
            if let Some(gp) = SelectionGp::fit(&labels) {
                let rank: Vec<f64> = gp.predict(&candidates).iter().map(|(m, s)| m - config.beta * s).collect();
                order.sort_by(|&a, &b| rank[a].total_cmp(&rank[b]));
            }
        } else {
            // The ranking reads the model's verdicts only, never a
            // measured cost (the pool skips the labelled extractions).
            let preds = cost.predict_unmeasured(&candidates)?;
            let incumbent = best_before;
            let rank: Vec<f64> = preds
                .iter()
                .map(|p| match config.acquisition {
                    Acquisition::Lcb => cost.lower_bound(p, config.beta),
                    Acquisition::Mean => cost.lower_bound(p, 0.0),
                    Acquisition::Ei => cost.box_charge(p) - expected_improvement(incumbent, p.mean, p.std),
                    Acquisition::Random | Acquisition::SelectionGp => unreachable!(),
                })
                .collect();
            order.sort_by(|&a, &b| rank[a].total_cmp(&rank[b]));
        }
        let picked = share.per_round.saturating_sub(batch.len()).min(order.len());
        order[picked..].shuffle(&mut rng);
        for (rank, &i) in order.iter().take(picked + share.explore).enumerate() {
            batch.push(std::mem::replace(&mut candidates[i], Extraction::empty(0)));
            sources.push(if rank < picked { PickSource::Acquisition } else { PickSource::Explore });
        }
        let predicted = cost.predict(&batch)?;
        for e in &batch {
            seen.insert(e.clone());
        }
        let (costs, _) = labeler.label(log, &to_original(&batch), &mut budget)?;
        let optimum = optimum.map(|(e, predicted)| OptimumCheck {
            predicted,
            real: batch
                .iter()
                .position(|b| *b == e)
                .and_then(|i| costs[i])
                .or_else(|| data.iter().find(|l| l.extraction == e).map(|l| l.cost)),
        });
        let picks = sources
            .into_iter()
            .zip(predicted)
            .zip(&costs)
            .map(|((source, predicted), &real)| RoundPick { source, predicted, real })
            .collect();
        data = labelled(log)?;
        // Trust region: wider after a round that found a better real
        // cost, narrower after one that did not.
        let used = radius;
        radius = if best_of(&data) < best_before {
            (radius * 2).min(RADIUS_BOUNDS.1)
        } else {
            (radius / 2).max(RADIUS_BOUNDS.0)
        };
        // Random picks never ask the model: only the last one is fitted.
        let fit_started = std::time::Instant::now();
        let mut fit_seconds = 0.0;
        if config.acquisition != Acquisition::Random || round == config.rounds || budget == 0 {
            model = refit(&data, smoothe.seed + round as u64)?;
            fit_seconds = fit_started.elapsed().as_secs_f64();
        }
        rounds.push(summary(round, &model, log, &data, optimum, used, picks, fit_seconds));
    }
    let checks: Vec<(f64, f64)> = rounds
        .iter()
        .filter_map(|r| r.optimum.as_ref())
        .filter_map(|o| o.real.map(|real| (o.predicted.mean, real)))
        .collect();
    model.meta.optimum_error = OptimumError::of(&checks);
    let Some(best) = data.iter().min_by(|a, b| a.cost.total_cmp(&b.cost)) else {
        bail!("no oracle call succeeded; see the label log for the errors");
    };
    let best_cost = best.cost;
    let best = problem.to_original(&best.extraction).restricted_to_reachable(original)?;
    Ok(TrainCostOutcome { model, rounds, best, best_cost })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_model_not_yet_fitted_here_must_beat_the_incumbent_by_its_margin() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/esyn-abc-area.safetensors");
        let mut model = Ensemble::load(&path, &Device::Cpu).unwrap();
        let margin = model.meta.transfer_margin.expect("the shipped corpus model is calibrated");
        assert!(margin > 0.0);
        model.meta.report.epochs = 0.0;
        let bar = prior_bar(true, &model, 1000.0, Some(900.0));
        assert!((bar - (1000.0 - margin * 900.0)).abs() < 1e-9, "{bar}");
        // Once fitted to this design's labels, or trained here, no bar.
        assert_eq!(prior_bar(false, &model, 1000.0, Some(900.0)), f64::INFINITY);
        let mut fitted = model.clone();
        fitted.meta.report.epochs = 12.0;
        assert_eq!(prior_bar(true, &fitted, 1000.0, Some(900.0)), f64::INFINITY);
        // Nothing to set it by: no margin, no reference label, no incumbent.
        let mut uncalibrated = model.clone();
        uncalibrated.meta.transfer_margin = None;
        assert_eq!(prior_bar(true, &uncalibrated, 1000.0, Some(900.0)), f64::INFINITY);
        assert_eq!(prior_bar(true, &model, 1000.0, None), f64::INFINITY);
        assert_eq!(prior_bar(true, &model, f64::INFINITY, Some(900.0)), f64::INFINITY);
    }

    #[test]
    fn a_short_round_keeps_the_mix_of_a_full_one() {
        let config = TrainCostConfig::default();
        let full = RoundShare::of(&config, 1000);
        assert_eq!(
            full,
            RoundShare { per_round: config.per_round, search_picks: config.search_picks, explore: config.explore }
        );
        assert_eq!(RoundShare::of(&config, config.per_round + config.explore), full);
        for budget in 1..config.per_round + config.explore {
            let share = RoundShare::of(&config, budget);
            assert_eq!(share.per_round + share.explore, budget, "{budget}: {share:?}");
            assert!(share.per_round >= 1 && share.search_picks < share.per_round, "{budget}: {share:?}");
            // Within a pick of the configured proportion.
            let want = config.per_round as f64 * budget as f64 / (config.per_round + config.explore) as f64;
            assert!((share.per_round as f64 - want).abs() <= 1.0, "{budget}: {share:?}");
        }
        assert_eq!(RoundShare::of(&config, 0), RoundShare { per_round: 0, search_picks: 0, explore: 0 });
    }

    #[test]
    fn adapting_a_library_model_samples_broadly_with_half_the_calls_at_most() {
        let config = TrainCostConfig::default();
        let scratch = config.initial - 3;
        assert_eq!(initial_samples(&config, false, 27, 3), scratch);
        assert_eq!(initial_samples(&config, true, 27, 3), 13);
        assert_eq!(initial_samples(&config, true, 1, 3), 0);
        assert_eq!(initial_samples(&config, true, 1000, 3), scratch);
    }

    #[test]
    fn a_round_skips_extractions_the_features_cannot_tell_from_its_labels() {
        // The root class offers not(x), not(y) and or(x, y); the two `not`
        // choices have the same operators, pairs and costs.
        let json = r#"{"nodes": {
            "r1": {"op": "not", "eclass": "r", "cost": 1, "children": ["a1"]},
            "r2": {"op": "not", "eclass": "r", "cost": 1, "children": ["b1"]},
            "r3": {"op": "or", "eclass": "r", "cost": 1, "children": ["a1", "b1"]},
            "a1": {"op": "x", "eclass": "a", "cost": 0, "children": []},
            "b1": {"op": "y", "eclass": "b", "cost": 0, "children": []}
        }, "root_eclasses": ["r"]}"#;
        let original = crate::load::parse_str(json).unwrap();
        let problem = crate::preprocess::preprocess(&original).unwrap();
        let g = &problem.graph;
        let featurizer = Featurizer::fresh(FeatureKind::Structure, &problem, &original);
        // Every valid extraction, by the root's choice.
        let root = g.roots()[0];
        let mut by_root: Vec<Extraction> = Vec::new();
        for &n in g.class_nodes(root) {
            let mut choices = vec![None; g.num_classes()];
            choices[root.index()] = Some(n);
            for &c in g.children(n) {
                choices[c.index()] = Some(g.class_nodes(c)[0]);
            }
            by_root.push(Extraction { choices });
        }
        assert_eq!(by_root.len(), 3);
        let row = |e: &Extraction| featurizer.of_extraction(e).unwrap();
        let twins: Vec<usize> =
            (0..3).filter(|&i| (0..3).any(|j| j != i && row(&by_root[i]) == row(&by_root[j]))).collect();
        assert_eq!(twins.len(), 2, "two of the three choices are feature twins");
        let (twin, other) = (twins[0], (0..3).find(|i| !twins.contains(i)).unwrap());
        let labelled = vec![Labelled { extraction: by_root[twin].clone(), cost: 1.0, test: false }];
        let mut novel = Novelty::of(&featurizer, &labelled).unwrap();
        // The pool keeps one extraction per new row, in order.
        let pool = vec![by_root[twins[1]].clone(), by_root[other].clone(), by_root[other].clone()];
        assert_eq!(novel.only_new(pool).unwrap(), vec![by_root[other].clone()]);
        // A pick records its row: the next with the same row is refused.
        assert!(!novel.admit(&by_root[twins[1]]).unwrap());
        assert!(novel.admit(&by_root[other]).unwrap());
        assert!(!novel.admit(&by_root[other]).unwrap());
    }
}
