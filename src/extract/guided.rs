//! Extractors driven by an arbitrary cost model (such as a learned one):
//! SmoothE against the model, helped by a model-guided evolutionary search,
//! and the best of N random extractions by the model for comparison.

use super::moves::{broad_sample, screening_pool};
use super::random::random_extraction;
use super::{as_extracted, DagGreedy, ExtractOptions, Extractor, Greedy, SmoothE, SmoothEConfig};
use crate::cost::CostModel;
use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use crate::progress::quiet;
use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::time::Instant;

/// Settings of [`guided_search`].
#[derive(Debug, Clone, Copy)]
pub struct GuidedSearch {
    /// Broad samples judged first (see [`broad_sample`]), so the search
    /// can start in any basin the model likes, not only near `starts`.
    pub broad: usize,
    /// Most generations.
    pub generations: usize,
    /// Stop after this many generations without a cheaper extraction.
    pub patience: usize,
    /// Candidates the model judges per generation.
    pub pool: usize,
    /// Cheapest extractions kept as the next generation's parents.
    pub survivors: usize,
    /// Most classes a small move switches.
    pub radius: usize,
}

impl Default for GuidedSearch {
    fn default() -> Self {
        GuidedSearch { broad: 1024, generations: 40, patience: 8, pool: 256, survivors: 8, radius: 8 }
    }
}

/// Share of uniform random extractions among the broad samples (the loop's
/// default too).
const BROAD_UNIFORM: f64 = 0.2;

/// Evolutionary search over valid extractions of `g` judged by `model`
/// alone: each generation judges a screening pool (small moves,
/// perturbations and crossovers of the survivors, and uniform random
/// extractions; see [`screening_pool`]) and keeps the cheapest. Cheap for a
/// model that judges a batch at once, and unlike gradient descent it can
/// jump to a distant region that the model knows to be good. Returns the
/// last generation's survivors, cheapest first, with their costs (`starts`
/// among them where nothing beat them; empty only if the model prices
/// everything as infinite), and the generations run. Assumes `starts` is
/// not empty and valid.
pub fn guided_search(
    g: &EGraph,
    model: &dyn CostModel,
    starts: &[Extraction],
    settings: GuidedSearch,
    seed: u64,
    deadline: Option<Instant>,
) -> (Vec<(Extraction, f64)>, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut seen: HashSet<Extraction> = HashSet::new();
    let mut first: Vec<Extraction> = starts.iter().filter(|&s| seen.insert(s.clone())).cloned().collect();
    let want = first.len() + settings.broad;
    for _ in 0..settings.broad * 2 {
        if first.len() >= want {
            break;
        }
        let e = broad_sample(g, starts, BROAD_UNIFORM, &mut rng);
        if seen.insert(e.clone()) {
            first.push(e);
        }
    }
    let mut population = Vec::new();
    keep_cheapest(&mut population, model, first, settings.survivors);
    let mut since_improvement = 0;
    let mut generations = 0;
    while generations < settings.generations && since_improvement < settings.patience {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let Some(best_before) = population.first().map(|p| p.1) else {
            break;
        };
        generations += 1;
        let parents: Vec<Extraction> = population.iter().map(|(e, _)| e.clone()).collect();
        let pool = screening_pool(g, &parents, settings.pool, settings.radius, &seen, &mut rng);
        seen.extend(pool.iter().cloned());
        keep_cheapest(&mut population, model, pool, settings.survivors);
        since_improvement = if population[0].1 < best_before { 0 } else { since_improvement + 1 };
    }
    (population, generations)
}

/// Judges `candidates` by `model` and keeps, of them and `population`, the
/// `survivors` cheapest with a finite cost, cheapest first (ties in order:
/// the population, then the candidates).
fn keep_cheapest(
    population: &mut Vec<(Extraction, f64)>,
    model: &dyn CostModel,
    candidates: Vec<Extraction>,
    survivors: usize,
) {
    let costs = model.costs_of(&candidates);
    population.extend(candidates.into_iter().zip(costs).filter(|(_, c)| c.is_finite()));
    population.sort_by(|a, b| a.1.total_cmp(&b.1));
    population.truncate(survivors.max(1));
}

