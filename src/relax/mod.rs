//! The SmoothE relaxation: node probabilities as a differentiable function
//! of per-node scores, batched over seeds, with a hand-written backward.
//!
//! For scores `s` (one column per seed), `q = softmax` of `s` within each
//! class; a root class has probability 1; a class edge `p -> c` carries
//! `t = P(p) * w`, where `w` sums `q` over the nodes of `p` that have `c` as
//! a child; `P(c)` combines its incoming `t` (independent, correlated or
//! hybrid rule); node probability is `P(class) * q`. Classes are swept in
//! topological order of the condensation of the class graph, so acyclic
//! parts are exact in one pass; inside a cyclic component the update is
//! iterated from zero (the least fixed point) to a tolerance. The backward
//! pass solves the adjoint of the same system in reverse order (implicit
//! differentiation inside cyclic components).
//!
//! The acyclicity penalty `h = trace(exp(A)) - dim(A)` is computed per
//! cyclic component, `A` holding the edge probabilities `t` between its
//! classes; it is zero exactly when the weighted component has no cycle.
//! Two-class components use the product of their two edge weights; up to
//! [`DENSE_PENALTY_MAX`] classes the exponential is exact (Padé). Larger
//! components would cost cubic time per seed, so they get the terms of the
//! series that matter in practice, each exact and cheap: every 2-cycle, plus
//! the product of edge probabilities of each longer cycle that decoding has
//! actually met (handed in with [`Relaxation::remember_cycle`], like lazy
//! cycle constraints in an ILP).
//!
//! Buffers are node-major: value `(i, b)` of a `[rows, width]` buffer is at
//! `i * width + b`. All arithmetic is `f64`.

mod backward;
pub mod expm;
mod forward;
pub mod op;
mod penalty;

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::scc::Sccs;
use serde::{Deserialize, Serialize};

/// Cyclic components up to this many classes get the exact penalty.
pub const DENSE_PENALTY_MAX: usize = 32;

/// How a class's incoming edge probabilities combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    /// `P = 1 - prod (1 - t)`: parents pick the class independently.
    Independent,
    /// `P = max t`: parents' choices are fully correlated.
    Correlated,
    /// The mean of the two.
    Hybrid,
    /// Seeds take turns: independent, correlated, hybrid, independent, ...
    /// (which rule suits a graph varies by suite; a batch can try all).
    Mixed,
}

impl crate::config::Choice for Combine {
    const NAMES: &'static [&'static str] = &["independent", "correlated", "hybrid", "mixed"];
}

impl Combine {
    /// Weights of the independent and correlated rules for batch column `b`.
    pub fn weights(self, b: usize) -> (f64, f64) {
        match self {
            Combine::Independent => (1.0, 0.0),
            Combine::Correlated => (0.0, 1.0),
            Combine::Hybrid => (0.5, 0.5),
            Combine::Mixed => [Combine::Independent, Combine::Correlated, Combine::Hybrid][b % 3].weights(b),
        }
    }
}

/// Order in which to sweep the classes of cyclic component `comp`:
/// breadth-first from its entry classes (roots, or classes with an edge
/// from outside) along its internal edges, so one Gauss-Seidel sweep
/// carries inflow across the component and only back edges need more.
pub(crate) fn sweep_order(
    members: &[ClassIdx],
    comp: usize,
    sccs: &Sccs,
    is_root: &[bool],
    children: impl Fn(ClassIdx) -> Vec<ClassIdx>,
    has_outside_parent: impl Fn(ClassIdx) -> bool,
) -> Vec<ClassIdx> {
    let mut seen: std::collections::HashSet<ClassIdx> = std::collections::HashSet::new();
    let mut order = Vec::with_capacity(members.len());
    let mut queue = std::collections::VecDeque::new();
    for &c in members {
        if is_root[c.index()] || has_outside_parent(c) {
            seen.insert(c);
            queue.push_back(c);
        }
    }
    loop {
        while let Some(c) = queue.pop_front() {
            order.push(c);
            for k in children(c) {
                if sccs.component_of[k.index()] as usize == comp && seen.insert(k) {
                    queue.push_back(k);
                }
            }
        }
        // Unreachable members (possible only without entries): any order.
        match members.iter().find(|c| !seen.contains(c)) {
            Some(&c) => {
                seen.insert(c);
                queue.push_back(c);
            }
            None => break,
        }
    }
    order
}

