//! What the oracle measured, kept with a model: per training design, the
//! real cost of every feature row it labelled.
//!
//! The oracle is deterministic and the labels are measurements, while the
//! model's mean at a training row is a fit that can be off by its training
//! error: measured with the shipped ABC delay oracle, the final model of a
//! 300-call loop on esyn/c2670 predicted the greedy extraction at 20.3 (its
//! label: 18.9) and chose, frozen, an extraction that measured 21.5. So when
//! a frozen model chooses between candidates ([`crate::cost::CostModel::selection_costs`]),
//! a candidate whose features are a row it measured on this design is
//! judged by that measurement, with no spread, and every other candidate by
//! the model's conservative score.
//!
//! The memory holds feature rows (as hashes), not extractions: two
//! extractions with equal features share a row, and their labels are
//! averaged. It applies only to the design the row was measured on; a new
//! design's candidates are judged by the model alone.

use super::dataset::Labelled;
use super::features::Featurizer;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One measured feature row of a design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRow {
    /// [`row_key`] of the raw feature row (in the model's layout).
    pub row: String,
    /// Mean real cost of the labels with that row.
    pub cost: f64,
    /// How many labels it averages.
    pub labels: usize,
}

/// The measured rows of one training design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredDesign {
    /// Fingerprint of the (original) e-graph.
    pub egraph: String,
    /// Its measured rows, sorted by key.
    pub rows: Vec<MeasuredRow>,
}

/// A key for a raw feature row: a hash of its values rounded to `f32`, so
/// that the same extraction featurized twice, with sums taken in another
/// order, gives the same key.
pub fn row_key(row: &[f64]) -> String {
    let bytes: Vec<u8> = row.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect();
    super::hash_hex(&bytes)
}

impl MeasuredDesign {
    /// The labels `data` of the design with fingerprint `egraph`, read
    /// through `featurizer` (the model's layout bound to that design).
    pub fn of(egraph: &str, featurizer: &Featurizer, data: &[Labelled]) -> Result<Self> {
        let mut sums: HashMap<String, (f64, usize)> = HashMap::new();
        for l in data {
            let entry = sums.entry(row_key(&featurizer.of_extraction(&l.extraction)?)).or_default();
            entry.0 += l.cost;
            entry.1 += 1;
        }
        let mut rows: Vec<MeasuredRow> =
            sums.into_iter().map(|(row, (sum, n))| MeasuredRow { row, cost: sum / n as f64, labels: n }).collect();
        rows.sort_by(|a, b| a.row.cmp(&b.row));
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

/// The measured costs of the design with fingerprint `egraph`, by row key
/// (empty if the model has none for it).
pub fn lookup(all: &[MeasuredDesign], egraph: &str) -> HashMap<String, f64> {
    all.iter().filter(|d| d.egraph == egraph).flat_map(|d| d.rows.iter().map(|r| (r.row.clone(), r.cost))).collect()
}
