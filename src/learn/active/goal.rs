//! What a measured extraction is worth to a search: one metric, or one
//! metric under upper bounds on others (`--objective area --constraint
//! 'delay<=T'`), read from the numbers the oracle printed.

use crate::learn::oracle::labels::Label;
use crate::learn::oracle::process::{parse_metric_list, OracleSettings};
use crate::timing::objective::Constraint;
use anyhow::{bail, Result};
use serde::Serialize;

/// How much one unit of relative violation weighs, as a multiple of the
/// objective: a label 10% over its bound scores as if its objective were
/// `2 + 10 * 0.1 = 3` times larger, so the search prefers any extraction
/// that meets the bounds unless it is over twice as large.
const VIOLATION_WEIGHT: f64 = 10.0;

/// The metric a search minimises and the bounds it must meet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Goal {
    /// The minimised metric; `None` is the oracle's primary one.
    pub objective: Option<String>,
    /// Upper bounds on measured metrics.
    pub constraints: Vec<Constraint>,
}

/// How a measured extraction stands against one bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredBound {
    /// The bounded metric.
    pub metric: String,
    /// Its bound.
    pub bound: f64,
    /// Its measured value.
    pub measured: f64,
    /// Whether `measured <= bound`.
    pub met: bool,
}

impl Goal {
    /// The goal of minimising the oracle's metric `metric` (its primary one
    /// when `None`), unbounded.
    pub fn metric(metric: Option<&str>) -> Goal {
        Goal { objective: metric.map(str::to_string), constraints: Vec::new() }
    }

    /// The metrics the goal names, the objective first.
    pub fn metrics(&self) -> Vec<String> {
        let mut out: Vec<String> = self.objective.iter().cloned().collect();
        for c in &self.constraints {
            if !out.contains(&c.metric) {
                out.push(c.metric.clone());
            }
        }
        out
    }

    /// `settings` with the metrics the oracle must print: the goal's when
    /// `settings` names none, otherwise its own list, which must then hold
    /// every metric the goal names (an error says which is missing).
    pub fn oracle_settings(&self, settings: &OracleSettings) -> Result<OracleSettings> {
        let named = self.metrics();
        let mut out = settings.clone();
        match parse_metric_list(settings.metric.as_deref())? {
            listed if listed.is_empty() => {
                if !named.is_empty() {
                    out.metric = Some(named.join(","));
                }
            }
            listed => {
                if let Some(missing) = named.iter().find(|m| !listed.contains(m)) {
                    bail!("{missing:?} is not among --metric {}; list every metric the goal names", listed.join(","));
                }
            }
        }
        Ok(out)
    }

    /// The objective's measured value and the sum of the bounds' relative
    /// violations (`(value - bound) / |bound|` where over, 0 when every
    /// bound is met); `None` when the label lacks one of the metrics, as a
    /// failed call does. `primary` is the oracle's primary metric.
    pub fn judge(&self, label: &Label, primary: Option<&str>) -> Option<(f64, f64)> {
        let objective = label.value(self.objective.as_deref().or(primary))?;
        let mut violation = 0.0;
        for c in &self.constraints {
            let v = label.value(Some(&c.metric))?;
            if v > c.bound {
                violation += (v - c.bound) / c.bound.abs().max(1e-12);
            }
        }
        Some((objective, violation))
    }

    /// One number to minimise: the objective where the bounds are met,
    /// and the objective inflated by `2 + 10 * violation` times its
    /// magnitude where they are not (see [`Goal::judge`]). It assumes a
    /// positive objective, as area and power are.
    pub fn score(&self, label: &Label, primary: Option<&str>) -> Option<f64> {
        let (objective, violation) = self.judge(label, primary)?;
        Some(match violation > 0.0 {
            true => objective + objective.abs() * (1.0 + VIOLATION_WEIGHT * violation),
            false => objective,
        })
    }

    /// Each bound against `label`'s measured values (a bound whose metric
    /// the label lacks is left out).
    pub fn report(&self, label: &Label) -> Vec<MeasuredBound> {
        self.constraints
            .iter()
            .filter_map(|c| {
                let measured = label.value(Some(&c.metric))?;
                Some(MeasuredBound { metric: c.metric.clone(), bound: c.bound, measured, met: measured <= c.bound })
            })
            .collect()
    }
}
