//! Objectives with timing: arrival time as a [`CostModel`], and any
//! objective under upper bounds on other metrics ("least DAG cost with
//! delay <= T").

use super::op::ArrivalOp;
use super::{OpDelays, TimingGraph};
use crate::cost::{CostModel, LinearCost};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use serde::Serialize;
use std::sync::Arc;

/// The metrics that need no model: `dag-cost` (the sum of the chosen
/// nodes' costs, each class once) and `delay` (arrival time under per-op
/// delays).
pub const METRICS: &[&str] = &["dag-cost", "delay"];

/// The arrival time of an extraction as a cost: what `--objective delay`
/// minimises.
pub struct DelayCost {
    timing: Arc<TimingGraph>,
    delay: Vec<f64>,
    delay_tensor: Tensor,
    op: ArrivalOp,
}

impl DelayCost {
    /// Arrival time over `timing` under `delays`, its relaxation on `device`.
    pub fn new(timing: Arc<TimingGraph>, delays: &OpDelays, device: &Device) -> Result<Self> {
        let delay = timing.delay_vector(delays);
        let delay_tensor = Tensor::from_vec(delay.clone(), delay.len(), device)?;
        Ok(DelayCost { op: ArrivalOp::new(timing.clone()), timing, delay, delay_tensor })
    }
}

impl CostModel for DelayCost {
    fn name(&self) -> String {
        "delay".into()
    }
    fn expected(&self, node_prob: &Tensor) -> candle_core::Result<Tensor> {
        self.op.apply(node_prob, &self.delay_tensor)
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        self.timing.arrival(extraction, &self.delay).unwrap_or(f64::INFINITY)
    }
}

/// `METRIC<=VALUE`: an upper bound on a metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constraint {
    /// The bounded metric.
    pub metric: String,
    /// Its largest allowed value.
    pub bound: f64,
}

impl std::str::FromStr for Constraint {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let (metric, value) = s
            .split_once("<=")
            .with_context(|| format!("constraint {s:?}: expected METRIC<=VALUE, such as delay<=20"))?;
        let bound: f64 =
            value.trim().parse().with_context(|| format!("constraint {s:?}: {:?} is not a number", value.trim()))?;
        if !bound.is_finite() {
            bail!("constraint {s:?}: the bound must be finite");
        }
        Ok(Constraint { metric: metric.trim().to_string(), bound })
    }
}

/// How a constraint came out on an extraction, for the result file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConstraintReport {
    /// The bounded metric.
    pub metric: String,
    /// Its largest allowed value.
    pub bound: f64,
    /// The extraction's value of the metric, by the metric's model (exact
    /// for the model-free metrics, predicted for a learned one), or its
    /// measurement where the answer is one the model's training measured.
    pub predicted: f64,
    /// Whether `predicted <= bound`.
    pub met: bool,
    /// `bound - predicted`: slack when met, the violation (negative) when
    /// not.
    pub margin: f64,
}

impl ConstraintReport {
    /// The report of `constraint` for an extraction whose value of its
    /// metric is `value`.
    pub fn new(constraint: &Constraint, value: f64) -> ConstraintReport {
        ConstraintReport {
            metric: constraint.metric.clone(),
            bound: constraint.bound,
            predicted: value,
            met: value <= constraint.bound,
            margin: constraint.bound - value,
        }
    }
}

/// The model of a model-free metric ([`METRICS`]) on `problem`.
pub fn metric_model(
    name: &str,
    problem: &Reduced,
    timing: &Arc<TimingGraph>,
    delays: &OpDelays,
    device: &Device,
) -> Result<Box<dyn CostModel>> {
    Ok(match name {
        "dag-cost" => Box::new(LinearCost::new(&problem.graph, device)?),
        "delay" => Box::new(DelayCost::new(timing.clone(), delays, device)?),
        other => bail!("unknown metric {other:?}; without a model the metrics are {}", METRICS.join(", ")),
    })
}

