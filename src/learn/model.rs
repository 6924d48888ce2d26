//! A small MLP cost model in Candle: training, saving as safetensors with a
//! metadata record, loading, and use as SmoothE's objective.

use super::features::{FeatureLayout, Featurizer};
use crate::cost::{CostModel, LinearCost};
use crate::extract::standard_normal as normal;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// Key of the metadata record inside the safetensors header.
const META_KEY: &str = "smoothe";

/// How well a model fits, measured on labels it was not trained on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Labels used for fitting.
    pub train: usize,
    /// Labels held out.
    pub holdout: usize,
    /// Mean absolute error on the training labels (oracle units).
    pub train_mae: f64,
    /// Mean absolute error on the held-out labels (oracle units).
    pub holdout_mae: f64,
    /// Spearman rank correlation on the held-out labels.
    pub holdout_spearman: f64,
    /// Epochs run (early stopping keeps the best).
    pub epochs: usize,
}

/// Everything needed to reload and use a model, saved with its weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    /// Feature layout.
    pub features: FeatureLayout,
    /// Features are divided by these before the first layer.
    pub input_scale: Vec<f32>,
    /// Target normalisation: prediction = output * std + mean.
    pub target_mean: f64,
    /// See `target_mean`.
    pub target_std: f64,
    /// Hidden layer widths.
    pub hidden: Vec<usize>,
    /// Fingerprint of the (original) e-graph the model was trained on.
    pub egraph_fingerprint: String,
    /// Identity of the oracle whose labels it learned.
    pub oracle: String,
    /// Fit quality at training time.
    pub report: TrainReport,
}

/// A multilayer perceptron with ReLU activations.
#[derive(Clone)]
pub struct Mlp {
    /// Weights `[in, out]` and biases `[out]` per layer.
    layers: Vec<(Tensor, Tensor)>,
    /// Metadata.
    pub meta: ModelMeta,
}

/// Settings of [`train`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Width of each of the two hidden layers.
    pub hidden: usize,
    /// Most epochs (full-batch steps).
    pub epochs: usize,
    /// AdamW learning rate.
    pub learning_rate: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Stop after this many epochs without a better held-out error.
    pub patience: usize,
    /// Fraction of labels held out.
    pub holdout: f64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig { hidden: 64, epochs: 3000, learning_rate: 3e-3, weight_decay: 1e-3, patience: 300, holdout: 0.2 }
    }
}

impl Mlp {
    /// Predicted costs `[batch]` (oracle units) of features `[batch, F]`.
    pub fn predict(&self, features: &Tensor) -> candle_core::Result<Tensor> {
        let scale = Tensor::from_slice(&self.meta.input_scale, self.meta.input_scale.len(), features.device())?
            .to_dtype(features.dtype())?;
        let mut h = features.broadcast_div(&scale)?;
        let n = self.layers.len();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            h = h.matmul(&w.to_dtype(h.dtype())?)?.broadcast_add(&b.to_dtype(h.dtype())?)?;
            if i + 1 < n {
                h = h.relu()?;
            }
        }
        (h.squeeze(1)? * self.meta.target_std)? + self.meta.target_mean
    }

    /// The device holding the weights.
    pub fn device(&self) -> &Device {
        self.layers[0].0.device()
    }

    /// Writes weights and metadata to one safetensors file.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut tensors: HashMap<String, Tensor> = HashMap::new();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            tensors.insert(format!("layer{i}.weight"), w.to_dtype(DType::F32)?.to_device(&Device::Cpu)?);
            tensors.insert(format!("layer{i}.bias"), b.to_dtype(DType::F32)?.to_device(&Device::Cpu)?);
        }
        let data: Vec<(String, Vec<u8>, Vec<usize>)> = {
            let mut names: Vec<&String> = tensors.keys().collect();
            names.sort();
            names
                .into_iter()
                .map(|k| {
                    let t = &tensors[k];
                    let v: Vec<f32> = t.flatten_all()?.to_vec1()?;
                    Ok((k.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect(), t.dims().to_vec()))
                })
                .collect::<Result<_>>()?
        };
        let views: Vec<(String, safetensors::tensor::TensorView)> = data
            .iter()
            .map(|(k, bytes, shape)| {
                Ok((k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)?))
            })
            .collect::<Result<_>>()?;
        let meta = HashMap::from([(META_KEY.to_string(), serde_json::to_string(&self.meta)?)]);
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        safetensors::serialize_to_file(views, Some(meta), path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// Reads a model written by [`Mlp::save`].
    pub fn load(path: &Path, device: &Device) -> Result<Mlp> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)
            .with_context(|| format!("{}: not a safetensors file", path.display()))?;
        let meta_json = header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(META_KEY))
            .with_context(|| format!("{}: no smoothe metadata (not a smoothe model?)", path.display()))?;
        let meta: ModelMeta =
            serde_json::from_str(meta_json).with_context(|| format!("{}: bad smoothe metadata", path.display()))?;
        let tensors = candle_core::safetensors::load_buffer(&bytes, device)
            .with_context(|| format!("{}: cannot read tensors", path.display()))?;
        let mut layers = Vec::new();
        for i in 0..=meta.hidden.len() {
            let w = tensors
                .get(&format!("layer{i}.weight"))
                .with_context(|| format!("{}: missing layer{i}", path.display()))?;
            let b = tensors
                .get(&format!("layer{i}.bias"))
                .with_context(|| format!("{}: missing layer{i}", path.display()))?;
            layers.push((w.clone(), b.clone()));
        }
        if layers[0].0.dim(0)? != meta.features.names.len() {
            bail!("{}: first layer does not match the feature layout", path.display());
        }
        Ok(Mlp { layers, meta })
    }
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

