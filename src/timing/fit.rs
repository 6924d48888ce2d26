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
use crate::learn::model::metrics::spearman;
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::Optimizer;
use candle_optimisers::adam::{Adam, ParamsAdam};
use serde::{Deserialize, Serialize};
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

/// Delays fitted on a training share of labels and tested on the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingFit {
    /// The fitted delay per operator (`<leaf>`: inputs and constants).
    pub delays: BTreeMap<String, f64>,
    /// Labels fitted on.
    pub train: usize,
    /// Held-out labels.
    pub test: usize,
    /// Mean absolute error on the fitted labels.
    #[serde(deserialize_with = "nan_if_null")]
    pub train_mae: f64,
    /// Mean absolute error on the held-out labels (NaN without any).
    #[serde(deserialize_with = "nan_if_null")]
    pub test_mae: f64,
    /// `test_mae` over the held-out labels' mean magnitude.
    #[serde(deserialize_with = "nan_if_null")]
    pub test_relative_mae: f64,
    /// Rank correlation of predicted and measured held-out delays.
    #[serde(deserialize_with = "nan_if_null")]
    pub test_spearman: f64,
    /// The same for unit depth, the model with nothing learned.
    #[serde(deserialize_with = "nan_if_null")]
    pub test_spearman_unit_depth: f64,
}

impl TimingFit {
    /// The fitted delays as an [`OpDelays`] map.
    pub fn op_delays(&self) -> OpDelays {
        OpDelays::from_map(self.delays.clone()).expect("fitted delays are finite and non-negative")
    }
}

/// Reads a number written by serde_json, where NaN (no held-out labels, a
/// constant ranking) was written as `null`.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A labelled extraction for [`fit_and_test`].
pub struct TimingLabel {
    /// A valid extraction of the timing graph's graph.
    pub extraction: Extraction,
    /// Its measured delay.
    pub value: f64,
    /// Whether it is held out to test the fit.
    pub test: bool,
}

/// Fits delays ([`fit_delays`]) on the labels not held out and measures
/// the fit on those that are. Needs at least two training labels.
pub fn fit_and_test(timing: &Arc<TimingGraph>, labels: &[TimingLabel], config: &FitConfig) -> Result<TimingFit> {
    let split = |test: bool| -> (Vec<Extraction>, Vec<f64>) {
        labels.iter().filter(|l| l.test == test).map(|l| (l.extraction.clone(), l.value)).unzip()
    };
    let ((train_x, train_y), (test_x, test_y)) = (split(false), split(true));
    if train_x.len() < 2 {
        bail!("fitting delays needs at least 2 training labels, got {}", train_x.len());
    }
    let fit = fit_delays(timing, &train_x, &train_y, config)?;
    let delays = fit.op_delays(timing);
    let predict = |es: &[Extraction], d: &[f64]| es.iter().map(|e| timing.arrival(e, d)).collect::<Result<Vec<f64>>>();
    let mae = |p: &[f64], y: &[f64]| p.iter().zip(y).map(|(a, b)| (a - b).abs()).sum::<f64>() / y.len() as f64;
    let (train_pred, test_pred) = (predict(&train_x, &fit.delay)?, predict(&test_x, &fit.delay)?);
    let unit = predict(&test_x, &timing.delay_vector(&OpDelays::unit()))?;
    let test_mae = mae(&test_pred, &test_y);
    let magnitude = test_y.iter().map(|y| y.abs()).sum::<f64>() / test_y.len() as f64;
    Ok(TimingFit {
        delays: timing.ops().iter().map(|op| (op.clone(), delays.delay(op))).collect(),
        train: train_x.len(),
        test: test_x.len(),
        train_mae: mae(&train_pred, &train_y),
        test_mae,
        test_relative_mae: test_mae / magnitude,
        test_spearman: spearman(&test_pred, &test_y),
        test_spearman_unit_depth: spearman(&unit, &test_y),
    })
}

