//! `smoothe train-cost`: sample, label, train an ensemble, then rounds in
//! which the model picks what to label next by an acquisition rule, inside
//! a trust region around the best labelled extractions.

use crate::egraph::EGraph;
use crate::extract::moves::broad_sample;
use crate::extract::{as_extracted, DagGreedy, Greedy, SmoothE};
use crate::extraction::{Extraction, OriginalExtraction};
use crate::learn::active::config::{linear_baseline, TrainCostConfig};
use crate::learn::active::design::Design;
use crate::learn::active::front::Front;
use crate::learn::active::round::{
    initial_samples, prior_bar, ModelRound, OptimumCheck, Picks, RoundPick, RoundShare, RoundSummary,
};
use crate::learn::model::dataset::{dataset, Labelled};
use crate::learn::model::features::Featurizer;
use crate::learn::model::measured::{self, MeasuredDesign};
use crate::learn::model::meta::OptimumError;
use crate::learn::model::network::Ensemble;
use crate::learn::model::objective::LearnedCost;
use crate::learn::model::reference::Reference;
use crate::learn::model::train::{fine_tune, train_on_labels};
use crate::learn::oracle::labeler::Labeler;
use crate::learn::oracle::labels::LabelLog;
use crate::preprocess::Reduced;
use anyhow::{bail, Result};
use candle_core::Device;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashSet;

/// Best labelled extractions that candidates are drawn around.
const PARENTS: usize = 8;
/// Bounds of the trust-region radius (classes switched by a small move).
const RADIUS_BOUNDS: (usize, usize) = (1, 64);

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
/// [`crate::learn::active::config::loop_smoothe`]); the linear baseline is [`linear_baseline`].
///
/// With `init` (a relative model, such as one trained on other designs,
/// see [`crate::learn::model::reference`]), the loop adapts it instead of starting from
/// nothing: at most half the calls left after the baselines go to broad
/// initial samples, and every model is `init` fine-tuned on this design's
/// labels, relative to its dag-greedy extraction.
pub fn train_cost(
    design: &Design,
    log: &mut LabelLog,
    config: &TrainCostConfig,
    smoothe: &SmoothE,
    init: Option<&Ensemble>,
    device: &Device,
) -> Result<TrainCostOutcome> {
    let Design { original, problem, labeler, .. } = *design;
    let circuit = design.circuit.as_ref();
    let setting = Setting { original, problem, labeler, circuit, config, smoothe, init, device };
    // The layout every fit of this design reads, built once: the design's
    // own vocabulary, or the initial model's (with the design's reference
    // extraction, which relative features are measured from).
    let featurizer = match init {
        None => Featurizer::fresh(config.features, problem, original),
        Some(m) => Featurizer::new(m.meta.features.kind, problem, original, &m.meta.features.names),
    };
    let mut run = ActiveLoop::new(setting, &featurizer, log)?;
    run.label_baselines()?;
    run.sample_initially()?;
    let fit_started = std::time::Instant::now();
    let mut model = run.first_model()?;
    // With a delay metric beside the one the ensemble learns, rounds
    // explore the trade-off between them (see [`Front`]).
    let mut front = Front::of(&labeler.oracle.metrics, problem);
    let mut radius = config.radius.clamp(RADIUS_BOUNDS.0, RADIUS_BOUNDS.1);
    let summary = run.summary(0, &model, None, radius, Vec::new(), fit_started.elapsed().as_secs_f64());
    run.close_round(summary);
    for round in 1..=config.rounds {
        if run.budget == 0 {
            break;
        }
        let best_before = run.best_cost();
        let (optimum, picks) = run.round(round, &model, radius, front.as_mut())?;
        // Trust region: wider after a round that found a better real
        // cost, narrower after one that did not.
        let used = radius;
        radius = if run.best_cost() < best_before {
            (radius * 2).min(RADIUS_BOUNDS.1)
        } else {
            (radius / 2).max(RADIUS_BOUNDS.0)
        };
        // Random picks never ask the model: only the last one is fitted.
        let fit_started = std::time::Instant::now();
        let mut fit_seconds = 0.0;
        if config.acquisition.reads_model() || round == config.rounds || run.budget == 0 {
            model = run.fit(smoothe.seed + round as u64)?;
            fit_seconds = fit_started.elapsed().as_secs_f64();
        }
        let summary = run.summary(round, &model, optimum, used, picks, fit_seconds);
        run.close_round(summary);
    }
    run.finish(model)
}

