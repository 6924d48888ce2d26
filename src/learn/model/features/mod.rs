//! Features of an extraction for learned cost models, in two forms: of a
//! discrete extraction (for training) and of SmoothE's node probabilities
//! (for optimising), the second being the relaxation's expectation of the
//! first, so the two agree exactly on a one-hot probability vector.
//!
//! Every feature is operator-level (no node or class ids), so a layout
//! learned on one e-graph applies to any e-graph of the same operator
//! language:
//!
//! - `count:OP`: how many chosen (original) nodes have operator `OP`;
//! - `cost:OP`: the sum of their node costs;
//! - `pair:P>C` (`structure` only): how many edges go from a chosen `P`
//!   node to a class whose chosen node is a `C` node;
//! - `pair:<unseen>` (`structure` only): edges whose pair the layout
//!   lacks (always 0 on the e-graphs a model was trained on);
//! - `linear`: the DAG cost, the sum of all chosen node costs.
//!
//! Nodes without children pool as the operator `<leaf>`, since inputs and
//! constants are named differently in every design.

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::bail;
use candle_core::{DType, Result, Tensor};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

mod pair_op;
use pair_op::{PairEdges, PairOp, PairTensors};

/// Which features a model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureKind {
    /// Per operator, the count of chosen nodes and the sum of their costs,
    /// plus the DAG cost.
    OpCounts,
    /// `op-counts` plus, per (parent operator, child operator) pair, the
    /// number of chosen edges between them.
    Structure,
}

impl crate::config::Choice for FeatureKind {
    const NAMES: &'static [&'static str] = &["op-counts", "structure"];
}

/// The feature layout of a model, saved with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureLayout {
    /// Which features.
    pub kind: FeatureKind,
    /// Feature names, in order.
    pub names: Vec<String>,
}

/// The feature that counts operator pairs a layout has no feature for.
pub const UNSEEN_PAIR: &str = "pair:<unseen>";

/// The operator a feature calls an original node by.
pub fn op_key(original: &EGraph, n: NodeIdx) -> String {
    if original.children(n).is_empty() {
        "<leaf>".into()
    } else {
        original.op(n).to_string()
    }
}

/// The feature names `kind` gives `problem` (preprocessed from `original`):
/// its operators and operator pairs, sorted, then `linear`.
pub fn vocabulary(kind: FeatureKind, problem: &Reduced, original: &EGraph) -> Vec<String> {
    let g = &problem.graph;
    let mut ops = BTreeSet::new();
    let mut pairs = BTreeSet::new();
    let mut heads: Vec<String> = Vec::with_capacity(g.num_nodes());
    for n in g.nodes() {
        heads.push(op_key(original, problem.origin(n)[0].1));
        for &(_, o) in problem.origin(n) {
            ops.insert(op_key(original, o));
        }
    }
    if kind == FeatureKind::Structure {
        let wiring = Wiring::new(problem, original);
        for &(_, c, parent_op) in &wiring.slots {
            for &m in g.class_nodes(c) {
                pairs.insert(format!("pair:{}>{}", wiring.ops[parent_op as usize], heads[m.index()]));
            }
        }
        for (p, ch) in &wiring.internal_pairs {
            pairs.insert(format!("pair:{}>{}", wiring.ops[*p as usize], wiring.ops[*ch as usize]));
        }
        pairs.insert(UNSEEN_PAIR.to_string());
    }
    let mut names: Vec<String> = ops.iter().map(|o| format!("count:{o}")).collect();
    names.extend(ops.iter().map(|o| format!("cost:{o}")));
    names.extend(pairs);
    names.push("linear".into());
    names
}

/// One layout covering several [`vocabulary`] lists (of several designs):
/// their operators and pairs, in the same order `vocabulary` uses.
pub fn merge_vocabularies(lists: &[Vec<String>]) -> Vec<String> {
    let all: BTreeSet<&String> = lists.iter().flatten().collect();
    let with = |prefix: &str| all.iter().filter(|n| n.starts_with(prefix)).map(|n| n.to_string()).collect::<Vec<_>>();
    let mut names = with("count:");
    names.extend(with("cost:"));
    names.extend(with("pair:"));
    if all.iter().any(|n| *n == "linear") {
        names.push("linear".into());
    }
    names
}

