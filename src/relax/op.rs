//! The relaxation as a Candle custom op, so any Candle expression of the
//! node probabilities (a linear cost, an MLP) can be differentiated with
//! respect to the scores.

use super::{Forward, Relaxation};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Most batch columns one worker sweeps at a time. Wider chunks leave the
/// cache: at batch 1024 on a 30k-node graph (herbie 1774, 2 threads),
/// chunks of 32 columns instead of 512 halved the forward (500 to 240 ms)
/// and cut the backward from 570 to 340 ms. Columns are independent, so
/// the chunking changes no result.
pub const MAX_CHUNK_COLUMNS: usize = 32;

/// Copies and conversions around the sweep split into tasks of at least
/// this many values: on small graphs a parallel pass costs more than it
/// saves (measured: 0.41 to 0.51 ms per step on a 400-node graph).
const MIN_PARALLEL_VALUES: usize = 1 << 16;

/// Maps scores `[nodes, batch]` to `[nodes + 1, batch]`: node
/// probabilities, then one row holding each seed's acyclicity penalty.
/// The batch is split into column chunks run in parallel, at least one per
/// worker and at most [`MAX_CHUNK_COLUMNS`] columns each. One op value
/// serves one forward/backward pair (it keeps the forward state).
pub struct RelaxOp {
    relax: Arc<Relaxation>,
    chunks: usize,
    state: Mutex<Option<Vec<Forward>>>,
    counters: Option<Arc<OpCounters>>,
}

/// What a run's steps add up across its ops: see
/// [`RelaxOp::counting`].
#[derive(Debug, Default)]
pub struct OpCounters {
    /// Bytes copied between a device and the host (both ways, forward
    /// and backward): zero on the CPU. The sweep has no device kernel
    /// yet, so on a GPU every step copies.
    pub host_bytes: AtomicU64,
    /// Class edges the forward sweeps visited, summed over the batch's
    /// column chunks (see [`Forward::edge_visits`]).
    pub edge_visits: AtomicU64,
    /// Forward passes, one per column chunk.
    pub forwards: AtomicU64,
}

impl RelaxOp {
    /// A new op over `relax`, splitting the batch into `chunks` parallel
    /// pieces (one per worker), or more where a piece would be wider than
    /// [`MAX_CHUNK_COLUMNS`].
    pub fn new(relax: Arc<Relaxation>, chunks: usize) -> Self {
        RelaxOp { relax, chunks: chunks.max(1), state: Mutex::new(None), counters: None }
    }

    /// Adds what this op does to `counters`: its host copies and its
    /// forward sweeps' edge visits.
    pub fn counting(mut self, counters: Arc<OpCounters>) -> Self {
        self.counters = Some(counters);
        self
    }

    fn count(&self, tensors_elements: usize, dtype: DType) {
        if let Some(c) = &self.counters {
            c.host_bytes.fetch_add((tensors_elements * dtype.size_in_bytes()) as u64, Ordering::Relaxed);
        }
    }

    /// Applies the op to `scores` (`[nodes, batch]`, f32 or f64; on a GPU
    /// the sweep itself runs on the host).
    pub fn apply(self, scores: &Tensor) -> Result<Tensor> {
        scores.contiguous()?.apply_op1(self)
    }

    fn ranges(&self, batch: usize) -> Vec<std::ops::Range<usize>> {
        let k = self.chunks.max(batch.div_ceil(MAX_CHUNK_COLUMNS)).min(batch).max(1);
        (0..k).map(|i| (i * batch / k)..((i + 1) * batch / k)).collect()
    }
}

/// Copies columns `range` of a `[rows, batch]` buffer into `[rows, width]`
/// (a buffer of `relax`'s, to give back).
fn gather(relax: &Relaxation, src: &[f64], rows: usize, batch: usize, range: &std::ops::Range<usize>) -> Vec<f64> {
    let width = range.len();
    let mut out = relax.zeroed(rows * width);
    for r in 0..rows {
        out[r * width..(r + 1) * width].copy_from_slice(&src[r * batch + range.start..r * batch + range.end]);
    }
    out
}

/// The `[rows, batch]` buffer whose columns `ranges[k]` are chunk `k`'s
/// rows, `row_of(k, row)` (each `ranges[k].len()` wide); rows in parallel.
fn interleave<'a>(
    rows: usize,
    batch: usize,
    ranges: &[std::ops::Range<usize>],
    row_of: impl Fn(usize, usize) -> &'a [f64] + Sync,
) -> Vec<f64> {
    let mut out = vec![0.0; rows * batch];
    let rows_per_task = (MIN_PARALLEL_VALUES / batch.max(1)).max(1);
    out.par_chunks_mut(batch.max(1)).with_min_len(rows_per_task).enumerate().for_each(|(row, dst)| {
        for (k, r) in ranges.iter().enumerate() {
            dst[r.clone()].copy_from_slice(row_of(k, row));
        }
    });
    out
}

/// `values` widened to f64, in parallel once there are enough of them.
fn widen(values: &[f32]) -> Vec<f64> {
    values.par_iter().with_min_len(MIN_PARALLEL_VALUES).map(|&x| f64::from(x)).collect()
}

