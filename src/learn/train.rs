//! Fitting the ensemble: a test split that neither fitting nor early
//! stopping sees, cross-validation folds (member `k` stops early on fold
//! `k` and fits the others), AdamW on the mean squared error of
//! standardised targets, and honest metrics on the test split.

use super::features::FeatureLayout;
use super::network::{forward, Ensemble, ModelMeta};
use crate::extract::standard_normal as normal;
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// How well a model fits. Test figures come from labels no member was
/// fitted or early-stopped on; validation figures are out-of-fold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainReport {
    /// Labels the members were fitted and early-stopped on.
    pub train: usize,
    /// Labels in the test split.
    pub test: usize,
    /// Mean absolute error of the ensemble mean on the test split (oracle units).
    pub test_mae: f64,
    /// Spearman rank correlation of the ensemble mean on the test split.
    pub test_spearman: f64,
    /// Share of test labels within two ensemble standard deviations of the mean.
    pub test_coverage: f64,
    /// Spearman correlation of out-of-fold predictions on the training labels.
    pub validation_spearman: f64,
    /// Mean epochs run per member (early stopping keeps the best).
    pub epochs: f64,
}

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

/// Whether the label of the extraction with canonical key `key` belongs
/// to the test split.
pub fn in_test_split(key: &str, fraction: f64) -> bool {
    let h = crate::egraph::hash_hex(key.as_bytes());
    let mut v = u64::from_str_radix(&h[..16.min(h.len())], 16).unwrap_or(0);
    // The splitmix64 finaliser spreads FNV's weakly mixed high bits.
    v ^= v >> 30;
    v = v.wrapping_mul(0xbf58476d1ce4e5b9);
    v ^= v >> 27;
    v = v.wrapping_mul(0x94d049bb133111eb);
    v ^= v >> 31;
    ((v >> 11) as f64 / (1u64 << 53) as f64) < fraction
}