/// Relaxed penalty per unit of relative violation, in units of the
/// objective's scale.
const RELAXED_WEIGHT: f64 = 10.0;

/// A discrete extraction that violates a bound costs this many times the
/// objective's scale more than any that meets them all, plus as much again
/// per unit of relative violation, so the least-violating one wins when
/// none is feasible.
const INFEASIBLE: f64 = 1e6;

/// An objective under upper bounds on other metrics. Relaxed, each
/// violation is a hinge penalty; discrete, any violation ranks an
/// extraction behind every feasible one.
pub struct Constrained<'a> {
    metric: String,
    objective: Box<dyn CostModel + 'a>,
    bounds: Vec<(Box<dyn CostModel + 'a>, Constraint)>,
    /// The objective's magnitude on a reference extraction.
    scale: f64,
}

impl<'a> Constrained<'a> {
    /// `objective` (the model of `metric`) subject to `bounds`;
    /// `reference` (a valid extraction) sets the scale that violations are
    /// weighed in.
    pub fn new(
        metric: &str,
        objective: Box<dyn CostModel + 'a>,
        bounds: Vec<(Box<dyn CostModel + 'a>, Constraint)>,
        reference: &Extraction,
    ) -> Self {
        let scale = objective.cost_of(reference).abs().max(1e-9);
        Constrained { metric: metric.to_string(), objective, bounds, scale }
    }

    /// The objective's and each bounded metric's value on `extraction`, by
    /// their models.
    pub fn predicted(&self, extraction: &Extraction) -> std::collections::BTreeMap<String, f64> {
        let mut out = std::collections::BTreeMap::from([(self.metric.clone(), self.objective.cost_of(extraction))]);
        for (model, c) in &self.bounds {
            out.insert(c.metric.clone(), model.cost_of(extraction));
        }
        out
    }

    /// Each bound's outcome on `extraction`.
    pub fn report(&self, extraction: &Extraction) -> Vec<ConstraintReport> {
        self.bounds.iter().map(|(model, c)| ConstraintReport::new(c, model.cost_of(extraction))).collect()
    }

    /// What violating the bounds adds to a discrete extraction's cost: 0
    /// when it meets them all.
    fn infeasibility(&self, extraction: &Extraction) -> f64 {
        let violation = self.relative_violation(extraction);
        if violation > 0.0 {
            INFEASIBLE * self.scale * (1.0 + violation)
        } else {
            0.0
        }
    }

    fn relative_violation(&self, extraction: &Extraction) -> f64 {
        self.bounds
            .iter()
            .map(|(model, c)| (model.cost_of(extraction) - c.bound).max(0.0) / c.bound.abs().max(1e-9))
            .sum()
    }
}

impl CostModel for Constrained<'_> {
    fn name(&self) -> String {
        let bounds: Vec<String> = self.bounds.iter().map(|(_, c)| format!("{}<={}", c.metric, c.bound)).collect();
        format!("{} s.t. {}", self.objective.name(), bounds.join(", "))
    }
    fn expected(&self, node_prob: &Tensor) -> candle_core::Result<Tensor> {
        let mut total = self.objective.expected(node_prob)?;
        for (model, c) in &self.bounds {
            let weight = RELAXED_WEIGHT * self.scale / c.bound.abs().max(1e-9);
            let over = (model.expected(node_prob)? - c.bound)?.relu()?;
            total = (total + (over * weight)?)?;
        }
        Ok(total)
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        self.objective.cost_of(extraction) + self.infeasibility(extraction)
    }
    fn selection_costs(&self, extractions: &[Extraction]) -> Vec<f64> {
        let costs = self.objective.selection_costs(extractions);
        costs.into_iter().zip(extractions).map(|(c, e)| c + self.infeasibility(e)).collect()
    }
    fn optimum_charge(&self, optimum: &Extraction) -> f64 {
        self.objective.optimum_charge(optimum)
    }
}