/// SmoothE optimising `model` instead of the linear cost. It first runs
/// SmoothE on the linear (node) cost ([`linear_start_config`]: a third of
/// the default steps, bounded by steps, not by the clock), then a
/// [`guided_search`] from that extraction, greedy and dag-greedy, so the
/// model's optimisation can start from the cheapest of them by the model:
/// a conservative model, which charges leaving its training data, cannot
/// make gradient descent cross a wide region it has never seen to reach a
/// good one, but the search can jump there. The search and the model's
/// optimisation share two thirds of the time limit, counted from the end
/// of the linear start. Last, it returns the cheapest of the optimum and
/// those three model-free extractions by the model's
/// [`CostModel::selection_costs`] (for most models the same costs, so the
/// optimum, which is no dearer than its starts, is kept).
pub struct SmoothEWith<'a> {
    /// The optimiser.
    pub smoothe: SmoothE,
    /// The objective.
    pub model: &'a dyn CostModel,
    /// The graph the problem was preprocessed from (the linear start is
    /// made on it, see [`linear_start`]).
    pub original: &'a EGraph,
}

impl Extractor for SmoothEWith<'_> {
    fn name(&self) -> &'static str {
        "smoothe"
    }
    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let linear_start = linear_start(self.original, problem, &self.smoothe)?;
        // The model's part is timed from here.
        let start = std::time::Instant::now();
        let model_time = self.smoothe.config.time_limit * 2.0 / 3.0;
        let starts = [Greedy.extract(problem)?, DagGreedy.extract(problem)?, linear_start.clone()];
        let deadline = (model_time > 0.0).then(|| {
            let left = (model_time - start.elapsed().as_secs_f64()).max(0.0);
            Instant::now() + std::time::Duration::from_secs_f64(left / 2.0)
        });
        let (survivors, generations) = guided_search(
            &problem.graph,
            self.model,
            &starts,
            GuidedSearch::default(),
            frozen_search_seed(self.smoothe.seed),
            deadline,
        );
        let (searched, searched_cost) =
            survivors.into_iter().next().unwrap_or_else(|| (linear_start.clone(), f64::INFINITY));
        let mut main = self.smoothe.clone();
        if model_time > 0.0 {
            main.config.time_limit = (model_time - start.elapsed().as_secs_f64()).max(1e-3);
        }
        // Two thirds of the steps, as at the defaults, where the start takes
        // the other third.
        main.config.steps = self.smoothe.config.steps - self.smoothe.config.steps.div_ceil(3);
        let (optimum, mut details) = main.optimise_from(problem, self.model, &[linear_start.clone(), searched])?;
        details.insert("linear_start_model_cost".into(), json!(self.model.cost_of(&linear_start)));
        let [greedy, dag_greedy, linear] = starts;
        let candidates = [("smoothe", optimum), ("greedy", greedy), ("dag-greedy", dag_greedy), ("linear", linear)];
        let (pick, e, model_cost) = pick_by_selection_costs(self.model, candidates, &mut details);
        details.insert("pick".into(), json!(pick));
        details.insert("model_cost".into(), json!(model_cost));
        details.insert("search_model_cost".into(), json!(searched_cost));
        details.insert("search_generations".into(), json!(generations));
        Ok((e, details))
    }
}

/// The seed of [`SmoothEWith`]'s guided search under extraction seed
/// `seed`: a stream of its own. The learned-cost loop draws its broad
/// samples from `seed` itself, from the same three starts; a frozen search
/// on that seed redrew the very samples the loop had labelled, so at equal
/// seeds `extract --model` returned labelled extractions it had not found
/// by optimising the model, which made the frozen model look better than
/// it is.
fn frozen_search_seed(seed: u64) -> u64 {
    // XOR with a constant is a bijection, so distinct seeds stay distinct;
    // this one (the golden ratio's fraction in 64 bits) flips about half
    // the bits, so no small seed lands on another small seed's stream.
    seed ^ 0x9e37_79b9_7f4a_7c15
}

/// The settings of the linear-SmoothE start that [`SmoothEWith`] runs
/// under `config`: SmoothE's default settings for a third of the default
/// steps (1667), with no clock, whatever `config` sets, so for a seed and
/// thread count the start is the same extraction on any machine, under any
/// load and for any `--steps`: the learned-cost loop labels this start, so
/// a frozen model finds it measured. (A start timed by the clock drew a
/// different extraction on every run, moving the real cost by several
/// percent between draws; a start that took a third of `--steps` was
/// another extraction whenever `--steps` was not the default, and a frozen
/// model then judged it unmeasured.) The time limit still binds at four
/// times `config`'s, as a guard on graphs far larger than the shipped ones,
/// where a start that reaches it varies with the machine again.
pub fn linear_start_config(config: &SmoothEConfig) -> SmoothEConfig {
    let defaults = SmoothEConfig::default();
    SmoothEConfig { steps: defaults.steps.div_ceil(3), time_limit: 4.0 * config.time_limit, ..defaults }
}

