//! The acyclicity penalty per cyclic component, and the cycles met while
//! decoding that large components add to it.

use super::*;

impl Relaxation {
    /// Adds the cycle through `classes` (in order, closing back to the
    /// first) to the penalty, if it lies in a component too large for the
    /// exact penalty and is not known yet. Returns whether it was added.
    pub fn remember_cycle(&self, classes: &[ClassIdx]) -> bool {
        if classes.len() < 3 {
            return false; // 2-cycles are always in the penalty
        }
        let comp = |c: ClassIdx| self.component_of[c.index()];
        let first = comp(classes[0]);
        if classes.iter().any(|&c| comp(c) != first)
            || self.components[first as usize].classes.len() <= DENSE_PENALTY_MAX
        {
            return false;
        }
        let mut edges = Vec::with_capacity(classes.len());
        for (i, &p) in classes.iter().enumerate() {
            let c = classes[(i + 1) % classes.len()];
            match self.out_edges(p.index()).iter().find(|&&e| self.edge_child[e as usize] == c) {
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

    /// The penalty per seed and its derivative with respect to the edge
    /// probability `t_e` of each penalty edge (`[penalty edges, width]`;
    /// the derivative is zero for every other edge).
    pub(super) fn penalty(&self, w: &[f64], class_prob: &[f64], width: usize) -> (Vec<f64>, Vec<f64>) {
        let mut h = vec![0.0; width];
        let mut dhdt = self.zeroed(self.penalty_edges.len() * width);
        let slot = |e: u32| self.penalty_slot[e as usize] as usize;
        let t = |e: u32, b: usize| {
            class_prob[(self.edge_parent[e as usize]).index() * width + b] * w[e as usize * width + b]
        };
        for comp in &self.components {
            match &comp.penalty {
                None => {}
                Some(Penalty::Pair(a, r)) => {
                    for b in 0..width {
                        let (ta, tr) = (t(*a, b), t(*r, b));
                        h[b] += ta * tr;
                        dhdt[slot(*a) * width + b] = tr;
                        dhdt[slot(*r) * width + b] = ta;
                    }
                }
                Some(Penalty::TwoCycles(pairs)) => {
                    for &(a, r) in pairs {
                        for b in 0..width {
                            let (ta, tr) = (t(a, b), t(r, b));
                            h[b] += ta * tr;
                            dhdt[slot(a) * width + b] += tr;
                            dhdt[slot(r) * width + b] += ta;
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
                            dhdt[slot(e) * width + b] = ex[j * d + i];
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
                        dhdt[slot(e) * width + b] += prefix[i] * suffix;
                        suffix *= t(e, b);
                    }
                }
            }
        }
        (h, dhdt)
    }
}
