//! Extraction algorithms behind one trait, and a name-keyed registry.
//!
//! Every extractor works on a preprocessed graph ([`Reduced`]) and returns
//! an extraction of that graph; [`run`] maps it back to original ids and
//! checks it with the shared checker.

mod bottom_up;
mod dag_greedy;
mod greedy;
mod random;

pub use bottom_up::{complete_acyclic, NodeKey};
pub use dag_greedy::DagGreedy;
pub use greedy::Greedy;
pub use random::RandomExtractor;

use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::{bail, Context, Result};
use std::time::Instant;

/// An extraction algorithm.
pub trait Extractor {
    /// Registry name, as given to `--method`.
    fn name(&self) -> &'static str;
    /// Extracts from `problem.graph`. The result must be valid for it.
    fn extract(&self, problem: &Reduced) -> Result<Extraction>;
}

/// Options shared by the registry's constructors.
#[derive(Debug, Clone, Default)]
pub struct ExtractOptions {
    /// Seed for randomised extractors.
    pub seed: u64,
}

/// Names accepted by [`by_name`].
pub const METHODS: &[&str] = &["greedy", "dag-greedy", "random"];

/// Builds the extractor registered under `name`.
pub fn by_name(name: &str, options: &ExtractOptions) -> Result<Box<dyn Extractor>> {
    Ok(match name {
        "greedy" => Box::new(Greedy),
        "dag-greedy" => Box::new(DagGreedy),
        "random" => Box::new(RandomExtractor { seed: options.seed }),
        other => bail!("unknown method {other:?}; expected one of {}", METHODS.join(", ")),
    })
}

/// The outcome of [`run`]: an extraction of the *original* graph.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Valid extraction of the original graph, reachable classes only.
    pub extraction: Extraction,
    /// Its DAG cost on the original graph.
    pub dag_cost: f64,
    /// Seconds spent in the extractor (preprocessing excluded).
    pub seconds: f64,
}

/// Runs `extractor` on `problem`, maps the result back to `original` and
/// checks it. An invalid result is a bug in the extractor and is reported
/// as an error, never returned.
pub fn run(extractor: &dyn Extractor, original: &EGraph, problem: &Reduced) -> Result<Outcome> {
    let start = Instant::now();
    let reduced = extractor.extract(problem)?;
    let seconds = start.elapsed().as_secs_f64();
    reduced
        .check(&problem.graph)
        .with_context(|| format!("{} returned an invalid extraction (a bug)", extractor.name()))?;
    let extraction = problem.to_original(&reduced).restricted_to_reachable(original)?;
    let dag_cost = extraction
        .dag_cost(original)
        .with_context(|| format!("{} result is invalid after mapping back (a bug)", extractor.name()))?;
    Ok(Outcome {
        extraction,
        dag_cost,
        seconds,
    })
}
