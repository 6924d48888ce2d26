//! `--method auto`: SmoothE first, then the exact program with SmoothE's
//! answer as the incumbent to beat, within one time limit.
//!
//! SmoothE gets at most half of the limit (it usually stops sooner on its
//! own plateau rule); the solver gets what is left, with SmoothE's answer
//! as its incumbent, so the portfolio is never worse than its SmoothE phase
//! and always reports a lower bound.

use super::ilp::{self, Certified};
use super::{Extractor, SmoothE};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::Result;
use serde_json::{json, Map, Value};
use std::time::Instant;

/// Share of the time limit SmoothE may use before the solver starts.
const SMOOTHE_SHARE: f64 = 0.5;

/// The solver's least time when SmoothE used up the limit.
const LEAST_SOLVER_SECONDS: f64 = 0.1;

/// SmoothE, then the ILP with SmoothE's answer as its incumbent.
pub struct Portfolio {
    /// The SmoothE phase (its own time limit is replaced).
    pub smoothe: SmoothE,
    /// Seconds for both phases together (0: no limit for either).
    pub time_limit: f64,
}

impl Extractor for Portfolio {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let start = Instant::now();
        let mut smoothe = self.smoothe.clone();
        smoothe.config.time_limit = self.time_limit * SMOOTHE_SHARE;
        let (first, mut details) = smoothe.extract_with_details(problem)?;
        let smoothe_cost = first.dag_cost(&problem.graph)?;
        let smoothe_seconds = start.elapsed().as_secs_f64();
        let left = match self.time_limit {
            t if t > 0.0 => (t - smoothe_seconds).max(LEAST_SOLVER_SECONDS),
            _ => 0.0,
        };
        let certified: Certified = ilp::solve(problem, &first, left, &self.smoothe.progress)?;
        details.insert("smoothe_cost".into(), json!(smoothe_cost));
        details.insert("smoothe_seconds".into(), json!(smoothe_seconds));
        certified.describe(&mut details);
        Ok((certified.extraction, details))
    }
}
