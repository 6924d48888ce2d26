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

mod adam;
mod config;
mod params;

pub use config::{OptimizerKind, Parameterisation, SmoothEConfig};

use super::bottom_up::{choice_cycles, complete_acyclic};
use super::{local_search, DagGreedy, Extractor, Greedy};
use crate::cost::{CostModel, LinearCost};
use crate::egraph::{EGraph, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use crate::progress::Observer;
use crate::relax::op::{OpCounters, RelaxOp};
use crate::relax::{Iteration, Relaxation};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use params::{fresh_start, Opt, Params};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Share of `time_limit` spent on gradient steps; the rest is left for
/// polishing the best extraction by local search.
const SEARCH_SHARE: f64 = 0.9;

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
    let score = |n: NodeIdx| scores[n.index() * width + b];
    let preferred: Vec<Option<NodeIdx>> = g
        .classes()
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
        let cfg = &self.config;
        let mut run = Run::new(self, problem, model, pool, starts)?;
        self.progress.begin("step", cfg.steps as u64);
        for step in 0..cfg.steps {
            let raw = run.gradient_step(step)?;
            if step % cfg.decode_every == 0 || step + 1 == cfg.steps {
                run.decode(&raw, step)?;
            }
            let elapsed = run.start.elapsed().as_secs_f64();
            run.report(elapsed);
            if step - run.last_improvement >= cfg.patience {
                if run.restarts >= cfg.restarts {
                    break;
                }
                run.restart(step)?;
            }
            if run.time_limit > 0.0 && elapsed >= SEARCH_SHARE * run.time_limit {
                break;
            }
        }
        self.progress.end();
        // Polish the best decoded extraction with single-class switches and
        // sharing moves, in the time left.
        run.polish();
        run.finish()
    }
}

/// One optimisation in progress: the state its steps update.
struct Run<'a> {
    smoothe: &'a SmoothE,
    graph: &'a EGraph,
    model: &'a dyn CostModel,
    relax: Arc<Relaxation>,
    /// Seeds optimised together, nodes, and relaxation worker chunks.
    batch: usize,
    nodes: usize,
    chunks: usize,
    start: Instant,
    /// Seconds (0: none), and the instant it runs out.
    time_limit: f64,
    deadline: Option<Instant>,
    /// Magnitude of the starting cost, which the loss is divided by.
    scale: f64,
    rng: StdRng,
    params: Params,
    opt: Opt,
    penalty_weight: f64,
    /// Where the run started, and its cost.
    init_method: &'static str,
    init_cost: f64,
    best: Candidate,
    trajectory: Vec<(f64, f64)>,
    seconds_to_best: f64,
    /// Up to `pool` distinct decodes with the lowest cost, best first.
    kept: Vec<(Extraction, f64)>,
    pool: usize,
    last_improvement: usize,
    steps_done: usize,
    step_seconds: f64,
    cycles_seen: usize,
    restarts: usize,
    /// What the steps' relaxation ops did: host copies, edge visits.
    counters: Arc<OpCounters>,
}

