//! Fitting the ensemble: a test split that neither fitting nor early
//! stopping sees, cross-validation folds (member `k` stops early on fold
//! `k` and fits the others), AdamW on the mean squared error of
//! standardised targets, and honest metrics on the test split.

use super::dataset::Labelled;
use super::features::{FeatureLayout, Featurizer};
use super::metrics::{mean_std, spearman, TrainReport};
use super::network::{forward, Ensemble, ModelMeta};
use crate::normal::standard_normal as normal;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// Settings of [`train`].
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
struct Split<'a> {
    rows: &'a [Vec<f64>],
    targets: &'a [f64],
    train_idx: Vec<usize>,
    test_idx: Vec<usize>,
}

impl<'a> Split<'a> {
    /// Checks the data; at least `min_train` rows must lie outside the test split.
    fn new(rows: &'a [Vec<f64>], targets: &'a [f64], test: &[bool], f: usize, min_train: usize) -> Result<Self> {
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
    fn standardised(&self, idx: &[usize], meta: &ModelMeta, device: &Device) -> Result<(Tensor, Tensor)> {
        let f = meta.input_mean.len();
        let (mu, sd) = (&meta.input_mean, &meta.input_scale);
        let x: Vec<f32> =
            idx.iter().flat_map(|&i| (0..f).map(move |j| ((self.rows[i][j] - mu[j]) / sd[j]) as f32)).collect();
        let y: Vec<f32> =
            idx.iter().map(|&i| ((self.targets[i] - meta.target_mean) / meta.target_std) as f32).collect();
        Ok((Tensor::from_vec(x, (idx.len(), f), device)?, Tensor::from_vec(y, idx.len(), device)?))
    }

    /// The training rows standardised by `meta`, as anchor rows.
    fn anchor_rows(&self, meta: &ModelMeta) -> Vec<Vec<f64>> {
        let (mu, sd) = (&meta.input_mean, &meta.input_scale);
        self.train_idx.iter().map(|&i| (0..mu.len()).map(|j| (self.rows[i][j] - mu[j]) / sd[j]).collect()).collect()
    }
}

/// Fits an ensemble to `rows -> targets`; `test[i]` puts row `i` in the
/// test split. Normalisation and the feature range come from the training
/// rows only. Same inputs and seed, same model.
pub fn train(
    rows: &[Vec<f64>],
    targets: &[f64],
    test: &[bool],
    layout: FeatureLayout,
    config: &TrainConfig,
    seed: u64,
    device: &Device,
) -> Result<Ensemble> {
    let f = layout.names.len();
    let split = Split::new(rows, targets, test, f, 2)?;
    let train_idx = &split.train_idx;
    let members = config.members.max(1);
    let mut rng = StdRng::seed_from_u64(seed);
    // Standardisation and range from the training rows.
    let m = train_idx.len() as f64;
    let mut input_mean = vec![0.0; f];
    let mut feature_low = vec![f64::INFINITY; f];
    let mut feature_high = vec![f64::NEG_INFINITY; f];
    for &i in train_idx {
        for j in 0..f {
            input_mean[j] += rows[i][j] / m;
            feature_low[j] = feature_low[j].min(rows[i][j]);
            feature_high[j] = feature_high[j].max(rows[i][j]);
        }
    }
    let mut input_scale = vec![0.0; f];
    for &i in train_idx {
        for j in 0..f {
            input_scale[j] += (rows[i][j] - input_mean[j]).powi(2) / m;
        }
    }
    for s in input_scale.iter_mut() {
        *s = s.sqrt().max(1e-3);
    }
    let train_targets: Vec<f64> = train_idx.iter().map(|&i| targets[i]).collect();
    let (target_mean, std) = mean_std(&train_targets);
    let target_std = std.max(1e-6 * target_mean.abs().max(1.0));
    let meta = ModelMeta {
        format: super::network::MODEL_FORMAT,
        features: layout,
        input_mean,
        input_scale,
        feature_low,
        feature_high,
        target_mean,
        target_std,
        hidden: vec![config.hidden, config.hidden],
        members,
        anchor_spacing: 1.0,
        egraphs: Vec::new(),
        oracle: String::new(),
        metric: None,
        timing: None,
        relative: None,
        residual_length: 0.0,
        transfer_margin: None,
        measured: Vec::new(),
        optimum_error: None,
        error_floor: 0.0,
        report: TrainReport::default(),
        checksum: String::new(),
    };
    let fitted = fit_members(&split, &meta, None, config, &mut rng, device)?;
    let anchor_rows = split.anchor_rows(&meta);
    finish(&split, fitted, anchor_rows, meta, None, device)
}

/// [`train`] on one design's labelled extractions, read through
/// `featurizer` (their costs the targets, their split flags the test split).
pub fn train_on_labels(
    featurizer: &Featurizer,
    data: &[Labelled],
    config: &TrainConfig,
    seed: u64,
    device: &Device,
) -> Result<Ensemble> {
    let x: Vec<Vec<f64>> = data.iter().map(|l| featurizer.of_extraction(&l.extraction)).collect::<Result<_>>()?;
    let y: Vec<f64> = data.iter().map(|l| l.cost).collect();
    let test: Vec<bool> = data.iter().map(|l| l.test).collect();
    train(&x, &y, &test, featurizer.layout.clone(), config, seed, device)
}

/// Fine-tunes `init` on new `rows -> targets` (in `init`'s feature layout
/// and target units): each member starts from its trained weights, keeps
/// `init`'s normalisation, and keeps them unless fitting improves its
/// validation fold. The feature range grows to cover the new training
/// rows, and the anchors (the rows the trust region measures distance to)
/// become the new training rows: a fine-tuned model is used on the design
/// it was tuned on, where its error is known only at that design's labels.
/// `init`'s anchors are other designs' rows, at which this design's cost
/// can differ by the whole transfer error, so being near one says nothing
/// of the model's error here. The residual term
/// is refitted on the new labels.
/// With fewer than two training labels per member (too few for validation
/// folds) the weights stay as they are, and so do `init`'s anchors (the new
/// rows added) and its residual term unless the new labels give one. The
/// result has no [`ModelMeta::optimum_error`]: `init`'s describes the loop
/// that trained `init`, and a loop around this fit records its own.
pub fn fine_tune(
    init: &Ensemble,
    rows: &[Vec<f64>],
    targets: &[f64],
    test: &[bool],
    config: &TrainConfig,
    seed: u64,
    device: &Device,
) -> Result<Ensemble> {
    let split = Split::new(rows, targets, test, init.dim(), 0)?;
    let mut meta = ModelMeta { optimum_error: None, ..init.meta.clone() };
    for &i in &split.train_idx {
        for (j, &x) in rows[i].iter().enumerate() {
            meta.feature_low[j] = meta.feature_low[j].min(x);
            meta.feature_high[j] = meta.feature_high[j].max(x);
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let fitted = fit_members(&split, &meta, Some(init.members()), config, &mut rng, device)?;
    let unchanged = (fitted.epochs == 0).then_some(init);
    let mut anchor_rows = Vec::new();
    if unchanged.is_some() {
        let old: Vec<f32> = init.anchors().to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
        anchor_rows.extend(old.chunks(init.dim()).map(|r| r.iter().map(|&v| v as f64).collect::<Vec<f64>>()));
    }
    anchor_rows.extend(split.anchor_rows(&meta));
    finish(&split, fitted, anchor_rows, meta, unchanged, device)
}

/// What fitting the members gave: their layers, out-of-fold predictions
/// (oracle units, NaN where none) and the epochs run in all.
struct Fitted {
    members: Vec<Vec<Linear>>,
    out_of_fold: Vec<f64>,
    epochs: usize,
}

/// Fits every member on its folds (from `start`'s weights, or a seeded He
/// initialisation); with too few rows every member fits all of them for a
/// fixed number of epochs.
fn fit_members(
    split: &Split,
    meta: &ModelMeta,
    start: Option<&[Vec<Linear>]>,
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
            let p: Vec<f32> = forward(&layers, x_val)?.to_vec1()?;
            for (&i, &y) in val_idx.iter().zip(&p) {
                out_of_fold[i] = y as f64 * meta.target_std + meta.target_mean;
            }
        }
        trained.push(layers);
    }
    Ok(Fitted { members: trained, out_of_fold, epochs: epochs_total })
}

/// The ensemble from fitted members and anchor rows (standardised), with
/// the anchors' typical spacing, a residual term fitted to the training
/// rows (or, if none is worth it, `unchanged`'s, whose members these are),
/// and the honest metrics of `split`.
fn finish(
    split: &Split,
    fitted: Fitted,
    mut anchor_rows: Vec<Vec<f64>>,
    mut meta: ModelMeta,
    unchanged: Option<&Ensemble>,
    device: &Device,
) -> Result<Ensemble> {
    let f = meta.input_mean.len();
    let members = meta.members;
    let (rows, targets) = (split.rows, split.targets);
    // Distinct rows only: the distance's gradient goes to every nearest
    // anchor, so a duplicated row would count twice.
    anchor_rows.sort_by(|a, b| {
        a.iter().zip(b).map(|(x, y)| x.total_cmp(y)).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    });
    anchor_rows.dedup();
    let mut nearest: Vec<f64> = anchor_rows
        .iter()
        .enumerate()
        .map(|(a, ra)| {
            anchor_rows
                .iter()
                .enumerate()
                .filter(|(b, _)| *b != a)
                .map(|(_, rb)| (ra.iter().zip(rb).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / f as f64).sqrt())
                .fold(f64::INFINITY, f64::min)
        })
        .filter(|d| d.is_finite())
        .collect();
    nearest.sort_by(f64::total_cmp);
    let spacing = nearest.get(nearest.len() / 2).copied().unwrap_or(1.0).max(1e-3);
    let anchors = Tensor::from_vec(
        anchor_rows.iter().flatten().map(|&v| v as f32).collect::<Vec<f32>>(),
        (anchor_rows.len(), f),
        device,
    )?;
    meta.anchor_spacing = spacing;
    meta.residual_length = 0.0;
    let standardised = split.anchor_rows(&meta);
    let target_std = meta.target_std;
    let mut model = Ensemble::new(fitted.members, anchors, meta)?;
    let predict = |model: &Ensemble, idx: &[usize]| -> Result<(Vec<f64>, Vec<f64>)> {
        if idx.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let x: Vec<f32> = idx.iter().flat_map(|&i| rows[i].iter().map(|&v| v as f32)).collect();
        let p = model.predict(&Tensor::from_vec(x, (idx.len(), f), device)?)?;
        Ok((p.mean.to_dtype(DType::F64)?.to_vec1()?, p.std.to_dtype(DType::F64)?.to_vec1()?))
    };
    // What the members leave unexplained on the training rows, as a
    // residual term (kept only if it predicts held-out rows better).
    let (fitted_mean, _) = predict(&model, &split.train_idx)?;
    let residuals: Vec<f64> =
        split.train_idx.iter().zip(&fitted_mean).map(|(&i, p)| (targets[i] - p) / target_std).collect();
    if let Some(fit) = super::residual::fit(&standardised, &residuals, spacing) {
        log::debug!(
            "residual term: {} rows, length {:.3}, leave-one-out error {:.2} of none",
            fit.rows.len(),
            fit.length,
            fit.loo_ratio
        );
        model = model.with_residual(&fit)?;
    } else if let Some(init) = unchanged {
        model = model.with_residual_of(init)?;
    }
    let oof: Vec<(f64, f64)> = split
        .train_idx
        .iter()
        .filter(|&&i| fitted.out_of_fold[i].is_finite())
        .map(|&i| (targets[i], fitted.out_of_fold[i]))
        .collect();
    // The error the spread leaves out, from the members' out-of-fold
    // predictions (each by the member that held the label out, without
    // the residual term: if anything, an overestimate). With no folds,
    // the floor stays as it was (0, or `unchanged`'s).
    if !oof.is_empty() {
        let mse = oof.iter().map(|(t, p)| (t - p).powi(2)).sum::<f64>() / oof.len() as f64;
        model.meta.error_floor = mse.sqrt() / target_std;
    }
    let (oof_t, oof_p): (Vec<f64>, Vec<f64>) = oof.into_iter().unzip();
    // Honest metrics: the test split, and out-of-fold on the training rows.
    let (mean, std) = predict(&model, &split.test_idx)?;
    let truth: Vec<f64> = split.test_idx.iter().map(|&i| targets[i]).collect();
    let share = |hit: &dyn Fn(f64, f64, f64) -> bool| {
        let n = truth.iter().zip(&mean).zip(&std).filter(|((&t, &p), &s)| hit(t, p, s)).count();
        if truth.is_empty() {
            f64::NAN
        } else {
            n as f64 / truth.len() as f64
        }
    };
    let mae = if truth.is_empty() {
        f64::NAN
    } else {
        truth.iter().zip(&mean).map(|(t, p)| (t - p).abs()).sum::<f64>() / truth.len() as f64
    };
    let coverage = share(&|t, p, s| (t - p).abs() <= 2.0 * s);
    let error_coverage = share(&|t, p, s| (t - p).abs() <= 2.0 * model.prediction_error(s));
    model.meta.report = TrainReport {
        train: split.train_idx.len(),
        test: split.test_idx.len(),
        test_mae: mae,
        test_spearman: spearman(&truth, &mean),
        test_coverage: coverage,
        test_error_coverage: error_coverage,
        validation_spearman: spearman(&oof_t, &oof_p),
        epochs: fitted.epochs as f64 / members as f64,
    };
    Ok(model)
}

/// Fits one member, from `init`'s weights or a seeded He initialisation;
/// with `val`, keeps the weights of the epoch with the least validation
/// error (the starting weights count when fine-tuning) and stops after
/// `patience` epochs without a better one. Returns the layers and the
/// epochs run.
fn fit_member(
    x: &Tensor,
    y: &Tensor,
    val: Option<&(Tensor, Tensor)>,
    hidden: &[usize],
    init: Option<&Vec<Linear>>,
    config: &TrainConfig,
    rng: &mut StdRng,
) -> Result<(Vec<Linear>, usize)> {
    let device = x.device();
    let mut vars = Vec::new();
    if let (Some(layers), None) = (init, val) {
        // Too few labels for a validation fold: nothing would tell fitting
        // from forgetting, so the trained weights stay.
        return Ok((layers.clone(), 0));
    }
    if let Some(layers) = init {
        for layer in layers {
            vars.push(Var::from_tensor(&layer.weight().to_device(device)?.to_dtype(DType::F32)?)?);
            let bias = layer.bias().context("a layer without a bias")?;
            vars.push(Var::from_tensor(&bias.to_device(device)?.to_dtype(DType::F32)?)?);
        }
    } else {
        let mut dims = vec![x.dim(1)?];
        dims.extend(hidden);
        dims.push(1);
        for w in dims.windows(2) {
            let (fan_in, fan_out) = (w[0], w[1]);
            let sd = (2.0 / fan_in as f64).sqrt();
            let data: Vec<f32> = (0..fan_in * fan_out).map(|_| (normal(rng) * sd) as f32).collect();
            vars.push(Var::from_vec(data, (fan_out, fan_in), device)?);
            vars.push(Var::from_vec(vec![0f32; fan_out], fan_out, device)?);
        }
    }
    let layers_of = |ts: &[Tensor]| -> Vec<Linear> {
        ts.chunks(2).map(|p| Linear::new(p[0].clone(), Some(p[1].clone()))).collect()
    };
    let live: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
    let live_layers = layers_of(&live);
    let mut opt = AdamW::new(
        vars.clone(),
        ParamsAdamW { lr: config.learning_rate, weight_decay: config.weight_decay, ..Default::default() },
    )?;
    let epochs_cap = if val.is_some() { config.epochs } else { config.epochs.min(4 * config.patience.max(1)) };
    let snapshot = || vars.iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<Vec<_>>>();
    let val_loss = |(xv, yv): &(Tensor, Tensor)| -> Result<f64> {
        Ok((forward(&live_layers, xv)? - yv)?.sqr()?.mean_all()?.to_scalar::<f32>()? as f64)
    };
    let mut best = (f64::INFINITY, snapshot()?);
    if let (Some(v), Some(_)) = (val, init) {
        best.0 = val_loss(v)?;
    }
    let mut since_best = 0;
    let mut epochs = 0;
    for epoch in 0..epochs_cap {
        epochs = epoch + 1;
        let loss = (forward(&live_layers, x)? - y)?.sqr()?.mean_all()?;
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
    Ok((layers_of(&weights), epochs))
}
