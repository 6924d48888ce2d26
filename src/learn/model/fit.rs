//! Fitting the members of an ensemble: the checked data split, AdamW on
//! the mean squared error of standardised targets from a seeded He
//! initialisation (or a model's weights, when fine-tuning), and early
//! stopping on each member's validation fold.

use crate::learn::model::meta::ModelMeta;
use crate::learn::model::network::Mlp;
use crate::normal::standard_normal as normal;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Linear, Module, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

/// Settings of fitting an ensemble ([`crate::learn::model::train::train`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Width of each of the two hidden layers.
    pub hidden: usize,
    /// Members of the ensemble (and cross-validation folds).
    pub members: usize,
    /// Most epochs (full-batch steps) per member.
    pub epochs: usize,
    /// AdamW learning rate.
    pub learning_rate: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Stop a member after this many epochs without a better validation error.
    pub patience: usize,
    /// Share of labels in the test split (chosen by a hash of the
    /// extraction, so a label stays in its split as the data grow).
    pub test_fraction: f64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            hidden: 32,
            members: 5,
            epochs: 2000,
            learning_rate: 3e-3,
            weight_decay: 1e-3,
            patience: 200,
            test_fraction: 0.15,
        }
    }
}

/// Rows, targets and test flags, checked, with the indices of each split.
pub(super) struct Split<'a> {
    pub(super) rows: &'a [Vec<f64>],
    pub(super) targets: &'a [f64],
    pub(super) train_idx: Vec<usize>,
    pub(super) test_idx: Vec<usize>,
}

impl<'a> Split<'a> {
    /// Checks the data; at least `min_train` rows must lie outside the test split.
    pub(super) fn new(
        rows: &'a [Vec<f64>],
        targets: &'a [f64],
        test: &[bool],
        f: usize,
        min_train: usize,
    ) -> Result<Self> {
        let n = rows.len();
        if targets.len() != n || test.len() != n || rows.iter().any(|r| r.len() != f) {
            bail!("training data are inconsistent: {n} rows, {} targets, {f} features", targets.len());
        }
        if let Some(i) = targets.iter().position(|t| !t.is_finite()) {
            bail!("label {i} is not a finite number");
        }
        let train_idx: Vec<usize> = (0..n).filter(|&i| !test[i]).collect();
        let test_idx: Vec<usize> = (0..n).filter(|&i| test[i]).collect();
        if train_idx.len() < min_train {
            bail!(
                "need at least {min_train} labelled extractions outside the test split to train, have {}",
                train_idx.len()
            );
        }
        Ok(Split { rows, targets, train_idx, test_idx })
    }

    /// The rows at `idx`, standardised by `meta`, and their standardised targets.
    pub(super) fn standardised(&self, idx: &[usize], meta: &ModelMeta, device: &Device) -> Result<(Tensor, Tensor)> {
        let f = meta.input_mean.len();
        let (mu, sd) = (&meta.input_mean, &meta.input_scale);
        let x: Vec<f32> =
            idx.iter().flat_map(|&i| (0..f).map(move |j| ((self.rows[i][j] - mu[j]) / sd[j]) as f32)).collect();
        let y: Vec<f32> =
            idx.iter().map(|&i| ((self.targets[i] - meta.target_mean) / meta.target_std) as f32).collect();
        Ok((Tensor::from_vec(x, (idx.len(), f), device)?, Tensor::from_vec(y, idx.len(), device)?))
    }

    /// The training rows standardised by `meta`, as anchor rows.
    pub(super) fn anchor_rows(&self, meta: &ModelMeta) -> Vec<Vec<f64>> {
        let (mu, sd) = (&meta.input_mean, &meta.input_scale);
        self.train_idx.iter().map(|&i| (0..mu.len()).map(|j| (self.rows[i][j] - mu[j]) / sd[j]).collect()).collect()
    }
}

/// What fitting the members gave: their layers, out-of-fold predictions
/// (oracle units, NaN where none) and the epochs run in all.
pub(super) struct Fitted {
    pub(super) members: Vec<Mlp>,
    pub(super) out_of_fold: Vec<f64>,
    pub(super) epochs: usize,
}

/// Fits every member on its folds (from `start`'s weights, or a seeded He
/// initialisation); with too few rows every member fits all of them for a
/// fixed number of epochs.
pub(super) fn fit_members(
    split: &Split,
    meta: &ModelMeta,
    start: Option<&[Mlp]>,
    config: &TrainConfig,
    rng: &mut StdRng,
    device: &Device,
) -> Result<Fitted> {
    let members = meta.members;
    let mut shuffled = split.train_idx.clone();
    shuffled.shuffle(rng);
    let use_folds = members > 1 && shuffled.len() >= 2 * members;
    let mut out_of_fold = vec![f64::NAN; split.rows.len()];
    let mut trained = Vec::with_capacity(members);
    let mut epochs_total = 0usize;
    for k in 0..members {
        let (fit_idx, val_idx): (Vec<usize>, Vec<usize>) = if use_folds {
            let fold = |p: usize| p % members == k;
            (
                shuffled.iter().enumerate().filter(|(p, _)| !fold(*p)).map(|(_, &i)| i).collect(),
                shuffled.iter().enumerate().filter(|(p, _)| fold(*p)).map(|(_, &i)| i).collect(),
            )
        } else {
            (shuffled.clone(), Vec::new())
        };
        let (x_fit, y_fit) = split.standardised(&fit_idx, meta, device)?;
        let val = if val_idx.is_empty() { None } else { Some(split.standardised(&val_idx, meta, device)?) };
        let init = start.map(|s| &s[k]);
        let (layers, epochs) = fit_member(&x_fit, &y_fit, val.as_ref(), &meta.hidden, init, config, rng)?;
        epochs_total += epochs;
        if let Some((x_val, _)) = &val {
            let p: Vec<f32> = layers.forward(x_val)?.to_vec1()?;
            for (&i, &y) in val_idx.iter().zip(&p) {
                out_of_fold[i] = y as f64 * meta.target_std + meta.target_mean;
            }
        }
        trained.push(layers);
    }
    Ok(Fitted { members: trained, out_of_fold, epochs: epochs_total })
}

