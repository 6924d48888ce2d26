//! The forward sweep: node and class probabilities of a batch of score
//! columns, exact on acyclic parts and a fixed point inside cyclic components.

use super::*;

impl Relaxation {
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
        let mut q = self.zeroed(nn * w_);
        // Per-class softmax, max-subtracted per seed.
        let mut mx = vec![0.0; w_];
        let mut sum = vec![0.0; w_];
        for c in 0..nc {
            let nodes = self.class_nodes(c);
            mx.fill(f64::NEG_INFINITY);
            for &n in nodes {
                for (m, &s) in mx.iter_mut().zip(&scores[n.index() * w_..(n.index() + 1) * w_]) {
                    *m = m.max(s);
                }
            }
            sum.fill(0.0);
            for &n in nodes {
                let row = n.index() * w_;
                for b in 0..w_ {
                    let e = (scores[row + b] - mx[b]).exp();
                    q[row + b] = e;
                    sum[b] += e;
                }
            }
            for &n in nodes {
                let row = n.index() * w_;
                for b in 0..w_ {
                    q[row + b] /= sum[b];
                }
            }
        }
        // Edge weights: w_e = sum of q over the parent's nodes with this child.
        let mut w = self.zeroed(ne * w_);
        for e in 0..ne {
            let dst = &mut w[e * w_..(e + 1) * w_];
            for &n in self.edge_nodes(e) {
                for (d, &v) in dst.iter_mut().zip(&q[n.index() * w_..(n.index() + 1) * w_]) {
                    *d += v;
                }
            }
        }
        let mut class_prob = self.zeroed(nc * w_);
        let mut dfdt = self.zeroed(ne * w_);
        let (wi, wc) = (0..w_).map(|b| self.combine.weights(first_column + b)).unzip();
        let mut scratch = Scratch { t: Vec::new(), wi, wc };
        let mut probe = vec![0.0; w_];
        let mut sweeps = 0;
        let mut edge_visits = 0u64;
        for comp in &self.components {
            if !comp.cyclic {
                // Parents are final: value and local derivatives in one pass.
                let c = comp.classes[0].index();
                edge_visits += self.in_edges(c).len() as u64;
                self.update_class_into(c, &w, &class_prob, &mut probe, Some(&mut dfdt), &mut scratch, w_);
                class_prob[c * w_..(c + 1) * w_].copy_from_slice(&probe);
                continue;
            }
            for &c in &comp.classes {
                class_prob[c.index() * w_..(c.index() + 1) * w_].fill(0.0);
            }
            let mut n_sweeps = 0;
            loop {
                n_sweeps += 1;
                let mut change = 0.0f64;
                for &c in &comp.classes {
                    change =
                        change.max(self.update_class(c.index(), &w, &mut class_prob, &mut probe, &mut scratch, w_));
                }
                if change <= self.iteration.tolerance || n_sweeps >= self.iteration.max_sweeps {
                    break;
                }
            }
            sweeps = sweeps.max(n_sweeps);
            let internal: usize = comp.classes.iter().map(|c| self.in_edges(c.index()).len()).sum();
            edge_visits += (internal * (n_sweeps + 1)) as u64;
            // Local derivatives dP(c)/dt_e at the final probabilities.
            for &c in &comp.classes {
                self.update_class_into(c.index(), &w, &class_prob, &mut probe, Some(&mut dfdt), &mut scratch, w_);
            }
        }
        let mut node_prob = self.zeroed(nn * w_);
        for n in 0..nn {
            let c = self.node_class[n].index();
            for b in 0..w_ {
                node_prob[n * w_ + b] = class_prob[c * w_ + b] * q[n * w_ + b];
            }
        }
        let (penalty, dhdt) = self.penalty(&w, &class_prob, w_);
        Forward { width, q, class_prob, node_prob, penalty, sweeps, edge_visits, w, dfdt, dhdt }
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
            let p = (self.edge_parent[e as usize]).index();
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
}