/// Per-call scratch space and per-column rule weights.
struct Scratch {
    t: Vec<f64>,
    wi: Vec<f64>,
    wc: Vec<f64>,
}

/// Fixed-point iteration settings for cyclic components.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iteration {
    /// Stop when no class probability moves by more than this.
    pub tolerance: f64,
    /// Stop after this many sweeps regardless.
    pub max_sweeps: usize,
}

impl Default for Iteration {
    fn default() -> Self {
        Iteration { tolerance: 1e-7, max_sweeps: 100 }
    }
}

#[derive(Debug, Clone)]
enum Penalty {
    /// Two classes: `h = t_a * t_b`.
    Pair(u32, u32),
    /// Dense exponential over `classes` (local indices via `local`).
    Dense { classes: Vec<ClassIdx>, edges: Vec<u32> },
    /// Every 2-cycle `(e, reverse of e)`.
    TwoCycles(Vec<(u32, u32)>),
}

#[derive(Debug, Clone)]
struct Component {
    classes: Vec<ClassIdx>,
    cyclic: bool,
    penalty: Option<Penalty>,
}

/// The graph structure of the relaxation, built once per e-graph.
#[derive(Debug)]
pub struct Relaxation {
    num_nodes: usize,
    num_classes: usize,
    node_class: Vec<ClassIdx>,
    class_start: Vec<u32>,
    class_nodes: Vec<NodeIdx>,
    is_root: Vec<bool>,
    edge_parent: Vec<ClassIdx>,
    edge_child: Vec<ClassIdx>,
    edge_node_start: Vec<u32>,
    edge_nodes: Vec<NodeIdx>,
    in_start: Vec<u32>,
    in_edges: Vec<u32>,
    out_start: Vec<u32>,
    out_edges: Vec<u32>,
    components: Vec<Component>,
    component_of: Vec<u32>,
    /// Edges between two classes of one cyclic component (the only ones
    /// the penalty depends on), and each edge's place in that list
    /// (`u32::MAX` for the others): the penalty's derivative is stored
    /// for these alone.
    penalty_edges: Vec<u32>,
    penalty_slot: Vec<u32>,
    combine: Combine,
    iteration: Iteration,
    /// Cycles met by decoding in large components, as class-edge lists.
    met_cycles: std::sync::RwLock<MetCycles>,
    /// Buffers the passes give back for the next step to reuse.
    spare: std::sync::Mutex<Vec<Vec<f64>>>,
}

/// At most this many spare buffers are kept.
const MAX_SPARE_BUFFERS: usize = 64;

#[derive(Debug, Default)]
struct MetCycles {
    cycles: Vec<Vec<u32>>,
    seen: std::collections::HashSet<Vec<u32>>,
}

/// At most this many met cycles are remembered.
pub const MAX_MET_CYCLES: usize = 20_000;

/// Everything the backward pass needs from a forward pass.
#[derive(Debug, Clone)]
pub struct Forward {
    /// Batch width (seeds).
    pub width: usize,
    /// Per-class softmax `[nodes, width]`.
    pub q: Vec<f64>,
    /// Class probabilities `[classes, width]`.
    pub class_prob: Vec<f64>,
    /// Node probabilities `[nodes, width]`.
    pub node_prob: Vec<f64>,
    /// Acyclicity penalty per seed `[width]`.
    pub penalty: Vec<f64>,
    /// Largest number of sweeps any cyclic component needed.
    pub sweeps: usize,
    /// Class edges the pass visited: each edge into an acyclic class once,
    /// each edge into a cyclic component's class once per sweep and once
    /// more for the local derivatives. [`Relaxation::num_edges`] on a graph
    /// without cycles; up to `max_sweeps + 1` times it on one cyclic
    /// component.
    pub edge_visits: u64,
    w: Vec<f64>,
    dfdt: Vec<f64>,
    /// The penalty's derivative by `t_e`, `[penalty edges, width]`.
    dhdt: Vec<f64>,
}

