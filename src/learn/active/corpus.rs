//! One model over several designs: `smoothe train-cost A.json B.json ...`.
//!
//! Each design is labelled by its own run of the loop ([`train_cost`],
//! the budget per design), so a design's labels do not depend on which
//! other designs share the corpus and a label log serves any corpus drawn
//! from it. One relative model (see [`crate::learn::model::reference`]) is then fitted
//! on all labels, in a layout that covers every design's operators and
//! operator pairs.

use crate::extract::SmoothE;
use crate::learn::active::config::TrainCostConfig;
use crate::learn::active::design::Design;
use crate::learn::active::train_cost::{train_cost, TrainCostOutcome};
use crate::learn::model::dataset::{dataset, Labelled};
use crate::learn::model::features::{merge_vocabularies, vocabulary, FeatureKind, FeatureLayout, Featurizer};
use crate::learn::model::fit::TrainConfig;
use crate::learn::model::measured::MeasuredDesign;
use crate::learn::model::meta::RelativeFrame;
use crate::learn::model::network::Ensemble;
use crate::learn::model::reference::{transfer_margin, Reference, RelativeData};
use crate::learn::model::train::{fine_tune, train};
use crate::learn::oracle::labels::LabelLog;
use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use std::collections::HashSet;

/// What training over a corpus produced.
pub struct CorpusOutcome {
    /// The relative model over all designs.
    pub model: Ensemble,
    /// Per design, its own loop's outcome (its model is per design).
    pub designs: Vec<TrainCostOutcome>,
}

/// Labels every design by its own loop (`config.budget` calls each, fewer
/// when its labels are already in `log`), then fits one relative model on
/// all of them: from scratch, or by fine-tuning `init`.
pub fn train_corpus(
    designs: &[Design],
    log: &mut LabelLog,
    config: &TrainCostConfig,
    smoothe: &SmoothE,
    init: Option<&Ensemble>,
    device: &Device,
) -> Result<CorpusOutcome> {
    let mut outcomes = Vec::with_capacity(designs.len());
    for d in designs {
        let outcome = train_cost(d, log, config, smoothe, init, device).with_context(|| d.name.clone())?;
        outcomes.push(outcome);
    }
    let kind = init.map_or(config.features, |m| m.meta.features.kind);
    let vocabularies: Vec<Vec<String>> = designs.iter().map(|d| vocabulary(kind, d.problem, d.original)).collect();
    let names = match init {
        Some(m) => m.meta.features.names.clone(),
        None => merge_vocabularies(&vocabularies),
    };
    let mut labelled = Vec::with_capacity(designs.len());
    let mut per_design = Vec::with_capacity(designs.len());
    let mut frame = RelativeFrame::default();
    let mut fingerprints = Vec::new();
    let mut measured = Vec::with_capacity(designs.len());
    for (d, outcome) in designs.iter().zip(&outcomes) {
        let fingerprint = d.original.fingerprint();
        let reference_cost = outcome.rounds[0].dag_greedy_real_cost.with_context(|| {
            format!("{}: the oracle call on the dag-greedy extraction failed; the corpus model needs its cost", d.name)
        })?;
        let featurizer = Featurizer::new(kind, d.problem, d.original, &names);
        let reference = Reference::of(d.problem, &featurizer)?;
        let data = dataset(
            d.original,
            d.problem,
            log,
            &fingerprint,
            d.labeler.oracle,
            config.train.test_fraction,
            // The reference, which relative targets are measured from,
            // always trains (greedy and linear SmoothE may fall in the
            // test split here: a corpus model is judged on new designs).
            std::slice::from_ref(&reference.extraction),
        )?;
        per_design.push(reference.relative_data(&featurizer, &data, reference_cost).with_context(|| d.name.clone())?);
        measured.push(MeasuredDesign::of(&fingerprint, &d.problem.graph, &data)?);
        frame.record(&fingerprint, reference_cost, reference.nodes);
        fingerprints.push(fingerprint);
        labelled.push(LabelledDesign { design: d, data, reference_cost });
    }
    let RelativeData { rows, targets, test } = concatenated(per_design.iter());
    let mut model = match init {
        Some(m) => fine_tune(m, &rows, &targets, &test, &config.train, smoothe.seed, device)?,
        None => {
            let layout = FeatureLayout { kind, names };
            let mut model = train(&rows, &targets, &test, layout, &config.train, smoothe.seed, device)?;
            model.meta.transfer_margin =
                calibrate_transfer(&labelled, &vocabularies, kind, &config.train, smoothe.seed, device)?;
            model
        }
    };
    let mut all = init.map_or_else(RelativeFrame::default, |m| m.meta.relative.clone().unwrap_or_default());
    for r in frame.references {
        all.record(&r.egraph, r.cost, r.nodes);
    }
    model.meta.relative = Some(all);
    for m in measured {
        crate::learn::model::measured::record(&mut model.meta.measured, m);
    }
    for f in fingerprints {
        if !model.meta.egraphs.contains(&f) {
            model.meta.egraphs.push(f);
        }
    }
    model.meta.oracle = designs.first().map(|d| d.labeler.oracle.identity()).unwrap_or_default();
    model.meta.metric = designs.first().and_then(|d| d.labeler.oracle.primary()).map(String::from);
    Ok(CorpusOutcome { model, designs: outcomes })
}

