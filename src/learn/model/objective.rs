//! A frozen ensemble as SmoothE's objective, made conservative so that
//! gradient descent cannot profit from the model's errors:
//!
//! `score = mean + kappa * std + trust * unit * (outside + beyond)`,
//!
//! where `std` is the spread of the ensemble, `outside` measures how far
//! the features leave the box the training labels span (per feature, the
//! overshoot divided by the box's width, at least 1, summed), and `beyond`
//! how far they are from the nearest training row past the rows' typical
//! spacing (in spacings). Near the labelled data the score is the mean
//! plus an uncertainty premium; away from it, every spacing costs `trust`
//! units, so gradient descent cannot wander to where the model is wrong.
//! The unit is the standard deviation of the training labels (of this
//! design's, for a relative model, [`label_spread`]), or less where the
//! loop that trained the model measured its optima close to their
//! predictions ([`crate::learn::model::trust::trust_unit`]). Every term is differentiable in the node
//! probabilities, so SmoothE, its decoding and its polishing all judge
//! candidates by the same score.

use crate::cost::CostModel;
use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::learn::model::features::{FeatureKind, Featurizer};
use crate::learn::model::measured;
use crate::learn::model::meta::ReferenceEstimate;
use crate::learn::model::network::Ensemble;
use crate::learn::model::reference::Reference;
use crate::learn::model::trust::{label_spread, trust_unit, Conservatism};
use crate::learn::oracle::identity::choices_key;
use crate::preprocess::Reduced;
use anyhow::{bail, Result};
use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The model's verdict on one extraction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Ensemble mean (oracle units).
    pub mean: f64,
    /// Ensemble standard deviation (oracle units): how much the members
    /// disagree, what the conservative objective charges.
    pub std: f64,
    /// Expected error of `mean` (oracle units): `std` with the members'
    /// out-of-fold error added ([`Ensemble::prediction_error`]), the error
    /// bar reports print, and what a frozen choice charges a candidate the
    /// oracle did not measure ([`CostModel::selection_costs`]). Near the
    /// training labels; farther away, see `distance`. Equal to `std` for a
    /// model file without that error; 0 where a prediction serialised
    /// before it existed is read back.
    #[serde(default)]
    pub error: f64,
    /// How far the features lie outside the training range (0: inside).
    pub outside: f64,
    /// Features outside the training range.
    pub features_outside: usize,
    /// Distance to the nearest training row, in units of the training
    /// rows' typical spacing (about 1 inside the labelled region).
    pub distance: f64,
    /// The real cost the oracle measured for this extraction of this
    /// design in training, if it did (see [`crate::learn::model::measured`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
}

/// How a bound model relates to the design it judges.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DesignFit {
    /// Whether the labels it learned include this design's (by the
    /// e-graph's fingerprint).
    pub trained_on_design: bool,
    /// Designs it was trained on.
    pub training_designs: usize,
    /// For a relative model (trained over several designs), the cost of
    /// this design's reference extraction its predictions are scaled by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceEstimate>,
}

impl DesignFit {
    /// An absolute model (trained by the loop on its own designs, with no
    /// relative frame or transfer margin) applied to a design it never
    /// saw: its predictions here are extrapolations in every sense.
    pub fn uncalibrated_transfer(&self) -> bool {
        !self.trained_on_design && self.reference.is_none()
    }
}

/// A frozen ensemble bound to one preprocessed e-graph, as a [`CostModel`].
pub struct LearnedCost {
    model: Ensemble,
    featurizer: Featurizer,
    /// How conservative [`CostModel::expected`] and [`CostModel::cost_of`] are.
    pub conservatism: Conservatism,
    low: Vec<f64>,
    high: Vec<f64>,
    width: Vec<f64>,
    design: DesignFit,
    /// What the oracle measured on this design, by extraction key.
    measured: HashMap<String, f64>,
    /// The spread of the labels on this design (see [`label_spread`]).
    label_spread: f64,
    /// Oracle units one unit of `outside + beyond` costs, before `trust`
    /// (see [`trust_unit`]).
    trust_unit: f64,
}

