//! Differentiable cost models: the objective SmoothE descends.
//!
//! A model maps the batched node-probability tensor `[nodes, batch]` of the
//! (preprocessed) graph to one cost per seed, and prices a discrete
//! extraction exactly, so decoded candidates can be compared.

use crate::egraph::{EGraph, NodeIdx};
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
    /// Costs of many valid extractions; a model that evaluates a batch at
    /// once faster than one by one overrides it.
    fn costs_of(&self, extractions: &[Extraction]) -> Vec<f64> {
        extractions.iter().map(|e| self.cost_of(e)).collect()
    }
    /// Costs by which to choose among a few finished candidates (an
    /// optimiser's result and the model-free extractions it started from),
    /// where they should differ from [`CostModel::costs_of`], the costs the
    /// optimiser descends. Default: `costs_of`.
    fn selection_costs(&self, extractions: &[Extraction]) -> Vec<f64> {
        self.costs_of(extractions)
    }
    /// Added, when choosing, to the selection cost of the optimiser's own
    /// result `optimum` (not to the model-free extractions it is compared
    /// with): how much cheaper than it really is the model may score an
    /// extraction found by optimising against it, in cost units. Default: 0.
    fn optimum_charge(&self, _optimum: &Extraction) -> f64 {
        0.0
    }
}

/// A borrowed model is the model, so one built once can serve inside
/// another (such as an objective under bounds) without a second copy.
impl<M: CostModel + ?Sized> CostModel for &M {
    fn name(&self) -> String {
        (**self).name()
    }
    fn expected(&self, node_prob: &Tensor) -> Result<Tensor> {
        (**self).expected(node_prob)
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        (**self).cost_of(extraction)
    }
    fn costs_of(&self, extractions: &[Extraction]) -> Vec<f64> {
        (**self).costs_of(extractions)
    }
    fn selection_costs(&self, extractions: &[Extraction]) -> Vec<f64> {
        (**self).selection_costs(extractions)
    }
    fn optimum_charge(&self, optimum: &Extraction) -> f64 {
        (**self).optimum_charge(optimum)
    }
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

/// Linear cost plus pairwise interaction costs: choosing nodes `a` and `b`
/// together adds `c(a, b)`. The expectation uses `P(a) P(b)` for the joint
/// probability, as the published quadratic objective does.
pub struct QuadraticCost {
    linear: LinearCost,
    first: Tensor,
    second: Tensor,
    weights: Tensor,
    pairs: Vec<(NodeIdx, NodeIdx, f64)>,
}

/// The pairwise cost file: `{"pairs": [[node_id, node_id, cost], ...]}` in
/// original node ids.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PairFile {
    pairs: Vec<(serde_json::Value, serde_json::Value, f64)>,
}

impl QuadraticCost {
    /// Reads pairwise costs for `problem` (preprocessed from `original`)
    /// from `path`. A node merged into another during preprocessing is
    /// chosen exactly when that one is, so it maps onto it. Errors name
    /// unknown or removed nodes.
    pub fn load(
        path: &std::path::Path,
        problem: &crate::preprocess::Reduced,
        original: &EGraph,
        device: &Device,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let file: PairFile =
            serde_json::from_str(&text).with_context(|| format!("{}: invalid pair file", path.display()))?;
        let mut reduced_of = std::collections::HashMap::new();
        for n in problem.graph.nodes() {
            for &(_, o) in problem.origin(n) {
                reduced_of.insert(original.node_name(o).to_string(), n);
            }
        }
        let id = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut pairs = Vec::with_capacity(file.pairs.len());
        for (i, (a, b, c)) in file.pairs.iter().enumerate() {
            if !c.is_finite() {
                anyhow::bail!("{}: pair {i}: cost is not finite", path.display());
            }
            let find = |v: &serde_json::Value| {
                reduced_of.get(&id(v)).copied().with_context(|| {
                    format!("{}: pair {i}: node {} is unknown or can never be chosen", path.display(), id(v))
                })
            };
            pairs.push((find(a)?, find(b)?, *c));
        }
        let k = pairs.len();
        let first = Tensor::from_vec(pairs.iter().map(|p| p.0.raw()).collect::<Vec<u32>>(), k, device)?;
        let second = Tensor::from_vec(pairs.iter().map(|p| p.1.raw()).collect::<Vec<u32>>(), k, device)?;
        let weights = Tensor::from_vec(pairs.iter().map(|p| p.2).collect::<Vec<f64>>(), (k, 1), device)?;
        Ok(QuadraticCost { linear: LinearCost::new(&problem.graph, device)?, first, second, weights, pairs })
    }
}

impl CostModel for QuadraticCost {
    fn name(&self) -> String {
        "quadratic".into()
    }
    fn expected(&self, node_prob: &Tensor) -> Result<Tensor> {
        let linear = self.linear.expected(node_prob)?;
        if self.pairs.is_empty() {
            return Ok(linear);
        }
        let a = node_prob.index_select(&self.first, 0)?;
        let b = node_prob.index_select(&self.second, 0)?;
        let pair = (a * b)?.broadcast_mul(&self.weights.to_dtype(node_prob.dtype())?)?.sum(0)?;
        linear + pair
    }
    fn cost_of(&self, extraction: &Extraction) -> f64 {
        let linear = self.linear.cost_of(extraction);
        let Ok(order) = extraction.check(&self.linear.graph) else { return f64::INFINITY };
        let mut chosen = vec![false; self.linear.graph.num_nodes()];
        for c in order {
            if let Some(n) = extraction.choices[c.index()] {
                chosen[n.index()] = true;
            }
        }
        linear + self.pairs.iter().filter(|p| chosen[p.0.index()] && chosen[p.1.index()]).map(|p| p.2).sum::<f64>()
    }
}
