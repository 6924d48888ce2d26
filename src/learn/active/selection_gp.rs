//! A Gaussian process over the extractions of one design, for ranking the
//! active loop's candidates.
//!
//! Operator-level features cannot tell apart extractions that differ in
//! which nodes they use but not in which operators, and ABC area differs
//! between those. This process works on the
//! selection itself: its kernel is `exp(-d / ℓ)`, `d` the number of classes
//! whose choice differs (a class chosen in one and not the other counts),
//! the exponential kernel of the Hamming distance that combinatorial
//! Bayesian optimisation uses. It needs the labelled extractions to
//! predict, so it belongs to one design and one run: the loop fits it
//! afresh each round from its label log, and it never goes into a model
//! file (a frozen model holds no extraction). The length `ℓ` and the noise
//! are chosen by the log marginal likelihood over a small grid.

use crate::egraph::NodeIdx;
use crate::extraction::Extraction;
use crate::learn::model::linalg::{backward_solve, cholesky, forward_solve};
use crate::learn::model::metrics::mean_std;

/// Lengths tried, in classes.
const LENGTHS: [f64; 7] = [4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0];
/// Noise variances tried, relative to the kernel's unit variance.
const NOISES: [f64; 6] = [1e-3, 1e-2, 0.05, 0.1, 0.3, 1.0];
/// Most labels a process is fitted on: the cheapest ones, where the loop
/// searches. Fitting is cubic in them (about 0.2 s at 300, 12 s at 1200
/// labels over the length and noise grid on one core), so a loop with a
/// budget of thousands would otherwise spend minutes a round.
pub const MAX_LABELS: usize = 512;

/// A fitted process: predicts a standardised cost's mean and spread.
#[derive(Debug, Clone)]
pub struct SelectionGp {
    /// Training extractions' choices, one code per class (`u32::MAX`: none).
    rows: Vec<Vec<u32>>,
    /// `K^-1 y` for the standardised targets `y`.
    alpha: Vec<f64>,
    /// Lower Cholesky factor of `K + noise I`, row-major.
    chol: Vec<f64>,
    /// Chosen kernel length, in classes.
    pub length: f64,
    /// Chosen noise variance (standardised units).
    pub noise: f64,
    mean: f64,
    scale: f64,
}

/// The choices of `e` as one code per class.
fn codes(e: &Extraction) -> Vec<u32> {
    e.choices.iter().map(|c| c.map_or(u32::MAX, NodeIdx::raw)).collect()
}

/// Classes whose choice differs between two coded extractions.
fn hamming(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len())
}