impl LearnedCost {
    /// Binds `model` to `problem` (preprocessed from `original`). A relative model is
    /// bound to the design's dag-greedy reference first (see
    /// [`crate::learn::model::reference`]). Refuses a graph with
    /// an operator the model has no feature for, naming it; an operator
    /// pair it has never seen counts as `pair:<unseen>`, which lies outside
    /// the training range and so is charged by the trust region.
    pub fn new(model: Ensemble, problem: &Reduced, original: &EGraph, conservatism: Conservatism) -> Result<Self> {
        let kind = model.meta.features.kind;
        let names = model.meta.features.names.clone();
        let unknown: Vec<String> = Featurizer::unknown_features(kind, problem, original, &names)
            .into_iter()
            .filter(|n| n.starts_with("count:"))
            .map(|n| n.trim_start_matches("count:").to_string())
            .collect();
        if !unknown.is_empty() {
            bail!(
                "the model has never seen the operator(s) {} of this e-graph (it knows {}); \
                 train it on labels that use them",
                unknown.join(", "),
                names.iter().filter_map(|n| n.strip_prefix("count:")).collect::<Vec<_>>().join(", ")
            );
        }
        if kind == FeatureKind::OpCounts && model.meta.features.names.iter().any(|n| n.starts_with("pair:")) {
            bail!("feature layout says op-counts but lists operator pairs");
        }
        let featurizer = Featurizer::new(kind, problem, original, &names);
        let fingerprint = original.fingerprint();
        let measured = measured::lookup(&model.meta.measured, &fingerprint);
        let trained_on_design = model.meta.egraphs.contains(&fingerprint);
        let training_designs = model.meta.egraphs.len();
        let mut model = model;
        let reference = match model.meta.relative.clone() {
            Some(frame) => {
                let r = Reference::of(problem, &featurizer)?;
                let estimate = frame.cost_for(&original.fingerprint(), r.nodes)?;
                model = r.absolute(&model, estimate.cost)?;
                Some(estimate)
            }
            None => None,
        };
        let low = model.meta.feature_low.clone();
        let high = model.meta.feature_high.clone();
        let width = low.iter().zip(&high).map(|(l, h)| (h - l).max(1.0)).collect();
        let design = DesignFit { trained_on_design, training_designs, reference };
        // A relative model is the one bound through a reference.
        let label_spread = label_spread(&model.meta, &measured, design.reference.is_some());
        let trust_unit = trust_unit(&model.meta, label_spread, trained_on_design);
        Ok(LearnedCost {
            model,
            featurizer,
            conservatism,
            low,
            high,
            width,
            design,
            measured,
            label_spread,
            trust_unit,
        })
    }

    /// How the model relates to the design it is bound to: trained on it
    /// or not, on how many designs, and for a relative model the cost of
    /// this design's reference (dag-greedy) extraction that its predictions
    /// are scaled by, measured or estimated from the training designs.
    pub fn design_fit(&self) -> DesignFit {
        self.design
    }

    /// The model.
    pub fn model(&self) -> &Ensemble {
        &self.model
    }

    /// The conservative score of a prediction.
    pub fn score(&self, p: &Prediction) -> f64 {
        self.score_charging(p, p.std)
    }

    /// [`Self::score`] charging `kappa` times `uncertainty` (the spread,
    /// or the expected error) in place of `kappa` spreads.
    fn score_charging(&self, p: &Prediction, uncertainty: f64) -> f64 {
        p.mean + self.conservatism.kappa * uncertainty + self.charge(p)
    }

    /// The trust-region charge: `trust` times [`Self::trust_unit`] per
    /// range-width outside the training box, and per spacing beyond
    /// `free_distance` from the nearest training row.
    pub fn charge(&self, p: &Prediction) -> f64 {
        let beyond = (p.distance - self.conservatism.free_distance).max(0.0);
        self.conservatism.trust * self.trust_unit * (p.outside + beyond)
    }

    /// Oracle units that a box-width or spacing away from the training
    /// data costs, before `trust` (see [`trust_unit`]).
    pub fn trust_unit(&self) -> f64 {
        self.trust_unit
    }

    /// The spread of the labels the trust unit starts from on this design
    /// (see [`label_spread`]).
    pub fn label_spread(&self) -> f64 {
        self.label_spread
    }

    /// Lower confidence bound `mean - beta * std`, plus the charge for
    /// leaving the training box only: the acquisition rule of the active
    /// loop. The loop bounds how far it moves by its candidate moves (the
    /// trust-region radius) and wants to label where the model is unsure,
    /// so the distance charge, which exists to keep a frozen model near its
    /// data, stays out of it (with it, the loop explores too little).
    pub fn lower_bound(&self, p: &Prediction, beta: f64) -> f64 {
        p.mean - beta * p.std + self.box_charge(p)
    }

