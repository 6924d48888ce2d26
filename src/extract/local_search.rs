//! Hill climbing over single-class switches, to polish a decoded
//! extraction under any cost.

use super::bottom_up::{finalise_bottom_up, NodeKey};
use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use std::time::Instant;

/// Every class gets a choice: the classes `current` reaches keep theirs,
/// and each other class takes the node of least tree cost counting the
/// classes already reached as free (so a switch that needs new classes
/// brings in ones that share what is already there).
fn complete_in_context(g: &EGraph, current: &Extraction, reached: &[bool]) -> Extraction {
    finalise_bottom_up(g, |n, values| {
        let c = g.class_of(n).index();
        if reached[c] {
            let keep = current.choices[c] == Some(n);
            (NodeKey { preferred: keep, score: if keep { 0.0 } else { f64::NEG_INFINITY } }, 0.0)
        } else {
            let tree = g.cost(n) + g.children(n).iter().map(|&k| values[k.index()]).sum::<f64>();
            (NodeKey { preferred: true, score: -tree }, tree)
        }
    })
    .0
}

/// A move that single switches cannot make: bring in one class `k` the
/// extraction does not use yet and redirect, at once, every used class
/// that has a node no dearer (by node cost) than its current one whose
/// only new child class is `k`. Sharing `k` pays only when several classes
/// switch together; each switch alone costs as much as it saves. Returns
/// the first such move (in `full`'s context) with `cost` below `below`.
fn sharing_move(
    g: &EGraph,
    full: &Extraction,
    reached: &[bool],
    cost: &dyn Fn(&Extraction) -> f64,
    below: f64,
    deadline: Option<Instant>,
) -> Option<(Extraction, f64)> {
    let mut users: Vec<Vec<(ClassIdx, NodeIdx)>> = vec![Vec::new(); g.num_classes()];
    for c in g.classes().filter(|&c| reached[c.index()]) {
        let current = full.choices[c.index()]?;
        for &n in g.class_nodes(c) {
            if n == current || g.cost(n) > g.cost(current) {
                continue;
            }
            let mut new_kids = g.children(n).iter().filter(|&&k| !reached[k.index()]);
            if let (Some(&k), None) = (new_kids.next(), new_kids.next()) {
                if users[k.index()].last().is_none_or(|&(last, _)| last != c) {
                    users[k.index()].push((c, n));
                }
            }
        }
    }
    for switches in users.iter().filter(|u| u.len() >= 2) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let mut trial = full.clone();
        for &(c, n) in switches {
            trial.choices[c.index()] = Some(n);
        }
        if trial.is_valid(g) {
            let trial_cost = cost(&trial);
            if trial_cost < below {
                return Some((trial.restricted_to_reachable(g).unwrap_or(trial), trial_cost));
            }
        }
    }
    None
}

/// Repeatedly switches one picked class to another of its nodes when that
/// keeps the extraction valid and lowers `cost`, or else makes a sharing
/// move (see `sharing_move`) that lowers it. Classes a switch newly
/// needs are chosen in context (see `complete_in_context`, recomputed each
/// pass). Stops at a local optimum, after `max_passes` passes, or at
/// `deadline`. Returns the improved extraction (reachable classes only) and
/// its cost; never worse than `start`, which must be valid.
pub fn improve(
    g: &EGraph,
    start: &Extraction,
    cost: &dyn Fn(&Extraction) -> f64,
    max_passes: usize,
    deadline: Option<Instant>,
) -> (Extraction, f64) {
    let mut best = start.clone();
    let mut best_cost = cost(start);
    for _ in 0..max_passes {
        let Ok(order) = best.check(g) else { break };
        let mut reached = vec![false; g.num_classes()];
        for &c in &order {
            reached[c.index()] = true;
        }
        let mut full = complete_in_context(g, &best, &reached);
        let mut improved = false;
        for c in order.into_iter().rev() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return (best, best_cost);
            }
            let current = full.choices[c.index()];
            for &n in g.class_nodes(c) {
                if Some(n) == current || g.children(n).iter().any(|&k| full.choices[k.index()].is_none()) {
                    continue;
                }
                full.choices[c.index()] = Some(n);
                let candidate = if full.is_valid(g) { cost(&full) } else { f64::INFINITY };
                if candidate < best_cost - 1e-12 * best_cost.abs().max(1.0) {
                    best_cost = candidate;
                    best = full.restricted_to_reachable(g).unwrap_or_else(|_| full.clone());
                    improved = true;
                    break;
                }
                full.choices[c.index()] = current;
            }
            if improved {
                break; // recompute the context for the new extraction
            }
        }
        if !improved {
            let below = best_cost - 1e-12 * best_cost.abs().max(1.0);
            let Some((shared, shared_cost)) = sharing_move(g, &full, &reached, cost, below, deadline) else { break };
            (best, best_cost) = (shared, shared_cost);
        }
    }
    (best, best_cost)
}