impl SelectionGp {
    /// Fits the process to `labels` (extractions of one graph and their
    /// real costs; non-finite costs are skipped, and of more than
    /// [`MAX_LABELS`] only the cheapest are used). `None` with fewer than
    /// two usable labels or when no setting of the grid factorises.
    pub fn fit(labels: &[(&Extraction, f64)]) -> Option<SelectionGp> {
        let mut finite: Vec<&(&Extraction, f64)> = labels.iter().filter(|(_, c)| c.is_finite()).collect();
        if finite.len() > MAX_LABELS {
            finite.sort_by(|a, b| a.1.total_cmp(&b.1));
            finite.truncate(MAX_LABELS);
        }
        let used: Vec<(Vec<u32>, f64)> = finite.into_iter().map(|(e, c)| (codes(e), *c)).collect();
        let n = used.len();
        if n < 2 {
            return None;
        }
        let costs: Vec<f64> = used.iter().map(|(_, c)| *c).collect();
        let (mean, std) = mean_std(&costs);
        let scale = if std > 0.0 { std } else { 1.0 };
        let y: Vec<f64> = used.iter().map(|(_, c)| (c - mean) / scale).collect();
        let mut dist = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..i {
                let d = hamming(&used[i].0, &used[j].0) as f64;
                dist[i * n + j] = d;
                dist[j * n + i] = d;
            }
        }
        let mut best: Option<(f64, SelectionGp)> = None;
        for length in LENGTHS {
            for noise in NOISES {
                let k: Vec<f64> = (0..n * n)
                    .map(|ij| (-dist[ij] / length).exp() + if ij / n == ij % n { noise } else { 0.0 })
                    .collect();
                let Some(chol) = cholesky(k, n) else { continue };
                let alpha = backward_solve(&chol, n, &forward_solve(&chol, n, &y));
                let fit: f64 = y.iter().zip(&alpha).map(|(a, b)| a * b).sum();
                let log_det: f64 = (0..n).map(|i| chol[i * n + i].ln()).sum();
                let evidence = -0.5 * fit - log_det;
                if best.as_ref().is_none_or(|(e, _)| evidence > *e) {
                    let rows = Vec::new();
                    best = Some((evidence, SelectionGp { rows, alpha, chol, length, noise, mean, scale }));
                }
            }
        }
        let (_, mut gp) = best?;
        gp.rows = used.into_iter().map(|(r, _)| r).collect();
        Some(gp)
    }

    /// Predicted mean and spread (standard deviation of the latent cost,
    /// without the noise) of each extraction's real cost.
    pub fn predict(&self, extractions: &[Extraction]) -> Vec<(f64, f64)> {
        let n = self.rows.len();
        extractions
            .iter()
            .map(|e| {
                let c = codes(e);
                let k: Vec<f64> = self.rows.iter().map(|r| (-(hamming(&c, r) as f64) / self.length).exp()).collect();
                let mean: f64 = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
                let v = forward_solve(&self.chol, n, &k);
                let var = (1.0 - v.iter().map(|x| x * x).sum::<f64>()).max(0.0);
                (self.mean + self.scale * mean, self.scale * var.sqrt())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(choices: &[Option<u32>]) -> Extraction {
        Extraction { choices: choices.iter().map(|c| c.map(|n| NodeIdx::new(n as usize))).collect() }
    }

    #[test]
    fn predicts_near_its_labels_and_is_unsure_far_from_them() {
        // Cost grows with how many of 40 classes choose node 1 over 0.
        let label = |ones: usize| {
            let c: Vec<Option<u32>> = (0..40).map(|i| Some(u32::from(i < ones))).collect();
            (ext(&c), 100.0 + ones as f64)
        };
        let data: Vec<(Extraction, f64)> = [0, 2, 4, 6, 8, 10, 12].into_iter().map(label).collect();
        let refs: Vec<(&Extraction, f64)> = data.iter().map(|(e, c)| (e, *c)).collect();
        let gp = SelectionGp::fit(&refs).unwrap();
        let (labelled, _) = gp.predict(&[data[3].0.clone()])[0];
        assert!((labelled - 106.0).abs() < 0.5, "{labelled}");
        // Between two labels the prediction lies between their costs.
        let (between, near_spread) = gp.predict(&[label(5).0])[0];
        assert!(between > 104.0 && between < 106.0, "{between}");
        // An extraction far from every label is less certain.
        let far: Vec<Option<u32>> = (0..40).map(|i| Some(if i >= 20 { 2 } else { 0 })).collect();
        let (_, far_spread) = gp.predict(&[ext(&far)])[0];
        assert!(far_spread > near_spread, "{far_spread} vs {near_spread}");
    }

    #[test]
    fn a_long_log_is_fitted_on_its_cheapest_labels() {
        // Twice the cap: costs 0..2*MAX_LABELS, each label its own choices.
        let data: Vec<(Extraction, f64)> = (0..2 * MAX_LABELS)
            .map(|i| {
                let c: Vec<Option<u32>> = (0..12).map(|b| Some(((i >> b) & 1) as u32)).collect();
                (ext(&c), i as f64)
            })
            .collect();
        let refs: Vec<(&Extraction, f64)> = data.iter().map(|(e, c)| (e, *c)).collect();
        let gp = SelectionGp::fit(&refs).unwrap();
        assert_eq!(gp.rows.len(), MAX_LABELS);
        // The kept rows are exactly the cheapest labels' choices.
        let kept: std::collections::HashSet<&Vec<u32>> = gp.rows.iter().collect();
        let cheapest: Vec<Vec<u32>> = data[..MAX_LABELS].iter().map(|(e, _)| codes(e)).collect();
        assert!(cheapest.iter().all(|r| kept.contains(r)));
        // Its standardisation is theirs: mean (MAX_LABELS - 1) / 2.
        assert!((gp.mean - (MAX_LABELS as f64 - 1.0) / 2.0).abs() < 1e-9, "{}", gp.mean);
    }
}
