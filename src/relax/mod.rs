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

pub mod expm;
pub mod op;

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::scc::Sccs;
use serde::{Deserialize, Serialize};

/// Cyclic components up to this many classes get the exact penalty.
pub const DENSE_PENALTY_MAX: usize = 32;

/// How a class's incoming edge probabilities combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
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
fn sweep_order(
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
        if is_root[c as usize] || has_outside_parent(c) {
            seen.insert(c);
            queue.push_back(c);
        }
    }
    loop {
        while let Some(c) = queue.pop_front() {
            order.push(c);
            for k in children(c) {
                if sccs.component_of[k as usize] as usize == comp && seen.insert(k) {
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
    combine: Combine,
    iteration: Iteration,
    /// Cycles met by decoding in large components, as class-edge lists.
    met_cycles: std::sync::RwLock<MetCycles>,
}

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
    w: Vec<f64>,
    dfdt: Vec<f64>,
    dhdt: Vec<f64>,
}

impl Relaxation {
    /// Builds the relaxation of `g` (assumed preprocessed: no self-loop
    /// nodes) with components `sccs`.
    pub fn new(g: &EGraph, sccs: &Sccs, combine: Combine, iteration: Iteration) -> Self {
        let nc = g.num_classes();
        let nn = g.num_nodes();
        let mut class_start = vec![0u32];
        let mut class_nodes = Vec::with_capacity(nn);
        for c in 0..nc as ClassIdx {
            class_nodes.extend_from_slice(g.class_nodes(c));
            class_start.push(class_nodes.len() as u32);
        }
        let mut is_root = vec![false; nc];
        for &r in g.roots() {
            is_root[r as usize] = true;
        }
        // Class edges (p, c), each with the nodes of p that have child c.
        let mut pairs: Vec<(ClassIdx, ClassIdx, NodeIdx)> = Vec::new();
        for n in 0..nn as NodeIdx {
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
            crate::egraph::csr_from_pairs(nc, (0..ne as u32).map(|e| (edge_child[e as usize], e)));
        let (out_start, out_edges) =
            crate::egraph::csr_from_pairs(nc, (0..ne as u32).map(|e| (edge_parent[e as usize], e)));
        let mut components = Vec::with_capacity(sccs.len());
        for i in 0..sccs.len() {
            let classes = sccs.members(i).to_vec();
            let cyclic = classes.len() > 1;
            let penalty = cyclic.then(|| {
                let internal: Vec<u32> = classes
                    .iter()
                    .flat_map(|&c| in_edges[in_start[c as usize] as usize..in_start[c as usize + 1] as usize].iter())
                    .copied()
                    .filter(|&e| sccs.component_of[edge_parent[e as usize] as usize] as usize == i)
                    .collect();
                let find = |p: ClassIdx, c: ClassIdx| {
                    internal.iter().copied().find(|&e| edge_parent[e as usize] == p && edge_child[e as usize] == c)
                };
                if classes.len() == 2 {
                    let a = find(classes[0], classes[1]).expect("2-class component has both edges");
                    let b = find(classes[1], classes[0]).expect("2-class component has both edges");
                    Penalty::Pair(a, b)
                } else if classes.len() <= DENSE_PENALTY_MAX {
                    Penalty::Dense { classes: classes.clone(), edges: internal }
                } else {
                    let mut by_pair: std::collections::HashMap<(ClassIdx, ClassIdx), u32> =
                        std::collections::HashMap::new();
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
            });
            let classes = if cyclic {
                let children = |c: ClassIdx| -> Vec<ClassIdx> {
                    out_edges[out_start[c as usize] as usize..out_start[c as usize + 1] as usize]
                        .iter()
                        .map(|&e| edge_child[e as usize])
                        .collect()
                };
                let has_outside_parent = |c: ClassIdx| {
                    in_edges[in_start[c as usize] as usize..in_start[c as usize + 1] as usize]
                        .iter()
                        .any(|&e| sccs.component_of[edge_parent[e as usize] as usize] as usize != i)
                };
                sweep_order(&classes, i, sccs, &is_root, children, has_outside_parent)
            } else {
                classes
            };
            components.push(Component { classes, cyclic, penalty });
        }
        Relaxation {
            num_nodes: nn,
            num_classes: nc,
            node_class: (0..nn as NodeIdx).map(|n| g.class_of(n)).collect(),
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
            combine,
            iteration,
            met_cycles: Default::default(),
        }
    }

    /// Adds the cycle through `classes` (in order, closing back to the
    /// first) to the penalty, if it lies in a component too large for the
    /// exact penalty and is not known yet. Returns whether it was added.
    pub fn remember_cycle(&self, classes: &[ClassIdx]) -> bool {
        if classes.len() < 3 {
            return false; // 2-cycles are always in the penalty
        }
        let comp = |c: ClassIdx| self.component_of[c as usize];
        let first = comp(classes[0]);
        if classes.iter().any(|&c| comp(c) != first)
            || self.components[first as usize].classes.len() <= DENSE_PENALTY_MAX
        {
            return false;
        }
        let mut edges = Vec::with_capacity(classes.len());
        for (i, &p) in classes.iter().enumerate() {
            let c = classes[(i + 1) % classes.len()];
            match self.out_edges(p as usize).iter().find(|&&e| self.edge_child[e as usize] == c) {
                Some(&e) => edges.push(e),
                None => return false,
            }
        }
        // Canonical rotation so the same cycle is stored once.
        let start = (0..edges.len()).min_by_key(|&i| edges[i]).unwrap_or(0);
        edges.rotate_left(start);
        let Ok(mut met) = self.met_cycles.write() else { return false };
        if met.cycles.len() >= MAX_MET_CYCLES || !met.seen.insert(edges.clone()) {
            return false;
        }
        met.cycles.push(edges);
        true
    }

    /// Number of cycles remembered by [`Relaxation::remember_cycle`].
    pub fn met_cycle_count(&self) -> usize {
        self.met_cycles.read().map_or(0, |m| m.cycles.len())
    }

    /// Number of nodes (rows of the score and probability buffers).
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }
    /// Number of class edges.
    pub fn num_edges(&self) -> usize {
        self.edge_parent.len()
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

    /// Runs the forward pass on scores `[nodes, width]`.
    pub fn forward(&self, scores: &[f64], width: usize) -> Forward {
        self.forward_columns(scores, width, 0)
    }

    /// Like [`Relaxation::forward`], for columns `first_column..` of a
    /// larger batch (this decides each column's rule under
    /// [`Combine::Mixed`]).
    pub fn forward_columns(&self, scores: &[f64], width: usize, first_column: usize) -> Forward {
        let (nn, nc, ne, w_) = (self.num_nodes, self.num_classes, self.num_edges(), width);
        assert_eq!(scores.len(), nn * w_, "scores must be [nodes, width]");
        let mut q = vec![0.0; nn * w_];
        // Per-class softmax, max-subtracted per seed.
        let mut mx = vec![0.0; w_];
        let mut sum = vec![0.0; w_];
        for c in 0..nc {
            let nodes = self.class_nodes(c);
            mx.fill(f64::NEG_INFINITY);
            for &n in nodes {
                for (m, &s) in mx.iter_mut().zip(&scores[n as usize * w_..(n as usize + 1) * w_]) {
                    *m = m.max(s);
                }
            }
            sum.fill(0.0);
            for &n in nodes {
                let row = n as usize * w_;
                for b in 0..w_ {
                    let e = (scores[row + b] - mx[b]).exp();
                    q[row + b] = e;
                    sum[b] += e;
                }
            }
            for &n in nodes {
                let row = n as usize * w_;
                for b in 0..w_ {
                    q[row + b] /= sum[b];
                }
            }
        }
        // Edge weights: w_e = sum of q over the parent's nodes with this child.
        let mut w = vec![0.0; ne * w_];
        for e in 0..ne {
            let dst = &mut w[e * w_..(e + 1) * w_];
            for &n in self.edge_nodes(e) {
                for (d, &v) in dst.iter_mut().zip(&q[n as usize * w_..(n as usize + 1) * w_]) {
                    *d += v;
                }
            }
        }
        let mut class_prob = vec![0.0; nc * w_];
        let mut dfdt = vec![0.0; ne * w_];
        let (wi, wc) = (0..w_).map(|b| self.combine.weights(first_column + b)).unzip();
        let mut scratch = Scratch { t: Vec::new(), wi, wc };
        let mut probe = vec![0.0; w_];
        let mut sweeps = 0;
        for comp in &self.components {
            if !comp.cyclic {
                // Parents are final: value and local derivatives in one pass.
                let c = comp.classes[0] as usize;
                self.update_class_into(c, &w, &class_prob, &mut probe, Some(&mut dfdt), &mut scratch, w_);
                class_prob[c * w_..(c + 1) * w_].copy_from_slice(&probe);
                continue;
            }
            for &c in &comp.classes {
                class_prob[c as usize * w_..(c as usize + 1) * w_].fill(0.0);
            }
            let mut n_sweeps = 0;
            loop {
                n_sweeps += 1;
                let mut change = 0.0f64;
                for &c in &comp.classes {
                    change =
                        change.max(self.update_class(c as usize, &w, &mut class_prob, &mut probe, &mut scratch, w_));
                }
                if change <= self.iteration.tolerance || n_sweeps >= self.iteration.max_sweeps {
                    break;
                }
            }
            sweeps = sweeps.max(n_sweeps);
            // Local derivatives dP(c)/dt_e at the final probabilities.
            for &c in &comp.classes {
                self.update_class_into(c as usize, &w, &class_prob, &mut probe, Some(&mut dfdt), &mut scratch, w_);
            }
        }
        let mut node_prob = vec![0.0; nn * w_];
        for n in 0..nn {
            let c = self.node_class[n] as usize;
            for b in 0..w_ {
                node_prob[n * w_ + b] = class_prob[c * w_ + b] * q[n * w_ + b];
            }
        }
        let (penalty, dhdt) = self.penalty(&w, &class_prob, w_);
        Forward { width, q, class_prob, node_prob, penalty, sweeps, w, dfdt, dhdt }
    }

    /// Recomputes `P(c)` in place from its incoming edges; returns the
    /// largest change. Roots stay at 1.
    fn update_class(
        &self,
        c: usize,
        w: &[f64],
        class_prob: &mut [f64],
        out: &mut [f64],
        scratch: &mut Scratch,
        width: usize,
    ) -> f64 {
        self.update_class_into(c, w, class_prob, out, None, scratch, width);
        let row = &mut class_prob[c * width..(c + 1) * width];
        let mut change = 0.0f64;
        for (r, &o) in row.iter_mut().zip(out.iter()) {
            change = change.max((o - *r).abs());
            *r = o;
        }
        change
    }

    /// Computes the combined probability of class `c` into `out`, and,
    /// when `dfdt` is given, the derivative with respect to each incoming
    /// edge probability.
    #[allow(clippy::too_many_arguments)]
    fn update_class_into(
        &self,
        c: usize,
        w: &[f64],
        class_prob: &[f64],
        out: &mut [f64],
        dfdt: Option<&mut [f64]>,
        scratch: &mut Scratch,
        width: usize,
    ) {
        let edges = self.in_edges(c);
        if self.is_root[c] || edges.is_empty() {
            out.fill(if self.is_root[c] { 1.0 } else { 0.0 });
            if let Some(d) = dfdt {
                for &e in edges {
                    d[e as usize * width..(e as usize + 1) * width].fill(0.0);
                }
            }
            return;
        }
        let k = edges.len();
        // t values, [k, width].
        let Scratch { t: scratch, wi, wc } = scratch;
        scratch.clear();
        scratch.resize(k * width, 0.0);
        for (i, &e) in edges.iter().enumerate() {
            let p = self.edge_parent[e as usize] as usize;
            for b in 0..width {
                scratch[i * width + b] = (class_prob[p * width + b] * w[e as usize * width + b]).clamp(0.0, 1.0);
            }
        }
        let t = &scratch[..];
        out.fill(0.0);
        let mut dfdt = dfdt;
        if let Some(d) = dfdt.as_deref_mut() {
            for &e in edges {
                d[e as usize * width..(e as usize + 1) * width].fill(0.0);
            }
        }
        if wi.iter().any(|&x| x > 0.0) {
            // 1 - prod(1 - t); derivative prod over the others, by prefix and suffix products.
            for b in 0..width {
                let mut prod = 1.0;
                for i in 0..k {
                    prod *= 1.0 - t[i * width + b];
                }
                out[b] += wi[b] * (1.0 - prod);
            }
            if let Some(d) = dfdt.as_deref_mut() {
                for b in 0..width {
                    let mut prefix = 1.0;
                    for (i, &e) in edges.iter().enumerate() {
                        d[e as usize * width + b] = prefix; // suffix applied below
                        prefix *= 1.0 - t[i * width + b];
                    }
                    let mut suffix = 1.0;
                    for (i, &e) in edges.iter().enumerate().rev() {
                        d[e as usize * width + b] *= suffix * wi[b];
                        suffix *= 1.0 - t[i * width + b];
                    }
                }
            }
        }
        if wc.iter().any(|&x| x > 0.0) {
            for b in 0..width {
                if wc[b] == 0.0 {
                    continue;
                }
                let mut best = 0;
                for i in 1..k {
                    if t[i * width + b] > t[best * width + b] {
                        best = i;
                    }
                }
                out[b] += wc[b] * t[best * width + b];
                if let Some(d) = dfdt.as_deref_mut() {
                    d[edges[best] as usize * width + b] += wc[b];
                }
            }
        }
    }

    /// The penalty per seed and its derivative with respect to every edge
    /// probability `t_e` (zero outside cyclic components).
    fn penalty(&self, w: &[f64], class_prob: &[f64], width: usize) -> (Vec<f64>, Vec<f64>) {
        let mut h = vec![0.0; width];
        let mut dhdt = vec![0.0; self.num_edges() * width];
        let t = |e: u32, b: usize| {
            class_prob[self.edge_parent[e as usize] as usize * width + b] * w[e as usize * width + b]
        };
        for comp in &self.components {
            match &comp.penalty {
                None => {}
                Some(Penalty::Pair(a, r)) => {
                    for b in 0..width {
                        let (ta, tr) = (t(*a, b), t(*r, b));
                        h[b] += ta * tr;
                        dhdt[*a as usize * width + b] = tr;
                        dhdt[*r as usize * width + b] = ta;
                    }
                }
                Some(Penalty::TwoCycles(pairs)) => {
                    for &(a, r) in pairs {
                        for b in 0..width {
                            let (ta, tr) = (t(a, b), t(r, b));
                            h[b] += ta * tr;
                            dhdt[a as usize * width + b] += tr;
                            dhdt[r as usize * width + b] += ta;
                        }
                    }
                }
                Some(Penalty::Dense { classes, edges }) => {
                    let d = classes.len();
                    let local = |c: ClassIdx| classes.binary_search(&c).expect("member");
                    for b in 0..width {
                        let mut a = vec![0.0; d * d];
                        for &e in edges {
                            let (i, j) = (local(self.edge_parent[e as usize]), local(self.edge_child[e as usize]));
                            a[i * d + j] = t(e, b);
                        }
                        let ex = expm::expm(&a, d);
                        h[b] += (0..d).map(|i| ex[i * d + i]).sum::<f64>() - d as f64;
                        // d trace(exp A) / dA_ij = exp(A)_ji.
                        for &e in edges {
                            let (i, j) = (local(self.edge_parent[e as usize]), local(self.edge_child[e as usize]));
                            dhdt[e as usize * width + b] = ex[j * d + i];
                        }
                    }
                }
            }
        }
        if let Ok(met) = self.met_cycles.read() {
            let mut prefix = Vec::new();
            for cycle in &met.cycles {
                for b in 0..width {
                    // product of t over the cycle; derivative by prefix/suffix products
                    prefix.clear();
                    let mut acc = 1.0;
                    for &e in cycle {
                        prefix.push(acc);
                        acc *= t(e, b);
                    }
                    h[b] += acc;
                    let mut suffix = 1.0;
                    for (i, &e) in cycle.iter().enumerate().rev() {
                        dhdt[e as usize * width + b] += prefix[i] * suffix;
                        suffix *= t(e, b);
                    }
                }
            }
        }
        (h, dhdt)
    }

    /// Gradient of a scalar loss with respect to the scores, given its
    /// gradient with respect to the node probabilities (`[nodes, width]`)
    /// and to the penalty (`[width]`).
    pub fn backward(&self, fwd: &Forward, grad_node_prob: &[f64], grad_penalty: &[f64]) -> Vec<f64> {
        let (nn, nc, ne, w_) = (self.num_nodes, self.num_classes, self.num_edges(), fwd.width);
        let (q, cp, w, dfdt) = (&fwd.q, &fwd.class_prob, &fwd.w, &fwd.dfdt);
        // Direct terms: dL/dq (through node_prob) and dL/dP(c).
        let mut gq = vec![0.0; nn * w_];
        let mut direct = vec![0.0; nc * w_];
        for n in 0..nn {
            let c = self.node_class[n] as usize;
            for b in 0..w_ {
                let g = grad_node_prob[n * w_ + b];
                gq[n * w_ + b] = g * cp[c * w_ + b];
                direct[c * w_ + b] += g * q[n * w_ + b];
            }
        }
        // Penalty: t_e = P(parent) * w_e.
        let mut gw = vec![0.0; ne * w_];
        for e in 0..ne {
            let p = self.edge_parent[e] as usize;
            for b in 0..w_ {
                let g = grad_penalty[b] * fwd.dhdt[e * w_ + b];
                if g != 0.0 {
                    direct[p * w_ + b] += g * w[e * w_ + b];
                    gw[e * w_ + b] += g * cp[p * w_ + b];
                }
            }
        }
        // Adjoint sweep, children first.
        let mut adj = vec![0.0; nc * w_];
        let mut row = vec![0.0; w_];
        let accumulate = |c: usize, adj: &[f64], row: &mut [f64]| {
            row.copy_from_slice(&direct[c * w_..(c + 1) * w_]);
            for &e in self.out_edges(c) {
                let k = self.edge_child[e as usize] as usize;
                for b in 0..w_ {
                    row[b] += adj[k * w_ + b] * dfdt[e as usize * w_ + b] * w[e as usize * w_ + b];
                }
            }
        };
        for comp in self.components.iter().rev() {
            if !comp.cyclic {
                let c = comp.classes[0] as usize;
                accumulate(c, &adj, &mut row);
                adj[c * w_..(c + 1) * w_].copy_from_slice(&row);
                continue;
            }
            // Gauss-Seidel on a = direct + J^T a, everything outside fixed,
            // against the forward sweep order (adjoints flow child to parent).
            let members: Vec<ClassIdx> = comp.classes.iter().rev().copied().collect();
            let mut sweeps = 0;
            loop {
                sweeps += 1;
                let mut change = 0.0f64;
                for &c in &members {
                    let c = c as usize;
                    accumulate(c, &adj, &mut row);
                    for b in 0..w_ {
                        change = change.max((row[b] - adj[c * w_ + b]).abs());
                    }
                    adj[c * w_..(c + 1) * w_].copy_from_slice(&row);
                }
                let scale = members
                    .iter()
                    .flat_map(|&c| adj[c as usize * w_..(c as usize + 1) * w_].iter())
                    .fold(1e-30f64, |m, v| m.max(v.abs()));
                if change <= self.iteration.tolerance * scale || sweeps >= self.iteration.max_sweeps {
                    break;
                }
            }
        }
        // Edge weights receive adj(child) * dP(child)/dt * P(parent).
        for e in 0..ne {
            let (p, k) = (self.edge_parent[e] as usize, self.edge_child[e] as usize);
            for b in 0..w_ {
                gw[e * w_ + b] += adj[k * w_ + b] * dfdt[e * w_ + b] * cp[p * w_ + b];
            }
        }
        for e in 0..ne {
            for &n in self.edge_nodes(e) {
                for b in 0..w_ {
                    gq[n as usize * w_ + b] += gw[e * w_ + b];
                }
            }
        }
        // Softmax backward per class.
        let mut gs = vec![0.0; nn * w_];
        let mut dot = vec![0.0; w_];
        for c in 0..nc {
            dot.fill(0.0);
            let nodes = self.class_nodes(c);
            for &n in nodes {
                for b in 0..w_ {
                    dot[b] += q[n as usize * w_ + b] * gq[n as usize * w_ + b];
                }
            }
            for &n in nodes {
                let i = n as usize * w_;
                for b in 0..w_ {
                    gs[i + b] = q[i + b] * (gq[i + b] - dot[b]);
                }
            }
        }
        gs
    }
}