    /// The charge for leaving the box of the training features alone.
    fn box_charge(&self, p: &Prediction) -> f64 {
        self.conservatism.trust * self.trust_unit * p.outside
    }

    /// The model's verdicts on extractions of the reduced graph, batched,
    /// each with what the oracle measured for it in training, if it did.
    pub fn predict(&self, extractions: &[Extraction]) -> Result<Vec<Prediction>> {
        let mut out = self.predict_unmeasured(extractions)?;
        if !self.measured.is_empty() {
            for (p, e) in out.iter_mut().zip(extractions) {
                p.measured = self.measured.get(&choices_key(self.featurizer.graph(), e)?).copied();
            }
        }
        Ok(out)
    }

    /// [`Self::predict`] without the lookup of measured costs (`measured`
    /// stays `None`): what an optimiser's scores and the loop's ranking of
    /// new candidates read. The lookup hashes every chosen class's and
    /// node's name, a large share of an optimiser's time, for an answer
    /// only the final choice reads.
    pub fn predict_unmeasured(&self, extractions: &[Extraction]) -> Result<Vec<Prediction>> {
        let mut out = Vec::with_capacity(extractions.len());
        for chunk in extractions.chunks(256) {
            let rows: Vec<Vec<f64>> = chunk.iter().map(|e| self.featurizer.of_extraction(e)).collect::<Result<_>>()?;
            let x = self.featurizer.tensor_of(&rows, self.model.device())?;
            let p = self.model.predict(&x)?;
            let mean: Vec<f64> = p.mean.to_dtype(DType::F64)?.to_vec1()?;
            let std: Vec<f64> = p.std.to_dtype(DType::F64)?.to_vec1()?;
            let distance: Vec<f64> = p.distance.to_dtype(DType::F64)?.to_vec1()?;
            for (((row, mean), std), distance) in rows.iter().zip(mean).zip(std).zip(distance) {
                let (outside, features_outside) = self.outside(row);
                let error = self.model.prediction_error(std);
                out.push(Prediction { mean, std, error, outside, features_outside, distance, measured: None });
            }
        }
        Ok(out)
    }

    /// Conservative scores of extractions.
    pub fn scores(&self, extractions: &[Extraction]) -> Result<Vec<f64>> {
        Ok(self.predict_unmeasured(extractions)?.iter().map(|p| self.score(p)).collect())
    }

    fn outside(&self, row: &[f64]) -> (f64, usize) {
        let mut total = 0.0;
        let mut count = 0;
        for (((&x, &low), &high), &width) in row.iter().zip(&self.low).zip(&self.high).zip(&self.width) {
            let over = (x - high).max(0.0) + (low - x).max(0.0);
            if over > 1e-9 {
                total += over / width;
                count += 1;
            }
        }
        (total, count)
    }
}

