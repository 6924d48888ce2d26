//! One design the learned loop runs on: the e-graph, its preprocessed
//! problem, its oracle calls and the circuit it was built from.

use crate::egraph::EGraph;
use crate::extraction::OriginalExtraction;
use crate::learn::oracle::labeler::Labeler;
use crate::preprocess::Reduced;

/// One design the loop runs on (alone, or as one of a corpus).
pub struct Design<'a> {
    /// A name for messages (the file name).
    pub name: String,
    /// The e-graph.
    pub original: &'a EGraph,
    /// It, preprocessed.
    pub problem: &'a Reduced,
    /// Its oracle calls.
    pub labeler: &'a Labeler<'a>,
    /// The circuit it was built from, where the e-graph records one (see
    /// [`crate::saturate::recorded_circuit`]): the loop labels it with the
    /// baselines, so its best is never worse than what it was given.
    pub circuit: Option<OriginalExtraction>,
}
