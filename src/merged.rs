//! What each node of a preprocessed graph holds inside: the original nodes
//! merged into it, as a tree, and which of them holds each child slot.
//!
//! Preprocessing merges a class with one node and one incoming edge into
//! the node holding that edge, splicing the merged node's children into
//! the holder's child list in place. A linear cost only needs the summed
//! node cost, but a cost that follows paths (arrival time) needs the tree:
//! a reduced node `f(g(x), y)` with `g` merged is two original nodes deep
//! towards `x` and one towards `y`.

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use anyhow::{bail, Result};
use std::collections::HashMap;

/// Marks the head part of a reduced node (it has no parent part).
pub const NO_PARENT: u32 = u32::MAX;

/// The parts (original nodes) of every reduced node, in index arrays.
///
/// Parts of one reduced node are listed parent before child, its head
/// (the original node it is named after) first.
#[derive(Debug, Clone, Default)]
pub struct MergedParts {
    /// Operator names of the original nodes, interned.
    ops: Vec<String>,
    /// Per reduced node, the range of its parts (`num_nodes + 1` entries).
    part_start: Vec<u32>,
    /// Operator id of each part.
    part_op: Vec<u32>,
    /// Parent of each part as an index into all parts, or [`NO_PARENT`].
    part_parent: Vec<u32>,
    /// Whether the part's original node has no children (an input or a
    /// constant).
    part_is_leaf: Vec<bool>,
    /// For each child slot of each reduced node (in the order of
    /// `EGraph::children`, flattened), the part holding it.
    slot_part: Vec<u32>,
    /// Per reduced node, the range of its slots in `slot_part`.
    slot_start: Vec<u32>,
}

impl MergedParts {
    /// Records the parts of the reduced graph `reduced`, whose node `n`
    /// stands for the original (class, node) pairs `origin[n]` of
    /// `original`, head first. Errors if the walk does not reproduce the
    /// reduced child lists (a preprocessing bug).
    pub(crate) fn new(original: &EGraph, reduced: &EGraph, origin: &[Vec<(ClassIdx, NodeIdx)>]) -> Result<Self> {
        let mut parts = MergedParts { part_start: vec![0], slot_start: vec![0], ..Default::default() };
        let mut op_ids: HashMap<&str, u32> = HashMap::new();
        for n in reduced.nodes() {
            let inside = &origin[n.index()];
            let merged_node = |class: ClassIdx| inside[1..].iter().find(|&&(c, _)| c == class).map(|&(_, o)| o);
            let expected = reduced.children(n);
            let mut slots = 0usize;
            // Depth-first, children in order: the order in which splicing
            // laid out the reduced child list. Frames: (part, node, next child).
            let mut stack: Vec<(u32, NodeIdx, usize)> = Vec::new();
            let mut add_part = |parts: &mut MergedParts, o: NodeIdx, parent: u32| -> u32 {
                let next = op_ids.len() as u32;
                let op = *op_ids.entry(original.op(o)).or_insert(next);
                if op == next {
                    parts.ops.push(original.op(o).to_string());
                }
                parts.part_op.push(op);
                parts.part_parent.push(parent);
                parts.part_is_leaf.push(original.children(o).is_empty());
                (parts.part_op.len() - 1) as u32
            };
            let head = add_part(&mut parts, inside[0].1, NO_PARENT);
            stack.push((head, inside[0].1, 0));
            while let Some(frame) = stack.last_mut() {
                let (part, o, next) = *frame;
                let Some(&k) = original.children(o).get(next) else {
                    stack.pop();
                    continue;
                };
                frame.2 += 1;
                if let Some(m) = merged_node(k) {
                    let child = add_part(&mut parts, m, part);
                    stack.push((child, m, 0));
                } else {
                    let name = original.class_name(k);
                    if expected.get(slots).map(|&c| reduced.class_name(c)) != Some(name) {
                        bail!("merged node {}: child slot {slots} is not class {name} (a bug)", reduced.node_name(n));
                    }
                    parts.slot_part.push(part);
                    slots += 1;
                }
            }
            if slots != expected.len() {
                bail!("merged node {}: {slots} child slots, expected {} (a bug)", reduced.node_name(n), expected.len());
            }
            parts.part_start.push(parts.part_op.len() as u32);
            parts.slot_start.push(parts.slot_part.len() as u32);
        }
        Ok(parts)
    }

    /// Operator names, indexed by operator id.
    pub fn ops(&self) -> &[String] {
        &self.ops
    }

    /// The parts of reduced node `n`, as indices into all parts.
    pub fn parts(&self, n: NodeIdx) -> std::ops::Range<usize> {
        self.part_start[n.index()] as usize..self.part_start[n.index() + 1] as usize
    }

    /// Total number of parts over all reduced nodes.
    pub fn num_parts(&self) -> usize {
        self.part_op.len()
    }

    /// Operator id of part `p`.
    pub fn op(&self, p: usize) -> u32 {
        self.part_op[p]
    }

    /// Parent part of `p`, or `None` for a head.
    pub fn parent(&self, p: usize) -> Option<usize> {
        (self.part_parent[p] != NO_PARENT).then_some(self.part_parent[p] as usize)
    }

    /// Whether part `p` is an original node without children.
    pub fn is_leaf(&self, p: usize) -> bool {
        self.part_is_leaf[p]
    }

    /// For each child slot of reduced node `n` (as in `EGraph::children`),
    /// the part holding it.
    pub fn slot_parts(&self, n: NodeIdx) -> &[u32] {
        &self.slot_part[self.slot_start[n.index()] as usize..self.slot_start[n.index() + 1] as usize]
    }
}