/// Average ranks (ties share the mean rank).
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        for &k in &idx[i..=j] {
            r[k] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

/// Spearman rank correlation (NaN with fewer than 3 points or no spread).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    if a.len() < 3 || a.len() != b.len() {
        return f64::NAN;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
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
    let n = rows.len();
    let f = layout.names.len();
    if targets.len() != n || test.len() != n || rows.iter().any(|r| r.len() != f) {
        bail!("training data are inconsistent: {n} rows, {} targets, {f} features", targets.len());
    }
    if let Some(i) = targets.iter().position(|t| !t.is_finite()) {
        bail!("label {i} is not a finite number");
    }
    let train_idx: Vec<usize> = (0..n).filter(|&i| !test[i]).collect();
    let test_idx: Vec<usize> = (0..n).filter(|&i| test[i]).collect();
    if train_idx.len() < 2 {
        bail!("need at least 2 labelled extractions outside the test split to train, have {}", train_idx.len());
    }
    let members = config.members.max(1);
    let mut rng = StdRng::seed_from_u64(seed);
    // Standardisation and range from the training rows.
    let m = train_idx.len() as f64;
    let mut input_mean = vec![0.0; f];
    let mut feature_low = vec![f64::INFINITY; f];
    let mut feature_high = vec![f64::NEG_INFINITY; f];
    for &i in &train_idx {
        for j in 0..f {
            input_mean[j] += rows[i][j] / m;
            feature_low[j] = feature_low[j].min(rows[i][j]);
            feature_high[j] = feature_high[j].max(rows[i][j]);
        }
    }
    let mut input_scale = vec![0.0; f];
    for &i in &train_idx {
        for j in 0..f {
            input_scale[j] += (rows[i][j] - input_mean[j]).powi(2) / m;
        }
    }
    for s in input_scale.iter_mut() {
        *s = s.sqrt().max(1e-3);
    }
    let target_mean = train_idx.iter().map(|&i| targets[i]).sum::<f64>() / m;
    let var = train_idx.iter().map(|&i| (targets[i] - target_mean).powi(2)).sum::<f64>() / m;
    let target_std = var.sqrt().max(1e-6 * target_mean.abs().max(1.0));
    let hidden = vec![config.hidden, config.hidden];
    let meta = ModelMeta {
        format: super::network::MODEL_FORMAT,
        features: layout,
        input_mean,
        input_scale,
        feature_low,
        feature_high,
        target_mean,
        target_std,
        hidden: hidden.clone(),
        members,
        anchor_spacing: 1.0,
        egraphs: Vec::new(),
        oracle: String::new(),
        report: TrainReport::default(),
        checksum: String::new(),
    };
    let (mu, sd) = (&meta.input_mean, &meta.input_scale);
    let standardised = |idx: &[usize]| -> Result<(Tensor, Tensor)> {
        let x: Vec<f32> =
            idx.iter().flat_map(|&i| (0..f).map(move |j| ((rows[i][j] - mu[j]) / sd[j]) as f32)).collect();
        let y: Vec<f32> = idx.iter().map(|&i| ((targets[i] - target_mean) / target_std) as f32).collect();
        Ok((Tensor::from_vec(x, (idx.len(), f), device)?, Tensor::from_vec(y, idx.len(), device)?))
    };
    // Folds over the training rows; with too few rows every member fits
    // all of them for a fixed number of epochs.
    let mut shuffled = train_idx.clone();
    shuffled.shuffle(&mut rng);
    let use_folds = members > 1 && shuffled.len() >= 2 * members;
    let mut out_of_fold = vec![f64::NAN; n];
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
        let (x_fit, y_fit) = standardised(&fit_idx)?;
        let val = if val_idx.is_empty() { None } else { Some(standardised(&val_idx)?) };
        let (layers, epochs) = fit_member(&x_fit, &y_fit, val.as_ref(), &hidden, config, &mut rng)?;
        epochs_total += epochs;
        if let Some((x_val, _)) = &val {
            let p: Vec<f32> = forward(&layers, x_val)?.to_vec1()?;
            for (&i, &y) in val_idx.iter().zip(&p) {
                out_of_fold[i] = y as f64 * target_std + target_mean;
            }
        }
        trained.push(layers);
    }
    // Anchors: the standardised training rows, and their typical spacing.
    // Distinct rows only: the distance's gradient goes to every nearest
    // anchor, so a duplicated row would count twice.
    let mut anchor_rows: Vec<Vec<f64>> =
        train_idx.iter().map(|&i| (0..f).map(|j| (rows[i][j] - mu[j]) / sd[j]).collect()).collect();
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
    let mut meta = meta;
    meta.anchor_spacing = spacing;
    let mut model = Ensemble::new(trained, anchors, meta)?;
    // Honest metrics: the test split, and out-of-fold on the training rows.
    let predict = |idx: &[usize]| -> Result<(Vec<f64>, Vec<f64>)> {
        if idx.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let x: Vec<f32> = idx.iter().flat_map(|&i| rows[i].iter().map(|&v| v as f32)).collect();
        let p = model.predict(&Tensor::from_vec(x, (idx.len(), f), device)?)?;
        Ok((p.mean.to_dtype(DType::F64)?.to_vec1()?, p.std.to_dtype(DType::F64)?.to_vec1()?))
    };
    let (mean, std) = predict(&test_idx)?;
    let truth: Vec<f64> = test_idx.iter().map(|&i| targets[i]).collect();
    let mae = if truth.is_empty() {
        f64::NAN
    } else {
        truth.iter().zip(&mean).map(|(t, p)| (t - p).abs()).sum::<f64>() / truth.len() as f64
    };
    let coverage = if truth.is_empty() {
        f64::NAN
    } else {
        truth.iter().zip(mean.iter().zip(&std)).filter(|(t, (p, s))| (*t - *p).abs() <= 2.0 * *s).count() as f64
            / truth.len() as f64
    };
    let oof: Vec<(f64, f64)> =
        train_idx.iter().filter(|&&i| out_of_fold[i].is_finite()).map(|&i| (targets[i], out_of_fold[i])).collect();
    let (oof_t, oof_p): (Vec<f64>, Vec<f64>) = oof.into_iter().unzip();
    model.meta.report = TrainReport {
        train: train_idx.len(),
        test: test_idx.len(),
        test_mae: mae,
        test_spearman: spearman(&truth, &mean),
        test_coverage: coverage,
        validation_spearman: spearman(&oof_t, &oof_p),
        epochs: epochs_total as f64 / members as f64,
    };
    Ok(model)
}

/// Fits one member from a seeded He initialisation; with `val`, keeps the
/// weights of the epoch with the least validation error and stops after
/// `patience` epochs without a better one. Returns the layers and the
/// epochs run.
fn fit_member(
    x: &Tensor,
    y: &Tensor,
    val: Option<&(Tensor, Tensor)>,
    hidden: &[usize],
    config: &TrainConfig,
    rng: &mut StdRng,
) -> Result<(Vec<Linear>, usize)> {
    let device = x.device();
    let mut dims = vec![x.dim(1)?];
    dims.extend(hidden);
    dims.push(1);
    let mut vars = Vec::new();
    for w in dims.windows(2) {
        let (fan_in, fan_out) = (w[0], w[1]);
        let sd = (2.0 / fan_in as f64).sqrt();
        let data: Vec<f32> = (0..fan_in * fan_out).map(|_| (normal(rng) * sd) as f32).collect();
        vars.push(Var::from_vec(data, (fan_out, fan_in), device)?);
        vars.push(Var::from_vec(vec![0f32; fan_out], fan_out, device)?);
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
    let mut best = (f64::INFINITY, snapshot()?);
    let mut since_best = 0;
    let mut epochs = 0;
    for epoch in 0..epochs_cap {
        epochs = epoch + 1;
        let loss = (forward(&live_layers, x)? - y)?.sqr()?.mean_all()?;
        opt.backward_step(&loss)?;
        let Some((xv, yv)) = val else { continue };
        let val_loss = (forward(&live_layers, xv)? - yv)?.sqr()?.mean_all()?.to_scalar::<f32>()? as f64;
        if val_loss < best.0 - 1e-9 {
            best = (val_loss, snapshot()?);
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
