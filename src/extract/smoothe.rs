//! SmoothE: differentiable extraction by gradient descent on the
//! relaxation (see [`crate::relax`]), batched over seeds.
//!
//! The loop: scores from parameters (direct logits, or per-seed node
//! embeddings through a small shared MLP head), node probabilities from the
//! relaxation op, loss = expected cost (any [`CostModel`]) + lambda *
//! acyclicity penalty, one optimiser step. Every few steps each seed is
//! decoded (per class the most likely node, completed into a valid
//! extraction, cycles repaired) and the best is kept. It starts from the
//! better of `greedy` and `dag-greedy`, so it never returns anything worse.

use super::bottom_up::{choice_cycles, complete_acyclic};
use super::random::standard_normal as normal;
use super::{local_search, DagGreedy, Extractor, Greedy};
use crate::cost::{CostModel, LinearCost};
use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use crate::progress::Observer;
use crate::relax::op::RelaxOp;
use crate::relax::{Combine, Iteration, Relaxation};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor, Var};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use candle_optimisers::adam::{Adam, ParamsAdam};
use candle_optimisers::rmsprop::{ParamsRMSprop, RMSprop};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// Share of `time_limit` spent on gradient steps; the rest is left for
/// polishing the best extraction by local search.
const SEARCH_SHARE: f64 = 0.9;

/// Which optimiser updates the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (candle-optimisers).
    Adam,
    /// RMSprop (candle-optimisers).
    Rmsprop,
}

/// How node scores are parameterised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Parameterisation {
    /// One free logit per node and seed.
    Logits,
    /// Per-seed node embeddings through a shared
    /// Linear -> LayerNorm -> ReLU -> Linear(1) head, as the published code.
    Embedding,
}

/// Settings of the SmoothE optimiser; `configs/smoothe.toml` holds the
/// defaults, and every field has a command-line flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmoothEConfig {
    /// How a class's incoming edge probabilities combine.
    pub combine: Combine,
    /// Optimiser.
    pub optimizer: OptimizerKind,
    /// Learning rate.
    pub learning_rate: f64,
    /// Most optimisation steps.
    pub steps: usize,
    /// Restart (or stop, when restarts are used up) after this many steps
    /// without a better decoded extraction.
    pub patience: usize,
    /// Restarts around the best extraction so far after a plateau.
    pub restarts: usize,
    /// Wall-clock limit in seconds for the optimisation (0: none); the last
    /// tenth is left for the final local search.
    pub time_limit: f64,
    /// Seeds optimised together (0: chosen from the graph size).
    pub batch: usize,
    /// Parameterisation of the scores.
    pub parameterisation: Parameterisation,
    /// Embedding width for the `embedding` parameterisation.
    pub embedding_dim: usize,
    /// Softmax temperature.
    pub temperature: f64,
    /// Scale of the Gumbel noise added to the scores each step (0: none).
    pub gumbel: f64,
    /// Decode every this many steps.
    pub decode_every: usize,
    /// Initial weight of the acyclicity penalty.
    pub penalty_weight: f64,
    /// Factor applied to the penalty weight when a decoded seed had a cycle.
    pub penalty_growth: f64,
    /// Logit bonus of the starting extraction's nodes.
    pub init_bias: f64,
    /// Standard deviation of the initial logit noise of the last seed
    /// (seed 0 has none; the others in between).
    pub init_noise: f64,
    /// Share of seeds that start from noise alone instead of near the
    /// greedy extraction (logits parameterisation).
    pub explore_seeds: f64,
    /// Passes of hill climbing (single-class switches, sharing moves) on the final result
    /// (0: none).
    pub polish_passes: usize,
    /// Fixed-point tolerance inside cyclic components.
    pub tolerance: f64,
    /// Most fixed-point sweeps inside a cyclic component.
    pub max_sweeps: usize,
}

impl Default for SmoothEConfig {
    fn default() -> Self {
        SmoothEConfig {
            combine: Combine::Mixed,
            optimizer: OptimizerKind::Adam,
            learning_rate: 0.15,
            steps: 5000,
            patience: 300,
            restarts: 10,
            time_limit: 30.0,
            batch: 0,
            parameterisation: Parameterisation::Logits,
            embedding_dim: 32,
            temperature: 1.0,
            gumbel: 0.0,
            decode_every: 5,
            penalty_weight: 0.01,
            penalty_growth: 1.5,
            init_bias: 3.0,
            init_noise: 2.0,
            explore_seeds: 0.25,
            polish_passes: 20,
            tolerance: 1e-4,
            max_sweeps: 10,
        }
    }
}