/// A corpus design with its labelled extractions and the real cost of its
/// reference.
struct LabelledDesign<'d, 'a> {
    design: &'d Design<'a>,
    data: Vec<Labelled>,
    reference_cost: f64,
}

impl LabelledDesign<'_, '_> {
    /// Its labels as relative rows and targets in the layout `names` (the
    /// transfer calibration's layouts; the corpus layout's are made as the
    /// labels are read).
    fn relative(&self, kind: FeatureKind, names: &[String]) -> Result<RelativeData> {
        let d = self.design;
        let featurizer = Featurizer::new(kind, d.problem, d.original, names);
        let reference = Reference::of(d.problem, &featurizer)?;
        reference.relative_data(&featurizer, &self.data, self.reference_cost).with_context(|| d.name.clone())
    }
}

/// The designs' relative data, one after another.
fn concatenated<'a>(designs: impl Iterator<Item = &'a RelativeData>) -> RelativeData {
    let mut all = RelativeData::default();
    for d in designs {
        all.rows.extend_from_slice(&d.rows);
        all.targets.extend_from_slice(&d.targets);
        all.test.extend_from_slice(&d.test);
    }
    all
}

/// The corpus model's [`transfer_margin`], measured by leaving each design
/// out in turn as if it were new: a model fitted as the corpus model is, on
/// the other designs only and in their operator layout (so the left-out
/// design's unseen operator pairs count as `pair:<unseen>`, as on a new
/// design), predicts every labelled extraction of the one left out. A
/// design with an operator the others lack is skipped, with a warning: a
/// model without it would refuse it. `None` when no design could be left
/// out (a corpus of one).
fn calibrate_transfer(
    labelled: &[LabelledDesign],
    vocabularies: &[Vec<String>],
    kind: FeatureKind,
    config: &TrainConfig,
    seed: u64,
    device: &Device,
) -> Result<Option<f64>> {
    let mut held_out = Vec::with_capacity(labelled.len());
    for (left_out, design) in labelled.iter().enumerate() {
        let others: Vec<usize> = (0..labelled.len()).filter(|&i| i != left_out).collect();
        if others.is_empty() || design.data.len() < 2 {
            continue;
        }
        let names = merge_vocabularies(&others.iter().map(|&i| vocabularies[i].clone()).collect::<Vec<_>>());
        let known: HashSet<&str> = names.iter().map(String::as_str).collect();
        if let Some(op) = vocabularies[left_out].iter().find(|n| n.starts_with("count:") && !known.contains(n.as_str()))
        {
            log::warn!(
                "the transfer margin does not cover {}: it has the operator {}, which no other design has, \
                 so a model without it would refuse it",
                design.design.name,
                op.trim_start_matches("count:")
            );
            continue;
        }
        let train_data = others.iter().map(|&i| labelled[i].relative(kind, &names)).collect::<Result<Vec<_>>>()?;
        let train_data = concatenated(train_data.iter());
        let layout = FeatureLayout { kind, names: names.clone() };
        let model = match train(&train_data.rows, &train_data.targets, &train_data.test, layout, config, seed, device) {
            Ok(model) => model,
            Err(e) => {
                log::warn!(
                    "the transfer margin does not cover {}: the others alone cannot be fitted: {e:#}",
                    design.design.name
                );
                continue;
            }
        };
        let own = design.relative(kind, &names)?;
        let x: Vec<f32> = own.rows.iter().flatten().map(|&v| v as f32).collect();
        let predicted = model.predict(&Tensor::from_vec(x, (own.rows.len(), names.len()), device)?)?;
        held_out.push((predicted.mean.to_dtype(DType::F64)?.to_vec1::<f64>()?, own.targets));
    }
    let margin = transfer_margin(&held_out);
    log::info!("transfer margin from {} of {} designs left out in turn: {margin:?}", held_out.len(), labelled.len());
    Ok(margin)
}
