//! The backward sweep: the adjoint of the forward system in reverse
//! topological order (implicit differentiation inside cyclic components).

use super::*;

impl Relaxation {
    /// Gradient of a scalar loss with respect to the scores, given its
    /// gradient with respect to the node probabilities (`[nodes, width]`)
    /// and to the penalty (`[width]`).
    pub fn backward(&self, fwd: &Forward, grad_node_prob: &[f64], grad_penalty: &[f64]) -> Vec<f64> {
        let (nn, nc, ne, w_) = (self.num_nodes, self.num_classes, self.num_edges(), fwd.width);
        let (q, cp, w, dfdt) = (&fwd.q, &fwd.class_prob, &fwd.w, &fwd.dfdt);
        // Direct terms: dL/dq (through node_prob) and dL/dP(c).
        let mut gq = self.zeroed(nn * w_);
        let mut direct = self.zeroed(nc * w_);
        for n in 0..nn {
            let c = self.node_class[n].index();
            for b in 0..w_ {
                let g = grad_node_prob[n * w_ + b];
                gq[n * w_ + b] = g * cp[c * w_ + b];
                direct[c * w_ + b] += g * q[n * w_ + b];
            }
        }
        // Penalty: t_e = P(parent) * w_e.
        let mut gw = self.zeroed(ne * w_);
        for (slot, &e) in self.penalty_edges.iter().enumerate() {
            let (e, p) = (e as usize, self.edge_parent[e as usize].index());
            for b in 0..w_ {
                let g = grad_penalty[b] * fwd.dhdt[slot * w_ + b];
                if g != 0.0 {
                    direct[p * w_ + b] += g * w[e * w_ + b];
                    gw[e * w_ + b] += g * cp[p * w_ + b];
                }
            }
        }
        // Adjoint sweep, children first.
        let mut adj = self.zeroed(nc * w_);
        let mut row = vec![0.0; w_];
        let accumulate = |c: usize, adj: &[f64], row: &mut [f64]| {
            row.copy_from_slice(&direct[c * w_..(c + 1) * w_]);
            for &e in self.out_edges(c) {
                let k = (self.edge_child[e as usize]).index();
                for b in 0..w_ {
                    row[b] += adj[k * w_ + b] * dfdt[e as usize * w_ + b] * w[e as usize * w_ + b];
                }
            }
        };
        for comp in self.components.iter().rev() {
            if !comp.cyclic {
                let c = comp.classes[0].index();
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
                    let c = c.index();
                    accumulate(c, &adj, &mut row);
                    for b in 0..w_ {
                        change = change.max((row[b] - adj[c * w_ + b]).abs());
                    }
                    adj[c * w_..(c + 1) * w_].copy_from_slice(&row);
                }
                let scale = members
                    .iter()
                    .flat_map(|&c| adj[c.index() * w_..(c.index() + 1) * w_].iter())
                    .fold(1e-30f64, |m, v| m.max(v.abs()));
                if change <= self.iteration.tolerance * scale || sweeps >= self.iteration.max_sweeps {
                    break;
                }
            }
        }
        // Edge weights receive adj(child) * dP(child)/dt * P(parent).
        for e in 0..ne {
            let (p, k) = (self.edge_parent[e].index(), self.edge_child[e].index());
            for b in 0..w_ {
                gw[e * w_ + b] += adj[k * w_ + b] * dfdt[e * w_ + b] * cp[p * w_ + b];
            }
        }
        for e in 0..ne {
            for &n in self.edge_nodes(e) {
                for b in 0..w_ {
                    gq[n.index() * w_ + b] += gw[e * w_ + b];
                }
            }
        }
        let gs = self.softmax_backward(q, &gq, w_);
        self.give_back([gq, direct, gw, adj]);
        gs
    }

    /// The softmax backward per class: the gradient with respect to the
    /// scores from `gq`, the gradient with respect to the in-class
    /// probabilities `q` (`[nodes, width]`).
    fn softmax_backward(&self, q: &[f64], gq: &[f64], w_: usize) -> Vec<f64> {
        let (nn, nc) = (self.num_nodes, self.num_classes);
        let mut gs = self.zeroed(nn * w_);
        let mut dot = vec![0.0; w_];
        for c in 0..nc {
            dot.fill(0.0);
            let nodes = self.class_nodes(c);
            for &n in nodes {
                for b in 0..w_ {
                    dot[b] += q[n.index() * w_ + b] * gq[n.index() * w_ + b];
                }
            }
            for &n in nodes {
                let i = n.index() * w_;
                for b in 0..w_ {
                    gs[i + b] = q[i + b] * (gq[i + b] - dot[b]);
                }
            }
        }
        gs
    }
}
