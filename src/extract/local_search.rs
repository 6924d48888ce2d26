//! Hill climbing over single-class switches, to polish a decoded
//! extraction under any cost.

use crate::egraph::{ClassIdx, EGraph};
use crate::extraction::Extraction;
use std::time::Instant;

/// Repeatedly switches one picked class to another of its nodes when that
/// keeps the extraction valid and lowers `cost`; classes newly needed take
/// their choice from `fallback` (a valid full or partial extraction, such
/// as a greedy one). Stops at a local optimum, after `max_passes` passes,
/// or at `deadline`. Returns the improved extraction (reachable classes
/// only) and its cost; never worse than `start`.
pub fn improve(
    g: &EGraph,
    start: &Extraction,
    fallback: &Extraction,
    cost: &dyn Fn(&Extraction) -> f64,
    max_passes: usize,
    deadline: Option<Instant>,
) -> (Extraction, f64) {
    // Full assignment: start's choices, fallback's elsewhere.
    let mut full = start.clone();
    for (c, f) in full.choices.iter_mut().zip(&fallback.choices) {
        if c.is_none() {
            *c = *f;
        }
    }
    let mut best_cost = cost(start);
    if !full.is_valid(g) {
        return (start.clone(), best_cost);
    }
    for _ in 0..max_passes {
        let mut improved = false;
        let order = match full.check(g) {
            Ok(order) => order,
            Err(_) => break,
        };
        for c in order.into_iter().rev() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return finish(g, full, best_cost);
            }
            let current = full.choices[c as usize];
            for &n in g.class_nodes(c as ClassIdx) {
                if Some(n) == current {
                    continue;
                }
                if g.children(n).iter().any(|&k| full.choices[k as usize].is_none()) {
                    continue;
                }
                full.choices[c as usize] = Some(n);
                let candidate = if full.is_valid(g) { cost(&full) } else { f64::INFINITY };
                if candidate < best_cost - 1e-12 * best_cost.abs().max(1.0) {
                    best_cost = candidate;
                    improved = true;
                    break;
                }
                full.choices[c as usize] = current;
            }
        }
        if !improved {
            break;
        }
    }
    finish(g, full, best_cost)
}

fn finish(g: &EGraph, full: Extraction, cost: f64) -> (Extraction, f64) {
    let reachable = full.restricted_to_reachable(g).unwrap_or(full);
    (reachable, cost)
}