/// The acyclicity penalty of a cyclic component with `classes` and the
/// class edges `internal` among them: one 2-cycle for two classes, the
/// dense matrix exponential up to [`DENSE_PENALTY_MAX`] classes, and its
/// 2-cycles alone beyond.
fn component_penalty(
    classes: &[ClassIdx],
    internal: Vec<u32>,
    edge_parent: &[ClassIdx],
    edge_child: &[ClassIdx],
) -> Penalty {
    let find = |p: ClassIdx, c: ClassIdx| {
        internal.iter().copied().find(|&e| edge_parent[e as usize] == p && edge_child[e as usize] == c)
    };
    if classes.len() == 2 {
        let a = find(classes[0], classes[1]).expect("2-class component has both edges");
        let b = find(classes[1], classes[0]).expect("2-class component has both edges");
        Penalty::Pair(a, b)
    } else if classes.len() <= DENSE_PENALTY_MAX {
        Penalty::Dense { classes: classes.to_vec(), edges: internal }
    } else {
        let mut by_pair: std::collections::HashMap<(ClassIdx, ClassIdx), u32> = std::collections::HashMap::new();
        for &e in &internal {
            by_pair.insert((edge_parent[e as usize], edge_child[e as usize]), e);
        }
        let mut cycles = Vec::new();
        for &e in &internal {
            let (p, c) = (edge_parent[e as usize], edge_child[e as usize]);
            if p < c {
                if let Some(&r) = by_pair.get(&(c, p)) {
                    cycles.push((e, r));
                }
            }
        }
        Penalty::TwoCycles(cycles)
    }
}

/// The edges between two classes of one cyclic component, and each edge's
/// place among them (`u32::MAX` for every other edge).
fn penalty_edges(
    components: &[Component],
    sccs: &Sccs,
    edge_parent: &[ClassIdx],
    edge_child: &[ClassIdx],
) -> (Vec<u32>, Vec<u32>) {
    let mut slot = vec![u32::MAX; edge_parent.len()];
    let mut edges = Vec::new();
    for (e, (p, c)) in edge_parent.iter().zip(edge_child).enumerate() {
        let (p, c) = (sccs.component_of[p.index()], sccs.component_of[c.index()]);
        if p == c && components[p as usize].cyclic {
            slot[e] = edges.len() as u32;
            edges.push(e as u32);
        }
    }
    (edges, slot)
}

impl Relaxation {
    /// Builds the relaxation of `g` (assumed preprocessed: no self-loop
    /// nodes) with components `sccs`.
    pub fn new(g: &EGraph, sccs: &Sccs, combine: Combine, iteration: Iteration) -> Self {
        let nc = g.num_classes();
        let nn = g.num_nodes();
        let mut class_start = vec![0u32];
        let mut class_nodes = Vec::with_capacity(nn);
        for c in ClassIdx::range(nc) {
            class_nodes.extend_from_slice(g.class_nodes(c));
            class_start.push(class_nodes.len() as u32);
        }
        let mut is_root = vec![false; nc];
        for &r in g.roots() {
            is_root[r.index()] = true;
        }
        // Class edges (p, c), each with the nodes of p that have child c.
        let mut pairs: Vec<(ClassIdx, ClassIdx, NodeIdx)> = Vec::new();
        for n in NodeIdx::range(nn) {
            let mut kids = g.children(n).to_vec();
            kids.sort_unstable();
            kids.dedup();
            pairs.extend(kids.into_iter().map(|k| (g.class_of(n), k, n)));
        }
        pairs.sort_unstable();
        let mut edge_parent = Vec::new();
        let mut edge_child = Vec::new();
        let mut edge_node_start = vec![0u32];
        let mut edge_nodes = Vec::with_capacity(pairs.len());
        for (i, &(p, c, n)) in pairs.iter().enumerate() {
            if i > 0 && (pairs[i - 1].0, pairs[i - 1].1) != (p, c) {
                edge_node_start.push(edge_nodes.len() as u32);
            }
            if i == 0 || (pairs[i - 1].0, pairs[i - 1].1) != (p, c) {
                edge_parent.push(p);
                edge_child.push(c);
            }
            edge_nodes.push(n);
        }
        edge_node_start.push(edge_nodes.len() as u32);
        let ne = edge_parent.len();
        let (in_start, in_edges) =
            crate::egraph::csr_from_pairs(nc, (0..ne as u32).map(|e| (edge_child[e as usize].index(), e)));
        let (out_start, out_edges) =
            crate::egraph::csr_from_pairs(nc, (0..ne as u32).map(|e| (edge_parent[e as usize].index(), e)));
        let mut components = Vec::with_capacity(sccs.len());
        for i in 0..sccs.len() {
            let classes = sccs.members(i).to_vec();
            let cyclic = classes.len() > 1;
            let penalty = cyclic.then(|| {
                let internal: Vec<u32> = classes
                    .iter()
                    .flat_map(|&c| in_edges[in_start[c.index()] as usize..in_start[c.index() + 1] as usize].iter())
                    .copied()
                    .filter(|&e| sccs.component_of[(edge_parent[e as usize]).index()] as usize == i)
                    .collect();
                component_penalty(&classes, internal, &edge_parent, &edge_child)
            });
            let classes = if cyclic {
                let children = |c: ClassIdx| -> Vec<ClassIdx> {
                    out_edges[out_start[c.index()] as usize..out_start[c.index() + 1] as usize]
                        .iter()
                        .map(|&e| edge_child[e as usize])
                        .collect()
                };
                let has_outside_parent = |c: ClassIdx| {
                    in_edges[in_start[c.index()] as usize..in_start[c.index() + 1] as usize]
                        .iter()
                        .any(|&e| sccs.component_of[(edge_parent[e as usize]).index()] as usize != i)
                };
                sweep_order(&classes, i, sccs, &is_root, children, has_outside_parent)
            } else {
                classes
            };
            components.push(Component { classes, cyclic, penalty });
        }
        let (penalty_edges, penalty_slot) = penalty_edges(&components, sccs, &edge_parent, &edge_child);
        Relaxation {
            num_nodes: nn,
            num_classes: nc,
            node_class: NodeIdx::range(nn).map(|n| g.class_of(n)).collect(),
            class_start,
            class_nodes,
            is_root,
            edge_parent,
            edge_child,
            edge_node_start,
            edge_nodes,
            in_start,
            in_edges,
            out_start,
            out_edges,
            components,
            component_of: sccs.component_of.clone(),
            penalty_edges,
            penalty_slot,
            combine,
            iteration,
            met_cycles: Default::default(),
            spare: Default::default(),
        }
    }

