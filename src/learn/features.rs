//! Features of an extraction for learned cost models, in two forms: of a
//! discrete extraction (for training) and of SmoothE's node probabilities
//! (for optimising), the second being the expectation of the first.

use crate::egraph::NodeIdx;
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use candle_core::{Result, Tensor};
use serde::{Deserialize, Serialize};

/// Which features a model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureKind {
    /// One feature per (reduced) node: 1 when chosen. Ties the model to
    /// one e-graph, as the published code does.
    Selection,
    /// Per operator, how many chosen nodes have it and the sum of their
    /// costs (leaves pooled as `<leaf>`). Transfers between e-graphs of the
    /// same operator language.
    OpCounts,
}

/// The feature layout of a model, saved with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureLayout {
    /// Which features.
    pub kind: FeatureKind,
    /// Feature names, in order (node ids for `selection`).
    pub names: Vec<String>,
}

/// Features bound to one preprocessed e-graph: a `[nodes, features]`
/// matrix `M` with `features(x) = x^T M` for a node vector `x` (the
/// identity, not stored, for `selection`).
pub struct Featurizer {
    /// The layout.
    pub layout: FeatureLayout,
    matrix: Vec<f32>,
    nodes: usize,
}

fn op_key(original: &crate::egraph::EGraph, n: NodeIdx) -> String {
    if original.children(n).is_empty() {
        "<leaf>".into()
    } else {
        original.op(n).to_string()
    }
}

impl Featurizer {
    /// The features of `kind` for `problem` (preprocessed from `original`).
    /// For `op-counts`, `names` fixes the layout (from a saved model);
    /// without it the layout is this graph's operators, sorted.
    pub fn new(
        kind: FeatureKind,
        problem: &Reduced,
        original: &crate::egraph::EGraph,
        names: Option<&[String]>,
    ) -> Self {
        let g = &problem.graph;
        let nn = g.num_nodes();
        match kind {
            FeatureKind::Selection => {
                // The identity matrix, never stored.
                let names: Vec<String> = (0..nn as NodeIdx).map(|n| g.node_name(n).to_string()).collect();
                Featurizer { layout: FeatureLayout { kind, names }, matrix: Vec::new(), nodes: nn }
            }
            FeatureKind::OpCounts => {
                let names: Vec<String> = match names {
                    Some(n) => n.to_vec(),
                    None => {
                        let mut ops: Vec<String> = (0..nn as NodeIdx)
                            .flat_map(|n| problem.origin(n).iter().map(|&(_, o)| op_key(original, o)))
                            .collect();
                        ops.sort();
                        ops.dedup();
                        ops.iter().flat_map(|o| [format!("count:{o}"), format!("cost:{o}")]).collect()
                    }
                };
                let index: std::collections::HashMap<&str, usize> =
                    names.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
                let f = names.len();
                let mut matrix = vec![0f32; nn * f];
                for n in 0..nn as NodeIdx {
                    for &(_, o) in problem.origin(n) {
                        let key = op_key(original, o);
                        if let Some(&i) = index.get(format!("count:{key}").as_str()) {
                            matrix[n as usize * f + i] += 1.0;
                        }
                        if let Some(&i) = index.get(format!("cost:{key}").as_str()) {
                            matrix[n as usize * f + i] += original.cost(o) as f32;
                        }
                    }
                }
                Featurizer { layout: FeatureLayout { kind, names }, matrix, nodes: nn }
            }
        }
    }

    /// Number of features.
    pub fn dim(&self) -> usize {
        self.layout.names.len()
    }

    /// Features of a valid extraction of the reduced graph (reachable
    /// classes only count).
    pub fn of_extraction(&self, extraction: &Extraction) -> Vec<f32> {
        let f = self.dim();
        let mut out = vec![0f32; f];
        if self.layout.kind == FeatureKind::Selection {
            for n in extraction.choices.iter().flatten() {
                out[*n as usize] = 1.0;
            }
            return out;
        }
        for n in extraction.choices.iter().flatten() {
            let row = &self.matrix[*n as usize * f..(*n as usize + 1) * f];
            for (o, &m) in out.iter_mut().zip(row) {
                *o += m;
            }
        }
        out
    }

    /// Expected features `[batch, features]` of node probabilities
    /// `[nodes, batch]`.
    pub fn of_probabilities(&self, node_prob: &Tensor) -> Result<Tensor> {
        match self.layout.kind {
            FeatureKind::Selection => node_prob.t()?.contiguous(),
            FeatureKind::OpCounts => {
                let m = Tensor::from_slice(&self.matrix, (self.nodes, self.dim()), node_prob.device())?
                    .to_dtype(node_prob.dtype())?;
                node_prob.t()?.contiguous()?.matmul(&m)
            }
        }
    }
}