/// What the loop is given: the design, the oracle, the settings.
pub(super) struct Setting<'a> {
    pub(super) original: &'a EGraph,
    pub(super) problem: &'a Reduced,
    pub(super) labeler: &'a Labeler<'a>,
    pub(super) config: &'a TrainCostConfig,
    pub(super) smoothe: &'a SmoothE,
    pub(super) init: Option<&'a Ensemble>,
    pub(super) device: &'a Device,
    /// The circuit the e-graph was built from, if it records one.
    pub(super) circuit: Option<&'a OriginalExtraction>,
}

/// The loop's state between its steps.
pub(super) struct ActiveLoop<'a> {
    pub(super) s: Setting<'a>,
    pub(super) log: &'a mut LabelLog,
    pub(super) oracle_id: String,
    pub(super) fingerprint: String,
    /// Calls left.
    pub(super) budget: usize,
    pub(super) rng: StdRng,
    /// Greedy, dag-greedy and linear SmoothE, then the recorded circuit.
    pub(super) bases: Vec<Extraction>,
    /// Their real costs, in that order (`None`: the call failed).
    pub(super) base_costs: Vec<Option<f64>>,
    /// Real cost of the recorded circuit, once labelled.
    pub(super) circuit_cost: Option<f64>,
    /// Every extraction labelled or picked so far.
    pub(super) seen: HashSet<Extraction>,
    /// The layout every fit of this design reads.
    pub(super) featurizer: &'a Featurizer,
    pub(super) reference: Option<Reference>,
    /// The design's labels, refreshed from the log after each labelling.
    pub(super) data: Vec<Labelled>,
    pub(super) rounds: Vec<RoundSummary>,
    /// When the current round began.
    pub(super) round_started: std::time::Instant,
    /// Seconds this round has waited for labels.
    pub(super) label_seconds: f64,
}

impl<'a> ActiveLoop<'a> {
    fn new(s: Setting<'a>, featurizer: &'a Featurizer, log: &'a mut LabelLog) -> Result<Self> {
        if let Some(m) = s.init {
            if m.meta.relative.is_none() {
                bail!(
                    "the initial model was trained on one design in absolute units and cannot adapt to another; \
                     train it on several designs (train-cost A.json B.json ...) to get a model that transfers"
                );
            }
            // Refuses, naming them, operators the model has never seen.
            LearnedCost::new(m.clone(), s.problem, s.original, s.config.conservatism)?;
        }
        let oracle_id = s.labeler.oracle.identity();
        let fingerprint = s.original.fingerprint();
        // The budget caps the labels this e-graph and oracle have in the
        // log over all runs, so a resumed run finishes the same job
        // instead of starting a new one; asking again for a logged label
        // is free.
        let budget = s.config.budget.saturating_sub(log.calls(&fingerprint, &oracle_id).total);
        let reference = s.init.map(|_| Reference::of(s.problem, featurizer)).transpose()?;
        Ok(ActiveLoop {
            rng: StdRng::seed_from_u64(s.smoothe.seed),
            s,
            log,
            oracle_id,
            fingerprint,
            budget,
            bases: Vec::new(),
            base_costs: Vec::new(),
            circuit_cost: None,
            seen: HashSet::new(),
            featurizer,
            reference,
            data: Vec::new(),
            rounds: Vec::new(),
            round_started: std::time::Instant::now(),
            label_seconds: 0.0,
        })
    }

    /// Oracle calls this e-graph and oracle have in the log.
    fn calls(&self) -> usize {
        self.log.calls(&self.fingerprint, &self.oracle_id).total
    }

    /// Labels `batch` (within the budget); their real costs, in order.
    fn label(&mut self, batch: &[Extraction]) -> Result<Vec<Option<f64>>> {
        let originals: Vec<OriginalExtraction> = batch.iter().map(|e| self.s.problem.to_original(e)).collect();
        let started = std::time::Instant::now();
        let costs = self.s.labeler.label(self.log, &originals, &mut self.budget)?.0;
        self.label_seconds += started.elapsed().as_secs_f64();
        Ok(costs)
    }

