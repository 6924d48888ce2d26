//! The operator-pair features of node probabilities as one custom Candle
//! op with a hand-written backward.

use candle_core::{DType, Result, Tensor};
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

fn cpu_values(storage: &candle_core::CpuStorage, layout: &candle_core::Layout) -> Result<Vec<f64>> {
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg("pair features need contiguous input".into()))?;
    Ok(match storage {
        candle_core::CpuStorage::F64(v) => v[start..end].to_vec(),
        candle_core::CpuStorage::F32(v) => v[start..end].iter().map(|&x| x as f64).collect(),
        _ => candle_core::bail!("pair features need f32 or f64 probabilities"),
    })
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
        let p = cpu_values(storage, layout)?;
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
