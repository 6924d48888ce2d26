//! What a learned model says of the extraction `extract --model` returns:
//! its prediction, whether it was trained on the design, and what shaped
//! the choice.

use crate::extraction::Extraction;
use crate::learn::model::meta::OptimumError;
use crate::learn::model::objective::{DesignFit, LearnedCost, Prediction};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// A learned model's verdict on the extraction it chose, and what shaped
/// the choice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelVerdict {
    /// Its prediction for the extraction.
    pub prediction: Prediction,
    /// Whether it was trained on this design and, for a relative model,
    /// the reference cost it was scaled by.
    pub design: DesignFit,
    /// What a step away from the training data cost the optimiser, in the
    /// design's units.
    pub trust_unit: f64,
    /// The label spread such a step costs by default.
    pub label_spread: f64,
    /// With a model trained by the loop: how far its own optima measured
    /// from their predictions there.
    pub optimum_error: Option<OptimumError>,
    /// Which candidate the frozen choice kept (`smoothe`: the model's own
    /// optimum; `greedy`, `dag-greedy`, `linear`: a model-free one), when
    /// the extractor made that choice.
    pub pick: Option<String>,
    /// What the model's own optimum was charged before that choice.
    pub optimum_charge: Option<f64>,
}

/// The part of an extractor's details that the frozen choice writes.
#[derive(Deserialize)]
struct ChoiceDetails {
    pick: Option<String>,
    optimum_charge: Option<f64>,
}

impl ModelVerdict {
    /// The verdict of `model` on `reduced`, with the choice recorded in
    /// the extractor's `details`.
    pub(super) fn of(model: &LearnedCost, reduced: &Extraction, details: &Map<String, Value>) -> Result<ModelVerdict> {
        let choice: ChoiceDetails = serde_json::from_value(Value::Object(details.clone()))?;
        Ok(ModelVerdict {
            prediction: model.predict(std::slice::from_ref(reduced))?[0],
            design: model.design_fit(),
            trust_unit: model.trust_unit(),
            label_spread: model.label_spread(),
            optimum_error: model.model().meta.optimum_error,
            pick: choice.pick,
            optimum_charge: choice.optimum_charge,
        })
    }

    /// Adds the verdict to the result file's details.
    pub(super) fn describe(&self, extra: &mut Map<String, Value>) -> Result<()> {
        extra.insert("prediction".into(), serde_json::to_value(self.prediction)?);
        extra.insert("trained_on_design".into(), json!(self.design.trained_on_design));
        extra.insert("trust_unit".into(), json!(self.trust_unit));
        extra.insert("label_spread".into(), json!(self.label_spread));
        if let Some(r) = self.design.reference {
            extra.insert("reference".into(), serde_json::to_value(r)?);
        }
        if let Some(o) = self.optimum_error {
            extra.insert("optimum_error".into(), serde_json::to_value(o)?);
        }
        Ok(())
    }
}
