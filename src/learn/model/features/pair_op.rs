//! The operator-pair features of node probabilities: one custom Candle op
//! with a hand-written backward for the CPU, and the same function from
//! Candle ops alone for other devices.

use candle_core::{DType, Device, Result, Tensor};
use std::sync::Arc;

/// The (parent node, child node, feature) entries of the pair features,
/// flattened, with what the class probabilities need.
#[derive(Default)]
pub(super) struct PairEdges {
    pub(super) parent: Vec<u32>,
    pub(super) child: Vec<u32>,
    pub(super) class: Vec<u32>,
    pub(super) feature: Vec<u32>,
    pub(super) class_of: Vec<u32>,
    pub(super) classes: usize,
    pub(super) features: usize,
}

/// Pair features `[features, batch]` of node probabilities `[nodes,
/// batch]` as plain loops, with a hand-written backward: composed Candle
/// ops over the edge list cost five times as much per SmoothE step.
pub(super) struct PairOp {
    pub(super) edges: Arc<PairEdges>,
}

/// Floor of a class probability in a denominator.
const CLASS_FLOOR: f64 = 1e-9;

impl PairOp {
    fn class_prob(&self, p: &[f64], batch: usize) -> Vec<f64> {
        let e = &self.edges;
        let mut pc = vec![0.0; e.classes * batch];
        for (n, &c) in e.class_of.iter().enumerate() {
            for b in 0..batch {
                pc[c as usize * batch + b] += p[n * batch + b];
            }
        }
        pc
    }
}

impl candle_core::CustomOp1 for PairOp {
    fn name(&self) -> &'static str {
        "smoothe-pair-features"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let (nn, batch) = layout.shape().dims2()?;
        let e = &self.edges;
        if nn != e.class_of.len() {
            candle_core::bail!("pair features expect [{}, batch] probabilities, got [{nn}, {batch}]", e.class_of.len());
        }
        let p = crate::relax::op::cpu_f64(storage, layout, "pair features' probabilities")?;
        let pc = self.class_prob(&p, batch);
        let mut out = vec![0.0; e.features * batch];
        for k in 0..e.parent.len() {
            let (n, m, c, f) = (e.parent[k] as usize, e.child[k] as usize, e.class[k] as usize, e.feature[k] as usize);
            for b in 0..batch {
                out[f * batch + b] += p[n * batch + b] * p[m * batch + b] / pc[c * batch + b].max(CLASS_FLOOR);
            }
        }
        let storage = match storage {
            candle_core::CpuStorage::F32(_) => {
                candle_core::CpuStorage::F32(out.into_iter().map(|x| x as f32).collect())
            }
            _ => candle_core::CpuStorage::F64(out),
        };
        Ok((storage, candle_core::Shape::from((e.features, batch))))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let (nn, batch) = arg.dims2()?;
        let e = &self.edges;
        let p: Vec<f64> = arg.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?;
        let g: Vec<f64> = grad_res.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?;
        let pc = self.class_prob(&p, batch);
        // 1 / P(c) (floored), and d(1 / P(c)) / dP(c) = -1 / P(c)^2 where
        // the floor is not active.
        let inv: Vec<f64> = pc.iter().map(|&x| 1.0 / x.max(CLASS_FLOOR)).collect();
        let dinv: Vec<f64> = pc.iter().zip(&inv).map(|(&x, &i)| if x > CLASS_FLOOR { -i * i } else { 0.0 }).collect();
        let mut dp = vec![0.0; nn * batch];
        let mut dpc = vec![0.0; e.classes * batch];
        let (mut to_parent, mut to_child) = (vec![0.0; batch], vec![0.0; batch]);
        let row = |i: usize| i * batch..(i + 1) * batch;
        for k in 0..e.parent.len() {
            let (n, m, c, f) = (e.parent[k] as usize, e.child[k] as usize, e.class[k] as usize, e.feature[k] as usize);
            let (pn, pm, gf) = (&p[row(n)], &p[row(m)], &g[row(f)]);
            let (iv, dv) = (&inv[row(c)], &dinv[row(c)]);
            let dc = &mut dpc[c * batch..(c + 1) * batch];
            for b in 0..batch {
                let r = gf[b];
                to_parent[b] = r * pm[b] * iv[b];
                to_child[b] = r * pn[b] * iv[b];
                dc[b] += r * pn[b] * pm[b] * dv[b];
            }
            for (d, t) in dp[n * batch..(n + 1) * batch].iter_mut().zip(&to_parent) {
                *d += t;
            }
            for (d, t) in dp[m * batch..(m + 1) * batch].iter_mut().zip(&to_child) {
                *d += t;
            }
        }
        for (n, &c) in e.class_of.iter().enumerate() {
            for b in 0..batch {
                dp[n * batch + b] += dpc[c as usize * batch + b];
            }
        }
        Ok(Some(Tensor::from_vec(dp, (nn, batch), arg.device())?.to_dtype(arg.dtype())?))
    }
}