    /// Number of nodes (rows of the score and probability buffers).
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }
    /// Number of class edges.
    pub fn num_edges(&self) -> usize {
        self.edge_parent.len()
    }

    /// `len` zeros, in a buffer an earlier pass gave back where one is
    /// large enough. Every step needs the same large buffers on its worker
    /// threads, whose allocator arenas tend to give such memory back to the
    /// system and map it again: page faults and, on several cores, TLB
    /// shootdowns each step. Reused buffers avoid both.
    pub(crate) fn zeroed(&self, len: usize) -> Vec<f64> {
        let reused = self.spare.lock().ok().and_then(|mut spare| {
            let fit = (0..spare.len()).filter(|&i| spare[i].capacity() >= len).min_by_key(|&i| spare[i].capacity())?;
            Some(spare.swap_remove(fit))
        });
        let mut buffer = reused.unwrap_or_default();
        buffer.clear();
        buffer.resize(len, 0.0);
        buffer
    }

    /// Gives `buffers` back for [`Relaxation::zeroed`] to reuse.
    pub(crate) fn give_back(&self, buffers: impl IntoIterator<Item = Vec<f64>>) {
        if let Ok(mut spare) = self.spare.lock() {
            for b in buffers {
                if spare.len() < MAX_SPARE_BUFFERS && b.capacity() > 0 {
                    spare.push(b);
                }
            }
        }
    }

    /// Gives the buffers of a forward pass back once its backward is done.
    pub(crate) fn recycle(&self, fwd: Forward) {
        let Forward { q, class_prob, node_prob, w, dfdt, dhdt, .. } = fwd;
        self.give_back([q, class_prob, node_prob, w, dfdt, dhdt]);
    }

    fn class_nodes(&self, c: usize) -> &[NodeIdx] {
        &self.class_nodes[self.class_start[c] as usize..self.class_start[c + 1] as usize]
    }
    fn in_edges(&self, c: usize) -> &[u32] {
        &self.in_edges[self.in_start[c] as usize..self.in_start[c + 1] as usize]
    }
    fn out_edges(&self, c: usize) -> &[u32] {
        &self.out_edges[self.out_start[c] as usize..self.out_start[c + 1] as usize]
    }
    fn edge_nodes(&self, e: usize) -> &[NodeIdx] {
        &self.edge_nodes[self.edge_node_start[e] as usize..self.edge_node_start[e + 1] as usize]
    }
}
