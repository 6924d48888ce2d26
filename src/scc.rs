//! Strongly connected components of the class graph (class -> child classes
//! of any of its nodes), in topological order of the condensation.

use crate::egraph::{ClassIdx, EGraph};

/// The condensation of an e-graph's class graph.
///
/// Components are numbered in topological order from the roots: every edge
/// between two different components goes from a lower to a higher number.
#[derive(Debug, Clone)]
pub struct Sccs {
    /// Component of each class.
    pub component_of: Vec<u32>,
    start: Vec<u32>,
    members: Vec<ClassIdx>,
}

impl Sccs {
    /// Computes the components with an iterative Tarjan search.
    pub fn new(g: &EGraph) -> Self {
        let n = g.num_classes();
        // Class adjacency, deduplicated.
        let mut adj_start = Vec::with_capacity(n + 1);
        let mut adj = Vec::new();
        adj_start.push(0u32);
        for c in ClassIdx::range(n) {
            let from = adj.len();
            for &node in g.class_nodes(c) {
                adj.extend_from_slice(g.children(node));
            }
            adj[from..].sort_unstable();
            let mut kept = from;
            for i in from..adj.len() {
                if i == from || adj[i] != adj[kept - 1] {
                    adj[kept] = adj[i];
                    kept += 1;
                }
            }
            adj.truncate(kept);
            adj_start.push(adj.len() as u32);
        }
        const UNSEEN: u32 = u32::MAX;
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<ClassIdx> = Vec::new();
        let mut comps_rev: Vec<Vec<ClassIdx>> = Vec::new();
        let mut next_index = 0u32;
        // Explicit DFS frames: (class, position in its adjacency).
        let mut frames: Vec<(ClassIdx, u32)> = Vec::new();
        for s in ClassIdx::range(n) {
            if index[s.index()] != UNSEEN {
                continue;
            }
            frames.push((s, adj_start[s.index()]));
            index[s.index()] = next_index;
            low[s.index()] = next_index;
            next_index += 1;
            stack.push(s);
            on_stack[s.index()] = true;
            while let Some(&(v, pos)) = frames.last() {
                if pos < adj_start[v.index() + 1] {
                    let w = adj[pos as usize];
                    if let Some(top) = frames.last_mut() {
                        top.1 += 1;
                    }
                    if index[w.index()] == UNSEEN {
                        index[w.index()] = next_index;
                        low[w.index()] = next_index;
                        next_index += 1;
                        stack.push(w);
                        on_stack[w.index()] = true;
                        frames.push((w, adj_start[w.index()]));
                    } else if on_stack[w.index()] {
                        low[v.index()] = low[v.index()].min(index[w.index()]);
                    }
                } else {
                    frames.pop();
                    if let Some(&(parent, _)) = frames.last() {
                        low[parent.index()] = low[parent.index()].min(low[v.index()]);
                    }
                    if low[v.index()] == index[v.index()] {
                        let mut comp = Vec::new();
                        loop {
                            let w = stack.pop().expect("Tarjan stack holds the component");
                            on_stack[w.index()] = false;
                            comp.push(w);
                            if w == v {
                                break;
                            }
                        }
                        comps_rev.push(comp);
                    }
                }
            }
        }
        // Tarjan emits components children-first; number them roots-first.
        let mut component_of = vec![0u32; n];
        let mut start = Vec::with_capacity(comps_rev.len() + 1);
        let mut members = Vec::with_capacity(n);
        start.push(0u32);
        for (i, comp) in comps_rev.iter().rev().enumerate() {
            let mut comp = comp.clone();
            comp.sort_unstable();
            for &c in &comp {
                component_of[c.index()] = i as u32;
            }
            members.extend(comp);
            start.push(members.len() as u32);
        }
        Sccs { component_of, start, members }
    }

    /// Number of components.
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }
    /// Whether there are no components (an empty graph).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Classes of component `i`, sorted.
    pub fn members(&self, i: usize) -> &[ClassIdx] {
        &self.members[self.start[i] as usize..self.start[i + 1] as usize]
    }
    /// Sizes of the components with more than one class (the cyclic ones,
    /// given that self-loop nodes were removed), largest first.
    pub fn cyclic_sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = (0..self.len()).map(|i| self.members(i).len()).filter(|&s| s > 1).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        sizes
    }
}
