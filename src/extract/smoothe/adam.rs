//! Adam for one f32 variable in CPU memory, as a single fused pass.
//!
//! The same update as candle-optimisers' Adam with its default betas and
//! epsilon and no weight decay, value for value: each operation is the one
//! Candle applies (its scalar constants rounded to f32 as Candle rounds
//! them, `powf` where it calls `powf`), so a run gives bit-identical
//! results with either. The fused pass walks the parameters once instead of
//! a dozen times, each allocating a buffer their size; on large e-graphs
//! the logits are millions of values, and that was most of the step.

use candle_core::{backprop::GradStore, DType, Result, Storage, Tensor, Var};
use rayon::prelude::*;

const BETA_1: f64 = 0.9;
const BETA_2: f64 = 0.999;
const EPS: f64 = 1e-8;

/// Values per parallel task: below this a parallel pass costs more than it saves.
const MIN_TASK: usize = 1 << 15;

/// Adam state for one contiguous f32 CPU variable.
pub(super) struct FusedAdam {
    var: Var,
    lr: f64,
    m: Vec<f32>,
    v: Vec<f32>,
    /// Steps taken so far.
    t: i32,
}

impl FusedAdam {
    /// Adam over `var` with learning rate `lr`, or `None` where `var` is
    /// not an f32 variable in CPU memory (use candle-optimisers there).
    pub(super) fn new(var: &Var, lr: f64) -> Option<Self> {
        if !var.device().is_cpu() || var.dtype() != DType::F32 {
            return None;
        }
        let n = var.elem_count();
        Some(FusedAdam { var: var.clone(), lr, m: vec![0.0; n], v: vec![0.0; n], t: 0 })
    }

    /// One Adam step from the variable's gradient in `grads` (none: no step).
    pub(super) fn step(&mut self, grads: &GradStore) -> Result<()> {
        let Some(grad) = grads.get(&self.var) else { return Ok(()) };
        self.t += 1;
        let grad = grad.to_dtype(DType::F32)?.contiguous()?;
        let theta = self.var.as_tensor().contiguous()?;
        // Candle's `x * s`, `x / s` and `x + s` are `x * a + b` with f32 `a`, `b`.
        let (b1, one_minus_b1) = (BETA_1 as f32, (1.0 - BETA_1) as f32);
        let (b2, one_minus_b2) = (BETA_2 as f32, (1.0 - BETA_2) as f32);
        let t = f64::from(self.t);
        let unbias_1 = (1.0 / (1.0 - BETA_1.powf(t))) as f32;
        let unbias_2 = (1.0 / (1.0 - BETA_2.powf(t))) as f32;
        let (lr, eps) = (self.lr as f32, EPS as f32);
        // Exponents the compiler cannot see, so `powf` is the library call
        // Candle makes (a constant 2 would become `x * x`, rounded otherwise).
        let (two, half) = (std::hint::black_box(2f32), std::hint::black_box(0.5f32));
        let next = {
            let (g_storage, g_layout) = grad.storage_and_layout();
            let (t_storage, t_layout) = theta.storage_and_layout();
            let (Storage::Cpu(g_cpu), Storage::Cpu(t_cpu)) = (&*g_storage, &*t_storage) else {
                candle_core::bail!("fused Adam needs CPU tensors");
            };
            let (g0, g1) = g_layout.contiguous_offsets().expect("contiguous");
            let (t0, t1) = t_layout.contiguous_offsets().expect("contiguous");
            let (g, th) = (&g_cpu.as_slice::<f32>()?[g0..g1], &t_cpu.as_slice::<f32>()?[t0..t1]);
            let mut next = vec![0f32; th.len()];
            next.par_chunks_mut(MIN_TASK)
                .zip(self.m.par_chunks_mut(MIN_TASK))
                .zip(self.v.par_chunks_mut(MIN_TASK))
                .enumerate()
                .for_each(|(i, ((out, m), v))| {
                    let start = i * MIN_TASK;
                    for j in 0..out.len() {
                        let gj = g[start + j];
                        m[j] = (m[j] * b1 + 0.0) + (gj * one_minus_b1 + 0.0);
                        v[j] = (v[j] * b2 + 0.0) + (gj.powf(two) * one_minus_b2 + 0.0);
                        let m_hat = m[j] * unbias_1 + 0.0;
                        let v_hat = v[j] * unbias_2 + 0.0;
                        out[j] = th[start + j] - (m_hat * lr + 0.0) / (v_hat.powf(half) * 1.0 + eps);
                    }
                });
            next
        };
        self.var.set(&Tensor::from_vec(next, self.var.shape(), self.var.device())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use candle_nn::Optimizer;
    use candle_optimisers::adam::{Adam, ParamsAdam};

    /// The fused pass follows candle-optimisers' Adam bit for bit, on a loss
    /// whose gradient changes with the parameters.
    #[test]
    fn fused_adam_takes_the_same_steps_as_candle_optimisers() {
        let dev = Device::Cpu;
        let n = 100_003; // several parallel tasks and a ragged last one
        let init: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let target =
            Tensor::from_vec((0..n).map(|i| (i % 13) as f32 / 6.0 - 1.0).collect::<Vec<_>>(), n, &dev).unwrap();
        let a = Var::from_vec(init.clone(), n, &dev).unwrap();
        let b = Var::from_vec(init, n, &dev).unwrap();
        let mut fused = FusedAdam::new(&a, 0.05).unwrap();
        let loss = |v: &Var| (v.as_tensor() - &target).unwrap().sqr().unwrap().sum_all().unwrap();
        let before = loss(&a).to_scalar::<f32>().unwrap();
        let mut reference = Adam::new(vec![b.clone()], ParamsAdam { lr: 0.05, ..Default::default() }).unwrap();
        for _ in 0..25 {
            fused.step(&loss(&a).backward().unwrap()).unwrap();
            reference.step(&loss(&b).backward().unwrap()).unwrap();
        }
        let (x, y) = (a.as_tensor().to_vec1::<f32>().unwrap(), b.as_tensor().to_vec1::<f32>().unwrap());
        let worst = x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
        assert_eq!(worst, 0.0, "the fused pass should match value for value");
        // And it moved: the loss fell.
        assert!(loss(&a).to_scalar::<f32>().unwrap() < 0.5 * before);
    }
}
