//! Extraction algorithms behind one trait, and a name-keyed registry.
//!
//! Every extractor works on a preprocessed graph ([`Reduced`]) and returns
//! an extraction of that graph; [`run`] maps it back to original ids and
//! checks it with the shared checker.

mod baselines;
mod bottom_up;
mod dag_greedy;
mod depth_greedy;
mod greedy;
mod guided;
#[cfg(feature = "ilp")]
pub mod ilp;
pub mod local_search;
pub mod moves;
#[cfg(feature = "ilp")]
mod portfolio;
mod random;
mod smoothe;

pub use baselines::as_extracted;
pub use bottom_up::{choice_cycles, complete_acyclic, finalise_bottom_up, NodeKey};
pub use dag_greedy::{dag_greedy_with_limit, DagGreedy, MEMBER_BUDGET, MIN_SET};
pub use depth_greedy::{least_arrival, DepthGreedy, TimedSmoothE};
pub use greedy::Greedy;
pub use guided::{
    guided_search, linear_start, linear_start_config, with_model, BestOfRandom, GuidedSearch, SmoothEWith,
};
#[cfg(feature = "ilp")]
pub use ilp::{Certified, Ilp, IlpStatus};
#[cfg(feature = "ilp")]
pub use portfolio::Portfolio;
pub use random::{random_extraction, RandomExtractor};
pub use smoothe::{OptimizerKind, Parameterisation, SmoothE, SmoothEConfig};

use crate::egraph::EGraph;
use crate::extraction::{Extraction, OriginalExtraction};
use crate::preprocess::Reduced;
use crate::progress::{quiet, Observer};
use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::time::Instant;

/// An extraction algorithm.
pub trait Extractor {
    /// Registry name, as given to `--method`.
    fn name(&self) -> &'static str;
    /// Extracts from `problem.graph`. The result must be valid for it.
    fn extract(&self, problem: &Reduced) -> Result<Extraction> {
        Ok(self.extract_with_details(problem)?.0)
    }
    /// Like [`Extractor::extract`], plus algorithm-specific details for the
    /// result file (an object; empty by default).
    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        Ok((self.extract(problem)?, Map::new()))
    }
}

/// Options shared by the registry's constructors.
#[derive(Clone)]
pub struct ExtractOptions {
    /// Seed for randomised extractors.
    pub seed: u64,
    /// SmoothE settings.
    pub smoothe: SmoothEConfig,
    /// Device for tensor work.
    pub device: candle_core::Device,
    /// Where long extractors report progress.
    pub progress: Observer,
    /// Per-operator delays of `depth-greedy` (unit by default).
    pub op_delays: crate::timing::OpDelays,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions {
            seed: 0,
            smoothe: SmoothEConfig::default(),
            device: candle_core::Device::Cpu,
            progress: quiet(),
            op_delays: Default::default(),
        }
    }
}

impl ExtractOptions {
    /// SmoothE with these settings, seed, device and progress observer.
    pub fn smoothe(&self) -> SmoothE {
        SmoothE {
            config: self.smoothe.clone(),
            seed: self.seed,
            device: self.device.clone(),
            progress: self.progress.clone(),
        }
    }
}

/// Names accepted by [`by_name`].
#[cfg(feature = "ilp")]
pub const METHODS: &[&str] = &["greedy", "dag-greedy", "depth-greedy", "random", "smoothe", "ilp", "auto"];
/// Names accepted by [`by_name`] (a build without the `ilp` feature).
#[cfg(not(feature = "ilp"))]
pub const METHODS: &[&str] = &["greedy", "dag-greedy", "depth-greedy", "random", "smoothe"];

/// Methods that solve the linear program exactly and take node costs only.
pub const EXACT_METHODS: &[&str] = &["ilp", "auto"];

/// Builds the extractor registered under `name`.
pub fn by_name(name: &str, options: &ExtractOptions) -> Result<Box<dyn Extractor>> {
    Ok(match name {
        "greedy" => Box::new(Greedy),
        "dag-greedy" => Box::new(DagGreedy),
        "depth-greedy" => Box::new(DepthGreedy { delays: options.op_delays.clone() }),
        "random" => Box::new(RandomExtractor { seed: options.seed }),
        "smoothe" => Box::new(options.smoothe()),
        #[cfg(feature = "ilp")]
        "ilp" => Box::new(Ilp { time_limit: options.smoothe.time_limit, progress: options.progress.clone() }),
        #[cfg(feature = "ilp")]
        "auto" => Box::new(Portfolio { smoothe: options.smoothe(), time_limit: options.smoothe.time_limit }),
        #[cfg(not(feature = "ilp"))]
        "ilp" | "auto" => bail!("--method {name} needs a build with the `ilp` feature (on by default)"),
        other => bail!("unknown method {other:?}; expected one of {}", METHODS.join(", ")),
    })
}

/// The outcome of [`run`]: an extraction of the *original* graph.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Valid extraction of the original graph, reachable classes only.
    pub extraction: OriginalExtraction,
    /// Its DAG cost on the original graph.
    pub dag_cost: f64,
    /// Seconds spent in the extractor (preprocessing excluded).
    pub seconds: f64,
    /// Algorithm-specific details for the result file.
    pub details: Map<String, Value>,
}

/// Runs `extractor` on `problem`, maps the result back to `original` and
/// checks it. An invalid result is a bug in the extractor and is reported
/// as an error, never returned.
pub fn run(extractor: &dyn Extractor, original: &EGraph, problem: &Reduced) -> Result<Outcome> {
    let start = Instant::now();
    let (reduced, details) = extractor.extract_with_details(problem)?;
    let seconds = start.elapsed().as_secs_f64();
    reduced
        .check(&problem.graph)
        .with_context(|| format!("{} returned an invalid extraction (a bug)", extractor.name()))?;
    let extraction = problem.to_original(&reduced).restricted_to_reachable(original)?;
    let dag_cost = extraction
        .dag_cost(original)
        .with_context(|| format!("{} result is invalid after mapping back (a bug)", extractor.name()))?;
    Ok(Outcome { extraction, dag_cost, seconds, details })
}