/// A fitted static-timing model of one metric, kept in a cost-model file
/// beside the ensemble: `extract --model` optimises or bounds `metric`
/// with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingHead {
    /// The metric it predicts (such as `delay`).
    pub metric: String,
    /// The fit and how it tested.
    #[serde(flatten)]
    pub fit: TimingFit,
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
    let (starts, per_op) = calibrated_starts(timing, extractions, labels)?;
    let mut start = Vec::new();
    let mut least = f64::INFINITY;
    for s in starts {
        let refined = refine_on_critical_paths(timing, extractions, labels, s)?;
        let error: f64 = extractions
            .iter()
            .zip(labels)
            .map(|(e, y)| Ok((timing.arrival(e, &refined)? - y).powi(2)))
            .sum::<Result<f64>>()?;
        if error < least {
            (start, least) = (refined, error);
        }
    }
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

/// Most rounds of [`refine_on_critical_paths`].
const CRITICAL_ROUNDS: usize = 30;

/// Sweeps of coordinate descent per round of [`refine_on_critical_paths`].
const SWEEPS: usize = 200;

/// Improves `delay` by rounds of least squares on fixed critical paths:
/// with each extraction's critical path held, arrival is linear in the
/// delays (the op counts along it, [`TimingGraph::critical_ops`]), so a
/// round solves that non-negative least-squares problem by coordinate
/// descent, and is kept while the true (max-plus) squared error falls.
/// Gradient steps alone stalled where a leaf delay and the operators'
/// traded off (several times the true leaf delay on exact labels).
fn refine_on_critical_paths(
    timing: &TimingGraph,
    extractions: &[Extraction],
    labels: &[f64],
    mut delay: Vec<f64>,
) -> Result<Vec<f64>> {
    let sse = |d: &[f64]| -> Result<f64> {
        let mut total = 0.0;
        for (e, y) in extractions.iter().zip(labels) {
            total += (timing.arrival(e, d)? - y).powi(2);
        }
        Ok(total)
    };
    let mut best = sse(&delay)?;
    for _ in 0..CRITICAL_ROUNDS {
        let rows: Vec<Vec<f64>> = extractions.iter().map(|e| timing.critical_ops(e, &delay)).collect::<Result<_>>()?;
        let mut next = delay.clone();
        let mut residual: Vec<f64> =
            rows.iter().zip(labels).map(|(r, y)| r.iter().zip(&next).map(|(a, d)| a * d).sum::<f64>() - y).collect();
        for _ in 0..SWEEPS {
            for j in 0..next.len() {
                let norm: f64 = rows.iter().map(|r| r[j] * r[j]).sum();
                if norm == 0.0 {
                    continue;
                }
                let slope: f64 = rows.iter().zip(&residual).map(|(r, e)| r[j] * e).sum();
                let moved = (next[j] - slope / norm).max(0.0);
                let step = moved - next[j];
                if step != 0.0 {
                    for (e, r) in residual.iter_mut().zip(&rows) {
                        *e += r[j] * step;
                    }
                    next[j] = moved;
                }
            }
        }
        // The least-squares solution of the linearised problem, or a
        // shorter step towards it where the critical paths move.
        let mut improved = false;
        for halving in 0..8 {
            let t = 0.5f64.powi(halving);
            let trial: Vec<f64> = delay.iter().zip(&next).map(|(a, b)| a + t * (b - a)).collect();
            let error = sse(&trial)?;
            if error < best * (1.0 - 1e-9) {
                (delay, best, improved) = (trial, error, true);
                break;
            }
        }
        if !improved {
            break;
        }
    }
    Ok(delay)
}

/// The starting delays: depth in operators calibrated to the labels by
/// least squares, `y ~ a * depth + b`, with `a` the delay of every operator
/// and `b >= 0` the leaf delay (every path ends at a leaf, so this is exact
/// for the calibrated model). Tried with every operator counted, and with
/// each operator in turn free (a flow may absorb one, as ABC's structural
/// hashing absorbs inverters); the start of least squared error is kept.
/// Descending from a plain rescaling of depth instead often collapsed onto
/// a constant predictor (operator delays 0, the mean in the leaf delay).
/// Returns every start, the best first, and the best start's calibrated
/// operator delay `a`.
fn calibrated_starts(timing: &TimingGraph, extractions: &[Extraction], labels: &[f64]) -> Result<(Vec<Vec<f64>>, f64)> {
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
    let mut all: Vec<(f64, Vec<f64>, f64)> = Vec::new();
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
        all.push((sse, delays, a));
    }
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let a = all[0].2;
    Ok((all.into_iter().map(|(_, d, _)| d).collect(), a))
}