/// Fits an MLP to `features -> targets` with a seeded held-out split,
/// normalised targets, AdamW and early stopping on the held-out error.
/// Same inputs and seed, same model.
pub fn train(
    features: &[Vec<f32>],
    targets: &[f64],
    layout: FeatureLayout,
    config: &TrainConfig,
    seed: u64,
    device: &Device,
) -> Result<(Mlp, TrainReport)> {
    let n = features.len();
    if n < 2 || targets.len() != n {
        bail!("need at least 2 labelled extractions to train, have {n}");
    }
    let f = layout.names.len();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    let n_hold = if n >= 5 { ((n as f64 * config.holdout).round() as usize).clamp(1, n - 2) } else { 0 };
    let (hold, fit) = order.split_at(n_hold);
    let fit_idx: Vec<usize> = fit.to_vec();
    let hold_idx: Vec<usize> = hold.to_vec();
    // Normalisation from the fitting rows only.
    let mut input_scale = vec![0f32; f];
    for &i in &fit_idx {
        for (s, &x) in input_scale.iter_mut().zip(&features[i]) {
            *s = s.max(x.abs());
        }
    }
    for s in input_scale.iter_mut() {
        if *s < 1e-6 {
            *s = 1.0;
        }
    }
    let mean = fit_idx.iter().map(|&i| targets[i]).sum::<f64>() / fit_idx.len() as f64;
    let var = fit_idx.iter().map(|&i| (targets[i] - mean).powi(2)).sum::<f64>() / fit_idx.len() as f64;
    let std = var.sqrt().max(1e-9 * mean.abs().max(1.0));
    let rows = |idx: &[usize]| -> Result<(Tensor, Tensor)> {
        let x: Vec<f32> = idx.iter().flat_map(|&i| features[i].iter().copied()).collect();
        let y: Vec<f32> = idx.iter().map(|&i| ((targets[i] - mean) / std) as f32).collect();
        let x = Tensor::from_vec(x, (idx.len(), f), device)?;
        let scale = Tensor::from_slice(&input_scale, f, device)?;
        Ok((x.broadcast_div(&scale)?, Tensor::from_vec(y, idx.len(), device)?))
    };
    let (x_fit, y_fit) = rows(&fit_idx)?;
    let hidden = vec![config.hidden, config.hidden];
    let mut dims = vec![f];
    dims.extend(&hidden);
    dims.push(1);
    let mut vars = Vec::new();
    for w in dims.windows(2) {
        let (fan_in, fan_out) = (w[0], w[1]);
        let sd = (2.0 / fan_in as f64).sqrt();
        let data: Vec<f32> = (0..fan_in * fan_out).map(|_| (normal(&mut rng) * sd) as f32).collect();
        vars.push(Var::from_vec(data, (fan_in, fan_out), device)?);
        vars.push(Var::from_vec(vec![0f32; fan_out], fan_out, device)?);
    }
    let forward = |x: &Tensor, vars: &[Var]| -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        let layers = vars.len() / 2;
        for l in 0..layers {
            h = h.matmul(vars[2 * l].as_tensor())?.broadcast_add(vars[2 * l + 1].as_tensor())?;
            if l + 1 < layers {
                h = h.relu()?;
            }
        }
        h.squeeze(1)
    };
    let mut opt = AdamW::new(
        vars.clone(),
        ParamsAdamW { lr: config.learning_rate, weight_decay: config.weight_decay, ..Default::default() },
    )?;
    let (x_hold, y_hold) = if hold_idx.is_empty() { (x_fit.clone(), y_fit.clone()) } else { rows(&hold_idx)? };
    let mut best: (f64, Vec<Tensor>) =
        (f64::INFINITY, vars.iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<_>>()?);
    let mut since_best = 0;
    let mut epochs = 0;
    for epoch in 0..config.epochs {
        epochs = epoch + 1;
        let loss = (forward(&x_fit, &vars)? - &y_fit)?.sqr()?.mean_all()?;
        opt.backward_step(&loss)?;
        let hold_loss: f64 = (forward(&x_hold, &vars)? - &y_hold)?.sqr()?.mean_all()?.to_scalar::<f32>()? as f64;
        if hold_loss < best.0 - 1e-9 {
            best = (hold_loss, vars.iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<_>>()?);
            since_best = 0;
        } else {
            since_best += 1;
            if since_best >= config.patience {
                break;
            }
        }
    }
    let layers: Vec<(Tensor, Tensor)> = best.1.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    let mut mlp = Mlp {
        layers,
        meta: ModelMeta {
            features: layout,
            input_scale,
            target_mean: mean,
            target_std: std,
            hidden,
            egraph_fingerprint: String::new(),
            oracle: String::new(),
            report: TrainReport::default(),
        },
    };
    let predict = |idx: &[usize]| -> Result<Vec<f64>> {
        if idx.is_empty() {
            return Ok(Vec::new());
        }
        let x: Vec<f32> = idx.iter().flat_map(|&i| features[i].iter().copied()).collect();
        let p = mlp.predict(&Tensor::from_vec(x, (idx.len(), f), device)?)?;
        Ok(p.to_dtype(DType::F64)?.to_vec1()?)
    };
    let mae = |idx: &[usize], p: &[f64]| {
        if idx.is_empty() {
            f64::NAN
        } else {
            idx.iter().zip(p).map(|(&i, y)| (targets[i] - y).abs()).sum::<f64>() / idx.len() as f64
        }
    };
    let p_fit = predict(&fit_idx)?;
    let p_hold = predict(&hold_idx)?;
    let truth: Vec<f64> = hold_idx.iter().map(|&i| targets[i]).collect();
    let report = TrainReport {
        train: fit_idx.len(),
        holdout: hold_idx.len(),
        train_mae: mae(&fit_idx, &p_fit),
        holdout_mae: mae(&hold_idx, &p_hold),
        holdout_spearman: spearman(&truth, &p_hold),
        epochs,
    };
    mlp.meta.report = report.clone();
    Ok((mlp, report))
}