impl CostModel for LearnedCost {
    fn name(&self) -> String {
        let c = self.conservatism;
        format!("ensemble mean + {} std + {} trust", c.kappa, c.trust)
    }
    fn expected(&self, node_prob: &Tensor) -> candle_core::Result<Tensor> {
        let dev = node_prob.device();
        let dtype = node_prob.dtype();
        let x = self.featurizer.of_probabilities(node_prob)?;
        let p = self.model.predict(&x)?;
        let mut y = (p.mean + (p.std * self.conservatism.kappa)?)?;
        if self.conservatism.trust > 0.0 {
            let f = self.low.len();
            let low = Tensor::from_slice(&self.low, f, dev)?.to_dtype(dtype)?;
            let high = Tensor::from_slice(&self.high, f, dev)?.to_dtype(dtype)?;
            let width = Tensor::from_slice(&self.width, f, dev)?.to_dtype(dtype)?;
            let over = (x.broadcast_sub(&high)?.relu()? + x.broadcast_sub(&low)?.neg()?.relu()?)?;
            let outside = over.broadcast_div(&width)?.sum(1)?;
            let beyond = (p.distance - self.conservatism.free_distance)?.relu()?;
            y = (y + ((outside + beyond)? * (self.conservatism.trust * self.trust_unit))?)?;
        }
        Ok(y)
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        self.scores(std::slice::from_ref(extraction)).map_or(f64::INFINITY, |y| y[0])
    }
    fn costs_of(&self, extractions: &[Extraction]) -> Vec<f64> {
        self.scores(extractions).unwrap_or_else(|_| vec![f64::INFINITY; extractions.len()])
    }
    /// On a design the model was trained on (or any design, for a model
    /// that is not relative), the conservative scores, with expected
    /// errors in place of spreads (below). On a new design (a relative
    /// model whose reference cost is estimated), the mean plus `kappa`
    /// standard deviations, without the
    /// trust-region charge. There every candidate but the reference
    /// lies far from the training rows, which are other designs' (the
    /// reference sits at the origin of the relative frame, where every
    /// training design's reference has target 0), so the charge only says
    /// "not the reference" and outweighs any predicted difference. The
    /// reference's relative cost is 0 by definition, while another
    /// candidate's is uncertain by the ensemble's spread: so a candidate
    /// replaces the reference when the model expects it cheaper by more
    /// than `kappa` spreads: where the plain mean would trust a prediction
    /// whose spread is a large share of it, this keeps the reference.
    ///
    /// Either way, a candidate the oracle measured on this design in
    /// training is judged by that measurement, with no spread (see
    /// [`crate::learn::model::measured`]). Where the conservative score applies, an
    /// unmeasured candidate's score charges `kappa` expected errors
    /// ([`Prediction::error`]: the spread with the members' out-of-fold
    /// error added) instead of `kappa` spreads: what the choice weighs is
    /// a measurement against a prediction, and near the labels the spread
    /// alone understates how far a prediction is off, so charging it would
    /// favour predictions over measurements by the error the members
    /// share. A new design keeps the spread: the floor is an error within
    /// the training designs, and what the choice there pays for the
    /// model's error on a design left out is the transfer margin of
    /// [`CostModel::optimum_charge`], calibrated for it.
    fn selection_costs(&self, extractions: &[Extraction]) -> Vec<f64> {
        let trained = self.design.reference.is_none_or(|r| r.measured);
        let preds = match self.predict(extractions) {
            Ok(preds) => preds,
            Err(_) => return vec![f64::INFINITY; extractions.len()],
        };
        preds
            .iter()
            .map(|p| match p.measured {
                Some(cost) => cost,
                None if trained => self.score_charging(p, p.error),
                None => p.mean + self.conservatism.kappa * p.std,
            })
            .collect()
    }
    /// On a new design, the model's calibrated transfer margin (how far
    /// its predicted differences were off on training designs left out in
    /// turn, see [`crate::learn::model::reference::transfer_margin`]) in this design's
    /// estimated cost units: the optimum must be predicted cheaper than a
    /// model-free extraction by more than that to replace it. Without a
    /// calibration (a corpus of one design, an older model file), no
    /// margin.
    ///
    /// On the design the model's active loop was trained on, the loop's
    /// own optimism instead: each round it labelled the model's optimum,
    /// and those optima measured up to
    /// [`crate::learn::model::meta::OptimumError::worst`] (as a share of the
    /// prediction) above what the model predicted. An optimum found by
    /// optimising against the frozen model is the same kind of pick, so
    /// its predicted mean is charged that share (when positive) before it
    /// is compared with extractions the oracle measured. The worst share,
    /// not the mean: the same record sets how far the optimiser may leave
    /// the training data ([`crate::learn::model::trust::trust_unit`]), so the optimum it vouches for
    /// pays the record's bound. Charging the mean share instead, with that
    /// trust unit, lets an optimum the model overrates past a measured
    /// extraction that is in fact cheaper. An optimum the
    /// oracle measured itself, or a model without that record (one not
    /// trained by the loop), pays nothing.
    fn optimum_charge(&self, optimum: &Extraction) -> f64 {
        match (self.design.reference, self.model.meta.transfer_margin, self.model.meta.optimum_error) {
            (Some(r), Some(margin), _) if !r.measured => margin * r.cost,
            (_, _, Some(error)) if self.design.trained_on_design && error.worst > 0.0 => {
                match self.predict(std::slice::from_ref(optimum)).as_deref() {
                    Ok([p]) if p.measured.is_none() && p.mean.is_finite() => error.worst * p.mean.max(0.0),
                    _ => 0.0,
                }
            }
            _ => 0.0,
        }
    }
}
