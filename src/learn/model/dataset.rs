//! A design's labelled extractions as training data: from the label log,
//! mapped onto the preprocessed graph, with their test-split flags.

use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::learn::model::metrics::in_test_split;
use crate::learn::oracle::labels::LabelLog;
use crate::learn::oracle::process::Oracle;
use crate::preprocess::Reduced;
use anyhow::Result;

/// A labelled extraction of the reduced graph.
pub struct Labelled {
    /// The extraction.
    pub extraction: Extraction,
    /// Its real cost.
    pub cost: f64,
    /// Whether it belongs to the test split.
    pub test: bool,
}

/// The labelled extractions of this graph by `oracle` with a value of its
/// primary metric ([`Oracle::primary`]), as reduced-graph
/// extractions with their costs and split (labels using removed nodes are
/// skipped).
///
/// `baselines` (greedy, dag-greedy, linear SmoothE: the extractions a
/// model's optimum is judged against) always stay in the training split.
/// A model that never saw the best of them cannot rank its optimum against
/// it: with C432 the dag-greedy extraction hashed into the test split, and
/// the frozen model, predicting it 4% too high, preferred extractions that
/// measured 6% larger.
pub fn dataset(
    original: &EGraph,
    problem: &Reduced,
    log: &LabelLog,
    fingerprint: &str,
    oracle: &Oracle,
    test_fraction: f64,
    baselines: &[Extraction],
) -> Result<Vec<Labelled>> {
    let mut out = Vec::new();
    for (label, cost) in log.values_for(fingerprint, &oracle.identity(), oracle.primary()) {
        let ex = label.to_extraction(original)?;
        if let Some(reduced) = problem.from_original(&ex) {
            let test = in_test_split(&label.extraction, test_fraction) && !baselines.contains(&reduced);
            out.push(Labelled { extraction: reduced, cost, test });
        }
    }
    Ok(out)
}
