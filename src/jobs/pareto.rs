//! `extract --pareto A,B`: extractions that trade metric `A` against `B`,
//! by the model's predictions, from one command.

use super::extract::{ExtractJob, ExtractResult};
use crate::progress::Observer;
use crate::timing::objective::Constraint;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// A front of extractions: the least `A`, the least `B`, and the least `A`
/// under bounds on `B` evenly spaced between those two.
#[derive(Debug, Clone)]
pub struct ParetoJob {
    /// How each extraction is made (its objective and constraints are
    /// replaced).
    pub extract: ExtractJob,
    /// The metric minimised (`A`).
    pub minimise: String,
    /// The metric traded against it (`B`).
    pub against: String,
    /// Most extractions on the front (at least 2).
    pub points: usize,
}

impl ParetoJob {
    /// Runs up to `points` extractions on the e-graph at `egraph` and
    /// returns those no other one dominates by the predicted pair (no
    /// worse in both, better in one; measured where the answer is one the
    /// model's training measured), in increasing `B`.
    pub fn run(&self, egraph: &Path, progress: Observer) -> Result<Vec<ExtractResult>> {
        if self.points < 2 {
            bail!("--points must be at least 2, got {}", self.points);
        }
        if self.minimise == self.against {
            bail!("--pareto needs two different metrics, got {} twice", self.minimise);
        }
        let run = |objective: &str, bound: Option<f64>| -> Result<ExtractResult> {
            let constraints = bound.map(|b| Constraint { metric: self.against.clone(), bound: b });
            let job = ExtractJob {
                objective: Some(objective.to_string()),
                constraints: constraints.into_iter().collect(),
                ..self.extract.clone()
            };
            job.run(egraph, progress.clone())
        };
        // A measured answer is judged by its measurement.
        let value = |r: &ExtractResult, metric: &str| {
            r.measured
                .as_ref()
                .and_then(|m| m.get(metric))
                .or_else(|| r.predicted.get(metric))
                .copied()
                .with_context(|| format!("no predicted {metric} in the result (a bug)"))
        };
        let fastest = run(&self.against, None)?;
        let cheapest = run(&self.minimise, None)?;
        let (lo, hi) = (value(&fastest, &self.against)?, value(&cheapest, &self.against)?);
        let mut all = vec![fastest, cheapest];
        for k in 1..self.points - 1 {
            let bound = lo + (hi - lo) * k as f64 / (self.points - 1) as f64;
            let r = run(&self.minimise, Some(bound))?;
            if r.constraints.iter().all(|c| c.met) {
                all.push(r);
            }
        }
        let pairs: Vec<(f64, f64)> =
            all.iter().map(|r| Ok((value(r, &self.minimise)?, value(r, &self.against)?))).collect::<Result<_>>()?;
        let dominated = |i: usize| {
            let (a, b) = pairs[i];
            pairs
                .iter()
                .enumerate()
                .any(|(j, &(x, y))| j != i && x <= a && y <= b && (x < a || y < b || (x == a && y == b && j < i)))
        };
        let keep: Vec<usize> = (0..all.len()).filter(|&i| !dominated(i)).collect();
        let mut front: Vec<(f64, ExtractResult)> = Vec::new();
        for (i, r) in all.into_iter().enumerate() {
            if keep.contains(&i) {
                front.push((pairs[i].1, r));
            }
        }
        front.sort_by(|x, y| x.0.total_cmp(&y.0));
        Ok(front.into_iter().map(|(_, r)| r).collect())
    }
}
