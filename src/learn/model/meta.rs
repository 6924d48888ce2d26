//! What a model file records beside its weights: the feature layout,
//! normalisation, provenance (e-graphs, oracle, metric), the relative frame
//! of a model over several designs, the measurements kept with it and its
//! fit report, with the file format's version.

use crate::learn::model::features::FeatureLayout;
use crate::learn::model::front::MeasuredFront;
use crate::learn::model::measured::MeasuredDesign;
use crate::learn::model::metrics::{mean_std, TrainReport};
use crate::learn::oracle::process::BARE_METRIC;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Key of the metadata record inside the safetensors header.
pub(crate) const META_KEY: &str = "smoothe";
/// Version of the file layout this build writes. Formats 3 (before relative
/// models) and 4 (before the residual term) read the same; format 5 stored
/// the residual term's rows beside the anchors, and is read into one weight
/// per anchor; format 6 read as 7 does, without a metric name or a timing
/// head. Older files are refused with a message.
pub(crate) const FORMAT: u32 = 7;
/// The oldest format this build reads.
pub(crate) const OLDEST_FORMAT: u32 = 3;

/// The file layout version this build writes.
pub const MODEL_FORMAT: u32 = FORMAT;

/// Everything needed to reload and use a model, saved with its weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    /// File layout version.
    pub format: u32,
    /// Feature layout.
    pub features: FeatureLayout,
    /// Features are standardised as `(x - input_mean) / input_scale`.
    pub input_mean: Vec<f64>,
    /// See `input_mean`.
    pub input_scale: Vec<f64>,
    /// Least value of each feature over the training rows.
    pub feature_low: Vec<f64>,
    /// Greatest value of each feature over the training rows.
    pub feature_high: Vec<f64>,
    /// Target normalisation: prediction = output * std + mean.
    pub target_mean: f64,
    /// See `target_mean`.
    pub target_std: f64,
    /// Hidden layer widths (the same for every member).
    pub hidden: Vec<usize>,
    /// Members of the ensemble.
    pub members: usize,
    /// Typical spacing of the training labels: the median, over training
    /// rows, of the root-mean-square distance (standardised features) to
    /// the nearest other row. Distances are reported in this unit.
    pub anchor_spacing: f64,
    /// Fingerprints of the (original) e-graphs the labels came from.
    pub egraphs: Vec<String>,
    /// Identity of the oracle whose labels it learned.
    pub oracle: String,
    /// The metric the ensemble predicts; `None`: the oracle's only number
    /// (and in files written before metrics were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// A static-timing model of another metric (delay) fitted to the same
    /// oracle calls, which `extract --objective`/`--constraint` use for
    /// that metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<crate::timing::fit::TimingHead>,
    /// Set for a relative model (features and targets relative to each
    /// design's dag-greedy extraction, see [`crate::learn::model::reference`]): its
    /// training designs' reference costs. Bind it to a design with
    /// [`crate::learn::model::reference::Reference::absolute`] before predicting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<RelativeFrame>,
    /// Kernel length of the residual term (see [`crate::learn::model::residual`]), in
    /// RMS distance of standardised features; 0: the model has none.
    #[serde(default)]
    pub residual_length: f64,
    /// For a relative model over two or more designs: how far its
    /// predicted cost differences may be off on a design it never saw, as
    /// a share of that design's reference cost (see
    /// [`crate::learn::model::reference::transfer_margin`]). Choosing on a new design
    /// charges it to the optimiser's own result against the model-free
    /// extractions. `None`: not calibrated (one design, or an older file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_margin: Option<f64>,
    /// Per training design, the real cost of every extraction it
    /// labelled (by a hash): a frozen model choosing between candidates judges one it
    /// measured by the measurement (see [`crate::learn::model::measured`]). Empty in
    /// files written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<MeasuredDesign>,
    /// Per training design of a model with a timing head, the measured
    /// extractions no other beats on both learned metrics, kept whole so a
    /// constrained query can return one (see [`crate::learn::model::front`]).
    /// Empty in files written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub front: Vec<MeasuredFront>,
    /// How far, in the loop that trained it, the model's own optima
    /// measured from their predictions (see [`OptimumError`]). `None`: no
    /// loop round labelled one (`--rounds 0`, a corpus model, an older
    /// file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimum_error: Option<OptimumError>,
    /// The members' root-mean-square out-of-fold error on the training
    /// labels, in target standard deviations: the error the spread leaves
    /// out (labels the features cannot tell apart, misfit), which
    /// [`crate::learn::model::network::Ensemble::prediction_error`] adds to it. 0 in files written before
    /// it was kept, and for a model with no validation folds.
    #[serde(default)]
    pub error_floor: f64,
    /// Fit quality at training time.
    pub report: TrainReport,
    /// Hash of the tensor data, written by [`crate::learn::model::network::Ensemble::save`] and required
    /// and checked (then cleared) by [`crate::learn::model::network::Ensemble::load`], so a damaged file
    /// is caught.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub checksum: String,
}

/// How far the real costs of a model's own optima lay from its predictions
/// for them, as shares of the prediction (`(real - predicted) / predicted`;
/// positive: the model was optimistic), over the rounds of the loop that
/// trained it. Each round's optimum is predicted by the model of the round
/// before, fitted without its label, so this is an out-of-sample error on
/// the extractions an optimiser picks, where a model errs most: the honest
/// error bar of a frozen model's own optimum, which the ensemble's spread
/// understates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OptimumError {
    /// Optima measured.
    pub checked: usize,
    /// Mean share.
    pub mean: f64,
    /// Largest share.
    pub worst: f64,
}