/// How the reduced nodes of a preprocessed graph wire operators together:
/// each reduced node's child slots with the operator of the original node
/// holding that edge, and the operator pairs inside merged nodes.
struct Wiring {
    /// Operator names, indexed by the ids used below.
    ops: Vec<String>,
    /// Per reduced node, the range of its slots in `slots`.
    slot_start: Vec<usize>,
    /// (reduced node, child class in the reduced graph, parent operator id).
    slots: Vec<(NodeIdx, ClassIdx, u32)>,
    /// Per reduced node, its (parent operator, child operator) pairs that
    /// lie inside it (classes merged into it); flattened with `internal_start`.
    internal: Vec<(u32, u32)>,
    internal_start: Vec<usize>,
    /// All internal pairs, for the vocabulary.
    internal_pairs: BTreeSet<(u32, u32)>,
    /// Operator id of each reduced node's head (original) node.
    head_op: Vec<u32>,
}

impl Wiring {
    fn new(problem: &Reduced, original: &EGraph) -> Self {
        let g = &problem.graph;
        let mut op_ids: HashMap<String, u32> = HashMap::new();
        let mut ops = Vec::new();
        let mut id = |name: String| -> u32 {
            *op_ids.entry(name.clone()).or_insert_with(|| {
                ops.push(name);
                (ops.len() - 1) as u32
            })
        };
        let class_by_name: HashMap<&str, ClassIdx> = g.classes().map(|c| (g.class_name(c), c)).collect();
        let mut w = Wiring {
            ops: Vec::new(),
            slot_start: vec![0],
            slots: Vec::new(),
            internal: Vec::new(),
            internal_start: vec![0],
            internal_pairs: BTreeSet::new(),
            head_op: Vec::with_capacity(g.num_nodes()),
        };
        for n in g.nodes() {
            let origin = problem.origin(n);
            w.head_op.push(id(op_key(original, origin[0].1)));
            for &(_, o) in origin {
                let parent = id(op_key(original, o));
                for &oc in original.children(o) {
                    if let Some(&(_, inner)) = origin.iter().find(|(c, _)| *c == oc) {
                        let pair = (parent, id(op_key(original, inner)));
                        w.internal.push(pair);
                        w.internal_pairs.insert(pair);
                    } else if let Some(&c) = class_by_name.get(original.class_name(oc)) {
                        w.slots.push((n, c, parent));
                    }
                }
            }
            w.slot_start.push(w.slots.len());
            w.internal_start.push(w.internal.len());
        }
        w.ops = ops;
        w
    }
}

/// Features bound to one preprocessed e-graph. The part that is linear in
/// the node choices is a `[nodes, features]` matrix; the edge pairs are a
/// list of (parent node, child node, feature) entries.
pub struct Featurizer {
    /// The layout.
    pub layout: FeatureLayout,
    graph: EGraph,
    /// Row-major `[nodes, features]`.
    matrix: Vec<f64>,
    /// The same rows sparse: node `n`'s non-zero (feature, value) entries
    /// are `row_entries[row_start[n]..row_start[n + 1]]`, in feature order,
    /// so featurizing an extraction adds the same values in the same order
    /// as the dense rows, without the zeros.
    row_start: Vec<usize>,
    row_entries: Vec<(u32, f64)>,
    /// Each node's position in its class's node list (what `slot_features`
    /// is aligned with).
    position_in_class: Vec<u32>,
    /// Per reduced node, its child slots: (child class, feature index of
    /// each possible child node, aligned with `class_nodes(child class)`).
    slot_start: Vec<usize>,
    slot_class: Vec<ClassIdx>,
    slot_features: Vec<Vec<Option<u32>>>,
    /// The same entries flattened for the relaxed features.
    pairs: Arc<PairEdges>,
    /// `matrix` (and, off the CPU, the pair entries) as tensors on the
    /// device and in the dtype last asked for, so a SmoothE step copies
    /// and converts nothing.
    on_device: Mutex<Option<OnDevice>>,
}

/// What [`Featurizer::of_probabilities`] keeps on one device.
struct OnDevice {
    location: candle_core::DeviceLocation,
    dtype: DType,
    dense: Tensor,
    pairs: Option<PairTensors>,
}

