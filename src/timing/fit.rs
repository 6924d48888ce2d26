//! A learnable static-timing model: per-operator delays fitted so that the
//! arrival time of labelled extractions matches their measured delay.
//!
//! The model is the arrival time itself (max-plus over the chosen DAG) with
//! one non-negative delay per operator, the leaf delay acting as the
//! constant every path pays. It sees depth and the critical path by
//! construction, depends on operators only (so it applies to any design in
//! the same operator language and cell library), and the fitted delays are
//! an ordinary `--op-delays` file: `extract --objective delay` or
//! `--constraint 'delay<=T'` then optimise the learned delay with no oracle
//! call.

use super::op::ArrivalOp;
use super::{OpDelays, TimingGraph};
use crate::extraction::Extraction;
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::Optimizer;
use candle_optimisers::adam::{Adam, ParamsAdam};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How the delays are fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct FitConfig {
    /// Full-batch Adam steps.
    pub steps: usize,
    /// Adam's step size, relative to the starting delays' scale; it decays
    /// to a twentieth of this by the last step.
    pub learning_rate: f64,
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig { steps: 600, learning_rate: 0.05 }
    }
}

/// Fitted delays, per operator of a [`TimingGraph`].
#[derive(Debug, Clone, PartialEq)]
pub struct DelayFit {
    /// Delay per timing operator, in [`TimingGraph::ops`] order.
    pub delay: Vec<f64>,
    /// Mean squared error on the fitted labels.
    pub train_mse: f64,
}

impl DelayFit {
    /// The fitted delays as an [`OpDelays`] map (what `--op-delays` reads).
    pub fn op_delays(&self, timing: &TimingGraph) -> OpDelays {
        let map: BTreeMap<String, f64> = timing.ops().iter().cloned().zip(self.delay.iter().copied()).collect();
        OpDelays::from_map(map).expect("fitted delays are finite and non-negative")
    }
}

/// One-hot node probabilities `[nodes, extractions]` of valid extractions.
fn one_hot_columns(timing: &TimingGraph, extractions: &[Extraction], device: &Device) -> Result<Tensor> {
    let g = timing.graph();
    let width = extractions.len();
    let mut p = vec![0.0f64; g.num_nodes() * width];
    for (i, e) in extractions.iter().enumerate() {
        for c in e.check(g)? {
            p[e.choices[c.index()].expect("checked").index() * width + i] = 1.0;
        }
    }
    Ok(Tensor::from_vec(p, (g.num_nodes(), width), device)?)
}

/// Fits per-op delays to `labels`, the measured delays of `extractions`
/// (valid extractions of `timing`'s graph), by least squares through the
/// arrival-time layer. Starts from the best affine calibration of depth
/// (least squares over the ops, each zeroed in turn) and keeps the best
/// delays seen; delays stay
/// non-negative.
pub fn fit_delays(
    timing: &Arc<TimingGraph>,
    extractions: &[Extraction],
    labels: &[f64],
    config: &FitConfig,
) -> Result<DelayFit> {
    if extractions.is_empty() || extractions.len() != labels.len() {
        bail!("fitting delays needs labelled extractions ({} extractions, {} labels)", extractions.len(), labels.len());
    }
    let device = Device::Cpu;
    let (start, per_op) = calibrated_start(timing, extractions, labels)?;
    // Steps sized to an operator's delay (or, where the calibration found
    // none, a tenth of the mean label).
    let mean_label = labels.iter().map(|y| y.abs()).sum::<f64>() / labels.len() as f64;
    let scale = if per_op > 0.0 { per_op } else { (mean_label / 10.0).max(1e-9) };
    let probs = one_hot_columns(timing, extractions, &device)?;
    let target = Tensor::from_vec(labels.to_vec(), labels.len(), &device)?;
    let delay = Var::from_vec(start.clone(), start.len(), &device)?;
    let lr = config.learning_rate * scale;
    let mut adam = Adam::new(vec![delay.clone()], ParamsAdam { lr, ..Default::default() })?;
    let op = ArrivalOp::new(timing.clone());
    let mse = |d: &Tensor| -> Result<Tensor> { Ok(op.apply(&probs, d)?.sub(&target)?.sqr()?.mean_all()?) };
    let mut best = DelayFit { train_mse: mse(delay.as_tensor())?.to_dtype(DType::F64)?.to_scalar()?, delay: start };
    for step in 0..config.steps {
        let loss = mse(delay.as_tensor())?;
        let value: f64 = loss.to_dtype(DType::F64)?.to_scalar()?;
        if value < best.train_mse {
            best = DelayFit { delay: delay.as_tensor().to_vec1()?, train_mse: value };
        }
        let progress = step as f64 / config.steps.max(1) as f64;
        adam.set_learning_rate(lr * 20f64.powf(-progress));
        adam.step(&loss.backward()?)?;
        delay.set(&delay.as_tensor().clamp(0.0, f64::MAX)?)?;
    }
    let last: f64 = mse(delay.as_tensor())?.to_dtype(DType::F64)?.to_scalar()?;
    if last < best.train_mse {
        best = DelayFit { delay: delay.as_tensor().to_vec1()?, train_mse: last };
    }
    Ok(best)
}

/// The starting delays: depth in operators calibrated to the labels by
/// least squares, `y ~ a * depth + b`, with `a` the delay of every operator
/// and `b >= 0` the leaf delay (every path ends at a leaf, so this is exact
/// for the calibrated model). Tried with every operator counted, and with
/// each operator in turn free (a flow may absorb one, as ABC's structural
/// hashing absorbs inverters); the start of least squared error is kept.
/// Descending from a plain rescaling of depth instead often collapsed onto
/// a constant predictor (operator delays 0, the mean in the leaf delay).
/// Returns the delays and the calibrated operator delay `a`.
fn calibrated_start(timing: &TimingGraph, extractions: &[Extraction], labels: &[f64]) -> Result<(Vec<f64>, f64)> {
    let ops = timing.ops();
    let unit = timing.delay_vector(&OpDelays::unit());
    let leaf = ops.iter().position(|op| op == super::LEAF_OP);
    let mut bases = vec![unit.clone()];
    for (i, op) in ops.iter().enumerate() {
        if op != super::LEAF_OP {
            let mut base = unit.clone();
            base[i] = 0.0;
            bases.push(base);
        }
    }
    let n = labels.len() as f64;
    let mean_y = labels.iter().sum::<f64>() / n;
    let mut best: Option<(f64, Vec<f64>, f64)> = None;
    for base in bases {
        let x: Vec<f64> = extractions.iter().map(|e| timing.arrival(e, &base)).collect::<Result<_>>()?;
        let mean_x = x.iter().sum::<f64>() / n;
        let sxx: f64 = x.iter().map(|v| (v - mean_x).powi(2)).sum();
        let sxy: f64 = x.iter().zip(labels).map(|(v, y)| (v - mean_x) * (y - mean_y)).sum();
        let a = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
        let b = (mean_y - a * mean_x).max(0.0);
        let sse: f64 = x.iter().zip(labels).map(|(v, y)| (a * v + b - y).powi(2)).sum();
        let mut delays: Vec<f64> = base.iter().map(|d| d * a).collect();
        if let Some(l) = leaf {
            delays[l] = b;
        }
        if best.as_ref().is_none_or(|(e, _, _)| sse < *e) {
            best = Some((sse, delays, a));
        }
    }
    let (_, delays, a) = best.expect("at least the unit start");
    Ok((delays, a))
}
