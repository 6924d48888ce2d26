//! The cost model's network: a small deep ensemble of MLPs (candle-nn
//! `Linear` layers, ReLU) over normalised features, whose spread is the
//! model's uncertainty, saved as one safetensors file with a metadata
//! record.

use super::features::FeatureLayout;
use super::measured::MeasuredDesign;
use super::metrics::TrainReport;
use super::reference::RelativeFrame;
use super::residual::ResidualFit;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::Linear;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// Key of the metadata record inside the safetensors header.
const META_KEY: &str = "smoothe";
/// Version of the file layout this build writes. Formats 3 (before relative
/// models) and 4 (before the residual term) read the same; format 5 stored
/// the residual term's rows beside the anchors, and is read into one weight
/// per anchor; format 6 read as 7 does, without a metric name or a timing
/// head. Older files are refused with a message.
const FORMAT: u32 = 7;
/// The oldest format this build reads.
const OLDEST_FORMAT: u32 = 3;

/// The file layout version this build writes.
pub const MODEL_FORMAT: u32 = FORMAT;

/// Everything needed to reload and use a model, saved with its weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    /// File layout version.
    pub format: u32,
    /// Feature layout.
    pub features: FeatureLayout,
    /// Features are standardised as `(x - input_mean) / input_scale`.
    pub input_mean: Vec<f64>,
    /// See `input_mean`.
    pub input_scale: Vec<f64>,
    /// Least value of each feature over the training rows.
    pub feature_low: Vec<f64>,
    /// Greatest value of each feature over the training rows.
    pub feature_high: Vec<f64>,
    /// Target normalisation: prediction = output * std + mean.
    pub target_mean: f64,
    /// See `target_mean`.
    pub target_std: f64,
    /// Hidden layer widths (the same for every member).
    pub hidden: Vec<usize>,
    /// Members of the ensemble.
    pub members: usize,
    /// Typical spacing of the training labels: the median, over training
    /// rows, of the root-mean-square distance (standardised features) to
    /// the nearest other row. Distances are reported in this unit.
    pub anchor_spacing: f64,
    /// Fingerprints of the (original) e-graphs the labels came from.
    pub egraphs: Vec<String>,
    /// Identity of the oracle whose labels it learned.
    pub oracle: String,
    /// The metric the ensemble predicts; `None`: the oracle's only number
    /// (and in files written before metrics were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// A static-timing model of another metric (delay) fitted to the same
    /// oracle calls, which `extract --objective`/`--constraint` use for
    /// that metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<crate::timing::fit::TimingHead>,
    /// Set for a relative model (features and targets relative to each
    /// design's dag-greedy extraction, see [`super::reference`]): its
    /// training designs' reference costs. Bind it to a design with
    /// [`super::reference::Reference::absolute`] before predicting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<RelativeFrame>,
    /// Kernel length of the residual term (see [`super::residual`]), in
    /// RMS distance of standardised features; 0: the model has none.
    #[serde(default)]
    pub residual_length: f64,
    /// For a relative model over two or more designs: how far its
    /// predicted cost differences may be off on a design it never saw, as
    /// a share of that design's reference cost (see
    /// [`super::reference::transfer_margin`]). Choosing on a new design
    /// charges it to the optimiser's own result against the model-free
    /// extractions. `None`: not calibrated (one design, or an older file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_margin: Option<f64>,
    /// Per training design, the real cost of every extraction it
    /// labelled (by a hash): a frozen model choosing between candidates judges one it
    /// measured by the measurement (see [`super::measured`]). Empty in
    /// files written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<MeasuredDesign>,
    /// How far, in the loop that trained it, the model's own optima
    /// measured from their predictions (see [`OptimumError`]). `None`: no
    /// loop round labelled one (`--rounds 0`, a corpus model, an older
    /// file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimum_error: Option<OptimumError>,
    /// The members' root-mean-square out-of-fold error on the training
    /// labels, in target standard deviations: the error the spread leaves
    /// out (labels the features cannot tell apart, misfit), which
    /// [`Ensemble::prediction_error`] adds to it. 0 in files written before
    /// it was kept, and for a model with no validation folds.
    #[serde(default)]
    pub error_floor: f64,
    /// Fit quality at training time.
    pub report: TrainReport,
    /// Hash of the tensor data, written by [`Ensemble::save`] and required
    /// and checked (then cleared) by [`Ensemble::load`], so a damaged file
    /// is caught.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub checksum: String,
}

