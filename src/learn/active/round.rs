//! One round of the loop, as data: what it labelled and why, its summary
//! row, how it shares its calls, the bar a library model's picks must
//! clear.

use crate::extraction::Extraction;
use crate::learn::active::config::TrainCostConfig;
use crate::learn::active::front::Front;
use crate::learn::model::metrics::TrainReport;
use crate::learn::model::network::Ensemble;
use crate::learn::model::objective::Prediction;
use serde::{Deserialize, Serialize};

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
    /// Real cost of the circuit the e-graph was built from, where it
    /// records one (`smoothe saturate` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_real_cost: Option<f64>,
    /// What this round labelled, in order, each with the previous model's
    /// prediction: whether the model's picks beat the random ones from the
    /// same pool shows as the loop runs (empty for round 0).
    #[serde(default)]
    pub picks: Vec<RoundPick>,
    /// Wall-clock seconds spent fitting this round's model (0 when the
    /// round kept the previous one).
    #[serde(default)]
    pub fit_seconds: f64,
    /// Wall-clock seconds of the whole round (round 0: the baselines, the
    /// initial samples and the first fit).
    #[serde(default)]
    pub seconds: f64,
    /// Of those, seconds spent waiting for the oracle's labels (export and
    /// synthesis included); the rest is SmoothE, the search and fitting.
    #[serde(default)]
    pub label_seconds: f64,
}

/// The most a pick of the model's own (its optimum, SmoothE's other
/// decodes, the guided search's survivors) may be predicted to cost for a
/// round to label it, when the loop adapts a library model (`adapting`) that
/// has not yet been fitted to any of this design's labels (`model` kept the
/// library model's weights: fewer labels than validation folds need): the
/// incumbent's real cost less the library model's transfer margin (see
/// [`crate::learn::model::reference::transfer_margin`]) in units of the design's
/// dag-greedy label, `reference_cost`. Such a model's optimum on a design
/// it never saw is chosen because it scores low there, so its error leans
/// the cheap way by about that margin, the bar `extract --model` sets an
/// optimum it cannot measure. Without this bar such picks measured above
/// the baselines and never improved the incumbent, while the screened
/// pool's picks gave every gain, so their calls go to the pool. Infinite (no bar) otherwise: a model
/// trained on this design, or one fine-tuned on its labels, is checked by
/// them, and a model without a margin (one not calibrated over designs) or
/// a design whose dag-greedy call failed has no bar to set.
pub(super) fn prior_bar(adapting: bool, model: &Ensemble, incumbent: f64, reference_cost: Option<f64>) -> f64 {
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
pub(super) fn initial_samples(config: &TrainCostConfig, adapting: bool, budget: usize, bases: usize) -> usize {
    let configured = config.initial.saturating_sub(bases);
    if adapting {
        configured.min(budget / 2)
    } else {
        configured
    }
}

/// How one round spends its calls: the configured `per_round` picks and
/// `explore` random ones, or, when fewer calls are left than the round
/// would label, the same proportions of those left (at least one pick), so
/// a short last round keeps its mix instead of losing its random and
/// acquisition picks to the budget's cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RoundShare {
    pub(super) per_round: usize,
    pub(super) explore: usize,
}

impl RoundShare {
    /// The share of a round with `budget` calls left.
    pub(super) fn of(config: &TrainCostConfig, budget: usize) -> Self {
        let full = config.per_round + config.explore;
        if budget >= full || full == 0 {
            return RoundShare { per_round: config.per_round, explore: config.explore };
        }
        let scaled = |n: usize| (n as f64 * budget as f64 / full as f64).round() as usize;
        let per_round = scaled(config.per_round).clamp(budget.min(1), budget);
        RoundShare { per_round, explore: budget - per_round }
    }
}

/// What the model's picks of a round read: its number, the bar its picks
/// must clear ([`prior_bar`]), its share of calls and the front it
/// explores, if any.
pub(super) struct ModelRound<'r> {
    pub(super) round: usize,
    pub(super) bar: f64,
    pub(super) share: &'r RoundShare,
    pub(super) front: Option<&'r mut Front>,
}

/// What a round will label, in order, with why; and the model's optimum
/// with its prediction, whether or not it is among them.
#[derive(Default)]
pub(super) struct Picks {
    pub(super) batch: Vec<Extraction>,
    pub(super) sources: Vec<PickSource>,
    pub(super) optimum: Option<(Extraction, Prediction)>,
}

impl Picks {
    pub(super) fn push(&mut self, e: Extraction, source: PickSource) {
        self.batch.push(e);
        self.sources.push(source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

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
        assert_eq!(full, RoundShare { per_round: config.per_round, explore: config.explore });
        assert_eq!(RoundShare::of(&config, config.per_round + config.explore), full);
        for budget in 1..config.per_round + config.explore {
            let share = RoundShare::of(&config, budget);
            assert_eq!(share.per_round + share.explore, budget, "{budget}: {share:?}");
            assert!(share.per_round >= 1, "{budget}: {share:?}");
            // Within a pick of the configured proportion.
            let want = config.per_round as f64 * budget as f64 / (config.per_round + config.explore) as f64;
            assert!((share.per_round as f64 - want).abs() <= 1.0, "{budget}: {share:?}");
        }
        assert_eq!(RoundShare::of(&config, 0), RoundShare { per_round: 0, explore: 0 });
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
}