impl Featurizer {
    /// The features named `names` (a saved layout, or [`vocabulary`]) for
    /// `problem`, preprocessed from `original`. Names this graph never
    /// produces stay 0; operators of this graph that `names` lacks are
    /// reported by [`Featurizer::unknown_features`] and otherwise ignored.
    pub fn new(kind: FeatureKind, problem: &Reduced, original: &EGraph, names: &[String]) -> Self {
        let g = &problem.graph;
        let nn = g.num_nodes();
        let f = names.len();
        let index: HashMap<&str, u32> = names.iter().enumerate().map(|(i, s)| (s.as_str(), i as u32)).collect();
        let mut matrix = vec![0f64; nn * f];
        let wiring = Wiring::new(problem, original);
        // A pair the layout lacks counts as `pair:<unseen>`.
        let unseen = index.get(UNSEEN_PAIR).copied();
        let pair_index = |p: u32, c: u32| {
            index
                .get(format!("pair:{}>{}", wiring.ops[p as usize], wiring.ops[c as usize]).as_str())
                .copied()
                .or(unseen)
        };
        for n in NodeIdx::range(nn) {
            let row = &mut matrix[n.index() * f..(n.index() + 1) * f];
            for &(_, o) in problem.origin(n) {
                let key = op_key(original, o);
                if let Some(&i) = index.get(format!("count:{key}").as_str()) {
                    row[i as usize] += 1.0;
                }
                if let Some(&i) = index.get(format!("cost:{key}").as_str()) {
                    row[i as usize] += original.cost(o);
                }
            }
            if let Some(&i) = index.get("linear") {
                row[i as usize] += g.cost(n);
            }
            if kind == FeatureKind::Structure {
                for &(p, c) in &wiring.internal[wiring.internal_start[n.index()]..wiring.internal_start[n.index() + 1]]
                {
                    if let Some(i) = pair_index(p, c) {
                        row[i as usize] += 1.0;
                    }
                }
            }
        }
        let mut row_start = vec![0];
        let mut row_entries = Vec::new();
        for n in 0..nn {
            let row = &matrix[n * f..(n + 1) * f];
            row_entries.extend(row.iter().enumerate().filter(|(_, &v)| v != 0.0).map(|(i, &v)| (i as u32, v)));
            row_start.push(row_entries.len());
        }
        let mut position_in_class = vec![0u32; nn];
        for c in g.classes() {
            for (i, &m) in g.class_nodes(c).iter().enumerate() {
                position_in_class[m.index()] = i as u32;
            }
        }
        let mut fz = Featurizer {
            layout: FeatureLayout { kind, names: names.to_vec() },
            graph: g.clone(),
            matrix,
            row_start,
            row_entries,
            position_in_class,
            slot_start: vec![0],
            slot_class: Vec::new(),
            slot_features: Vec::new(),
            pairs: Arc::new(PairEdges::default()),
            on_device: Mutex::new(None),
        };
        let mut edges = PairEdges {
            class_of: g.nodes().map(|n| g.class_of(n).raw()).collect(),
            classes: g.num_classes(),
            features: f,
            ..PairEdges::default()
        };
        if kind == FeatureKind::Structure {
            for n in 0..nn {
                for &(_, c, p) in &wiring.slots[wiring.slot_start[n]..wiring.slot_start[n + 1]] {
                    let per_child: Vec<Option<u32>> =
                        g.class_nodes(c).iter().map(|&m| pair_index(p, wiring.head_op[m.index()])).collect();
                    for (&m, fi) in g.class_nodes(c).iter().zip(&per_child) {
                        if let Some(fi) = fi {
                            edges.parent.push(n as u32);
                            edges.child.push(m.raw());
                            edges.class.push(c.raw());
                            edges.feature.push(*fi);
                        }
                    }
                    fz.slot_class.push(c);
                    fz.slot_features.push(per_child);
                }
                fz.slot_start.push(fz.slot_class.len());
            }
        } else {
            fz.slot_start = vec![0; nn + 1];
        }
        fz.pairs = Arc::new(edges);
        fz
    }

