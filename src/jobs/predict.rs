//! `smoothe predict`: a model's verdict on given extractions, no oracle
//! call and no optimisation.

use super::extract::bind_model;
use crate::extraction::OriginalExtraction;
use crate::learn::model::objective::{DesignFit, Prediction};
use crate::learn::model::trust::Conservatism;
use crate::{load, preprocess};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Which model judges, and where.
#[derive(Debug, Clone)]
pub struct PredictJob {
    /// The trained model.
    pub model: PathBuf,
    /// Device for tensor work (`cpu` or `cuda`).
    pub device: String,
}

/// The model's verdict on one extraction.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Verdict {
    /// Mean, spread and how far from the training data it lies.
    #[serde(flatten)]
    pub prediction: Prediction,
    /// The conservative score `extract --model` minimises for it (see
    /// [`crate::learn::model::objective`]).
    pub score: f64,
}

impl PredictJob {
    /// Judges each extraction file (any file `smoothe check` accepts) of the
    /// e-graph at `egraph`; also returns how the model relates to the
    /// design (trained on it or not; for a relative model, the cost of the
    /// design's reference extraction that predictions are scaled by).
    pub fn run(&self, egraph: &Path, extractions: &[PathBuf]) -> Result<(Vec<Verdict>, DesignFit)> {
        let device = crate::device::parse(&self.device)?;
        let graph = load::load_file(egraph)?;
        let problem = preprocess::preprocess_for_oracle(&graph).with_context(|| format!("{}", egraph.display()))?;
        let model = bind_model(&self.model, &problem, &graph, Conservatism::FROZEN, &device)?;
        let mut reduced = Vec::with_capacity(extractions.len());
        for path in extractions {
            // Preprocessing drops only nodes no valid extraction uses, so a
            // valid one always maps.
            let original = OriginalExtraction::load_valid_file(&graph, path)?;
            reduced.push(problem.from_original(&original).with_context(|| {
                format!("{}: the extraction does not map onto the preprocessed graph (a bug)", path.display())
            })?);
        }
        let predictions = model.predict(&reduced)?;
        let verdicts = predictions.into_iter().map(|p| Verdict { prediction: p, score: model.score(&p) }).collect();
        Ok((verdicts, model.design_fit()))
    }
}