/// The pair entries as index tensors on one device, so the features of
/// probabilities on that device need no copy to the host.
#[derive(Clone)]
pub(super) struct PairTensors {
    parent: Tensor,
    child: Tensor,
    class: Tensor,
    feature: Tensor,
    class_of: Tensor,
    classes: usize,
    features: usize,
}

impl PairTensors {
    /// Uploads the entries of `edges` to `device`.
    pub(super) fn new(edges: &PairEdges, device: &Device) -> Result<Self> {
        let ids = |v: &[u32]| Tensor::from_slice(v, v.len(), device);
        Ok(PairTensors {
            parent: ids(&edges.parent)?,
            child: ids(&edges.child)?,
            class: ids(&edges.class)?,
            feature: ids(&edges.feature)?,
            class_of: ids(&edges.class_of)?,
            classes: edges.classes,
            features: edges.features,
        })
    }

    /// The same `[features, batch]` as [`PairOp`], from gathers and
    /// `index_add` (whose backward Candle has), on the device of `p`. On
    /// the CPU the custom op is the faster of the two.
    pub(super) fn features(&self, p: &Tensor) -> Result<Tensor> {
        let batch = p.dim(1)?;
        let zeros = |rows: usize| Tensor::zeros((rows, batch), p.dtype(), p.device());
        let class_prob = zeros(self.classes)?.index_add(&self.class_of, p, 0)?;
        let inverse = class_prob.maximum(CLASS_FLOOR)?.recip()?;
        let terms = (p.index_select(&self.parent, 0)? * p.index_select(&self.child, 0)?)?;
        let terms = (terms * inverse.index_select(&self.class, 0)?)?;
        zeros(self.features)?.index_add(&self.feature, &terms, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Var;
    use rand::{Rng, SeedableRng};

    /// Random entries over `nodes` nodes: each pair's class is its child's.
    fn random_edges(rng: &mut rand::rngs::StdRng, nodes: usize, classes: usize, features: usize) -> PairEdges {
        let class_of: Vec<u32> =
            (0..nodes).map(|n| if n < classes { n as u32 } else { rng.random_range(0..classes as u32) }).collect();
        let mut e = PairEdges { class_of, classes, features, ..Default::default() };
        for _ in 0..3 * nodes {
            let (n, m) = (rng.random_range(0..nodes), rng.random_range(0..nodes));
            e.parent.push(n as u32);
            e.child.push(m as u32);
            e.class.push(e.class_of[m]);
            e.feature.push(rng.random_range(0..features as u32));
        }
        e
    }

    #[test]
    fn composed_features_equal_the_custom_op_in_value_and_gradient() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for trial in 0..5 {
            let (nodes, batch) = (20 + trial * 7, 1 + trial);
            let edges = Arc::new(random_edges(&mut rng, nodes, 6 + trial, 9));
            // Some probabilities at zero: classes whose mass is below the floor.
            let p0: Vec<f64> =
                (0..nodes * batch).map(|i| if i % 11 == 0 { 0.0 } else { rng.random_range(0.0..1.0) }).collect();
            let weights: Vec<f64> = (0..edges.features * batch).map(|_| rng.random_range(-1.0..1.0)).collect();
            let run = |composed: bool| -> (Vec<f64>, Vec<f64>) {
                let p = Var::from_vec(p0.clone(), (nodes, batch), &Device::Cpu).unwrap();
                let w = Tensor::from_vec(weights.clone(), (edges.features, batch), &Device::Cpu).unwrap();
                let out = if composed {
                    PairTensors::new(&edges, &Device::Cpu).unwrap().features(p.as_tensor()).unwrap()
                } else {
                    p.as_tensor().apply_op1(PairOp { edges: edges.clone() }).unwrap()
                };
                let grads = (&out * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let values = out.flatten_all().unwrap().to_vec1().unwrap();
                (values, grads.get(&p).unwrap().flatten_all().unwrap().to_vec1().unwrap())
            };
            let ((v_op, g_op), (v_ops, g_ops)) = (run(false), run(true));
            for (name, a, b) in [("value", &v_op, &v_ops), ("gradient", &g_op, &g_ops)] {
                let scale = a.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                for (x, y) in a.iter().zip(b) {
                    assert!((x - y).abs() <= 1e-9 * scale, "trial {trial} {name}: {x} against {y}");
                }
            }
        }
    }
}