    /// Labels the baselines first: the greedy ones at once, so the oracle
    /// is at work (and a broken one found) before linear SmoothE's start,
    /// which takes tens of seconds, is made.
    fn label_baselines(&mut self) -> Result<()> {
        let [greedy, dag]: [Extraction; 2] = as_extracted(self.s.original, self.s.problem, &[&Greedy, &DagGreedy])?
            .try_into()
            .expect("one extraction per extractor");
        self.base_costs = self.label(&[greedy.clone(), dag.clone()])?;
        // An oracle that fails on both is broken (a missing tool, a bad
        // path); every further call would fail too, each up to its timeout.
        if self.base_costs.iter().all(Option::is_none) {
            let calls = self.log.calls(&self.fingerprint, &self.oracle_id);
            if let Some(why) = calls.last_failure.and_then(|l| l.error.as_deref()) {
                bail!(
                    "the oracle failed on the greedy and dag-greedy extractions alike; stopping (the last \
                     failure: {why})"
                );
            }
        }
        let smoothe = self.s.smoothe;
        let linear = linear_baseline(self.s.original, self.s.problem, smoothe.seed, &smoothe.device)?;
        let linear_cost = self.label(std::slice::from_ref(&linear))?;
        self.base_costs.extend(linear_cost);
        self.bases = vec![greedy, dag, linear];
        // The circuit the e-graph was built from: what the user has now.
        if let Some(circuit) = self.s.circuit.and_then(|c| self.s.problem.from_original(c)) {
            self.circuit_cost = match self.bases.iter().position(|b| *b == circuit) {
                Some(i) => self.base_costs[i],
                None => {
                    let cost = self.label(std::slice::from_ref(&circuit))?.first().copied().flatten();
                    self.bases.push(circuit);
                    self.base_costs.push(cost);
                    cost
                }
            };
        }
        self.seen = self.bases.iter().cloned().collect();
        Ok(())
    }

    /// Labels the initial samples: distinct, mostly perturbations of the
    /// baselines (the real cost often favours another of them than the
    /// node costs do).
    fn sample_initially(&mut self) -> Result<()> {
        let want = initial_samples(self.s.config, self.s.init.is_some(), self.budget, self.bases.len());
        let mut samples = Vec::new();
        let mut attempts = 0;
        while samples.len() < want && attempts < 50 * want.max(1) {
            attempts += 1;
            let e = broad_sample(&self.s.problem.graph, &self.bases, self.s.config.uniform_fraction, &mut self.rng);
            if self.seen.insert(e.clone()) {
                samples.push(e);
            }
        }
        self.label(&samples)?;
        self.refresh_data()
    }

    /// Reads the design's labels from the log.
    fn refresh_data(&mut self) -> Result<()> {
        let s = &self.s;
        let test_fraction = s.config.train.test_fraction;
        self.data =
            dataset(s.original, s.problem, self.log, &self.fingerprint, s.labeler.oracle, test_fraction, &self.bases)?;
        Ok(())
    }

    /// The least real cost labelled so far.
    pub(super) fn best_cost(&self) -> f64 {
        self.data.iter().map(|l| l.cost).fold(f64::INFINITY, f64::min)
    }

    /// The first model; too few labels to train is most often an oracle
    /// that fails, which the error then says.
    fn first_model(&mut self) -> Result<Ensemble> {
        self.fit(self.s.smoothe.seed).map_err(|e| {
            let calls = self.log.calls(&self.fingerprint, &self.oracle_id);
            match calls.last_failure {
                Some(last) => e.context(format!(
                    "{} of the {} oracle calls on this design failed (the last: {})",
                    calls.failed,
                    calls.total,
                    last.error.as_deref().unwrap_or("no reason recorded")
                )),
                None => e,
            }
        })
    }

    /// A model of the labels so far: trained from nothing, or the initial
    /// model fine-tuned on them relative to the dag-greedy extraction.
    fn fit(&self, seed: u64) -> Result<Ensemble> {
        let s = &self.s;
        let mut model = match (s.init, &self.reference) {
            (Some(init), Some(reference)) => {
                let Some(reference_cost) = self.base_costs[1] else {
                    bail!("the oracle call on the dag-greedy extraction failed; adapting a model needs its cost");
                };
                let d = reference.relative_data(self.featurizer, &self.data, reference_cost)?;
                let mut model = fine_tune(init, &d.rows, &d.targets, &d.test, &s.config.train, seed, s.device)?;
                let frame = model.meta.relative.get_or_insert_with(Default::default);
                frame.record(&self.fingerprint, reference_cost, reference.nodes);
                if !model.meta.egraphs.contains(&self.fingerprint) {
                    model.meta.egraphs.push(self.fingerprint.clone());
                }
                model
            }
            _ => {
                let mut model = train_on_labels(self.featurizer, &self.data, &s.config.train, seed, s.device)?;
                model.meta.egraphs = vec![self.fingerprint.clone()];
                model
            }
        };
        model.meta.oracle = self.oracle_id.clone();
        model.meta.metric = s.labeler.oracle.primary().map(String::from);
        let design = MeasuredDesign::of(&self.fingerprint, &s.problem.graph, &self.data)?;
        measured::record(&mut model.meta.measured, design);
        Ok(model)
    }

