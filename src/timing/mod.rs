//! Static timing of an extraction: arrival time, max-plus over the chosen
//! DAG, with a delay per operator.
//!
//! The arrival time of a chosen node is its operator's delay plus the
//! latest arrival among its children; a leaf (a node without children:
//! an input or a constant) arrives at its own delay. The delay of an
//! extraction is the latest arrival over the roots. It is what depth is
//! with unit delays, and what static timing analysis computes with a cell
//! library's delays.
//!
//! Unlike the DAG cost, arrival time is not a sum over the chosen nodes:
//! sharing is free and only the slowest path counts, so a linear cost
//! cannot express it. This module gives it exactly on a discrete
//! extraction ([`TimingGraph::arrival`]) and relaxed over SmoothE's probabilities ([`op::ArrivalOp`]), where it
//! equals the exact value on a one-hot choice.
//!
//! Everything works on the preprocessed graph: a reduced node that holds
//! merged original nodes is timed through the tree inside it
//! ([`crate::merged::MergedParts`]), so the arrival times are those of the
//! original graph.

pub mod fit;
pub mod objective;
pub mod op;

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The operator name that every node without children (inputs and
/// constants, named differently in every design) is timed as.
pub const LEAF_OP: &str = "<leaf>";

/// The oracle metric that a learned static-timing model predicts
/// (`train-cost --metric area,delay` fits one for it).
pub const TIMING_METRIC: &str = "delay";

/// Marks a terminal with no child class: the path ends at a leaf.
const NO_CHILD: u32 = u32::MAX;

/// A delay per operator: a file `{"OP": delay, ...}` in the units the user
/// chooses. Nodes without children are timed as [`LEAF_OP`] (default 0);
/// any other operator the map does not name takes the default delay 1, so
/// the empty map gives depth counted in operators.
#[derive(Debug, Clone, PartialEq)]
pub struct OpDelays {
    by_op: BTreeMap<String, f64>,
}

impl Default for OpDelays {
    fn default() -> Self {
        OpDelays::unit()
    }
}

impl OpDelays {
    /// Every operator 1, leaves 0: arrival time is depth in operators.
    pub fn unit() -> Self {
        OpDelays { by_op: BTreeMap::new() }
    }

    /// Delays from a map; errors on a negative or non-finite delay.
    pub fn from_map(by_op: BTreeMap<String, f64>) -> Result<Self> {
        for (op, &d) in &by_op {
            if !d.is_finite() || d < 0.0 {
                bail!("operator {op:?}: delay must be a finite number, 0 or more, got {d}");
            }
        }
        Ok(OpDelays { by_op })
    }

    /// Reads a `{"OP": delay}` JSON file; errors name the file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let by_op: BTreeMap<String, f64> = serde_json::from_str(&text).with_context(|| {
            format!("{}: expected a JSON object of operator delays, {{\"OP\": delay}}", path.display())
        })?;
        OpDelays::from_map(by_op).with_context(|| format!("{}", path.display()))
    }

    /// The delay of operator `op` (already [`LEAF_OP`] for a leaf).
    pub fn delay(&self, op: &str) -> f64 {
        self.by_op.get(op).copied().unwrap_or(if op == LEAF_OP { 0.0 } else { 1.0 })
    }

    /// The delays the map names (others take the defaults).
    pub fn by_op(&self) -> &BTreeMap<String, f64> {
        &self.by_op
    }
}

/// A cyclic or acyclic block of classes, in the order the timing sweep
/// visits them (children before parents where the graph allows).
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub classes: Vec<ClassIdx>,
    pub cyclic: bool,
}

/// The timing structure of a preprocessed graph: per node the paths from
/// it to the classes below it (through the original nodes merged into
/// it), as index arrays.
///
/// A *part* is one original node inside a reduced node; its path delay is
/// the sum of the delays of the parts from the reduced node's head down to
/// it. A *terminal* of a reduced node is where a path leaves it: a child
/// slot (path delay of the part holding it, plus the child class's arrival)
/// or a leaf part (its path delay alone). A node's arrival is the latest of
/// its terminals.
#[derive(Debug, Clone)]
pub struct TimingGraph {
    graph: EGraph,
    /// Timing operator names ([`LEAF_OP`] for leaves), by timing op id.
    ops: Vec<String>,
    /// Per part: timing op id and parent part (or `u32::MAX`).
    part_op: Vec<u32>,
    part_parent: Vec<u32>,
    /// Per node, the range of its terminals.
    term_start: Vec<u32>,
    /// Per terminal: the part it leaves from, and the child class or
    /// [`NO_CHILD`].
    term_part: Vec<u32>,
    term_child: Vec<u32>,
    /// Classes in sweep order, children-first by component.
    pub(crate) blocks: Vec<Block>,
    /// Per class, its block and its position in the block.
    pub(crate) class_block: Vec<u32>,
    pub(crate) class_position: Vec<u32>,
}

