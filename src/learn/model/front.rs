//! The measured front kept with a model: per training design, the
//! labelled extractions that no other labelled extraction beats on every
//! metric the model learns (area and delay, say), with their choices.
//!
//! A frozen model answers "least area with delay <= T" with no oracle
//! call. The loop that trained it has already measured many extractions
//! along that trade-off, and a measurement is exact where a prediction is
//! not. So the answer to a constrained query on a training design is the
//! best measured extraction that meets the constraints, unless the
//! model's own optimum is predicted to beat it by more than the model's
//! held-out error on every count ([`prefer_measured`]). Unlike
//! [`crate::learn::model::measured`], which keeps only hashes, the front
//! keeps the extractions themselves, so it can be returned; it is small
//! (non-dominated points only).

use crate::egraph::EGraph;
use crate::extraction::OriginalExtraction;
use crate::learn::oracle::labels::LabelLog;
use crate::learn::oracle::process::Measurement;
use crate::timing::objective::Constraint;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// One measured extraction on its design's front.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontPoint {
    /// Every number the oracle printed for it.
    pub metrics: Measurement,
    /// The extraction, as the label log holds it: original class id ->
    /// original node id.
    pub choices: serde_json::Map<String, serde_json::Value>,
}

impl FrontPoint {
    /// The extraction on `original`, the e-graph it was measured on.
    pub fn extraction(&self, original: &EGraph) -> Result<OriginalExtraction> {
        OriginalExtraction::from_json(original, &serde_json::Value::Object(self.choices.clone()))
            .context("a measured extraction kept with the model does not fit this e-graph")
    }

    /// Whether it meets every constraint by its measurement; `None` when
    /// a constraint's metric was not measured.
    fn meets(&self, constraints: &[Constraint]) -> Option<bool> {
        constraints.iter().try_fold(true, |all, c| Some(all && *self.metrics.get(&c.metric)? <= c.bound))
    }
}

/// The measured front of one training design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredFront {
    /// Fingerprint of the (original) e-graph.
    pub egraph: String,
    /// The metrics no point is beaten on by another (all of them at once).
    pub metrics: Vec<String>,
    /// Its points, by increasing value of the first metric.
    pub points: Vec<FrontPoint>,
}

impl MeasuredFront {
    /// The front over `metrics` of the labels `log` holds for the design
    /// with fingerprint `egraph` under the oracle `oracle`. Labels that
    /// lack one of the metrics, or hold a non-finite value, are left out.
    pub fn of(log: &LabelLog, egraph: &str, oracle: &str, metrics: &[String]) -> MeasuredFront {
        let mut seen = HashSet::new();
        let mut candidates: Vec<(Vec<f64>, FrontPoint)> = Vec::new();
        for label in log.labels().iter().filter(|l| l.egraph == egraph && l.oracle == oracle && !l.failed()) {
            let measured = label.measured();
            let values: Option<Vec<f64>> =
                metrics.iter().map(|m| measured.get(m).copied().filter(|v| v.is_finite())).collect();
            if let Some(values) = values {
                if seen.insert(label.extraction.clone()) {
                    candidates.push((values, FrontPoint { metrics: measured, choices: label.choices.clone() }));
                }
            }
        }
        let dominated =
            |a: &[f64], b: &[f64]| b.iter().zip(a).all(|(y, x)| y <= x) && b.iter().zip(a).any(|(y, x)| y < x);
        let mut points: Vec<(Vec<f64>, FrontPoint)> =
            candidates.iter().filter(|(a, _)| !candidates.iter().any(|(b, _)| dominated(a, b))).cloned().collect();
        // Equal on every metric: keep one.
        points.sort_by(|(a, _), (b, _)| a.partial_cmp(b).expect("finite"));
        points.dedup_by(|(a, _), (b, _)| a == b);
        MeasuredFront {
            egraph: egraph.to_string(),
            metrics: metrics.to_vec(),
            points: points.into_iter().map(|(_, p)| p).collect(),
        }
    }