/// A frozen MLP as SmoothE's objective, optionally plus a multiple of the
/// linear cost.
pub struct MlpCost {
    mlp: Mlp,
    featurizer: Featurizer,
    linear: Option<(LinearCost, f64)>,
}

impl MlpCost {
    /// Binds `mlp` to `problem` (preprocessed from `original`). Refuses a
    /// model trained on another e-graph when its features are tied to one.
    pub fn new(
        mlp: Mlp,
        problem: &Reduced,
        original: &crate::egraph::EGraph,
        linear_weight: f64,
        device: &Device,
    ) -> Result<Self> {
        use super::features::FeatureKind;
        if mlp.meta.features.kind == FeatureKind::Selection && mlp.meta.egraph_fingerprint != original.fingerprint() {
            bail!(
                "this model was trained on another e-graph (fingerprint {}, this one is {}); \
                 selection-feature models only apply to the e-graph they were trained on",
                mlp.meta.egraph_fingerprint,
                original.fingerprint()
            );
        }
        let names = mlp.meta.features.names.clone();
        let featurizer = Featurizer::new(mlp.meta.features.kind, problem, original, Some(&names));
        if featurizer.dim() != names.len() {
            bail!("feature layout mismatch: model has {}, graph gives {}", names.len(), featurizer.dim());
        }
        let linear = (linear_weight != 0.0)
            .then(|| LinearCost::new(&problem.graph, device).map(|l| (l, linear_weight)))
            .transpose()?;
        Ok(MlpCost { mlp, featurizer, linear })
    }

    /// The model's predictions (without the linear term) for extractions
    /// of the reduced graph, batched.
    pub fn predict(&self, extractions: &[Extraction]) -> Result<Vec<f64>> {
        let f = self.featurizer.dim();
        let device = self.mlp.device();
        let mut out = Vec::with_capacity(extractions.len());
        for chunk in extractions.chunks(256) {
            let x: Vec<f32> = chunk.iter().flat_map(|e| self.featurizer.of_extraction(e)).collect();
            let t = Tensor::from_vec(x, (chunk.len(), f), device)?;
            out.extend(self.mlp.predict(&t)?.to_dtype(DType::F64)?.to_vec1::<f64>()?);
        }
        Ok(out)
    }

    /// The objective (model plus weighted linear cost) of each extraction.
    pub fn costs_of(&self, extractions: &[Extraction]) -> Result<Vec<f64>> {
        let mut y = self.predict(extractions)?;
        if let Some((l, w)) = &self.linear {
            for (y, e) in y.iter_mut().zip(extractions) {
                *y += w * l.cost_of(e);
            }
        }
        Ok(y)
    }
}

impl CostModel for MlpCost {
    fn name(&self) -> String {
        match &self.linear {
            Some((_, w)) => format!("mlp + {w} x linear"),
            None => "mlp".into(),
        }
    }
    fn expected(&self, node_prob: &Tensor) -> candle_core::Result<Tensor> {
        let x = self.featurizer.of_probabilities(node_prob)?.to_dtype(DType::F32)?;
        let y = self.mlp.predict(&x)?.to_dtype(node_prob.dtype())?;
        match &self.linear {
            Some((l, w)) => y + (l.expected(node_prob)? * *w)?,
            None => Ok(y),
        }
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        self.costs_of(std::slice::from_ref(extraction)).map_or(f64::INFINITY, |y| y[0])
    }
}