impl TimingGraph {
    /// The timing structure of `problem`.
    pub fn new(problem: &Reduced) -> Self {
        let g = &problem.graph;
        let merged = &problem.parts;
        let mut ops: Vec<String> = Vec::new();
        let mut op_of_merged: Vec<Option<u32>> = vec![None; merged.ops().len()];
        let mut leaf_op: Option<u32> = None;
        let intern = |ops: &mut Vec<String>, name: &str| -> u32 {
            ops.push(name.to_string());
            (ops.len() - 1) as u32
        };
        let mut part_op = Vec::with_capacity(merged.num_parts());
        let mut part_parent = Vec::with_capacity(merged.num_parts());
        for p in 0..merged.num_parts() {
            let id = if merged.is_leaf(p) {
                *leaf_op.get_or_insert_with(|| intern(&mut ops, LEAF_OP))
            } else {
                let m = merged.op(p) as usize;
                *op_of_merged[m].get_or_insert_with(|| intern(&mut ops, &merged.ops()[m]))
            };
            part_op.push(id);
            part_parent.push(merged.parent(p).map_or(u32::MAX, |q| q as u32));
        }
        let mut term_start = vec![0u32];
        let mut term_part = Vec::new();
        let mut term_child = Vec::new();
        for n in g.nodes() {
            for (&part, &child) in merged.slot_parts(n).iter().zip(g.children(n)) {
                term_part.push(part);
                term_child.push(child.index() as u32);
            }
            for p in merged.parts(n).filter(|&p| merged.is_leaf(p)) {
                term_part.push(p as u32);
                term_child.push(NO_CHILD);
            }
            term_start.push(term_part.len() as u32);
        }
        let blocks = sweep_blocks(problem);
        let mut class_block = vec![0u32; g.num_classes()];
        let mut class_position = vec![0u32; g.num_classes()];
        for (i, block) in blocks.iter().enumerate() {
            for (j, c) in block.classes.iter().enumerate() {
                class_block[c.index()] = i as u32;
                class_position[c.index()] = j as u32;
            }
        }
        TimingGraph {
            graph: g.clone(),
            ops,
            part_op,
            part_parent,
            term_start,
            term_part,
            term_child,
            blocks,
            class_block,
            class_position,
        }
    }

    /// The graph it times.
    pub fn graph(&self) -> &EGraph {
        &self.graph
    }

    /// Timing operator names ([`LEAF_OP`] for leaves), by op id: the order
    /// of a per-op delay vector.
    pub fn ops(&self) -> &[String] {
        &self.ops
    }

    /// The per-op delay vector of `delays`, in [`TimingGraph::ops`] order.
    pub fn delay_vector(&self, delays: &OpDelays) -> Vec<f64> {
        self.ops.iter().map(|op| delays.delay(op)).collect()
    }

