//! Drawing valid extractions for training data: uniform ones, and
//! perturbations of a good extraction (which tell a model far more about
//! the region worth optimising).

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extract::complete_acyclic;
use crate::extraction::Extraction;
use rand::seq::IndexedRandom;
use rand::Rng;

/// A valid extraction that keeps `base`'s choice in each class with
/// probability `1 - rate` and otherwise prefers a uniformly random node;
/// classes `base` does not pick prefer a random node. Cycles are repaired.
pub fn perturb(g: &EGraph, base: &Extraction, rate: f64, rng: &mut impl Rng) -> Extraction {
    let preferred: Vec<Option<NodeIdx>> = (0..g.num_classes() as ClassIdx)
        .map(|c| match base.choices.get(c as usize).copied().flatten() {
            Some(n) if !rng.random_bool(rate.clamp(0.0, 1.0)) => Some(n),
            _ => g.class_nodes(c).choose(rng).copied(),
        })
        .collect();
    complete_around(g, base, preferred, rng)
}

/// A small move from `base` (a valid extraction): `moves` classes it uses
/// that have alternatives switch to another node chosen uniformly; classes
/// that then become needed prefer a random node. Cycles are repaired, so a
/// switch can also be undone.
pub fn nudge(g: &EGraph, base: &Extraction, moves: usize, rng: &mut impl Rng) -> Extraction {
    let used: Vec<ClassIdx> = base
        .check(g)
        .map(|order| order.into_iter().filter(|&c| g.class_nodes(c).len() > 1).collect())
        .unwrap_or_default();
    let mut preferred: Vec<Option<NodeIdx>> = (0..g.num_classes() as ClassIdx)
        .map(|c| base.choices.get(c as usize).copied().flatten().or_else(|| g.class_nodes(c).choose(rng).copied()))
        .collect();
    for &c in used.choose_multiple(rng, moves) {
        let others: Vec<NodeIdx> =
            g.class_nodes(c).iter().copied().filter(|&n| Some(n) != preferred[c as usize]).collect();
        preferred[c as usize] = others.choose(rng).copied();
    }
    complete_around(g, base, preferred, rng)
}

/// Completes `preferred` into a valid extraction, breaking cycles towards
/// `base`'s nodes first and then at random.
fn complete_around(g: &EGraph, base: &Extraction, preferred: Vec<Option<NodeIdx>>, rng: &mut impl Rng) -> Extraction {
    let scores: Vec<f64> = (0..g.num_nodes()).map(|_| rng.random::<f64>()).collect();
    complete_acyclic(g, &preferred, |n| {
        let base_bonus = if base.choices.get(g.class_of(n) as usize).copied().flatten() == Some(n) { 1.0 } else { 0.0 };
        base_bonus + scores[n as usize]
    })
}

/// A valid extraction that takes each class's node from `a` or `b` (valid
/// extractions) at random, the classes neither uses preferring a random
/// node. Cycles are repaired towards `a`.
pub fn crossover(g: &EGraph, a: &Extraction, b: &Extraction, rng: &mut impl Rng) -> Extraction {
    let preferred: Vec<Option<NodeIdx>> = (0..g.num_classes())
        .map(|c| {
            let (x, y) = (a.choices.get(c).copied().flatten(), b.choices.get(c).copied().flatten());
            let pick = if rng.random_bool(0.5) { x.or(y) } else { y.or(x) };
            pick.or_else(|| g.class_nodes(c as ClassIdx).choose(rng).copied())
        })
        .collect();
    complete_around(g, a, preferred, rng)
}