    /// The point with the least measured `objective` among those that
    /// meet every constraint by measurement; `None` when none does, or
    /// when the front does not cover the metrics named.
    pub fn best_meeting(&self, objective: &str, constraints: &[Constraint]) -> Option<&FrontPoint> {
        let covered = |m: &str| self.metrics.iter().any(|n| n == m);
        if !covered(objective) || !constraints.iter().all(|c| covered(&c.metric)) {
            return None;
        }
        self.points
            .iter()
            .filter(|p| p.meets(constraints) == Some(true))
            .min_by(|a, b| a.metrics[objective].total_cmp(&b.metrics[objective]))
    }

    /// Whether every point has finite values of the front's metrics.
    pub fn is_valid(&self) -> bool {
        self.points.iter().all(|p| self.metrics.iter().all(|m| p.metrics.get(m).is_some_and(|v| v.is_finite())))
    }
}

/// The front of the design with fingerprint `egraph` in `all`, if kept.
pub fn of_design<'a>(all: &'a [MeasuredFront], egraph: &str) -> Option<&'a MeasuredFront> {
    all.iter().find(|f| f.egraph == egraph)
}

/// Whether the measured point `measured` should answer a constrained query
/// instead of the model's optimum, whose metrics the model predicts as
/// `predicted`, each with an expected absolute error in `error`: unless
/// the optimum is predicted to beat the point's `objective` and to meet
/// every constraint, each by more than its error, the measurement wins.
/// A metric without a prediction counts against the model.
pub fn prefer_measured(
    measured: &FrontPoint,
    objective: &str,
    constraints: &[Constraint],
    predicted: &BTreeMap<String, f64>,
    error: &BTreeMap<String, f64>,
) -> bool {
    let pessimistic = |m: &str| predicted.get(m).map(|v| v + error.get(m).copied().unwrap_or(0.0).max(0.0));
    let beats = pessimistic(objective).is_some_and(|v| v < measured.metrics[objective]);
    let meets = constraints.iter().all(|c| pessimistic(&c.metric).is_some_and(|v| v <= c.bound));
    !(beats && meets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(area: f64, delay: f64) -> FrontPoint {
        FrontPoint {
            metrics: [("area".to_string(), area), ("delay".to_string(), delay)].into(),
            choices: Default::default(),
        }
    }

    fn front(points: Vec<FrontPoint>) -> MeasuredFront {
        MeasuredFront { egraph: "g".into(), metrics: vec!["area".into(), "delay".into()], points }
    }

    fn bound(t: f64) -> Vec<Constraint> {
        vec![Constraint { metric: "delay".into(), bound: t }]
    }

    #[test]
    fn the_best_point_meeting_a_bound_is_the_least_area_under_it() {
        let f = front(vec![point(100.0, 20.0), point(120.0, 15.0), point(150.0, 10.0)]);
        assert_eq!(f.best_meeting("area", &bound(16.0)).unwrap().metrics["area"], 120.0);
        assert_eq!(f.best_meeting("area", &bound(100.0)).unwrap().metrics["area"], 100.0);
        assert_eq!(f.best_meeting("delay", &[]).unwrap().metrics["delay"], 10.0);
        assert!(f.best_meeting("area", &bound(5.0)).is_none());
        assert!(f.best_meeting("power", &bound(16.0)).is_none());
    }

    #[test]
    fn the_model_wins_only_when_better_by_more_than_its_errors() {
        let p = point(120.0, 15.0);
        let pred = |a: f64, d: f64| BTreeMap::from([("area".to_string(), a), ("delay".to_string(), d)]);
        let err = BTreeMap::from([("area".to_string(), 5.0), ("delay".to_string(), 1.0)]);
        assert!(!prefer_measured(&p, "area", &bound(16.0), &pred(110.0, 14.0), &err));
        assert!(prefer_measured(&p, "area", &bound(16.0), &pred(116.0, 14.0), &err));
        assert!(prefer_measured(&p, "area", &bound(16.0), &pred(110.0, 15.5), &err));
        assert!(prefer_measured(&p, "area", &bound(16.0), &BTreeMap::new(), &err));
    }
}
