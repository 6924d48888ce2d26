//! Where an extraction stands relative to its design, so that one model
//! can learn from several designs and apply to new ones.
//!
//! Designs differ in size by orders of magnitude, and their real costs with
//! them, so a model fitted on raw feature counts of some designs has never
//! seen the counts of another. A *relative* model reads instead
//!
//! `(features(e) - features(r)) / nodes(r)` and predicts `(cost(e) - cost(r)) / cost(r)`,
//!
//! where `r` is the design's dag-greedy extraction (computed without an
//! oracle call) and `nodes(r)` its chosen node count: what a change of
//! operator mix, per node of the design, does to the real cost, in
//! proportion. Design-wide effects (size, how well the synthesis tool
//! does on the design as a whole) cancel in the difference.
//!
//! Bound to one design ([`Reference::absolute`]), a relative model becomes
//! an ordinary model in that design's units, so the conservative objective,
//! its trust region and SmoothE use it unchanged. `cost(r)` is the label of
//! the dag-greedy extraction for a design the model was trained on; for a
//! new design it is estimated from the training designs' cost per node,
//! which shifts and scales the predictions but not their order, so it does
//! not change which extraction SmoothE finds.
//!
//! How far a relative model's predicted *differences* can be trusted on a
//! new design is measured when it is trained: each training design is left
//! out in turn, a model fitted on the others predicts its labelled
//! extractions, and [`transfer_margin`] summarises how much the predicted
//! differences understated the real ones. On a new design the optimiser's
//! own result, chosen because the model scores it low, must then beat the
//! model-free extractions by that margin to be picked.

use crate::extract::{DagGreedy, Extractor};
use crate::extraction::Extraction;
use crate::learn::model::dataset::Labelled;
use crate::learn::model::features::Featurizer;
use crate::learn::model::network::Ensemble;
use crate::preprocess::Reduced;
use anyhow::{bail, Result};

/// Share of a held-out design's pairs of labelled extractions whose cost
/// difference [`transfer_margin`] covers.
pub const TRANSFER_QUANTILE: f64 = 0.9;

/// How far a relative model understates real cost differences on designs
/// it never saw. `held_out` holds, per design, the relative targets
/// predicted by a model fitted without that design and the real ones. For
/// every ordered pair `(x, y)` of the design's labelled extractions, the
/// understatement is `(real[x] - real[y]) - (predicted[x] - predicted[y])`:
/// how much dearer `x` really is against `y` than predicted, as a share of
/// the design's reference cost. Returns the [`TRANSFER_QUANTILE`] quantile
/// of the understatements, each design weighing the same whatever its
/// number of labels, and never below 0; `None` when no design has two
/// labels.
///
/// ```
/// use smoothe::learn::model::reference::transfer_margin;
/// // A model that predicts every difference exactly needs no margin.
/// let exact = vec![(vec![0.0, 0.1, -0.2], vec![0.0, 0.1, -0.2])];
/// assert_eq!(transfer_margin(&exact), Some(0.0));
/// // One whose predicted differences are off by 0.05 gets that margin.
/// let off = vec![(vec![0.0, 0.0], vec![0.0, 0.05])];
/// assert!((transfer_margin(&off).unwrap() - 0.05).abs() < 1e-12);
/// ```
pub fn transfer_margin(held_out: &[(Vec<f64>, Vec<f64>)]) -> Option<f64> {
    let mut weighted: Vec<(f64, f64)> = Vec::new();
    for (predicted, real) in held_out {
        let n = predicted.len().min(real.len());
        if n < 2 {
            continue;
        }
        let weight = 1.0 / (n * (n - 1)) as f64;
        for x in 0..n {
            for y in (0..n).filter(|&y| y != x) {
                let understatement = (real[x] - real[y]) - (predicted[x] - predicted[y]);
                if understatement.is_finite() {
                    weighted.push((understatement, weight));
                }
            }
        }
    }
    if weighted.is_empty() {
        return None;
    }
    weighted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = weighted.iter().map(|(_, w)| w).sum();
    let mut below = 0.0;
    for &(u, w) in &weighted {
        below += w;
        if below >= TRANSFER_QUANTILE * total {
            return Some(u.max(0.0));
        }
    }
    weighted.last().map(|(u, _)| u.max(0.0))
}

