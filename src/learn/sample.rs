//! Drawing valid extractions for training data: uniform ones, and
//! perturbations of a good extraction (which tell a model far more about
//! the region worth optimising).

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extract::complete_acyclic;
use crate::extraction::Extraction;
use rand::Rng;

/// A valid extraction that keeps `base`'s choice in each class with
/// probability `1 - rate` and otherwise prefers a uniformly random node;
/// classes `base` does not pick prefer a random node. Cycles are repaired.
pub fn perturb(g: &EGraph, base: &Extraction, rate: f64, rng: &mut impl Rng) -> Extraction {
    let preferred: Vec<Option<NodeIdx>> = (0..g.num_classes() as ClassIdx)
        .map(|c| {
            let nodes = g.class_nodes(c);
            match base.choices.get(c as usize).copied().flatten() {
                Some(n) if !rng.random_bool(rate.clamp(0.0, 1.0)) => Some(n),
                _ => Some(nodes[rng.random_range(0..nodes.len())]),
            }
        })
        .collect();
    let scores: Vec<f64> = (0..g.num_nodes()).map(|_| rng.random::<f64>()).collect();
    complete_acyclic(g, &preferred, |n| {
        let base_bonus = if base.choices.get(g.class_of(n) as usize).copied().flatten() == Some(n) { 1.0 } else { 0.0 };
        base_bonus + scores[n as usize]
    })
}
