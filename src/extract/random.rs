//! Uniformly random valid extractions, for baselines and training data.

use super::bottom_up::complete_acyclic;
use super::Extractor;
use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::Result;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A random valid extraction: every class prefers a uniformly random node;
/// a preference that would close a cycle falls back to the next acyclic
/// alternative by random score. Same seed, same result.
pub struct RandomExtractor {
    /// Seed of the generator.
    pub seed: u64,
}

/// Draws one random valid extraction of `g` using `rng`.
pub fn random_extraction(g: &EGraph, rng: &mut impl Rng) -> Extraction {
    let preferred: Vec<_> = g
        .classes()
        .map(|c| {
            let nodes = g.class_nodes(c);
            Some(nodes[rng.random_range(0..nodes.len())])
        })
        .collect();
    let scores: Vec<f64> = (0..g.num_nodes()).map(|_| rng.random::<f64>()).collect();
    complete_acyclic(g, &preferred, |n| scores[n.index()])
}

impl Extractor for RandomExtractor {
    fn name(&self) -> &'static str {
        "random"
    }

    fn extract(&self, problem: &Reduced) -> Result<Extraction> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        Ok(random_extraction(&problem.graph, &mut rng))
    }
}
