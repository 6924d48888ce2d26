//! Arrival time relaxed over SmoothE's node probabilities, as a Candle
//! custom op differentiable in the probabilities and in the per-op delays.
//!
//! For a class `c` with probability `P(c) = sum P(n)` over its nodes, the
//! choice given the class is `q(n) = P(n) / P(c)`, and
//! `t(c) = sum_n q(n) * a(n)`, where `a(n)` is the latest of the node's
//! terminals (path delay inside the node plus the child class's `t`). The
//! output is, per seed, the latest `t` over the roots. On a one-hot choice
//! this is exactly [`super::TimingGraph::arrival`]. The maximum is taken
//! hard: its gradient follows the latest terminal (a subgradient where two
//! tie). A class with (numerically) zero probability is not timed: no
//! picked node can use it. Inside a cyclic component the sweep is iterated
//! from zero to a fixed point (a cycle of certain choices has none: the
//! sweeps stop at a cap and the arrival is large, which pushes the
//! optimiser off the cycle); the backward solves the adjoint of the same
//! system.

use super::{Block, TimingGraph};
use crate::egraph::{ClassIdx, NodeIdx};
use crate::relax::op::cpu_f64;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

/// Below this class probability a class is not timed.
const TIMED_PROBABILITY: f64 = 1e-12;

/// The relaxed arrival-time op: `(node_prob [nodes, batch], delay [ops])
/// -> arrival [batch]`. Columns (seeds) are independent and run in
/// parallel; each stops sweeping a cyclic component once it has converged.
#[derive(Clone)]
pub struct ArrivalOp {
    timing: Arc<TimingGraph>,
    /// Relative change at which a cyclic component's sweeps stop.
    pub tolerance: f64,
    /// Most sweeps of a cyclic component.
    pub max_sweeps: usize,
    /// The forward of the last application, for its backward.
    state: Arc<Mutex<Option<Vec<Column>>>>,
}

/// One column's forward evaluation, kept for the backward.
struct Column {
    prob: Vec<f64>,
    class_prob: Vec<f64>,
    class_t: Vec<f64>,
    /// Node arrival and its latest terminal.
    node_a: Vec<f64>,
    node_arg: Vec<u32>,
    /// The latest root and its arrival.
    root: (ClassIdx, f64),
}

impl ArrivalOp {
    /// The op over `timing`, with a tolerance of 1e-9 and at most 100
    /// sweeps per cyclic component.
    pub fn new(timing: Arc<TimingGraph>) -> Self {
        ArrivalOp { timing, tolerance: 1e-9, max_sweeps: 100, state: Default::default() }
    }

    /// Arrival per seed, `[batch]`, of `node_prob` (`[nodes, batch]`, f32 or
    /// f64) under per-op delays `delay` (`[ops]`, in
    /// [`TimingGraph::ops`] order).
    pub fn apply(&self, node_prob: &Tensor, delay: &Tensor) -> Result<Tensor> {
        // A fresh state per application: the backward pairs with this forward.
        let op = ArrivalOp { state: Default::default(), ..self.clone() };
        node_prob.contiguous()?.apply_op2(&delay.contiguous()?.to_dtype(node_prob.dtype())?, op)
    }

    fn forward(&self, prob: Vec<f64>, part_delay: &[f64]) -> Column {
        let tg = &*self.timing;
        let g = &tg.graph;
        let mut col = Column {
            class_prob: g.classes().map(|c| g.class_nodes(c).iter().map(|n| prob[n.index()]).sum()).collect(),
            prob,
            class_t: vec![0.0; g.num_classes()],
            node_a: vec![0.0; g.num_nodes()],
            node_arg: vec![0; g.num_nodes()],
            root: (g.roots()[0], f64::NEG_INFINITY),
        };
        for block in &tg.blocks {
            if !block.cyclic {
                self.update_class(&mut col, part_delay, block.classes[0]);
                continue;
            }
            for _ in 0..self.max_sweeps {
                let mut changed = false;
                for &c in &block.classes {
                    changed |= self.update_class(&mut col, part_delay, c);
                }
                if !changed {
                    break;
                }
            }
        }
        for &r in g.roots() {
            if col.class_t[r.index()] > col.root.1 {
                col.root = (r, col.class_t[r.index()]);
            }
        }
        col
    }