    /// Path delay of every part for per-op delays `delay` (parents are
    /// listed before their children, so one pass suffices).
    pub fn part_delays(&self, delay: &[f64]) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.part_op.len());
        for (p, (&op, &parent)) in self.part_op.iter().zip(&self.part_parent).enumerate() {
            let above = if parent == u32::MAX { 0.0 } else { out[parent as usize] };
            debug_assert!(parent == u32::MAX || (parent as usize) < p);
            out.push(delay[op as usize] + above);
        }
        out
    }

    /// Adds to `grad_delay` (per op) the gradient of path delays whose
    /// gradient is `grad_part` (per part, consumed).
    pub(crate) fn part_delay_backward(&self, mut grad_part: Vec<f64>, grad_delay: &mut [f64]) {
        for p in (0..grad_part.len()).rev() {
            let g = grad_part[p];
            grad_delay[self.part_op[p] as usize] += g;
            let parent = self.part_parent[p];
            if parent != u32::MAX {
                grad_part[parent as usize] += g;
            }
        }
    }

    /// The terminals of node `n`: (part, child class or `None`).
    pub(crate) fn terminals(&self, n: NodeIdx) -> impl Iterator<Item = (usize, Option<ClassIdx>)> + '_ {
        let range = self.term_start[n.index()] as usize..self.term_start[n.index() + 1] as usize;
        range.map(move |s| {
            let child = self.term_child[s];
            (self.term_part[s] as usize, (child != NO_CHILD).then(|| ClassIdx::new(child as usize)))
        })
    }

    /// Arrival of node `n` given its children's arrivals `class_arrival`
    /// and the parts' path delays ([`TimingGraph::part_delays`]): the
    /// latest terminal, and which one.
    pub fn node_arrival(
        &self,
        n: NodeIdx,
        part_delay: &[f64],
        class_arrival: impl Fn(ClassIdx) -> f64,
    ) -> (f64, usize) {
        let mut best = (f64::NEG_INFINITY, 0);
        for (i, (part, child)) in self.terminals(n).enumerate() {
            let t = part_delay[part] + child.map_or(0.0, &class_arrival);
            if t > best.0 {
                best = (t, i);
            }
        }
        best
    }

    /// The arrival time of a valid extraction of the graph under per-op
    /// delays `delay` ([`TimingGraph::delay_vector`]): the latest arrival
    /// over the roots. Errors if the extraction is not valid.
    pub fn arrival(&self, extraction: &Extraction, delay: &[f64]) -> Result<f64> {
        let order = extraction.check(&self.graph)?;
        let part_delay = self.part_delays(delay);
        let mut t = vec![0.0; self.graph.num_classes()];
        for c in order {
            let n = extraction.choices[c.index()].expect("checked");
            t[c.index()] = self.node_arrival(n, &part_delay, |k| t[k.index()]).0;
        }
        Ok(self.graph.roots().iter().map(|r| t[r.index()]).fold(f64::NEG_INFINITY, f64::max))
    }

    /// How many times each op (in [`TimingGraph::ops`] order) lies on a
    /// critical path of a valid extraction under `delay`: the gradient of
    /// [`TimingGraph::arrival`] with respect to the delays, so that
    /// arrival equals its dot product with `delay`. Errors if the
    /// extraction is not valid.
    pub fn critical_ops(&self, extraction: &Extraction, delay: &[f64]) -> Result<Vec<f64>> {
        let order = extraction.check(&self.graph)?;
        let part_delay = self.part_delays(delay);
        let mut t = vec![0.0; self.graph.num_classes()];
        let mut latest = vec![(0usize, None); self.graph.num_classes()];
        for c in order {
            let n = extraction.choices[c.index()].expect("checked");
            let (arrival, i) = self.node_arrival(n, &part_delay, |k| t[k.index()]);
            t[c.index()] = arrival;
            latest[c.index()] = self.terminals(n).nth(i).expect("a terminal");
        }
        let mut counts = vec![0.0; self.ops.len()];
        let root = self.graph.roots().iter().copied().max_by(|a, b| t[a.index()].total_cmp(&t[b.index()]));
        let mut class = root;
        while let Some(c) = class {
            let (mut part, child) = latest[c.index()];
            loop {
                counts[self.part_op[part] as usize] += 1.0;
                match self.part_parent[part] {
                    u32::MAX => break,
                    parent => part = parent as usize,
                }
            }
            class = child;
        }
        Ok(counts)
    }
}

/// The classes of `problem` grouped by strongly connected component,
/// children-first; inside a cyclic component, the reverse of the
/// relaxation's parents-first order, so one sweep carries arrivals up
/// across the component and only back edges need more.
fn sweep_blocks(problem: &Reduced) -> Vec<Block> {
    let g = &problem.graph;
    let sccs = &problem.sccs;
    let mut is_root = vec![false; g.num_classes()];
    for &r in g.roots() {
        is_root[r.index()] = true;
    }
    (0..sccs.len())
        .rev()
        .map(|i| {
            let members = sccs.members(i);
            if members.len() == 1 {
                return Block { classes: members.to_vec(), cyclic: false };
            }
            let children = |c: ClassIdx| g.class_nodes(c).iter().flat_map(|&n| g.children(n).to_vec()).collect();
            let outside =
                |c: ClassIdx| g.parents(c).iter().any(|&p| sccs.component_of[g.class_of(p).index()] as usize != i);
            let mut classes = crate::relax::sweep_order(members, i, sccs, &is_root, children, outside);
            classes.reverse();
            Block { classes, cyclic: true }
        })
        .collect()
}