/// The linear-SmoothE start of [`SmoothEWith`] under `smoothe`'s seed,
/// device and settings ([`linear_start_config`]): SmoothE on the linear
/// cost of `original` as `extract --method smoothe` makes it (commutative
/// twins kept), mapped onto `problem` ([`as_extracted`]). On the graph
/// without twins, SmoothE lands on other extractions of the same node
/// cost, which an oracle can measure worse.
pub fn linear_start(original: &EGraph, problem: &Reduced, smoothe: &SmoothE) -> Result<Extraction> {
    let run = SmoothE { config: linear_start_config(&smoothe.config), progress: quiet(), ..smoothe.clone() };
    Ok(as_extracted(original, problem, &[&run])?.remove(0))
}

/// The cheapest of `candidates` (named, the first the optimiser's result)
/// by [`CostModel::selection_costs`], the optimiser's result charged
/// [`CostModel::optimum_charge`] on top; ties go to the earlier one.
/// Records every candidate's selection cost (charge included) and the
/// charge in `details`; returns the pick and its
/// model cost. Both costs are scored over the same batch of candidates: on
/// a GPU a score can differ in its last bits with the batch it is part of
/// (the matrix kernels change with the shape), and the two must agree
/// where they are the same function.
fn pick_by_selection_costs<const N: usize>(
    model: &dyn CostModel,
    candidates: [(&'static str, Extraction); N],
    details: &mut Map<String, Value>,
) -> (&'static str, Extraction, f64) {
    let extractions: Vec<Extraction> = candidates.iter().map(|(_, e)| e.clone()).collect();
    let mut costs = model.selection_costs(&extractions);
    let charge = extractions.first().map_or(0.0, |optimum| model.optimum_charge(optimum));
    if let Some(optimum) = costs.first_mut() {
        *optimum += charge;
    }
    let model_costs = model.costs_of(&extractions);
    let mut by_name = Map::new();
    for ((name, _), c) in candidates.iter().zip(&costs) {
        by_name.insert((*name).into(), json!(c));
    }
    details.insert("selection_costs".into(), Value::Object(by_name));
    details.insert("optimum_charge".into(), json!(charge));
    let best = (0..N).fold(0, |best, i| if costs[i] < costs[best] { i } else { best });
    let (name, e) = candidates.into_iter().nth(best).expect("index in range");
    (name, e, model_costs[best])
}

/// The cheapest by `model` of `samples` random valid extractions.
pub struct BestOfRandom<'a> {
    /// How many to draw.
    pub samples: usize,
    /// Seed of the draws.
    pub seed: u64,
    /// The judge.
    pub model: &'a dyn CostModel,
}

impl Extractor for BestOfRandom<'_> {
    fn name(&self) -> &'static str {
        "random"
    }
    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut best: Option<(Extraction, f64)> = None;
        for _ in 0..self.samples.max(1) {
            let e = random_extraction(&problem.graph, &mut rng);
            let c = self.model.cost_of(&e);
            if best.as_ref().is_none_or(|(_, b)| c < *b) {
                best = Some((e, c));
            }
        }
        let (e, c) = best.expect("at least one sample");
        let mut details = Map::new();
        details.insert("samples".into(), json!(self.samples.max(1)));
        details.insert("model_cost".into(), json!(c));
        Ok((e, details))
    }
}

/// The extractor `name` driven by `model`: `smoothe`, or `random` (best of
/// `samples`). Other methods take no cost model.
pub fn with_model<'a>(
    name: &str,
    options: &ExtractOptions,
    model: &'a dyn CostModel,
    original: &'a EGraph,
    samples: usize,
) -> Result<Box<dyn Extractor + 'a>> {
    Ok(match name {
        "smoothe" => Box::new(SmoothEWith { smoothe: options.smoothe(), model, original }),
        "random" => Box::new(BestOfRandom { samples, seed: options.seed, model }),
        other => bail!("method {other:?} cannot take a cost model; use smoothe or random"),
    })
}