    /// Recomputes `t(c)` and its nodes' arrivals; whether `t` moved by
    /// more than the tolerance.
    fn update_class(&self, col: &mut Column, part_delay: &[f64], c: ClassIdx) -> bool {
        let tg = &*self.timing;
        let pc = col.class_prob[c.index()];
        let mut t = 0.0;
        // An untimed class stays at 0, and the backward skips it too.
        if pc > TIMED_PROBABILITY {
            for &n in tg.graph.class_nodes(c) {
                let (a, arg) = tg.node_arrival(n, part_delay, |k| col.class_t[k.index()]);
                col.node_a[n.index()] = a;
                col.node_arg[n.index()] = arg as u32;
                t += col.prob[n.index()] / pc * a;
            }
        }
        let old = std::mem::replace(&mut col.class_t[c.index()], t);
        (t - old).abs() > self.tolerance * (1.0 + t.abs())
    }

    /// Gradients of `grad_out * arrival` with respect to the column's node
    /// probabilities and to the per-part path delays (added to `grad_part`).
    fn backward(&self, col: &Column, grad_out: f64, grad_part: &mut [f64]) -> Vec<f64> {
        let tg = &*self.timing;
        let g = &tg.graph;
        let mut lambda = vec![0.0; g.num_classes()];
        let mut grad_prob = vec![0.0; g.num_nodes()];
        lambda[col.root.0.index()] = grad_out;
        let chosen_terminal =
            |n: NodeIdx| tg.terminals(n).nth(col.node_arg[n.index()] as usize).expect("a recorded terminal");
        for (bi, block) in tg.blocks.iter().enumerate().rev() {
            if block.cyclic {
                self.solve_adjoint(col, block, &mut lambda, chosen_terminal);
            }
            for &c in &block.classes {
                let (l, pc) = (lambda[c.index()], col.class_prob[c.index()]);
                if l == 0.0 || pc <= TIMED_PROBABILITY {
                    continue;
                }
                let t = col.class_t[c.index()];
                for &n in g.class_nodes(c) {
                    grad_prob[n.index()] += l * (col.node_a[n.index()] - t) / pc;
                    let weight = l * col.prob[n.index()] / pc;
                    let (part, child) = chosen_terminal(n);
                    grad_part[part] += weight;
                    // Inside a cyclic block the solve already carried it.
                    if let Some(k) = child.filter(|k| tg.class_block[k.index()] as usize != bi) {
                        lambda[k.index()] += weight;
                    }
                }
            }
        }
        grad_prob
    }

    /// Inside cyclic `block`, replaces `lambda` (the adjoint from outside
    /// parents) by the solution of `lambda = outside + J^T lambda`, where
    /// `J` carries `t(c)`'s dependence on the other members' `t`.
    fn solve_adjoint(
        &self,
        col: &Column,
        block: &Block,
        lambda: &mut [f64],
        chosen_terminal: impl Fn(NodeIdx) -> (usize, Option<ClassIdx>),
    ) {
        let tg = &*self.timing;
        let this_block = tg.class_block[block.classes[0].index()];
        let outside: Vec<f64> = block.classes.iter().map(|c| lambda[c.index()]).collect();
        for _ in 0..self.max_sweeps {
            let mut next = outside.clone();
            for &c in &block.classes {
                let (l, pc) = (lambda[c.index()], col.class_prob[c.index()]);
                if l == 0.0 || pc <= TIMED_PROBABILITY {
                    continue;
                }
                for &n in tg.graph.class_nodes(c) {
                    if let (_, Some(k)) = chosen_terminal(n) {
                        if tg.class_block[k.index()] == this_block {
                            next[tg.class_position[k.index()] as usize] += l * col.prob[n.index()] / pc;
                        }
                    }
                }
            }
            let mut changed = false;
            for (&c, new) in block.classes.iter().zip(next) {
                changed |= (new - lambda[c.index()]).abs() > self.tolerance * (1.0 + new.abs());
                lambda[c.index()] = new;
            }
            if !changed {
                break;
            }
        }
    }
}