impl OptimumError {
    /// The error over `(predicted, real)` pairs; `None` for no pair or a
    /// prediction that is not positive and finite.
    pub fn of(pairs: &[(f64, f64)]) -> Option<OptimumError> {
        if pairs.is_empty() || pairs.iter().any(|&(p, r)| !(p.is_finite() && p > 0.0 && r.is_finite())) {
            return None;
        }
        let shares: Vec<f64> = pairs.iter().map(|&(p, r)| (r - p) / p).collect();
        Some(OptimumError {
            checked: shares.len(),
            mean: shares.iter().sum::<f64>() / shares.len() as f64,
            worst: shares.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

impl ModelMeta {
    /// The name of the metric the ensemble predicts: [`ModelMeta::metric`],
    /// or the name of an oracle's only number ([`BARE_METRIC`]).
    pub fn metric_name(&self) -> &str {
        self.metric.as_deref().unwrap_or(BARE_METRIC)
    }

    /// Checks the metadata on its own: a supported format, finite and
    /// positive normalisation, known and distinct feature names, and
    /// well-formed relative frame, margins and measurements.
    pub fn check(&self) -> Result<()> {
        let m = self;
        let f = m.features.names.len();
        if !(OLDEST_FORMAT..=FORMAT).contains(&m.format) {
            bail!(
                "model format {} is not supported (this build reads formats {OLDEST_FORMAT} to {FORMAT}); retrain it",
                m.format
            );
        }
        if let Some(frame) = &m.relative {
            if frame.references.is_empty()
                || frame.references.iter().any(|r| !(r.cost.is_finite() && r.cost > 0.0 && r.nodes > 0.0))
            {
                bail!("a relative model needs positive, finite reference costs for its training designs");
            }
        }
        if m.transfer_margin.is_some_and(|t| !(t.is_finite() && t >= 0.0)) {
            bail!("transfer margin {:?} is not a finite share of at least 0", m.transfer_margin);
        }
        if m.optimum_error.is_some_and(|o| o.checked == 0 || !(o.mean.is_finite() && o.worst.is_finite())) {
            bail!("the optimum error {:?} is not finite over at least one optimum", m.optimum_error);
        }
        if !(m.error_floor.is_finite() && m.error_floor >= 0.0) {
            bail!("error floor {} is not a finite number of at least 0", m.error_floor);
        }
        if let Some(d) = m.measured.iter().find(|d| !d.is_valid()) {
            bail!("the measured costs of e-graph {} are not all finite averages of at least one label", d.egraph);
        }
        if let Some(f) = m.front.iter().find(|f| !f.is_valid()) {
            bail!("the measured front of e-graph {} has a point without finite {}", f.egraph, f.metrics.join(" and "));
        }
        for (what, len) in [
            ("input_mean", m.input_mean.len()),
            ("input_scale", m.input_scale.len()),
            ("feature_low", m.feature_low.len()),
            ("feature_high", m.feature_high.len()),
        ] {
            if len != f {
                bail!("{what} has {len} entries for {f} features");
            }
        }
        let mut unique = std::collections::HashSet::new();
        for name in &m.features.names {
            let known = ["count:", "cost:", "pair:"].iter().any(|p| name.starts_with(p)) || name == "linear";
            if !known || !unique.insert(name.as_str()) {
                bail!("feature {name:?} is unknown or listed twice");
            }
        }
        let finite = m.input_mean.iter().chain(&m.input_scale).chain(&m.feature_low).chain(&m.feature_high);
        if finite.clone().any(|x| !x.is_finite()) || !m.target_mean.is_finite() || !m.target_std.is_finite() {
            bail!("non-finite normalisation values");
        }
        if m.input_scale.iter().any(|&s| s <= 0.0) || m.target_std <= 0.0 {
            bail!("non-positive normalisation scale");
        }
        Ok(())
    }
}

/// The real cost of one training design's dag-greedy extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceCost {
    /// Fingerprint of the (original) e-graph.
    pub egraph: String,
    /// Real cost of its dag-greedy extraction.
    pub cost: f64,
    /// Chosen nodes of that extraction.
    pub nodes: f64,
}

/// What a relative model stores about its training designs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelativeFrame {
    /// One entry per training design.
    pub references: Vec<ReferenceCost>,
}

/// How the cost of a design's reference extraction was found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReferenceEstimate {
    /// The cost used.
    pub cost: f64,
    /// Whether it is a label (a training design) rather than an estimate.
    pub measured: bool,
    /// Relative spread (standard deviation over mean) of the training
    /// designs' cost per node: how far off an estimate may be (0 when
    /// measured).
    pub spread: f64,
}

impl RelativeFrame {
    /// Records (or updates) a training design's reference cost.
    pub fn record(&mut self, egraph: &str, cost: f64, nodes: f64) {
        self.references.retain(|r| r.egraph != egraph);
        self.references.push(ReferenceCost { egraph: egraph.to_string(), cost, nodes });
    }

    /// The reference cost of the design with fingerprint `egraph` whose
    /// reference has `nodes` chosen nodes: its label when it is a training
    /// design, else `nodes` times the training designs' mean cost per node.
    pub fn cost_for(&self, egraph: &str, nodes: f64) -> Result<ReferenceEstimate> {
        if let Some(r) = self.references.iter().find(|r| r.egraph == egraph) {
            return Ok(ReferenceEstimate { cost: r.cost, measured: true, spread: 0.0 });
        }
        let per_node: Vec<f64> = self.references.iter().map(|r| r.cost / r.nodes).collect();
        if per_node.is_empty() {
            bail!("the relative model lists no training design");
        }
        let (mean, std) = mean_std(&per_node);
        Ok(ReferenceEstimate { cost: mean * nodes, measured: false, spread: std / mean })
    }
}
