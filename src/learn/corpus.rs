//! One model over several designs: `smoothe train-cost A.json B.json ...`.
//!
//! Each design is labelled by its own run of the loop ([`train_cost`],
//! the budget per design), so a design's labels do not depend on which
//! other designs share the corpus and a label log serves any corpus drawn
//! from it. One relative model (see [`super::reference`]) is then fitted
//! on all labels, in a layout that covers every design's operators and
//! operator pairs.

use super::active::{train_cost, TrainCostConfig, TrainCostOutcome};
use super::dataset::dataset;
use super::features::{merge_vocabularies, vocabulary, FeatureLayout, Featurizer};
use super::labeler::Labeler;
use super::labels::LabelLog;
use super::network::Ensemble;
use super::reference::{Reference, RelativeData, RelativeFrame};
use super::train::{fine_tune, train};
use crate::egraph::EGraph;
use crate::extract::SmoothE;
use crate::preprocess::Reduced;
use anyhow::{Context, Result};
use candle_core::Device;

/// One design of a corpus.
pub struct Design<'a> {
    /// A name for messages (the file name).
    pub name: String,
    /// The e-graph.
    pub original: &'a EGraph,
    /// It, preprocessed.
    pub problem: &'a Reduced,
    /// Its oracle calls.
    pub labeler: &'a Labeler<'a>,
}

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
        let outcome = train_cost(d.original, d.problem, d.labeler, log, config, smoothe, init, device)
            .with_context(|| d.name.clone())?;
        outcomes.push(outcome);
    }
    let kind = init.map_or(config.features, |m| m.meta.features.kind);
    let names = match init {
        Some(m) => m.meta.features.names.clone(),
        None => {
            merge_vocabularies(&designs.iter().map(|d| vocabulary(kind, d.problem, d.original)).collect::<Vec<_>>())
        }
    };
    let mut all_data = RelativeData::default();
    let mut frame = RelativeFrame::default();
    let mut fingerprints = Vec::new();
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
            &d.labeler.oracle.identity(),
            config.train.test_fraction,
            // The reference, which relative targets are measured from,
            // always trains (greedy and linear SmoothE may fall in the
            // test split here: a corpus model is judged on new designs).
            std::slice::from_ref(&reference.extraction),
        )?;
        let d_data = reference.relative_data(&featurizer, &data, reference_cost).with_context(|| d.name.clone())?;
        all_data.rows.extend(d_data.rows);
        all_data.targets.extend(d_data.targets);
        all_data.test.extend(d_data.test);
        frame.record(&fingerprint, reference_cost, reference.nodes);
        fingerprints.push(fingerprint);
    }
    let RelativeData { rows, targets, test } = all_data;
    let mut model = match init {
        Some(m) => fine_tune(m, &rows, &targets, &test, &config.train, smoothe.seed, device)?,
        None => train(&rows, &targets, &test, FeatureLayout { kind, names }, &config.train, smoothe.seed, device)?,
    };
    let mut all = init.map_or_else(RelativeFrame::default, |m| m.meta.relative.clone().unwrap_or_default());
    for r in frame.references {
        all.record(&r.egraph, r.cost, r.nodes);
    }
    model.meta.relative = Some(all);
    for f in fingerprints {
        if !model.meta.egraphs.contains(&f) {
            model.meta.egraphs.push(f);
        }
    }
    model.meta.oracle = designs.first().map(|d| d.labeler.oracle.identity()).unwrap_or_default();
    Ok(CorpusOutcome { model, designs: outcomes })
}
