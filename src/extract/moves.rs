//! Moves between valid extractions: small moves, perturbations and
//! crossovers of good ones, and the screening pool built from them. The
//! active loop draws its candidates here, annealing its steps, and the
//! model-guided search its generations.

use super::{complete_acyclic, random_extraction};
use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use rand::seq::IndexedRandom;
use rand::Rng;
use std::collections::HashSet;

/// A valid extraction that keeps `base`'s choice in each class with
/// probability `1 - rate` and otherwise prefers a uniformly random node;
/// classes `base` does not pick prefer a random node. Cycles are repaired.
pub fn perturb(g: &EGraph, base: &Extraction, rate: f64, rng: &mut impl Rng) -> Extraction {
    let preferred: Vec<Option<NodeIdx>> = g
        .classes()
        .map(|c| match base.choices.get(c.index()).copied().flatten() {
            Some(n) if !rng.random_bool(rate.clamp(0.0, 1.0)) => Some(n),
            _ => g.class_nodes(c).choose(rng).copied(),
        })
        .collect();
    complete_around(g, base, preferred, rng)
}

/// One draw of the broad sampler that starts the active loop and the
/// model-guided search: with probability `uniform_fraction` a uniform
/// random extraction, otherwise a perturbation (1-20% of classes) of one
/// of `bases` (valid extractions, at least one).
pub fn broad_sample(g: &EGraph, bases: &[Extraction], uniform_fraction: f64, rng: &mut impl Rng) -> Extraction {
    if rng.random_bool(uniform_fraction.clamp(0.0, 1.0)) {
        random_extraction(g, rng)
    } else {
        let base = &bases[rng.random_range(0..bases.len())];
        let rate = rng.random_range(0.01..0.2);
        perturb(g, base, rate, rng)
    }
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
    let mut preferred: Vec<Option<NodeIdx>> = g
        .classes()
        .map(|c| base.choices.get(c.index()).copied().flatten().or_else(|| g.class_nodes(c).choose(rng).copied()))
        .collect();
    for &c in used.choose_multiple(rng, moves) {
        let others: Vec<NodeIdx> =
            g.class_nodes(c).iter().copied().filter(|&n| Some(n) != preferred[c.index()]).collect();
        preferred[c.index()] = others.choose(rng).copied();
    }
    complete_around(g, base, preferred, rng)
}

/// Completes `preferred` into a valid extraction, breaking cycles towards
/// `base`'s nodes first and then at random.
fn complete_around(g: &EGraph, base: &Extraction, preferred: Vec<Option<NodeIdx>>, rng: &mut impl Rng) -> Extraction {
    let scores: Vec<f64> = (0..g.num_nodes()).map(|_| rng.random::<f64>()).collect();
    complete_acyclic(g, &preferred, |n| {
        let base_bonus = if base.choices.get(g.class_of(n).index()).copied().flatten() == Some(n) { 1.0 } else { 0.0 };
        base_bonus + scores[n.index()]
    })
}

/// A valid extraction that takes each class's node from `a` or `b` (valid
/// extractions) at random, the classes neither uses preferring a random
/// node. Cycles are repaired towards `a`.
pub fn crossover(g: &EGraph, a: &Extraction, b: &Extraction, rng: &mut impl Rng) -> Extraction {
    let preferred: Vec<Option<NodeIdx>> = g
        .classes()
        .map(|c| {
            let (x, y) = (a.choices.get(c.index()).copied().flatten(), b.choices.get(c.index()).copied().flatten());
            let pick = if rng.random_bool(0.5) { x.or(y) } else { y.or(x) };
            pick.or_else(|| g.class_nodes(c).choose(rng).copied())
        })
        .collect();
    complete_around(g, a, preferred, rng)
}

/// `size` distinct candidates not in `seen`: in equal shares, small moves
/// (1 to `radius` classes switched) and perturbations (1-20% of classes) of
/// the `parents` (the best labelled, best first), crossovers of two
/// parents, and uniform random extractions.
pub fn screening_pool(
    g: &EGraph,
    parents: &[Extraction],
    size: usize,
    radius: usize,
    seen: &HashSet<Extraction>,
    rng: &mut impl Rng,
) -> Vec<Extraction> {
    let mut fresh: HashSet<Extraction> = HashSet::new();
    let mut out = Vec::new();
    for i in 0..size * 2 {
        if out.len() == size {
            break;
        }
        let parent = &parents[rng.random_range(0..parents.len())];
        let e = match i % 4 {
            0 => nudge(g, parent, rng.random_range(1..=radius.max(1)), rng),
            1 => perturb(g, parent, rng.random_range(0.01..0.2), rng),
            2 => crossover(g, parent, &parents[rng.random_range(0..parents.len())], rng),
            _ => random_extraction(g, rng),
        };
        if !seen.contains(&e) && fresh.insert(e.clone()) {
            out.push(e);
        }
    }
    out
}