impl SmoothEConfig {
    /// The batch size to use on `g`: the configured one, or a size that
    /// keeps `nodes * batch` near 200k (between 4 and 32 seeds).
    pub fn batch_for(&self, g: &EGraph) -> usize {
        if self.batch > 0 {
            return self.batch;
        }
        (200_000 / g.num_nodes().max(1)).clamp(4, 32)
    }
}

impl crate::config::Choice for OptimizerKind {
    const NAMES: &'static [&'static str] = &["adam", "rmsprop"];
}

impl crate::config::Choice for Parameterisation {
    const NAMES: &'static [&'static str] = &["logits", "embedding"];
}

/// The SmoothE extractor.
#[derive(Clone)]
pub struct SmoothE {
    /// Optimiser settings.
    pub config: SmoothEConfig,
    /// Random seed (initial noise, Gumbel noise, embeddings).
    pub seed: u64,
    /// Where tensors live; the relaxation itself runs on the CPU.
    pub device: Device,
    /// Where progress goes (steps, best cost, time left).
    pub progress: Observer,
}

/// A decoded candidate and its cost.
struct Candidate {
    extraction: Extraction,
    cost: f64,
    had_cycle: bool,
}

/// Decodes one seed: per class the highest-scoring node, completed into a
/// valid extraction (cycles repaired by the best acyclic alternative).
/// Cycles met among the preferred choices are handed to the relaxation's
/// penalty.
fn decode(g: &EGraph, relax: &Relaxation, scores: &[f64], width: usize, b: usize) -> (Extraction, bool) {
    let score = |n: NodeIdx| scores[n as usize * width + b];
    let preferred: Vec<Option<NodeIdx>> = (0..g.num_classes() as ClassIdx)
        .map(|c| g.class_nodes(c).iter().copied().max_by(|&x, &y| score(x).total_cmp(&score(y)).then(y.cmp(&x))))
        .collect();
    let ex = complete_acyclic(g, &preferred, score);
    let had_cycle = ex.choices.iter().zip(&preferred).any(|(got, want)| got.is_some() && got != want);
    if had_cycle {
        for cycle in choice_cycles(g, &preferred, 64) {
            relax.remember_cycle(&cycle);
        }
    }
    (ex, had_cycle)
}

/// Parameters producing scores `[nodes, batch]`.
enum Params {
    Logits(Var),
    Embedding { embeddings: Var, head: Head, bias: Tensor, varmap: VarMap },
}