/// `values` narrowed to f32, in parallel once there are enough of them.
fn narrow(values: Vec<f64>) -> Vec<f32> {
    values.into_par_iter().with_min_len(MIN_PARALLEL_VALUES).map(|x| x as f32).collect()
}

/// The values of a contiguous f32 or f64 CPU tensor as f64; `what` names
/// the input in errors (a custom op's input of another layout or dtype).
pub(crate) fn cpu_f64(storage: &CpuStorage, layout: &Layout, what: &str) -> Result<Vec<f64>> {
    let (start, end) =
        layout.contiguous_offsets().ok_or_else(|| candle_core::Error::Msg(format!("{what} must be contiguous")))?;
    Ok(match storage {
        CpuStorage::F64(v) => v[start..end].to_vec(),
        CpuStorage::F32(v) => widen(&v[start..end]),
        _ => candle_core::bail!("{what} must be f32 or f64"),
    })
}

fn from_f64(data: Vec<f64>, dtype: DType) -> Result<CpuStorage> {
    Ok(match dtype {
        DType::F64 => CpuStorage::F64(data),
        DType::F32 => CpuStorage::F32(narrow(data)),
        other => candle_core::bail!("relaxation does not support {other:?}"),
    })
}

impl CustomOp1 for RelaxOp {
    fn name(&self) -> &'static str {
        "smoothe-relaxation"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (rows, batch) = layout.shape().dims2()?;
        let nn = self.relax.num_nodes();
        if rows != nn {
            candle_core::bail!("relaxation expects [{nn}, batch] scores, got [{rows}, {batch}]");
        }
        let scores = cpu_f64(storage, layout, "relaxation input")?;
        let ranges = self.ranges(batch);
        let forwards: Vec<Forward> = ranges
            .par_iter()
            .map(|r| {
                let columns = gather(&self.relax, &scores, nn, batch, r);
                let forward = self.relax.forward_columns(&columns, r.len(), r.start);
                self.relax.give_back([columns]);
                forward
            })
            .collect();
        let out = interleave(nn + 1, batch, &ranges, |chunk, row| {
            let (f, width) = (&forwards[chunk], ranges[chunk].len());
            if row < nn {
                &f.node_prob[row * width..(row + 1) * width]
            } else {
                &f.penalty
            }
        });
        if let Some(c) = &self.counters {
            c.edge_visits.fetch_add(forwards.iter().map(|f| f.edge_visits).sum(), Ordering::Relaxed);
            c.forwards.fetch_add(forwards.len() as u64, Ordering::Relaxed);
        }
        *self.state.lock().map_err(|_| candle_core::Error::Msg("relaxation state poisoned".into()))? = Some(forwards);
        Ok((from_f64(out, storage.dtype())?, Shape::from((nn + 1, batch))))
    }

    /// On a GPU the op runs on the host: the scores come over, the CPU
    /// sweep runs, and the probabilities go back (the backward likewise).
    /// The sweep is sequential over the condensation, so no device kernel
    /// of it exists yet.
    fn cuda_fwd(
        &self,
        storage: &candle_core::CudaStorage,
        layout: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendDevice;
        let (out, shape) = self.cpu_fwd(&storage.to_cpu_storage()?, layout)?;
        self.count(layout.shape().elem_count() + shape.elem_count(), storage.dtype());
        Ok((storage.device().storage_from_cpu_storage(&out)?, shape))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let (nn, batch) = arg.dims2()?;
        if !arg.device().is_cpu() {
            self.count(grad_res.elem_count() + arg.elem_count(), arg.dtype());
        }
        // The forward state serves this one backward; its buffers go back after.
        let forwards = self
            .state
            .lock()
            .map_err(|_| candle_core::Error::Msg("relaxation state poisoned".into()))?
            .take()
            .ok_or_else(|| candle_core::Error::Msg("backward before forward (or a second backward)".into()))?;
        let grad: Vec<f64> = match grad_res.dtype() {
            DType::F32 => widen(&grad_res.flatten_all()?.to_vec1::<f32>()?),
            _ => grad_res.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?,
        };
        let ranges = self.ranges(batch);
        let parts: Vec<Vec<f64>> = forwards
            .par_iter()
            .zip(ranges.par_iter())
            .map(|(f, r)| {
                let g = gather(&self.relax, &grad, nn + 1, batch, r);
                let width = r.len();
                let scores_grad = self.relax.backward(f, &g[..nn * width], &g[nn * width..]);
                self.relax.give_back([g]);
                scores_grad
            })
            .collect();
        let out = interleave(nn, batch, &ranges, |chunk, row| {
            let width = ranges[chunk].len();
            &parts[chunk][row * width..(row + 1) * width]
        });
        self.relax.give_back(parts);
        for f in forwards {
            self.relax.recycle(f);
        }
        let t = match arg.dtype() {
            DType::F32 => Tensor::from_vec(narrow(out), (nn, batch), arg.device())?,
            dtype => Tensor::from_vec(out, (nn, batch), arg.device())?.to_dtype(dtype)?,
        };
        Ok(Some(t))
    }
}
