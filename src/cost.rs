//! Differentiable cost models: the objective SmoothE descends.
//!
//! A model maps the batched node-probability tensor `[nodes, batch]` of the
//! (preprocessed) graph to one cost per seed, and prices a discrete
//! extraction exactly, so decoded candidates can be compared.

use crate::egraph::EGraph;
use crate::extraction::Extraction;
use candle_core::{Device, Result, Tensor};

/// A cost that SmoothE can optimise.
pub trait CostModel: Send + Sync {
    /// Short name for logs and result files.
    fn name(&self) -> String;
    /// Expected cost per seed, `[batch]`, from node probabilities
    /// `[nodes, batch]`. Must be differentiable with Candle autograd.
    fn expected(&self, node_prob: &Tensor) -> Result<Tensor>;
    /// Cost of a valid extraction of the graph the model was built for.
    fn cost_of(&self, extraction: &Extraction) -> f64;
}

/// The linear (DAG) cost: the sum of the chosen nodes' costs, each class
/// once. Its expectation is `sum_n P(n) cost(n)`.
pub struct LinearCost {
    costs: Tensor,
    graph: EGraph,
}

impl LinearCost {
    /// The node costs of `graph`, as a `[nodes, 1]` tensor on `device`.
    pub fn new(graph: &EGraph, device: &Device) -> Result<Self> {
        let costs = Tensor::from_vec(graph.costs().to_vec(), (graph.num_nodes(), 1), device)?;
        Ok(LinearCost { costs, graph: graph.clone() })
    }
}

impl CostModel for LinearCost {
    fn name(&self) -> String {
        "linear".into()
    }
    fn expected(&self, node_prob: &Tensor) -> Result<Tensor> {
        node_prob.broadcast_mul(&self.costs.to_dtype(node_prob.dtype())?)?.sum(0)
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        extraction.dag_cost(&self.graph).unwrap_or(f64::INFINITY)
    }
}
