//! How the active loop ranks candidates for labelling: one [`Rank`] trait,
//! with rules over the ensemble's mean and spread, over a Gaussian process
//! of this design's labels, or none at all.

use crate::extraction::Extraction;
use crate::learn::active::selection_gp::SelectionGp;
use crate::learn::model::dataset::Labelled;
use crate::learn::model::objective::LearnedCost;
use anyhow::Result;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

/// How the model picks what to label from the screened candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Acquisition {
    /// Lowest `mean - beta * std` of the ensemble (plus the trust-region
    /// charge; `beta` 0 ranks by the mean).
    Lcb,
    /// Lowest `mean - beta * std` of a Gaussian process over this design's
    /// labelled extractions with a Hamming kernel on their choices (see
    /// [`crate::learn::active::selection_gp`]), instead of the ensemble.
    SelectionGp,
    /// Uniformly at random, ignoring the model (an ablation: the loop's
    /// own candidate pool without a model).
    Random,
}

impl Acquisition {
    /// The rule as a ranker, with `beta` for the bounds that take one.
    pub fn ranker(self, beta: f64) -> Box<dyn Rank> {
        match self {
            Acquisition::Random => Box::new(RandomOrder),
            Acquisition::SelectionGp => Box::new(SelectionGpBound { beta }),
            Acquisition::Lcb => Box::new(EnsembleBound { beta }),
        }
    }

    /// Whether the rule ranks by the model (every rule but `random`): only
    /// then does a round also label the model's own picks and refit it.
    pub fn reads_model(self) -> bool {
        self != Acquisition::Random
    }
}

/// What a ranking may read in a round.
pub struct RoundView<'a> {
    /// The design's labelled extractions so far.
    pub data: &'a [Labelled],
    /// The round's model as SmoothE's objective.
    pub cost: &'a LearnedCost,
}

/// Orders a round's screened candidates for labelling.
pub trait Rank {
    /// A permutation of the indices of `candidates`, the ones to label
    /// first first. Rules that draw at random use `rng`.
    fn order(&self, candidates: &[Extraction], view: &RoundView, rng: &mut StdRng) -> Result<Vec<usize>>;
}

/// Uniformly at random: the ablation without a model.
struct RandomOrder;

impl Rank for RandomOrder {
    fn order(&self, candidates: &[Extraction], _: &RoundView, rng: &mut StdRng) -> Result<Vec<usize>> {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.shuffle(rng);
        Ok(order)
    }
}

/// The lower bound of a Gaussian process over the design's labels; the
/// pool's order when there are too few labels to fit one.
struct SelectionGpBound {
    beta: f64,
}

impl Rank for SelectionGpBound {
    fn order(&self, candidates: &[Extraction], view: &RoundView, _: &mut StdRng) -> Result<Vec<usize>> {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        let labels: Vec<(&Extraction, f64)> = view.data.iter().map(|l| (&l.extraction, l.cost)).collect();
        if let Some(gp) = SelectionGp::fit(&labels) {
            let rank: Vec<f64> = gp.predict(candidates).iter().map(|(m, s)| m - self.beta * s).collect();
            order.sort_by(|&a, &b| rank[a].total_cmp(&rank[b]));
        }
        Ok(order)
    }
}

/// The ensemble's lower bound, trust-region charge included. It reads
/// predictions only, never a measured cost (the pool skips the labelled
/// extractions).
struct EnsembleBound {
    beta: f64,
}

impl Rank for EnsembleBound {
    fn order(&self, candidates: &[Extraction], view: &RoundView, _: &mut StdRng) -> Result<Vec<usize>> {
        let cost = view.cost;
        let rank: Vec<f64> =
            cost.predict_unmeasured(candidates)?.iter().map(|p| cost.lower_bound(p, self.beta)).collect();
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by(|&a, &b| rank[a].total_cmp(&rank[b]));
        Ok(order)
    }
}

impl crate::config::Choice for Acquisition {
    const NAMES: &'static [&'static str] = &["lcb", "selection-gp", "random"];
}