/// How far the real costs of a model's own optima lay from its predictions
/// for them, as shares of the prediction (`(real - predicted) / predicted`;
/// positive: the model was optimistic), over the rounds of the loop that
/// trained it. Each round's optimum is predicted by the model of the round
/// before, fitted without its label, so this is an out-of-sample error on
/// the extractions an optimiser picks, where a model errs most: the honest
/// error bar of a frozen model's own optimum, which the ensemble's spread
/// understates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OptimumError {
    /// Optima measured.
    pub checked: usize,
    /// Mean share.
    pub mean: f64,
    /// Largest share.
    pub worst: f64,
}

impl OptimumError {
    /// The error over `(predicted, real)` pairs; `None` for no pair or a
    /// prediction that is not positive and finite.
    pub fn of(pairs: &[(f64, f64)]) -> Option<OptimumError> {
        if pairs.is_empty() || pairs.iter().any(|&(p, r)| !(p.is_finite() && p > 0.0 && r.is_finite())) {
            return None;
        }
        let shares: Vec<f64> = pairs.iter().map(|&(p, r)| (r - p) / p).collect();
        Some(OptimumError {
            checked: shares.len(),
            mean: shares.iter().sum::<f64>() / shares.len() as f64,
            worst: shares.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// A deep ensemble of MLPs sharing one metadata record, and the
/// standardised feature rows it was trained on (its anchors: what the model
/// has seen, for the trust region; feature vectors, not extractions).
#[derive(Clone)]
pub struct Ensemble {
    /// Per member, its layers (candle-nn layout: weight `[out, in]`).
    members: Vec<Vec<Linear>>,
    /// Standardised training feature rows `[rows, F]`.
    anchors: Tensor,
    /// The residual term's weight per anchor `[rows]` (standardised target
    /// units; 0 for an anchor it was not fitted on), if the model has one.
    residual: Option<Tensor>,
    /// Metadata.
    pub meta: ModelMeta,
}

/// The ensemble's prediction for a batch, in oracle units.
pub struct Predicted {
    /// Mean over members, `[batch]`.
    pub mean: Tensor,
    /// Standard deviation over members, `[batch]`.
    pub std: Tensor,
    /// Root-mean-square distance of the standardised features to the
    /// nearest anchor, in units of `anchor_spacing`, `[batch]`.
    pub distance: Tensor,
}

impl Ensemble {
    /// An ensemble of `members` (each a list of layers) with `meta`.
    /// Checks that the layer shapes chain from the feature count to 1.
    pub fn new(members: Vec<Vec<Linear>>, anchors: Tensor, meta: ModelMeta) -> Result<Self> {
        let e = Ensemble { members, anchors, residual: None, meta };
        e.validate()?;
        Ok(e)
    }

    /// This ensemble plus the residual term `fit` (see [`super::residual`]),
    /// whose rows must be anchors (standardised training rows).
    pub fn with_residual(mut self, fit: &ResidualFit) -> Result<Self> {
        let rows: Vec<f32> = fit.rows.iter().flatten().map(|&v| v as f32).collect();
        let weights: Vec<f32> = fit.weights.iter().map(|&v| v as f32).collect();
        self.residual = Some(self.weights_per_anchor(&rows, &weights)?);
        self.meta.residual_length = fit.length;
        self.validate()?;
        Ok(self)
    }

    /// This ensemble with `other`'s residual term (or none, if it has
    /// none), whose anchors must be among this one's.
    pub fn with_residual_of(mut self, other: &Ensemble) -> Result<Self> {
        self.residual = match &other.residual {
            Some(w) => {
                let rows: Vec<f32> = other.anchors.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
                let weights: Vec<f32> = w.to_dtype(DType::F32)?.to_vec1()?;
                Some(self.weights_per_anchor(&rows, &weights)?)
            }
            None => None,
        };
        self.meta.residual_length = other.meta.residual_length;
        self.validate()?;
        Ok(self)
    }

    /// The residual weights `weights` of standardised `rows` (flattened,
    /// `F` per row) as one weight per anchor, 0 where no row is that
    /// anchor. Errors if a row with a weight is not an anchor.
    fn weights_per_anchor(&self, rows: &[f32], weights: &[f32]) -> Result<Tensor> {
        let f = self.dim();
        if rows.len() != weights.len() * f {
            bail!("{} residual weights for {} values of rows of {f} features", weights.len(), rows.len());
        }
        let anchors: Vec<f32> = self.anchors.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
        let bits = |row: &[f32]| row.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
        let index: HashMap<Vec<u32>, usize> = anchors.chunks(f).enumerate().map(|(a, row)| (bits(row), a)).collect();
        let mut per_anchor = vec![0f32; anchors.len() / f];
        for (row, &w) in rows.chunks(f).zip(weights).filter(|(_, &w)| w != 0.0) {
            let a = index.get(&bits(row)).context("a residual row is not one of the model's anchors")?;
            per_anchor[*a] += w;
        }
        let n = per_anchor.len();
        Ok(Tensor::from_vec(per_anchor, n, self.anchors.device())?)
    }

    /// The same weights, anchors and residual term under new metadata
    /// (checked).
    pub fn with_meta(&self, meta: ModelMeta) -> Result<Self> {
        let e = Ensemble { meta, ..self.clone() };
        e.validate()?;
        Ok(e)
    }

    fn validate(&self) -> Result<()> {
        let m = &self.meta;
        let f = m.features.names.len();
        if !(OLDEST_FORMAT..=FORMAT).contains(&m.format) {
            bail!(
                "model format {} is not supported (this build reads formats {OLDEST_FORMAT} to {FORMAT}); retrain it",
                m.format
            );
        }
        if let Some(frame) = &m.relative {
            if frame.references.is_empty()
                || frame.references.iter().any(|r| !(r.cost.is_finite() && r.cost > 0.0 && r.nodes > 0.0))
            {
                bail!("a relative model needs positive, finite reference costs for its training designs");
            }
        }
        if m.transfer_margin.is_some_and(|t| !(t.is_finite() && t >= 0.0)) {
            bail!("transfer margin {:?} is not a finite share of at least 0", m.transfer_margin);
        }
        if m.optimum_error.is_some_and(|o| o.checked == 0 || !(o.mean.is_finite() && o.worst.is_finite())) {
            bail!("the optimum error {:?} is not finite over at least one optimum", m.optimum_error);
        }
        if !(m.error_floor.is_finite() && m.error_floor >= 0.0) {
            bail!("error floor {} is not a finite number of at least 0", m.error_floor);
        }
        if let Some(d) = m.measured.iter().find(|d| !d.is_valid()) {
            bail!("the measured costs of e-graph {} are not all finite averages of at least one label", d.egraph);
        }
        for (what, len) in [
            ("input_mean", m.input_mean.len()),
            ("input_scale", m.input_scale.len()),
            ("feature_low", m.feature_low.len()),
            ("feature_high", m.feature_high.len()),
        ] {
            if len != f {
                bail!("{what} has {len} entries for {f} features");
            }
        }
        let mut unique = std::collections::HashSet::new();
        for name in &m.features.names {
            let known = ["count:", "cost:", "pair:"].iter().any(|p| name.starts_with(p)) || name == "linear";
            if !known || !unique.insert(name.as_str()) {
                bail!("feature {name:?} is unknown or listed twice");
            }
        }
        let finite = m.input_mean.iter().chain(&m.input_scale).chain(&m.feature_low).chain(&m.feature_high);
        if finite.clone().any(|x| !x.is_finite()) || !m.target_mean.is_finite() || !m.target_std.is_finite() {
            bail!("non-finite normalisation values");
        }
        if m.input_scale.iter().any(|&s| s <= 0.0) || m.target_std <= 0.0 {
            bail!("non-positive normalisation scale");
        }
        let anchors = self.anchors.dims();
        if anchors.len() != 2 || anchors[0] == 0 || anchors[1] != f {
            bail!("anchors have shape {anchors:?}, expected [rows, {f}]");
        }
        let a: Vec<f32> = self.anchors.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
        if a.iter().any(|x| !x.is_finite()) || !(m.anchor_spacing.is_finite() && m.anchor_spacing > 0.0) {
            bail!("non-finite anchors or anchor spacing");
        }
        match &self.residual {
            Some(weights) => {
                if weights.dims() != [anchors[0]] {
                    bail!("residual weights {:?} do not match the {} anchors", weights.dims(), anchors[0]);
                }
                let v: Vec<f32> = weights.to_dtype(DType::F32)?.to_vec1()?;
                if v.iter().any(|x| !x.is_finite()) || !(m.residual_length.is_finite() && m.residual_length > 0.0) {
                    bail!("non-finite residual term or non-positive residual length");
                }
            }
            None if m.residual_length != 0.0 => bail!("residual length {} without a residual term", m.residual_length),
            None => {}
        }
        if self.members.is_empty() || self.members.len() != m.members {
            bail!("{} members stored, metadata says {}", self.members.len(), m.members);
        }
        let mut dims = vec![f];
        dims.extend(&m.hidden);
        dims.push(1);
        for (k, layers) in self.members.iter().enumerate() {
            if layers.len() + 1 != dims.len() {
                bail!("member {k} has {} layers, expected {}", layers.len(), dims.len() - 1);
            }
            for (i, (layer, w)) in layers.iter().zip(dims.windows(2)).enumerate() {
                let shape = layer.weight().dims().to_vec();
                if shape != [w[1], w[0]] {
                    bail!("member {k} layer {i}: weight shape {shape:?}, expected [{}, {}]", w[1], w[0]);
                }
                let bias = layer.bias().map(|b| b.dims().to_vec());
                if bias != Some(vec![w[1]]) {
                    bail!("member {k} layer {i}: bias shape {bias:?}, expected [{}]", w[1]);
                }
                for t in [Some(layer.weight()), layer.bias()].into_iter().flatten() {
                    let v: Vec<f32> = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
                    if v.iter().any(|x| !x.is_finite()) {
                        bail!("member {k} layer {i}: non-finite weights");
                    }
                }
            }
        }
        Ok(())
    }

    /// Per member, its layers.
    pub fn members(&self) -> &[Vec<Linear>] {
        &self.members
    }

    /// The standardised training rows `[rows, F]`.
    pub fn anchors(&self) -> &Tensor {
        &self.anchors
    }

    /// Number of features the model reads.
    pub fn dim(&self) -> usize {
        self.meta.features.names.len()
    }

    /// Standardised features of raw features `[batch, F]` (any float dtype).
    pub fn standardise(&self, features: &Tensor) -> candle_core::Result<Tensor> {
        let f = self.dim();
        let dev = features.device();
        let mean = Tensor::from_slice(&self.meta.input_mean, f, dev)?.to_dtype(features.dtype())?;
        let scale = Tensor::from_slice(&self.meta.input_scale, f, dev)?.to_dtype(features.dtype())?;
        features.broadcast_sub(&mean)?.broadcast_div(&scale)
    }

    /// Each member's normalised output `[members, batch]` for standardised
    /// features `[batch, F]`, in their dtype.
    pub fn member_outputs(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let outs = self.members.iter().map(|layers| forward(layers, x)).collect::<candle_core::Result<Vec<_>>>()?;
        Tensor::stack(&outs, 0)
    }

    /// Mean and spread of the members' predictions (oracle units) and the
    /// distance to the nearest anchor, for raw features `[batch, F]`.
    /// Differentiable in the features.
    pub fn predict(&self, features: &Tensor) -> candle_core::Result<Predicted> {
        let x = self.standardise(features)?;
        let y = self.member_outputs(&x)?;
        let anchors = self.anchors.to_device(x.device())?.to_dtype(x.dtype())?;
        let f = self.dim() as f64;
        // Mean squared difference to every anchor, `[batch, anchors]`.
        let d2 = (x.unsqueeze(1)?.broadcast_sub(&anchors.unsqueeze(0)?)?.sqr()?.sum(2)? / f)?;
        let nearest = d2.min_keepdim(1)?.squeeze(1)?;
        let distance = ((nearest + 1e-10)?.sqrt()? / self.meta.anchor_spacing)?;
        let var = y.broadcast_sub(&y.mean_keepdim(0)?)?.sqr()?.mean(0)?;
        let mut mean = y.mean(0)?;
        if let Some(weights) = &self.residual {
            let weights = weights.to_device(x.device())?.to_dtype(x.dtype())?;
            let k = (d2 / (-2.0 * self.meta.residual_length * self.meta.residual_length))?.exp()?;
            mean = (mean + k.matmul(&weights.unsqueeze(1)?)?.squeeze(1)?)?;
        }
        // The small floor keeps the gradient of the square root finite
        // where the members agree exactly.
        let std = (var + 1e-8)?.sqrt()?;
        Ok(Predicted {
            mean: ((mean * self.meta.target_std)? + self.meta.target_mean)?,
            std: (std * self.meta.target_std)?,
            distance,
        })
    }

    /// The expected error of a prediction whose ensemble spread is
    /// `spread` (oracle units): `sqrt(spread^2 + (error_floor *
    /// target_std)^2)`. The spread alone measures how much the members
    /// disagree; they can agree and all be off where labels differ for
    /// reasons the features do not show (two spreads of a 300-call ABC-area
    /// model held about half its test labels), and the members'
    /// out-of-fold error, which the floor adds, is what a label like the
    /// training ones is off by.
    /// Far from the training rows a model can be off by more than either
    /// (the distance and the loop's [`OptimumError`] say so).
    pub fn prediction_error(&self, spread: f64) -> f64 {
        spread.hypot(self.meta.error_floor * self.meta.target_std)
    }

    /// The device holding the weights.
    pub fn device(&self) -> &Device {
        self.members[0][0].weight().device()
    }

    /// Writes weights and metadata to one safetensors file.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut tensors: Vec<(String, Vec<u8>, Vec<usize>)> = Vec::new();
        for (k, layers) in self.members.iter().enumerate() {
            for (i, layer) in layers.iter().enumerate() {
                for (what, t) in [("weight", Some(layer.weight())), ("bias", layer.bias())] {
                    let Some(t) = t else { continue };
                    let v: Vec<f32> = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
                    tensors.push((
                        format!("member{k}.layer{i}.{what}"),
                        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                        t.dims().to_vec(),
                    ));
                }
            }
        }
        let a: Vec<f32> = self.anchors.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
        tensors.push((
            "anchors".into(),
            a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            self.anchors.dims().to_vec(),
        ));
        if let Some(weights) = &self.residual {
            let v: Vec<f32> = weights.to_dtype(DType::F32)?.to_vec1()?;
            tensors.push((
                "residual.weights".into(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                weights.dims().to_vec(),
            ));
        }
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        let mut meta = self.meta.clone();
        // Whatever it was loaded from, it is written in this build's layout.
        meta.format = FORMAT;
        meta.checksum = checksum(tensors.iter().map(|(name, bytes, _)| (name.as_str(), bytes.as_slice())));
        let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
            .iter()
            .map(|(k, bytes, shape)| {
                Ok((k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)?))
            })
            .collect::<Result<_>>()?;
        let meta = HashMap::from([(META_KEY.to_string(), serde_json::to_string(&meta)?)]);
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        let bytes = safetensors::serialize(views, Some(meta))?;
        let tmp = path.with_extension("safetensors.tmp");
        std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// Reads a model written by [`Ensemble::save`], checking every shape,
    /// normalisation vector and weight. Errors name the file.
    pub fn load(path: &Path, device: &Device) -> Result<Ensemble> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_bytes(&bytes, device).with_context(|| format!("{}: not a usable smoothe model", path.display()))
    }

    fn from_bytes(bytes: &[u8], device: &Device) -> Result<Ensemble> {
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes).context("not a safetensors file")?;
        let meta_json =
            header.metadata().as_ref().and_then(|m| m.get(META_KEY)).context("no smoothe metadata record")?;
        let mut meta: ModelMeta = serde_json::from_str(meta_json).context("bad smoothe metadata record")?;
        let raw = safetensors::SafeTensors::deserialize(bytes).context("cannot read the tensors")?;
        let mut names: Vec<String> = raw.names().into_iter().map(String::from).collect();
        names.sort();
        let stored = std::mem::take(&mut meta.checksum);
        let mut ordered: Vec<(String, Vec<u8>)> = Vec::new();
        for name in &names {
            ordered.push((name.clone(), raw.tensor(name)?.data().to_vec()));
        }
        if stored.is_empty() {
            bail!("no checksum in the metadata record (not written by this version of smoothe); retrain it");
        }
        if checksum(ordered.iter().map(|(n, b)| (n.as_str(), b.as_slice()))) != stored {
            bail!("checksum mismatch: the weights were damaged after saving");
        }
        let tensors = candle_core::safetensors::load_buffer(bytes, device).context("cannot read the tensors")?;
        let mut members = Vec::new();
        for k in 0..meta.members {
            let mut layers = Vec::new();
            for i in 0..=meta.hidden.len() {
                let get = |what: &str| {
                    tensors
                        .get(&format!("member{k}.layer{i}.{what}"))
                        .cloned()
                        .with_context(|| format!("missing tensor member{k}.layer{i}.{what}"))
                };
                layers.push(Linear::new(get("weight")?, Some(get("bias")?)));
            }
            members.push(layers);
        }
        let anchors = tensors.get("anchors").cloned().context("missing tensor anchors")?;
        let mut e = Ensemble { members, anchors, residual: None, meta };
        e.residual = match (tensors.get("residual.rows"), tensors.get("residual.weights")) {
            // Format 5 stored the fitted rows beside their weights.
            (Some(rows), Some(weights)) if e.meta.format == 5 => {
                Some(e.weights_per_anchor(&rows.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?, &weights.to_vec1()?)?)
            }
            (None, Some(weights)) if e.meta.format > 5 => Some(weights.clone()),
            (None, None) => None,
            _ => bail!("the residual term's tensors do not match format {}", e.meta.format),
        };
        e.validate()?;
        Ok(e)
    }
}

/// Hash of named tensor data (sorted by name), in the order given.
fn checksum<'a>(tensors: impl Iterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut all = Vec::new();
    for (name, bytes) in tensors {
        all.extend_from_slice(name.as_bytes());
        all.push(0);
        all.extend_from_slice(bytes);
    }
    crate::egraph::hash_hex(&all)
}

/// One member's forward pass: ReLU between layers, output squeezed to
/// `[batch]`; weights follow the input's dtype.
pub fn forward(layers: &[Linear], x: &Tensor) -> candle_core::Result<Tensor> {
    let mut h = x.clone();
    for (i, layer) in layers.iter().enumerate() {
        h = if layer.weight().dtype() == h.dtype() {
            layer.forward(&h)?
        } else {
            let cast = Linear::new(
                layer.weight().to_dtype(h.dtype())?,
                layer.bias().map(|b| b.to_dtype(h.dtype())).transpose()?,
            );
            cast.forward(&h)?
        };
        if i + 1 < layers.len() {
            h = h.relu()?;
        }
    }
    h.squeeze(1)
}
