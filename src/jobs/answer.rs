//! Answers to a constrained query from a model's measured front: on a
//! design the model was trained on, the best extraction its training
//! measured that meets the bounds replaces the optimiser's answer, unless
//! the optimiser's is predicted to beat it by more than the model's
//! held-out error (see [`crate::learn::model::front`]).

use crate::egraph::EGraph;
use crate::extract::Outcome;
use crate::extraction::Extraction;
use crate::learn::model::front::{self, FrontPoint};
use crate::learn::model::network::Ensemble;
use crate::learn::oracle::process::Measurement;
use crate::preprocess::Reduced;
use crate::timing::objective::{Constrained, Constraint, ConstraintReport};
use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// A constrained query: least `metric` under `constraints`.
pub(super) struct Query<'a> {
    /// The metric minimised.
    pub metric: &'a str,
    /// Bounds the answer must meet.
    pub constraints: &'a [Constraint],
}

/// With `model`'s measured front on `graph`: replaces the optimiser's
/// answer (`outcome`, and `reduced`, its image on `problem`) by the
/// measured extraction that should answer `query` against `objective`,
/// marks it `"answer": "measured"` in the details, and returns its
/// measurement. `None`, and nothing changed, where the optimiser's answer
/// stands.
pub(super) fn from_front(
    model: &Ensemble,
    graph: &EGraph,
    problem: &Reduced,
    objective: &Constrained,
    query: &Query,
    outcome: &mut Outcome,
    reduced: &mut Extraction,
) -> Result<Option<Measurement>> {
    let Some(point) = preferred_point(model, graph, objective, query, reduced) else {
        return Ok(None);
    };
    let extraction = point.extraction(graph)?.restricted_to_reachable(graph)?;
    let Some(image) = problem.from_original(&extraction) else {
        return Ok(None);
    };
    outcome.dag_cost = extraction.dag_cost(graph).context("a measured extraction kept with the model")?;
    outcome.extraction = extraction;
    outcome.details.insert("answer".into(), json!("measured"));
    *reduced = image;
    Ok(Some(point.metrics.clone()))
}

/// Judges each constraint by the measured `values` of the answer and adds
/// them to the result's details (`extra`).
pub(super) fn judge(values: &Measurement, constraints: &mut [ConstraintReport], extra: &mut Map<String, Value>) {
    for c in constraints.iter_mut() {
        if let Some(&v) = values.get(&c.metric) {
            *c = ConstraintReport::new(&Constraint { metric: c.metric.clone(), bound: c.bound }, v);
        }
    }
    extra.insert("measured".into(), json!(values));
}

/// The front point that should answer `query` instead of the optimiser's
/// `reduced` (see [`front::prefer_measured`]), each predicted metric
/// charged its held-out error: the ensemble's mean absolute error, the
/// timing head's relative one.
fn preferred_point<'m>(
    model: &'m Ensemble,
    graph: &EGraph,
    objective: &Constrained,
    query: &Query,
    reduced: &Extraction,
) -> Option<&'m FrontPoint> {
    let front = front::of_design(&model.meta.front, &graph.fingerprint())?;
    let point = front.best_meeting(query.metric, query.constraints)?;
    let predicted = objective.predicted(reduced);
    let mut error = BTreeMap::new();
    let own = model.meta.metric_name().to_string();
    if model.meta.report.test_mae.is_finite() {
        error.insert(own, model.meta.report.test_mae);
    }
    if let Some(head) = &model.meta.timing {
        if let Some(v) = predicted.get(&head.metric).filter(|_| head.fit.test_relative_mae.is_finite()) {
            error.insert(head.metric.clone(), v.abs() * head.fit.test_relative_mae);
        }
    }
    front::prefer_measured(point, query.metric, query.constraints, &predicted, &error).then_some(point)
}
