//! How far a frozen or active model may be followed away from its labels:
//! the [`Conservatism`] of SmoothE's objective and the unit a step away
//! from the training data costs ([`label_spread`], [`trust_unit`]).

use crate::learn::model::meta::ModelMeta;
use crate::learn::model::metrics::mean_std;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How conservative the objective is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Conservatism {
    /// Weight of the ensemble's standard deviation (0: the mean alone).
    pub kappa: f64,
    /// Target standard deviations charged per box-width a feature lies
    /// outside the training range, and per spacing beyond `free_distance`
    /// from the nearest training row (0: no trust region).
    pub trust: f64,
    /// Distance from the nearest training row, in spacings, that costs
    /// nothing: 1 ([`Conservatism::ACTIVE`]) is about as far as labelled
    /// rows lie from each other; 0 ([`Conservatism::FROZEN`]) charges every
    /// step away from labelled data.
    pub free_distance: f64,
}

impl Conservatism {
    /// Inside the active loop, whose proposals the oracle labels next: the
    /// model may reach about one row spacing past its data for free, and
    /// where it is wrong there, the new labels correct it.
    pub const ACTIVE: Conservatism = Conservatism { kappa: 1.0, trust: 1.0, free_distance: 1.0 };

    /// For a frozen model (`extract --model`), whose choice no oracle
    /// checks: every step away from labelled data is charged, so the
    /// optimum lies on or next to the rows the model was fitted to, where
    /// its error is its fitting error. Gradient descent alone then stays
    /// at its start; the model-guided search of `extract` jumps between
    /// such rows.
    ///
    /// The distance is to the nearest of *all* labelled rows, so the search
    /// stays near the greedy rows it starts from even where the model
    /// scores a distant labelled row cheaper: near its best rows the model
    /// is optimistic by about as much as the gain on offer. Trust regions
    /// centred on the model's cheapest rows, a charge raised gradually, and
    /// weaker charges were each measured and each did worse on real cost
    /// (the experiments' index lists them).
    pub const FROZEN: Conservatism = Conservatism { kappa: 1.0, trust: 1.0, free_distance: 0.0 };
}

impl Default for Conservatism {
    /// [`Conservatism::ACTIVE`], the setting a training job starts from.
    fn default() -> Self {
        Conservatism::ACTIVE
    }
}

/// Fewest optima a loop must have measured before their error may loosen
/// the trust region ([`trust_unit`]).
pub const MIN_OPTIMUM_CHECKS: usize = 3;

/// The spread of the labels that a model bound to a design measures its
/// trust region in ([`trust_unit`]), in that design's units: the model's
/// `target_std`, except for a relative model (one trained over several
/// designs, or fine-tuned from one) bound to a design it has labels of,
/// `measured` (see [`crate::learn::model::measured`]), where it is the spread of those
/// labels. A relative model's `target_std` is the spread of the relative
/// costs of every design it was first trained on, scaled to this one, and
/// so counts the differences between designs as well as between this
/// design's extractions: a model fine-tuned on a few labels of a design
/// would otherwise charge a step away from them several times what a model
/// trained from scratch on such labels does.
/// With fewer than two measured labels, or none apart, `target_std`.
pub fn label_spread(meta: &ModelMeta, measured: &HashMap<String, f64>, relative: bool) -> f64 {
    if !relative || measured.len() < 2 {
        return meta.target_std;
    }
    // Sorted, so the sum does not follow the map's order from run to run.
    let mut costs: Vec<f64> = measured.values().copied().collect();
    costs.sort_by(f64::total_cmp);
    let (_, spread) = mean_std(&costs);
    if spread.is_finite() && spread > 0.0 {
        spread
    } else {
        meta.target_std
    }
}

/// What leaving the training data costs, in oracle units per box-width or
/// spacing (times [`Conservatism::trust`]): the spread of the training
/// labels, `label_spread` (see [`label_spread`]), or less where the loop
/// that trained the model showed it accurate off its data. Each round the
/// loop labelled the model's optimum, found up to a spacing or so past the
/// labelled rows and predicted without its label
/// ([`crate::learn::model::meta::OptimumError`]); when
/// those optima, at least [`MIN_OPTIMUM_CHECKS`] of them on this very
/// design, all measured within a share `e` of their prediction (`e` the
/// worst optimism, or the mean pessimism where that is larger), a spacing
/// costs `e * target_mean` instead, if that is less. A model whose optima
/// were off by a label spread or more is charged as before; one whose
/// optima measured as predicted (an oracle that operator counts nearly
/// determine, say) may follow its predictions further.
pub fn trust_unit(meta: &ModelMeta, label_spread: f64, trained_on_design: bool) -> f64 {
    match meta.optimum_error {
        Some(e) if trained_on_design && e.checked >= MIN_OPTIMUM_CHECKS => {
            let share = e.worst.max(-e.mean).max(0.0);
            label_spread.min(share * meta.target_mean.abs())
        }
        _ => label_spread,
    }
}