/// Fits one member, from `init`'s weights or a seeded He initialisation;
/// with `val`, keeps the weights of the epoch with the least validation
/// error (the starting weights count when fine-tuning) and stops after
/// `patience` epochs without a better one. Returns the member and the
/// epochs run.
fn fit_member(
    x: &Tensor,
    y: &Tensor,
    val: Option<&(Tensor, Tensor)>,
    hidden: &[usize],
    init: Option<&Mlp>,
    config: &TrainConfig,
    rng: &mut StdRng,
) -> Result<(Mlp, usize)> {
    if let (Some(member), None) = (init, val) {
        // Too few labels for a validation fold: nothing would tell fitting
        // from forgetting, so the trained weights stay.
        return Ok((member.clone(), 0));
    }
    let mut dims = vec![x.dim(1)?];
    dims.extend(hidden);
    dims.push(1);
    let (varmap, vars) = starting_vars(&dims, init, rng, x.device())?;
    let live = Mlp::new(&dims, VarBuilder::from_varmap(&varmap, DType::F32, x.device()))?;
    let mut opt = AdamW::new(
        vars.clone(),
        ParamsAdamW { lr: config.learning_rate, weight_decay: config.weight_decay, ..Default::default() },
    )?;
    let epochs_cap = if val.is_some() { config.epochs } else { config.epochs.min(4 * config.patience.max(1)) };
    let snapshot = || vars.iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<Vec<_>>>();
    let val_loss = |(xv, yv): &(Tensor, Tensor)| -> Result<f64> {
        Ok((live.forward(xv)? - yv)?.sqr()?.mean_all()?.to_scalar::<f32>()? as f64)
    };
    let mut best = (f64::INFINITY, snapshot()?);
    if let (Some(v), Some(_)) = (val, init) {
        best.0 = val_loss(v)?;
    }
    let mut since_best = 0;
    let mut epochs = 0;
    for epoch in 0..epochs_cap {
        epochs = epoch + 1;
        let loss = (live.forward(x)? - y)?.sqr()?.mean_all()?;
        opt.backward_step(&loss)?;
        let Some(v) = val else { continue };
        let loss = val_loss(v)?;
        if loss < best.0 - 1e-9 {
            best = (loss, snapshot()?);
            since_best = 0;
        } else {
            since_best += 1;
            if since_best >= config.patience {
                break;
            }
        }
    }
    let weights = if val.is_some() { best.1 } else { snapshot()? };
    let layers = weights.chunks(2).map(|p| Linear::new(p[0].clone(), Some(p[1].clone()))).collect();
    Ok((Mlp::from_layers(layers), epochs))
}

/// The trainable variables of a member with layer widths `dims`, in a
/// `VarMap` under the names [`Mlp::new`] reads (`layer{i}.weight`,
/// `layer{i}.bias`) and as a list in layer order (weight, bias, ...):
/// copies of `init`'s weights, or a He initialisation drawn from `rng`
/// (biases 0), so that a seed fixes the fit.
fn starting_vars(dims: &[usize], init: Option<&Mlp>, rng: &mut StdRng, device: &Device) -> Result<(VarMap, Vec<Var>)> {
    let mut vars = Vec::new();
    match init {
        Some(member) => {
            for layer in member.layers() {
                vars.push(Var::from_tensor(&layer.weight().to_device(device)?.to_dtype(DType::F32)?)?);
                let bias = layer.bias().context("a layer without a bias")?;
                vars.push(Var::from_tensor(&bias.to_device(device)?.to_dtype(DType::F32)?)?);
            }
        }
        None => {
            for w in dims.windows(2) {
                let (fan_in, fan_out) = (w[0], w[1]);
                let sd = (2.0 / fan_in as f64).sqrt();
                let data: Vec<f32> = (0..fan_in * fan_out).map(|_| (normal(rng) * sd) as f32).collect();
                vars.push(Var::from_vec(data, (fan_out, fan_in), device)?);
                vars.push(Var::from_vec(vec![0f32; fan_out], fan_out, device)?);
            }
        }
    }
    if vars.len() + 2 != 2 * dims.len() {
        bail!("the starting member has {} layers, expected {}", vars.len() / 2, dims.len() - 1);
    }
    let varmap = VarMap::new();
    {
        let mut data = varmap.data().lock().map_err(|_| anyhow::anyhow!("the variable map's lock is poisoned"))?;
        for (i, pair) in vars.chunks(2).enumerate() {
            data.insert(format!("layer{i}.weight"), pair[0].clone());
            data.insert(format!("layer{i}.bias"), pair[1].clone());
        }
    }
    Ok((varmap, vars))
}