impl<'a> Run<'a> {
    /// Checks the settings, picks the start (the cheapest of greedy,
    /// dag-greedy and `starts` by the model) and sets up the parameters.
    fn new(
        smoothe: &'a SmoothE,
        problem: &'a Reduced,
        model: &'a dyn CostModel,
        pool: usize,
        starts: &[Extraction],
    ) -> Result<Self> {
        let cfg = &smoothe.config;
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
        let best = Candidate { extraction: init.clone(), cost: init_cost, had_cycle: false };
        let mut rng = StdRng::seed_from_u64(smoothe.seed);
        let (params, opt) = fresh_start(cfg, &smoothe.device, g, &best.extraction, batch, &mut rng)?;
        let relax = Arc::new(Relaxation::new(
            g,
            &problem.sccs,
            cfg.combine,
            Iteration { tolerance: cfg.tolerance, max_sweeps: cfg.max_sweeps },
        ));
        Ok(Run {
            smoothe,
            graph: g,
            model,
            relax,
            batch,
            nodes: g.num_nodes(),
            chunks: rayon::current_num_threads(),
            trajectory: vec![(start.elapsed().as_secs_f64(), init_cost)],
            seconds_to_best: start.elapsed().as_secs_f64(),
            deadline: (time_limit > 0.0).then(|| start + std::time::Duration::from_secs_f64(time_limit)),
            start,
            time_limit,
            scale: init_cost.abs().max(1e-9),
            rng,
            params,
            opt,
            penalty_weight: cfg.penalty_weight,
            init_method,
            init_cost,
            best,
            kept: Vec::new(),
            pool,
            last_improvement: 0,
            steps_done: 0,
            step_seconds: 0.0,
            cycles_seen: 0,
            restarts: 0,
            counters: Default::default(),
        })
    }

    /// One gradient step on expected cost plus the weighted penalty;
    /// returns the scores it started from (for decoding).
    fn gradient_step(&mut self, step: usize) -> Result<Tensor> {
        let cfg = &self.smoothe.config;
        let dev = &self.smoothe.device;
        let (nn, batch) = (self.nodes, self.batch);
        let t0 = Instant::now();
        let raw = self.params.scores(nn, batch)?;
        let mut scores = raw.clone();
        if cfg.gumbel > 0.0 {
            let u: Vec<f32> = (0..nn * batch)
                .map(|_| self.rng.random_range(1e-6f64..1.0 - 1e-6))
                .map(|u| (-(-u.ln()).ln()) as f32)
                .collect();
            if !dev.is_cpu() {
                self.counters.host_bytes.fetch_add((u.len() * 4) as u64, Ordering::Relaxed);
            }
            scores = (scores + (Tensor::from_vec(u, (nn, batch), dev)? * cfg.gumbel)?)?;
        }
        if cfg.temperature != 1.0 {
            scores = (scores / cfg.temperature)?;
        }
        let out = RelaxOp::new(self.relax.clone(), self.chunks).counting(self.counters.clone()).apply(&scores)?;
        let probs = out.narrow(0, 0, nn)?;
        let penalty = out.narrow(0, nn, 1)?;
        let cost = self.model.expected(&probs)?;
        let loss = ((cost.sum_all()? / self.scale)? + (penalty.sum_all()? * self.penalty_weight)?)?;
        let grads = loss.backward()?;
        self.opt.step(&grads)?;
        self.steps_done = step + 1;
        self.step_seconds += t0.elapsed().as_secs_f64();
        Ok(raw)
    }

    /// Decodes every seed of `raw`, keeps the pool, and takes a better
    /// best; a decode with a cycle raises the penalty weight.
    fn decode(&mut self, raw: &Tensor, step: usize) -> Result<()> {
        let (g, relax, model, batch) = (self.graph, &self.relax, self.model, self.batch);
        let scores_now: Vec<f64> = raw.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?;
        let candidates: Vec<Candidate> = (0..batch)
            .into_par_iter()
            .map(|b| {
                let (extraction, had_cycle) = decode(g, relax, &scores_now, batch, b);
                let cost = model.cost_of(&extraction);
                Candidate { extraction, cost, had_cycle }
            })
            .collect();
        if candidates.iter().any(|c| c.had_cycle) {
            self.cycles_seen += 1;
            self.penalty_weight *= self.smoothe.config.penalty_growth;
        }
        if self.pool > 0 {
            for c in &candidates {
                if !self.kept.iter().any(|(e, _)| *e == c.extraction) {
                    self.kept.push((c.extraction.clone(), c.cost));
                }
            }
            self.kept.sort_by(|a, b| a.1.total_cmp(&b.1));
            self.kept.truncate(self.pool);
        }
        if let Some(c) = candidates.into_iter().min_by(|a, b| a.cost.total_cmp(&b.cost)) {
            if c.cost < self.best.cost - 1e-12 * self.best.cost.abs().max(1.0) {
                self.best = c;
                self.last_improvement = step;
                self.seconds_to_best = self.start.elapsed().as_secs_f64();
                self.trajectory.push((self.seconds_to_best, self.best.cost));
            }
        }
        Ok(())
    }

