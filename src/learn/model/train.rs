//! Fitting the ensemble: a test split that neither fitting nor early
//! stopping sees, cross-validation folds (member `k` stops early on fold
//! `k` and fits the others), AdamW on the mean squared error of
//! standardised targets, and honest metrics on the test split.

use crate::learn::model::dataset::Labelled;
use crate::learn::model::features::{FeatureLayout, Featurizer};
use crate::learn::model::fit::{fit_members, Fitted, Split, TrainConfig};
use crate::learn::model::meta::ModelMeta;
use crate::learn::model::metrics::{mean_std, spearman, TrainReport};
use crate::learn::model::network::Ensemble;
use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use rand::rngs::StdRng;
use rand::SeedableRng;

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
        format: crate::learn::model::meta::MODEL_FORMAT,
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
        front: Vec::new(),
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

/// The ensemble from fitted members and anchor rows (standardised), with
/// the anchors' typical spacing, a residual term fitted to the training
/// rows (or, if none is worth it, `unchanged`'s, whose members these are),
/// and the honest metrics of `split`.
fn finish(
    split: &Split,
    fitted: Fitted,
    anchor_rows: Vec<Vec<f64>>,
    mut meta: ModelMeta,
    unchanged: Option<&Ensemble>,
    device: &Device,
) -> Result<Ensemble> {
    let f = meta.input_mean.len();
    let members = meta.members;
    let (rows, targets) = (split.rows, split.targets);
    let (anchors, spacing) = anchor_set(anchor_rows, f, device)?;
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
    if let Some(fit) = crate::learn::model::residual::fit(&standardised, &residuals, spacing) {
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
    model.meta.report = TrainReport {
        train: split.train_idx.len(),
        test: split.test_idx.len(),
        validation_spearman: spearman(&oof_t, &oof_p),
        epochs: fitted.epochs as f64 / members as f64,
        ..test_report(&model, &truth, &mean, &std)
    };
    Ok(model)
}

/// Distinct standardised anchor rows as a tensor `[rows, f]`, with their
/// typical spacing: the median RMS distance of a row to its nearest other
/// (at least 1e-3; 1 for a single row).
fn anchor_set(mut anchor_rows: Vec<Vec<f64>>, f: usize, device: &Device) -> Result<(Tensor, f64)> {
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
    Ok((anchors, spacing))
}

/// The test split's part of the fit report: mean absolute error, rank
/// correlation and how often the truth lies within two spreads and within
/// two expected errors of the prediction (NaN with no test label).
fn test_report(model: &Ensemble, truth: &[f64], mean: &[f64], std: &[f64]) -> TrainReport {
    let share = |hit: &dyn Fn(f64, f64, f64) -> bool| {
        let n = truth.iter().zip(mean).zip(std).filter(|((&t, &p), &s)| hit(t, p, s)).count();
        if truth.is_empty() {
            f64::NAN
        } else {
            n as f64 / truth.len() as f64
        }
    };
    let mae = if truth.is_empty() {
        f64::NAN
    } else {
        truth.iter().zip(mean).map(|(t, p)| (t - p).abs()).sum::<f64>() / truth.len() as f64
    };
    TrainReport {
        test_mae: mae,
        test_spearman: spearman(truth, mean),
        test_coverage: share(&|t, p, s| (t - p).abs() <= 2.0 * s),
        test_error_coverage: share(&|t, p, s| (t - p).abs() <= 2.0 * model.prediction_error(s)),
        ..TrainReport::default()
    }
}
