//! The cost model's network: a small deep ensemble of MLPs (candle-nn
//! `Linear` layers, ReLU) over normalised features, whose spread is the
//! model's uncertainty. Its metadata is [`ModelMeta`]; its file is written
//! and read by [`crate::learn::model::file`].

use crate::learn::model::meta::ModelMeta;
use crate::learn::model::residual::ResidualFit;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use std::collections::HashMap;

/// One member of the ensemble: `Linear` layers with ReLU between them and
/// one output, squeezed to `[batch]`. As a candle [`Module`] it follows
/// its input's dtype (the weights are cast when they differ).
#[derive(Clone, Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
}

impl Mlp {
    /// An MLP with layer widths `dims` (inputs first, 1 last) whose
    /// parameters `layer{i}.weight` and `layer{i}.bias` come from `vb`:
    /// existing variables of its `VarMap` are used as they are, missing
    /// ones are initialised by candle-nn.
    pub fn new(dims: &[usize], vb: VarBuilder) -> candle_core::Result<Mlp> {
        let layers = dims
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("layer{i}"))))
            .collect::<candle_core::Result<_>>()?;
        Ok(Mlp { layers })
    }

    /// An MLP of the given layers (weight `[out, in]`, bias `[out]`).
    pub fn from_layers(layers: Vec<Linear>) -> Mlp {
        Mlp { layers }
    }

    /// Its layers, inputs first.
    pub fn layers(&self) -> &[Linear] {
        &self.layers
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            h = if layer.weight().dtype() == h.dtype() {
                layer.forward(&h)?
            } else {
                let cast = Linear::new(
                    layer.weight().to_dtype(h.dtype())?,
                    layer.bias().map(|b| b.to_dtype(h.dtype())).transpose()?,
                );
                cast.forward(&h)?
            };
            if i + 1 < self.layers.len() {
                h = h.relu()?;
            }
        }
        h.squeeze(1)
    }
}

/// A deep ensemble of MLPs sharing one metadata record, and the
/// standardised feature rows it was trained on (its anchors: what the model
/// has seen, for the trust region; feature vectors, not extractions).
#[derive(Clone)]
pub struct Ensemble {
    /// The members.
    pub(super) members: Vec<Mlp>,
    /// Standardised training feature rows `[rows, F]`.
    pub(super) anchors: Tensor,
    /// The residual term's weight per anchor `[rows]` (standardised target
    /// units; 0 for an anchor it was not fitted on), if the model has one.
    pub(super) residual: Option<Tensor>,
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
    pub fn new(members: Vec<Mlp>, anchors: Tensor, meta: ModelMeta) -> Result<Self> {
        let e = Ensemble { members, anchors, residual: None, meta };
        e.validate()?;
        Ok(e)
    }

    /// This ensemble plus the residual term `fit` (see [`crate::learn::model::residual`]),
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
    pub(super) fn weights_per_anchor(&self, rows: &[f32], weights: &[f32]) -> Result<Tensor> {
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

    /// Checks the metadata, then that the anchors, the residual term and
    /// every member's layers match it and are finite.
    pub(crate) fn validate(&self) -> Result<()> {
        let m = &self.meta;
        m.check()?;
        let f = m.features.names.len();
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
        for (k, layers) in self.members.iter().map(Mlp::layers).enumerate() {
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

    /// The members.
    pub fn members(&self) -> &[Mlp] {
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
        let outs = self.members.iter().map(|m| m.forward(x)).collect::<candle_core::Result<Vec<_>>>()?;
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
    /// reasons the features do not show, and the members'
    /// out-of-fold error, which the floor adds, is what a label like the
    /// training ones is off by.
    /// Far from the training rows a model can be off by more than either
    /// (the distance and the loop's [`crate::learn::model::meta::OptimumError`] say so).
    pub fn prediction_error(&self, spread: f64) -> f64 {
        spread.hypot(self.meta.error_floor * self.meta.target_std)
    }

    /// The device holding the weights.
    pub fn device(&self) -> &Device {
        self.members[0].layers()[0].weight().device()
    }
}