    /// Tells the observer the step, best cost and time left.
    fn report(&self, elapsed: f64) {
        let left = if self.time_limit > 0.0 {
            format!(", {:.0} s left", (self.time_limit - elapsed).max(0.0))
        } else {
            String::new()
        };
        self.smoothe.progress.advance(self.steps_done as u64, &format!("best {:.6}{left}", self.best.cost));
    }

    /// Hill climbing on the best so far (single-class switches and
    /// sharing moves), within the deadline.
    fn polish(&mut self) {
        let model = self.model;
        let passes = self.smoothe.config.polish_passes;
        let (polished, cost) =
            local_search::improve(self.graph, &self.best.extraction, &|e| model.cost_of(e), passes, self.deadline);
        if cost < self.best.cost {
            self.best = Candidate { extraction: polished, cost, had_cycle: false };
            self.seconds_to_best = self.start.elapsed().as_secs_f64();
            self.trajectory.push((self.seconds_to_best, cost));
        }
    }

    /// A plateau: polish the best so far and start again around it.
    fn restart(&mut self, step: usize) -> Result<()> {
        self.polish();
        self.restarts += 1;
        self.last_improvement = step;
        let cfg = &self.smoothe.config;
        self.penalty_weight = cfg.penalty_weight;
        (self.params, self.opt) =
            fresh_start(cfg, &self.smoothe.device, self.graph, &self.best.extraction, self.batch, &mut self.rng)?;
        Ok(())
    }

    /// The best extraction, the pool and the details for the result file.
    #[allow(clippy::type_complexity)]
    fn finish(mut self) -> Result<(Extraction, Vec<(Extraction, f64)>, Map<String, Value>)> {
        let mut details = Map::new();
        details.insert("start_method".into(), json!(self.init_method));
        details.insert("start_cost".into(), json!(self.init_cost));
        details.insert("model".into(), json!(self.model.name()));
        details.insert("steps".into(), json!(self.steps_done));
        details.insert("batch".into(), json!(self.batch));
        details.insert("ms_per_step".into(), json!(1000.0 * self.step_seconds / self.steps_done.max(1) as f64));
        let host_bytes = self.counters.host_bytes.load(Ordering::Relaxed);
        details.insert("host_bytes_per_step".into(), json!(host_bytes as f64 / self.steps_done.max(1) as f64));
        // How many times a forward pass swept each class edge, on average:
        // 1 without cycles, up to max_sweeps + 1 inside cyclic components.
        let forwards = self.counters.forwards.load(Ordering::Relaxed).max(1) as f64;
        let visits = self.counters.edge_visits.load(Ordering::Relaxed) as f64;
        details.insert("edge_passes_per_step".into(), json!(visits / forwards / self.relax.num_edges().max(1) as f64));
        details.insert("seconds_to_best".into(), json!(self.seconds_to_best));
        details.insert("restarts".into(), json!(self.restarts));
        details.insert("decodes_with_cycles".into(), json!(self.cycles_seen));
        details.insert("cycles_in_penalty".into(), json!(self.relax.met_cycle_count()));
        details.insert("trajectory".into(), json!(self.trajectory));
        details.insert("config".into(), serde_json::to_value(&self.smoothe.config).context("config to JSON")?);
        if self.pool > 0 && !self.kept.iter().any(|(e, _)| *e == self.best.extraction) {
            self.kept.insert(0, (self.best.extraction.clone(), self.best.cost));
            self.kept.truncate(self.pool);
        }
        Ok((self.best.extraction, self.kept, details))
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
