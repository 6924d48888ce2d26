//! What SmoothE optimises: per-seed scores as free logits or as node
//! embeddings through a small shared head, and the optimiser over them.

use super::adam::FusedAdam;
use super::{OptimizerKind, Parameterisation, SmoothEConfig};
use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::normal::standard_normal as normal;
use anyhow::Result;
use candle_core::{DType, Device, Module, Tensor, Var};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use candle_optimisers::adam::{Adam, ParamsAdam};
use candle_optimisers::rmsprop::{ParamsRMSprop, RMSprop};
use rand::rngs::StdRng;

/// Parameters producing scores `[nodes, batch]`.
pub(super) enum Params {
    Logits(Var),
    Embedding { embeddings: Var, head: Head, bias: Tensor, varmap: VarMap },
}

/// Linear -> LayerNorm -> ReLU -> Linear(1).
pub(super) struct Head {
    first: candle_nn::Linear,
    norm_weight: Tensor,
    norm_bias: Tensor,
    last: candle_nn::Linear,
}

impl Head {
    fn new(dim: usize, vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(Head {
            first: candle_nn::linear(dim, dim, vb.pp("first"))?,
            norm_weight: vb.get_with_hints(dim, "norm.weight", candle_nn::Init::Const(1.0))?,
            norm_bias: vb.get_with_hints(dim, "norm.bias", candle_nn::Init::Const(0.0))?,
            last: candle_nn::linear(dim, 1, vb.pp("last"))?,
        })
    }
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.first.forward(x)?;
        let h = candle_nn::ops::layer_norm_slow(&h, &self.norm_weight, &self.norm_bias, 1e-5)?;
        self.last.forward(&h.relu()?)
    }
}

impl Params {
    pub(super) fn scores(&self, nodes: usize, batch: usize) -> candle_core::Result<Tensor> {
        match self {
            Params::Logits(v) => Ok(v.as_tensor().clone()),
            Params::Embedding { embeddings, head, bias, .. } => {
                // embeddings [batch * nodes, dim] -> [batch, nodes] -> [nodes, batch]
                let logits = head.forward(embeddings.as_tensor())?.reshape((batch, nodes))?.t()?;
                logits + bias
            }
        }
    }
    fn vars(&self) -> Vec<Var> {
        match self {
            Params::Logits(v) => vec![v.clone()],
            Params::Embedding { embeddings, varmap, .. } => {
                let mut vars = varmap.all_vars();
                vars.push(embeddings.clone());
                vars
            }
        }
    }
}

pub(super) enum Opt {
    /// Logits in CPU memory: one fused pass per step.
    FusedAdam(FusedAdam),
    Adam(Adam),
    Rmsprop(RMSprop),
}

impl Opt {
    pub(super) fn step(&mut self, grads: &candle_core::backprop::GradStore) -> candle_core::Result<()> {
        match self {
            Opt::FusedAdam(o) => o.step(grads),
            Opt::Adam(o) => o.step(grads),
            Opt::Rmsprop(o) => o.step(grads),
        }
    }
}

/// Parameters biased towards `start` (seed 0 exactly, the others with
/// growing noise), and a new optimiser for them.
pub(super) fn fresh_start(
    cfg: &SmoothEConfig,
    dev: &Device,
    g: &EGraph,
    start: &Extraction,
    batch: usize,
    rng: &mut StdRng,
) -> Result<(Params, Opt)> {
    let nn = g.num_nodes();
    // The bonus grows with the class size so the starting extraction
    // has the same probability (about 1 - e^-init_bias) in every class.
    let mut logits = vec![0f32; nn * batch];
    for n in start.choices.iter().flatten() {
        let size = g.class_nodes(g.class_of(*n)).len() as f64;
        let bonus = (cfg.init_bias + size.ln()) as f32;
        for b in 0..batch {
            logits[(*n).index() * batch + b] = bonus;
        }
    }
    let params = match cfg.parameterisation {
        Parameterisation::Logits => {
            // The last `explore_seeds` share of the batch starts from
            // noise alone, away from the greedy basin.
            let explorers = (cfg.explore_seeds.clamp(0.0, 1.0) * batch as f64).round() as usize;
            let explorers = explorers.min(batch.saturating_sub(1));
            for b in 1..batch {
                let explorer = b >= batch - explorers;
                let sd = if explorer { cfg.init_noise } else { cfg.init_noise * b as f64 / (batch - 1).max(1) as f64 };
                for n in 0..nn {
                    if explorer {
                        logits[n * batch + b] = 0.0;
                    }
                    logits[n * batch + b] += (sd * normal(rng)) as f32;
                }
            }
            Params::Logits(Var::from_vec(logits, (nn, batch), dev)?)
        }
        Parameterisation::Embedding => {
            let bias = Tensor::from_vec(logits, (nn, batch), dev)?;
            let varmap = VarMap::new();
            let vb = VarBuilder::from_varmap(&varmap, DType::F32, dev);
            let head = Head::new(cfg.embedding_dim, vb)?;
            let data: Vec<f32> = (0..batch * nn * cfg.embedding_dim).map(|_| normal(rng) as f32).collect();
            let embeddings = Var::from_vec(data, (batch * nn, cfg.embedding_dim), dev)?;
            Params::Embedding { embeddings, head, bias, varmap }
        }
    };
    let fused = match &params {
        Params::Logits(v) if cfg.optimizer == OptimizerKind::Adam => FusedAdam::new(v, cfg.learning_rate),
        _ => None,
    };
    let opt = match (cfg.optimizer, fused) {
        (OptimizerKind::Adam, Some(fused)) => Opt::FusedAdam(fused),
        (OptimizerKind::Adam, None) => {
            Opt::Adam(Adam::new(params.vars(), ParamsAdam { lr: cfg.learning_rate, ..Default::default() })?)
        }
        (OptimizerKind::Rmsprop, _) => {
            Opt::Rmsprop(RMSprop::new(params.vars(), ParamsRMSprop { lr: cfg.learning_rate, ..Default::default() })?)
        }
    };
    Ok((params, opt))
}
