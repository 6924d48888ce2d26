//! What the oracle measured, kept with a model: per training design, the
//! real cost of every extraction it labelled, by a hash of the extraction.
//!
//! The oracle is deterministic and the labels are measurements, while the
//! model's mean at a training row is a fit that can be off by its training
//! error, enough to rank a worse candidate first. So when a frozen model
//! chooses between candidates ([`crate::cost::CostModel::selection_costs`]),
//! a candidate it measured on this design is judged by that measurement,
//! with no spread, and every other candidate by the model's conservative
//! score, charged its expected error where the score charges the spread.
//!
//! The memory holds hashes of the labelled extractions (of their choices
//! on the preprocessed graph), not of their feature rows: extractions with
//! equal features can differ in real cost, and a frozen optimiser finds
//! such twins. It says what a candidate costs when the candidate is one
//! the oracle measured, and cannot lead an optimiser to one. It applies
//! only to the design it was measured on; a new design's candidates are
//! judged by the model alone.

use crate::egraph::EGraph;
use crate::learn::model::dataset::Labelled;
use crate::learn::oracle::identity::choices_key;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One measured extraction of a design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRow {
    /// [`choices_key`] of the extraction on the preprocessed graph. (Files
    /// from before it held feature-row hashes here, under `row`: those
    /// load, and match no extraction.)
    #[serde(alias = "row")]
    pub extraction: String,
    /// Mean real cost of its labels (more than one where labels of
    /// extractions that preprocessing makes one, such as twins, meet).
    pub cost: f64,
    /// How many labels it averages.
    pub labels: usize,
}

/// The measured extractions of one training design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredDesign {
    /// Fingerprint of the (original) e-graph.
    pub egraph: String,
    /// Its measured extractions, sorted by key.
    pub rows: Vec<MeasuredRow>,
}

impl MeasuredDesign {
    /// The labels `data` (extractions of `graph`, the preprocessed graph)
    /// of the design with fingerprint `egraph`.
    pub fn of(egraph: &str, graph: &EGraph, data: &[Labelled]) -> Result<Self> {
        let mut sums: HashMap<String, (f64, usize)> = HashMap::new();
        for l in data {
            let entry = sums.entry(choices_key(graph, &l.extraction)?).or_default();
            entry.0 += l.cost;
            entry.1 += 1;
        }
        let mut rows: Vec<MeasuredRow> = sums
            .into_iter()
            .map(|(extraction, (sum, n))| MeasuredRow { extraction, cost: sum / n as f64, labels: n })
            .collect();
        rows.sort_by(|a, b| a.extraction.cmp(&b.extraction));
        Ok(MeasuredDesign { egraph: egraph.to_string(), rows })
    }

    /// Whether every cost is finite and every row averages a label.
    pub fn is_valid(&self) -> bool {
        self.rows.iter().all(|r| r.cost.is_finite() && r.labels > 0)
    }
}

/// Adds `design` to `all`, replacing an earlier entry of the same e-graph.
pub fn record(all: &mut Vec<MeasuredDesign>, design: MeasuredDesign) {
    all.retain(|d| d.egraph != design.egraph);
    all.push(design);
}

/// The measured costs of the design with fingerprint `egraph`, by
/// extraction key (empty if the model has none for it).
pub fn lookup(all: &[MeasuredDesign], egraph: &str) -> HashMap<String, f64> {
    all.iter()
        .filter(|d| d.egraph == egraph)
        .flat_map(|d| d.rows.iter().map(|r| (r.extraction.clone(), r.cost)))
        .collect()
}