/// Column `b` of a node-major `[rows, width]` buffer.
fn column(values: &[f64], width: usize, b: usize) -> Vec<f64> {
    values.iter().skip(b).step_by(width).copied().collect()
}

fn to_storage(data: Vec<f64>, dtype: DType) -> Result<CpuStorage> {
    Ok(match dtype {
        DType::F64 => CpuStorage::F64(data),
        DType::F32 => CpuStorage::F32(data.into_iter().map(|x| x as f32).collect()),
        other => candle_core::bail!("arrival time does not support {other:?}"),
    })
}

impl CustomOp2 for ArrivalOp {
    fn name(&self) -> &'static str {
        "smoothe-arrival"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (rows, width) = l1.shape().dims2()?;
        let (nn, ops) = (self.timing.graph.num_nodes(), self.timing.ops.len());
        if rows != nn || l2.shape().elem_count() != ops {
            candle_core::bail!(
                "arrival expects [{nn}, batch] probabilities and [{ops}] delays, got {:?} and {:?}",
                l1.shape(),
                l2.shape()
            );
        }
        let prob = cpu_f64(s1, l1, "arrival probabilities")?;
        let part_delay = self.timing.part_delays(&cpu_f64(s2, l2, "arrival delays")?);
        let columns: Vec<Column> =
            (0..width).into_par_iter().map(|b| self.forward(column(&prob, width, b), &part_delay)).collect();
        let out = columns.iter().map(|c| c.root.1).collect();
        *self.state.lock().map_err(|_| candle_core::Error::Msg("arrival state poisoned".into()))? = Some(columns);
        Ok((to_storage(out, s1.dtype())?, Shape::from(width)))
    }

    /// On a GPU the op runs on the host, like the relaxation's sweep.
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendDevice;
        let (out, shape) = self.cpu_fwd(&s1.to_cpu_storage()?, l1, &s2.to_cpu_storage()?, l2)?;
        Ok((s1.device().storage_from_cpu_storage(&out)?, shape))
    }

    fn bwd(
        &self,
        prob: &Tensor,
        delay: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (nn, width) = prob.dims2()?;
        let guard = self.state.lock().map_err(|_| candle_core::Error::Msg("arrival state poisoned".into()))?;
        let columns = guard.as_ref().ok_or_else(|| candle_core::Error::Msg("backward before forward".into()))?;
        let grad_out: Vec<f64> = grad_res.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?;
        let parts = self.timing.part_op.len();
        let per_column: Vec<(Vec<f64>, Vec<f64>)> = columns
            .par_iter()
            .zip(&grad_out)
            .map(|(col, &g)| {
                let mut grad_part = vec![0.0; parts];
                (self.backward(col, g, &mut grad_part), grad_part)
            })
            .collect();
        let mut grad_prob = vec![0.0; nn * width];
        let mut grad_part = vec![0.0; parts];
        for (b, (gp, gd)) in per_column.into_iter().enumerate() {
            for (n, v) in gp.into_iter().enumerate() {
                grad_prob[n * width + b] = v;
            }
            for (acc, v) in grad_part.iter_mut().zip(gd) {
                *acc += v;
            }
        }
        let mut grad_delay = vec![0.0; self.timing.ops.len()];
        self.timing.part_delay_backward(grad_part, &mut grad_delay);
        let grad_prob = Tensor::from_vec(grad_prob, (nn, width), prob.device())?.to_dtype(prob.dtype())?;
        let grad_delay = Tensor::from_vec(grad_delay, delay.shape(), delay.device())?.to_dtype(delay.dtype())?;
        Ok((Some(grad_prob), Some(grad_delay)))
    }
}
