//! Extractors driven by an arbitrary cost model (such as a learned one):
//! SmoothE against the model, and the best of N random extractions by the
//! model for comparison.

use super::random::random_extraction;
use super::{ExtractOptions, Extractor, SmoothE};
use crate::cost::CostModel;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use crate::progress::quiet;
use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

/// SmoothE optimising `model` instead of the linear cost. It first runs
/// SmoothE on the linear (node) cost for a third of the time or steps, so
/// the model's optimisation can start from that extraction as well as from
/// greedy and dag-greedy (whichever the model prices lowest): a
/// conservative model, which charges leaving its training data, cannot
/// cross a wide region it has never seen to reach a good one.
pub struct SmoothEWith<'a> {
    /// The optimiser.
    pub smoothe: SmoothE,
    /// The objective.
    pub model: &'a dyn CostModel,
}

impl Extractor for SmoothEWith<'_> {
    fn name(&self) -> &'static str {
        "smoothe"
    }
    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let start = std::time::Instant::now();
        let mut linear = self.smoothe.clone();
        linear.progress = quiet();
        linear.config.time_limit = self.smoothe.config.time_limit / 3.0;
        linear.config.steps = self.smoothe.config.steps.div_ceil(3);
        let linear_start = linear.extract(problem)?;
        let mut main = self.smoothe.clone();
        if main.config.time_limit > 0.0 {
            main.config.time_limit = (main.config.time_limit - start.elapsed().as_secs_f64()).max(1e-3);
        }
        main.config.steps = self.smoothe.config.steps - linear.config.steps.min(self.smoothe.config.steps);
        let (e, mut details) = main.optimise_from(problem, self.model, std::slice::from_ref(&linear_start))?;
        details.insert("model_cost".into(), json!(self.model.cost_of(&e)));
        details.insert("linear_start_model_cost".into(), json!(self.model.cost_of(&linear_start)));
        Ok((e, details))
    }
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
    samples: usize,
) -> Result<Box<dyn Extractor + 'a>> {
    Ok(match name {
        "smoothe" => Box::new(SmoothEWith {
            smoothe: SmoothE {
                config: options.smoothe.clone(),
                seed: options.seed,
                device: options.device.clone(),
                progress: options.progress.clone(),
            },
            model,
        }),
        "random" => Box::new(BestOfRandom { samples, seed: options.seed, model }),
        other => bail!("method {other:?} cannot take a cost model; use smoothe or random"),
    })
}