    /// One row of the per-round summary.
    fn summary(
        &self,
        round: usize,
        model: &Ensemble,
        optimum: Option<OptimumCheck>,
        radius: usize,
        picks: Vec<RoundPick>,
        fit_seconds: f64,
    ) -> RoundSummary {
        RoundSummary {
            round,
            labels: self.data.len(),
            oracle_calls: self.calls(),
            report: model.meta.report.clone(),
            best_real_cost: self.best_cost(),
            optimum,
            radius,
            greedy_real_cost: self.base_costs[0],
            dag_greedy_real_cost: self.base_costs[1],
            linear_smoothe_real_cost: self.base_costs[2],
            circuit_real_cost: self.circuit_cost,
            picks,
            fit_seconds,
            seconds: self.round_started.elapsed().as_secs_f64(),
            label_seconds: self.label_seconds,
        }
    }

    /// Pushes this round's summary and starts the clocks of the next.
    fn close_round(&mut self, summary: RoundSummary) {
        self.rounds.push(summary);
        self.round_started = std::time::Instant::now();
        self.label_seconds = 0.0;
    }

    /// One round: picks by the model and by the acquisition rule, labelled;
    /// the previous model's optimum checked and the round's picks with
    /// their predictions.
    fn round(
        &mut self,
        round: usize,
        model: &Ensemble,
        radius: usize,
        front: Option<&mut Front>,
    ) -> Result<(Option<OptimumCheck>, Vec<RoundPick>)> {
        let s = &self.s;
        let cost = LearnedCost::new(model.clone(), s.problem, s.original, s.config.conservatism)?;
        let mut ranked: Vec<&Labelled> = self.data.iter().collect();
        ranked.sort_by(|a, b| a.cost.total_cmp(&b.cost));
        self.seen.extend(self.data.iter().map(|l| l.extraction.clone()));
        let parents: Vec<Extraction> = ranked.into_iter().take(PARENTS).map(|l| l.extraction.clone()).collect();
        if parents.is_empty() {
            bail!("no labelled extraction of this e-graph to start a round from; see the label log for errors");
        }
        let share = RoundShare::of(self.s.config, self.budget);
        let bar = prior_bar(self.s.init.is_some(), model, self.best_cost(), self.base_costs[1]);
        let mut picks = Picks::default();
        if self.s.config.acquisition.reads_model() {
            let model_round = ModelRound { round, bar, share: &share, front };
            self.model_picks(&cost, &parents, model_round, &mut picks)?;
        }
        self.screened_picks(&cost, &parents, radius, &share, &mut picks)?;
        let predicted = cost.predict(&picks.batch)?;
        self.seen.extend(picks.batch.iter().cloned());
        let costs = self.label(&picks.batch)?;
        let optimum = picks.optimum.map(|(e, predicted)| OptimumCheck {
            predicted,
            real: picks
                .batch
                .iter()
                .position(|b| *b == e)
                .and_then(|i| costs[i])
                .or_else(|| self.data.iter().find(|l| l.extraction == e).map(|l| l.cost)),
        });
        let picks = picks
            .sources
            .into_iter()
            .zip(predicted)
            .zip(&costs)
            .map(|((source, predicted), &real)| RoundPick { source, predicted, real })
            .collect();
        self.refresh_data()?;
        Ok((optimum, picks))
    }

    /// The outcome: the last model with the error of its optima over the
    /// rounds, and the best labelled extraction.
    fn finish(self, mut model: Ensemble) -> Result<TrainCostOutcome> {
        let checks: Vec<(f64, f64)> = self
            .rounds
            .iter()
            .filter_map(|r| r.optimum.as_ref())
            .filter_map(|o| o.real.map(|real| (o.predicted.mean, real)))
            .collect();
        model.meta.optimum_error = OptimumError::of(&checks);
        let Some(best) = self.data.iter().min_by(|a, b| a.cost.total_cmp(&b.cost)) else {
            bail!("no oracle call succeeded; see the label log for the errors");
        };
        let best_cost = best.cost;
        let best = self.s.problem.to_original(&best.extraction).restricted_to_reachable(self.s.original)?;
        Ok(TrainCostOutcome { model, rounds: self.rounds, best, best_cost })
    }
}