/// Linear -> LayerNorm -> ReLU -> Linear(1).
struct Head {
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
    fn scores(&self, nodes: usize, batch: usize) -> candle_core::Result<Tensor> {
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

enum Opt {
    Adam(Adam),
    Rmsprop(RMSprop),
}

impl Opt {
    fn step(&mut self, grads: &candle_core::backprop::GradStore) -> candle_core::Result<()> {
        match self {
            Opt::Adam(o) => o.step(grads),
            Opt::Rmsprop(o) => o.step(grads),
        }
    }
}

impl SmoothE {
    /// Optimises `model` over `problem`, returning the best valid
    /// extraction found and details (trajectory, steps, timings).
    pub fn optimise(&self, problem: &Reduced, model: &dyn CostModel) -> Result<(Extraction, Map<String, Value>)> {
        self.optimise_from(problem, model, &[])
    }

    /// Like [`SmoothE::optimise`], with `starts` (valid extractions of
    /// `problem`) joining greedy and dag-greedy as candidate starting
    /// points; the cheapest by the model is used.
    pub fn optimise_from(
        &self,
        problem: &Reduced,
        model: &dyn CostModel,
        starts: &[Extraction],
    ) -> Result<(Extraction, Map<String, Value>)> {
        let (best, _, details) = self.optimise_pool(problem, model, 0, starts)?;
        Ok((best, details))
    }

    /// Like [`SmoothE::optimise`], also returning up to `pool` distinct
    /// decoded extractions with the lowest model cost seen (best first),
    /// for active learning. `starts` (valid extractions of `problem`) join
    /// greedy and dag-greedy as candidate starting points; the cheapest by
    /// the model is used.
    #[allow(clippy::type_complexity)]
    pub fn optimise_pool(
        &self,
        problem: &Reduced,
        model: &dyn CostModel,
        pool: usize,
        starts: &[Extraction],
    ) -> Result<(Extraction, Vec<(Extraction, f64)>, Map<String, Value>)> {
        let mut kept: Vec<(Extraction, f64)> = Vec::new();
        let cfg = &self.config;
        if cfg.temperature <= 0.0 || !cfg.temperature.is_finite() {
            bail!("temperature must be positive, got {}", cfg.temperature);
        }
        if cfg.decode_every == 0 {
            bail!("decode_every must be at least 1");
        }
        if cfg.time_limit.is_nan() || cfg.time_limit < 0.0 {
            bail!("time_limit must be a number of seconds, 0 or more (0 or inf: none), got {}", cfg.time_limit);
        }
        // 0, inf and anything past a few decades mean no limit.
        let time_limit = if cfg.time_limit < 1e9 { cfg.time_limit } else { 0.0 };
        let start = Instant::now();
        let g = &problem.graph;
        let nn = g.num_nodes();
        let batch = cfg.batch_for(g);
        // Start from the better of the two greedy methods, by this model.
        let mut all_starts = vec![Greedy.extract(problem)?, DagGreedy.extract(problem)?];
        all_starts.extend(starts.iter().cloned());
        let (init_idx, init) = all_starts
            .iter()
            .enumerate()
            .min_by(|a, b| model.cost_of(a.1).total_cmp(&model.cost_of(b.1)))
            .expect("two starts");
        let init_method = ["greedy", "dag-greedy"].get(init_idx).copied().unwrap_or("given");
        let init_cost = model.cost_of(init);
        let mut best = Candidate { extraction: init.clone(), cost: init_cost, had_cycle: false };
        let mut trajectory = vec![(start.elapsed().as_secs_f64(), init_cost)];
        let mut seconds_to_best = start.elapsed().as_secs_f64();
        let scale = init_cost.abs().max(1e-9);

        let mut rng = StdRng::seed_from_u64(self.seed);
        let dev = &self.device;
        let (mut params, mut opt) = self.fresh_start(g, &best.extraction, batch, &mut rng)?;
        let relax = Arc::new(Relaxation::new(
            g,
            &problem.sccs,
            cfg.combine,
            Iteration { tolerance: cfg.tolerance, max_sweeps: cfg.max_sweeps },
        ));
        let chunks = rayon::current_num_threads();
        self.progress.begin("step", cfg.steps as u64);
        let mut penalty_weight = cfg.penalty_weight;
        let mut last_improvement = 0;
        let mut steps_done = 0;
        let mut step_seconds = 0.0;
        let mut cycles_seen = 0usize;
        let mut restarts = 0usize;
        let deadline = (time_limit > 0.0).then(|| start + std::time::Duration::from_secs_f64(time_limit));
        let polish = |best: &mut Candidate, trajectory: &mut Vec<(f64, f64)>, seconds_to_best: &mut f64| {
            let (polished, cost) =
                local_search::improve(g, &best.extraction, &|e| model.cost_of(e), cfg.polish_passes, deadline);
            if cost < best.cost {
                *best = Candidate { extraction: polished, cost, had_cycle: false };
                *seconds_to_best = start.elapsed().as_secs_f64();
                trajectory.push((*seconds_to_best, cost));
            }
        };
        for step in 0..cfg.steps {
            let t0 = Instant::now();
            let raw = params.scores(nn, batch)?;
            let mut scores = raw.clone();
            if cfg.gumbel > 0.0 {
                let u: Vec<f32> = (0..nn * batch)
                    .map(|_| rng.random_range(1e-6f64..1.0 - 1e-6))
                    .map(|u| (-(-u.ln()).ln()) as f32)
                    .collect();
                scores = (scores + (Tensor::from_vec(u, (nn, batch), dev)? * cfg.gumbel)?)?;
            }
            if cfg.temperature != 1.0 {
                scores = (scores / cfg.temperature)?;
            }
            let out = RelaxOp::new(relax.clone(), chunks).apply(&scores.to_device(&Device::Cpu)?)?.to_device(dev)?;
            let probs = out.narrow(0, 0, nn)?;
            let penalty = out.narrow(0, nn, 1)?;
            let cost = model.expected(&probs)?;
            let loss = ((cost.sum_all()? / scale)? + (penalty.sum_all()? * penalty_weight)?)?;
            let grads = loss.backward()?;
            opt.step(&grads)?;
            steps_done = step + 1;
            step_seconds += t0.elapsed().as_secs_f64();

            let last_step = step + 1 == cfg.steps;
            if step % cfg.decode_every == 0 || last_step {
                let scores_now: Vec<f64> = raw.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?;
                let candidates: Vec<Candidate> = (0..batch)
                    .into_par_iter()
                    .map(|b| {
                        let (extraction, had_cycle) = decode(g, &relax, &scores_now, batch, b);
                        let cost = model.cost_of(&extraction);
                        Candidate { extraction, cost, had_cycle }
                    })
                    .collect();
                let any_cycle = candidates.iter().any(|c| c.had_cycle);
                if any_cycle {
                    cycles_seen += 1;
                    penalty_weight *= cfg.penalty_growth;
                }
                if pool > 0 {
                    for c in &candidates {
                        if !kept.iter().any(|(e, _)| *e == c.extraction) {
                            kept.push((c.extraction.clone(), c.cost));
                        }
                    }
                    kept.sort_by(|a, b| a.1.total_cmp(&b.1));
                    kept.truncate(pool);
                }
                if let Some(c) = candidates.into_iter().min_by(|a, b| a.cost.total_cmp(&b.cost)) {
                    if c.cost < best.cost - 1e-12 * best.cost.abs().max(1.0) {
                        best = c;
                        last_improvement = step;
                        seconds_to_best = start.elapsed().as_secs_f64();
                        trajectory.push((seconds_to_best, best.cost));
                    }
                }
            }
            let elapsed = start.elapsed().as_secs_f64();
            let left = if time_limit > 0.0 {
                format!(", {:.0} s left", (time_limit - elapsed).max(0.0))
            } else {
                String::new()
            };
            self.progress.advance(steps_done as u64, &format!("best {:.6}{left}", best.cost));
            if step - last_improvement >= cfg.patience {
                if restarts >= cfg.restarts {
                    break;
                }
                // Plateau: polish the best so far and start again around it.
                polish(&mut best, &mut trajectory, &mut seconds_to_best);
                restarts += 1;
                last_improvement = step;
                penalty_weight = cfg.penalty_weight;
                (params, opt) = self.fresh_start(g, &best.extraction, batch, &mut rng)?;
            }
            if time_limit > 0.0 && elapsed >= SEARCH_SHARE * time_limit {
                break;
            }
        }
        self.progress.end();
        // Polish the best decoded extraction with single-class switches and
        // sharing moves, in the time left.
        polish(&mut best, &mut trajectory, &mut seconds_to_best);
        let mut details = Map::new();
        details.insert("start_method".into(), json!(init_method));
        details.insert("start_cost".into(), json!(init_cost));
        details.insert("model".into(), json!(model.name()));
        details.insert("steps".into(), json!(steps_done));
        details.insert("batch".into(), json!(batch));
        details.insert("ms_per_step".into(), json!(1000.0 * step_seconds / steps_done.max(1) as f64));
        details.insert("seconds_to_best".into(), json!(seconds_to_best));
        details.insert("restarts".into(), json!(restarts));
        details.insert("decodes_with_cycles".into(), json!(cycles_seen));
        details.insert("cycles_in_penalty".into(), json!(relax.met_cycle_count()));
        details.insert("trajectory".into(), json!(trajectory));
        details.insert("config".into(), serde_json::to_value(cfg).context("config to JSON")?);
        if pool > 0 && !kept.iter().any(|(e, _)| *e == best.extraction) {
            kept.insert(0, (best.extraction.clone(), best.cost));
            kept.truncate(pool);
        }
        Ok((best.extraction, kept, details))
    }

    /// Parameters biased towards `start` (seed 0 exactly, the others with
    /// growing noise), and a new optimiser for them.
    fn fresh_start(&self, g: &EGraph, start: &Extraction, batch: usize, rng: &mut StdRng) -> Result<(Params, Opt)> {
        let cfg = &self.config;
        let dev = &self.device;
        let nn = g.num_nodes();
        // The bonus grows with the class size so the starting extraction
        // has the same probability (about 1 - e^-init_bias) in every class.
        let mut logits = vec![0f32; nn * batch];
        for n in start.choices.iter().flatten() {
            let size = g.class_nodes(g.class_of(*n)).len() as f64;
            let bonus = (cfg.init_bias + size.ln()) as f32;
            for b in 0..batch {
                logits[*n as usize * batch + b] = bonus;
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
                    let sd =
                        if explorer { cfg.init_noise } else { cfg.init_noise * b as f64 / (batch - 1).max(1) as f64 };
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
        let opt = match cfg.optimizer {
            OptimizerKind::Adam => {
                Opt::Adam(Adam::new(params.vars(), ParamsAdam { lr: cfg.learning_rate, ..Default::default() })?)
            }
            OptimizerKind::Rmsprop => Opt::Rmsprop(RMSprop::new(
                params.vars(),
                ParamsRMSprop { lr: cfg.learning_rate, ..Default::default() },
            )?),
        };
        Ok((params, opt))
    }
}

impl Extractor for SmoothE {
    fn name(&self) -> &'static str {
        "smoothe"
    }

    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let model = LinearCost::new(&problem.graph, &self.device)?;
        self.optimise(problem, &model)
    }
}
