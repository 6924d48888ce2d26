//! Hill climbing over single-class switches, to polish a decoded
//! extraction under any cost.

use super::bottom_up::{finalise_bottom_up, NodeKey};
use crate::egraph::{ClassIdx, EGraph};
use crate::extraction::Extraction;
use std::time::Instant;

/// Every class gets a choice: the classes `current` reaches keep theirs,
/// and each other class takes the node of least tree cost counting the
/// classes already reached as free (so a switch that needs new classes
/// brings in ones that share what is already there).
fn complete_in_context(g: &EGraph, current: &Extraction, reached: &[bool]) -> Extraction {
    finalise_bottom_up(g, |n, values| {
        let c = g.class_of(n) as usize;
        if reached[c] {
            let keep = current.choices[c] == Some(n);
            (NodeKey { preferred: keep, score: if keep { 0.0 } else { f64::NEG_INFINITY } }, 0.0)
        } else {
            let tree = g.cost(n) + g.children(n).iter().map(|&k| values[k as usize]).sum::<f64>();
            (NodeKey { preferred: true, score: -tree }, tree)
        }
    })
    .0
}

/// Repeatedly switches one picked class to another of its nodes when that
/// keeps the extraction valid and lowers `cost`. Classes a switch newly
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
            reached[c as usize] = true;
        }
        let mut full = complete_in_context(g, &best, &reached);
        let mut improved = false;
        for c in order.into_iter().rev() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return (best, best_cost);
            }
            let current = full.choices[c as usize];
            for &n in g.class_nodes(c as ClassIdx) {
                if Some(n) == current || g.children(n).iter().any(|&k| full.choices[k as usize].is_none()) {
                    continue;
                }
                full.choices[c as usize] = Some(n);
                let candidate = if full.is_valid(g) { cost(&full) } else { f64::INFINITY };
                if candidate < best_cost - 1e-12 * best_cost.abs().max(1.0) {
                    best_cost = candidate;
                    best = full.restricted_to_reachable(g).unwrap_or_else(|_| full.clone());
                    improved = true;
                    break;
                }
                full.choices[c as usize] = current;
            }
            if improved {
                break; // recompute the context for the new extraction
            }
        }
        if !improved {
            break;
        }
    }
    (best, best_cost)
}