    /// A featurizer with this graph's own vocabulary.
    pub fn fresh(kind: FeatureKind, problem: &Reduced, original: &EGraph) -> Self {
        Self::new(kind, problem, original, &vocabulary(kind, problem, original))
    }

    /// Operators and operator pairs of this graph that the layout has no
    /// feature for (sorted). A model cannot judge them.
    pub fn unknown_features(kind: FeatureKind, problem: &Reduced, original: &EGraph, names: &[String]) -> Vec<String> {
        let known: std::collections::HashSet<&str> = names.iter().map(|s| s.as_str()).collect();
        vocabulary(kind, problem, original).into_iter().filter(|n| !known.contains(n.as_str())).collect()
    }

    /// The preprocessed graph the features are bound to.
    pub fn graph(&self) -> &EGraph {
        &self.graph
    }

    /// Number of features.
    pub fn dim(&self) -> usize {
        self.layout.names.len()
    }

    /// Features of an extraction of the reduced graph; only the classes
    /// reachable from the roots count. Errors if it is not valid.
    pub fn of_extraction(&self, extraction: &Extraction) -> anyhow::Result<Vec<f64>> {
        let f = self.dim();
        let mut out = vec![0f64; f];
        let order = match extraction.check(&self.graph) {
            Ok(order) => order,
            Err(defect) => bail!("cannot featurize an invalid extraction: {defect}"),
        };
        for c in order {
            let n = (extraction.choices[c.index()].expect("checked")).index();
            for &(i, v) in &self.row_entries[self.row_start[n]..self.row_start[n + 1]] {
                out[i as usize] += v;
            }
            for s in self.slot_start[n]..self.slot_start[n + 1] {
                let m = extraction.choices[self.slot_class[s].index()].expect("checked");
                if let Some(fi) = self.slot_features[s][self.position_in_class[m.index()] as usize] {
                    out[fi as usize] += 1.0;
                }
            }
        }
        Ok(out)
    }

    /// Expected features `[batch, features]` of node probabilities
    /// `[nodes, batch]` (same dtype as the input). The pair count of an
    /// edge `n -> c` to child `m` is `P(n) P(m) / P(c)`: the probability
    /// of `n` times that of `m` given its class.
    pub fn of_probabilities(&self, node_prob: &Tensor) -> Result<Tensor> {
        let (dense, pairs) = self.tensors_on(node_prob.dim(0)?, node_prob.device(), node_prob.dtype())?;
        let expected = node_prob.t()?.matmul(&dense)?;
        if self.pairs.parent.is_empty() {
            return Ok(expected);
        }
        let pair_counts = match pairs {
            Some(on_device) => on_device.features(node_prob)?,
            None => node_prob.contiguous()?.apply_op1(PairOp { edges: self.pairs.clone() })?,
        };
        expected + pair_counts.t()?
    }

    /// The dense `[nodes, features]` matrix, and off the CPU the pair
    /// entries, on `device` in `dtype`: made once, then reused while the
    /// device and dtype stay.
    fn tensors_on(
        &self,
        nodes: usize,
        device: &candle_core::Device,
        dtype: DType,
    ) -> Result<(Tensor, Option<PairTensors>)> {
        let mut kept = self.on_device.lock().map_err(|_| candle_core::Error::Msg("feature tensors poisoned".into()))?;
        let location = device.location();
        if let Some(k) = kept.as_ref().filter(|k| k.location == location && k.dtype == dtype) {
            return Ok((k.dense.clone(), k.pairs.clone()));
        }
        let dense = Tensor::from_slice(&self.matrix, (nodes, self.dim()), device)?.to_dtype(dtype)?;
        let pairs = if device.is_cpu() || self.pairs.parent.is_empty() {
            None
        } else {
            Some(PairTensors::new(&self.pairs, device)?)
        };
        *kept = Some(OnDevice { location, dtype, dense: dense.clone(), pairs: pairs.clone() });
        Ok((dense, pairs))
    }

    /// Features of many extractions as a `[rows, features]` f32 tensor.
    pub fn tensor_of(&self, rows: &[Vec<f64>], device: &candle_core::Device) -> Result<Tensor> {
        let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().map(|&x| x as f32)).collect();
        Tensor::from_vec(flat, (rows.len(), self.dim()), device)?.to_dtype(DType::F32)
    }
}