/// A design's labels in relative terms, ready for [`crate::learn::model::train::train`].
#[derive(Debug, Clone, Default)]
pub struct RelativeData {
    /// Relative feature rows.
    pub rows: Vec<Vec<f64>>,
    /// Relative targets.
    pub targets: Vec<f64>,
    /// Test-split flags.
    pub test: Vec<bool>,
}

/// A design's reference extraction, as features.
pub struct Reference {
    /// The dag-greedy extraction of the preprocessed graph.
    pub extraction: Extraction,
    /// Its features.
    pub features: Vec<f64>,
    /// Its chosen (original) node count: the sum of the `count:` features.
    pub nodes: f64,
}

impl Reference {
    /// The reference of `problem` in `featurizer`'s layout.
    pub fn of(problem: &Reduced, featurizer: &Featurizer) -> Result<Reference> {
        let extraction = DagGreedy.extract(problem)?;
        let features = featurizer.of_extraction(&extraction)?;
        let nodes: f64 = featurizer
            .layout
            .names
            .iter()
            .zip(&features)
            .filter(|(n, _)| n.starts_with("count:"))
            .map(|(_, v)| v)
            .sum();
        if nodes <= 0.0 {
            bail!("the dag-greedy extraction chooses no node");
        }
        Ok(Reference { extraction, features, nodes })
    }

    /// The relative features of an extraction's features.
    pub fn relative_row(&self, row: &[f64]) -> Vec<f64> {
        row.iter().zip(&self.features).map(|(x, r)| (x - r) / self.nodes).collect()
    }

    /// The relative target of a real cost, given the reference's cost.
    pub fn relative_target(cost: f64, reference_cost: f64) -> f64 {
        (cost - reference_cost) / reference_cost
    }

    /// Relative rows, targets and test flags of a design's labelled
    /// extractions, given the real cost of this reference.
    pub fn relative_data(
        &self,
        featurizer: &Featurizer,
        data: &[Labelled],
        reference_cost: f64,
    ) -> Result<RelativeData> {
        if !(reference_cost.is_finite() && reference_cost > 0.0) {
            bail!(
                "the dag-greedy extraction measured {reference_cost}; a model that transfers between designs \
                 measures costs relative to it, so it must be positive"
            );
        }
        let mut rows = Vec::with_capacity(data.len());
        for l in data {
            rows.push(self.relative_row(&featurizer.of_extraction(&l.extraction)?));
        }
        let targets = data.iter().map(|l| Self::relative_target(l.cost, reference_cost)).collect();
        Ok(RelativeData { rows, targets, test: data.iter().map(|l| l.test).collect() })
    }

    /// `model` (relative) as an ordinary model of this design, whose
    /// reference costs `reference_cost`: the relative transform folds into
    /// its normalisation and feature range; the anchors, kept standardised,
    /// need no change.
    pub fn absolute(&self, model: &Ensemble, reference_cost: f64) -> Result<Ensemble> {
        if !(reference_cost.is_finite() && reference_cost > 0.0) {
            bail!("a relative model needs a positive reference cost, got {reference_cost}");
        }
        let mut meta = model.meta.clone();
        let (r, s) = (&self.features, self.nodes);
        for (j, &rj) in r.iter().enumerate() {
            meta.input_mean[j] = rj + s * meta.input_mean[j];
            meta.input_scale[j] *= s;
            meta.feature_low[j] = rj + s * meta.feature_low[j];
            meta.feature_high[j] = rj + s * meta.feature_high[j];
        }
        meta.target_mean = reference_cost * (1.0 + meta.target_mean);
        meta.target_std *= reference_cost;
        meta.relative = None;
        model.with_meta(meta)
    }
}
