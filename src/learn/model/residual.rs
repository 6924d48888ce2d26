//! Kernel interpolation of what the ensemble leaves unexplained.
//!
//! The oracle is deterministic and, measured on ABC mapped area, rugged:
//! extractions a few classes apart can differ by as much as distant ones,
//! so a smooth MLP over operator-level
//! features fits the broad trend and leaves a local residual. A Gaussian
//! process on the residuals of the training labels (kernel
//! `exp(-d² / 2ℓ²)`, `d` the root-mean-square distance of standardised
//! features in units of the rows' typical spacing) adds that residual back
//! near the rows it was measured at and fades to nothing away from them,
//! so the model reproduces its labels where it has them and keeps the
//! ensemble's prediction elsewhere. Its length `ℓ` and noise are chosen by
//! the closed-form leave-one-out error over a small grid; when no setting
//! predicts held-out residuals better than none at all, there is no
//! residual term. The term is differentiable in the features.

use crate::learn::model::linalg::cholesky;

/// Lengths tried, in units of the training rows' typical spacing.
const LENGTHS: [f64; 5] = [0.5, 1.0, 2.0, 4.0, 8.0];
/// Noise variances tried, relative to the kernel's unit variance.
const NOISES: [f64; 3] = [0.01, 0.1, 1.0];
/// Fewest distinct rows worth a fit.
const MIN_ROWS: usize = 5;
/// Most distinct rows fitted (the fit's time is cubic in them); beyond,
/// the model has no residual term.
pub const MAX_ROWS: usize = 2000;

/// A fitted residual term: `sum_i weights[i] * exp(-d(x, rows[i])² / 2ℓ²)`,
/// in standardised target units.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualFit {
    /// Distinct standardised training rows.
    pub rows: Vec<Vec<f64>>,
    /// Weight of each row's kernel.
    pub weights: Vec<f64>,
    /// Kernel length `ℓ`, in the feature space's raw RMS-distance units
    /// (the rows' spacing times the chosen multiple).
    pub length: f64,
    /// Leave-one-out mean squared residual with the term, relative to
    /// without it (below 1: it helps).
    pub loo_ratio: f64,
}

/// Squared RMS distance between two rows.
fn rms2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len().max(1) as f64
}

/// Fits the residual term to `residuals` (standardised target units) at
/// standardised `rows`; `spacing` is the rows' typical distance to their
/// nearest neighbour. Equal rows are merged (their residuals averaged).
/// `None` when there are too few or too many distinct rows, or when no
/// setting beats leaving the residual out under leave-one-out.
pub fn fit(rows: &[Vec<f64>], residuals: &[f64], spacing: f64) -> Option<ResidualFit> {
    let mut order: Vec<usize> = (0..rows.len()).filter(|&i| residuals[i].is_finite()).collect();
    order.sort_by(|&a, &b| {
        rows[a]
            .iter()
            .zip(&rows[b])
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut distinct: Vec<(Vec<f64>, f64, usize)> = Vec::new();
    for i in order {
        match distinct.last_mut() {
            Some((row, sum, count)) if *row == rows[i] => {
                *sum += residuals[i];
                *count += 1;
            }
            _ => distinct.push((rows[i].clone(), residuals[i], 1)),
        }
    }
    let n = distinct.len();
    if n > MAX_ROWS {
        log::warn!("{n} distinct training rows, more than {MAX_ROWS}: the model gets no residual term");
    }
    if !(MIN_ROWS..=MAX_ROWS).contains(&n) {
        return None;
    }
    let r: Vec<f64> = distinct.iter().map(|(_, s, c)| s / *c as f64).collect();
    let baseline = r.iter().map(|v| v * v).sum::<f64>();
    if baseline <= 0.0 {
        return None;
    }
    let d2: Vec<f64> = (0..n * n).map(|k| rms2(&distinct[k / n].0, &distinct[k % n].0)).collect();
    let mut best: Option<(f64, f64, Vec<f64>)> = None;
    for multiple in LENGTHS {
        let length = multiple * spacing.max(1e-6);
        for noise in NOISES {
            let a: Vec<f64> = (0..n * n)
                .map(|k| (-d2[k] / (2.0 * length * length)).exp() + if k / n == k % n { noise } else { 0.0 })
                .collect();
            let Some((alpha, diagonal)) = solve_with_diagonal(a, n, &r) else { continue };
            let loo = (0..n).map(|i| (alpha[i] / diagonal[i]).powi(2)).sum::<f64>();
            if loo.is_finite() && best.as_ref().is_none_or(|b| loo < b.0) {
                best = Some((loo, length, alpha));
            }
        }
    }
    let (loo, length, weights) = best?;
    (loo < baseline).then(|| ResidualFit {
        rows: distinct.into_iter().map(|(row, _, _)| row).collect(),
        weights,
        length,
        loo_ratio: loo / baseline,
    })
}

/// `L⁻¹` of a lower-triangular `L` (row-major).
fn lower_inverse(l: &[f64], n: usize) -> Vec<f64> {
    let mut li = vec![0.0; n * n];
    for i in 0..n {
        li[i * n + i] = 1.0 / l[i * n + i];
        for j in 0..i {
            let s: f64 = (j..i).map(|k| l[i * n + k] * li[k * n + j]).sum();
            li[i * n + j] = -s / l[i * n + i];
        }
    }
    li
}

/// For a symmetric positive definite `A` (row-major `n x n`), `A⁻¹ r` and
/// the diagonal of `A⁻¹`: what the closed-form leave-one-out error needs.
fn solve_with_diagonal(a: Vec<f64>, n: usize, r: &[f64]) -> Option<(Vec<f64>, Vec<f64>)> {
    let l = cholesky(a, n)?;
    let li = lower_inverse(&l, n);
    // A⁻¹ = L⁻ᵀ L⁻¹: z = L⁻¹ r, then A⁻¹ r = L⁻ᵀ z.
    let z: Vec<f64> = (0..n).map(|i| (0..=i).map(|k| li[i * n + k] * r[k]).sum()).collect();
    let alpha = (0..n).map(|i| (i..n).map(|k| li[k * n + i] * z[k]).sum()).collect();
    let diagonal = (0..n).map(|i| (i..n).map(|k| li[k * n + i].powi(2)).sum()).collect();
    Some((alpha, diagonal))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(a: &[f64], b: &[f64], length: f64) -> f64 {
        (-rms2(a, b) / (2.0 * length * length)).exp()
    }

    /// The term at a standardised row, in plain numbers (the model
    /// evaluates it on tensors).
    fn term_at(fit: &ResidualFit, x: &[f64]) -> f64 {
        fit.rows.iter().zip(&fit.weights).map(|(r, w)| w * kernel(x, r, fit.length)).sum()
    }

    /// The full inverse, from the same factorisation.
    fn spd_inverse(a: Vec<f64>, n: usize) -> Option<Vec<f64>> {
        let li = lower_inverse(&cholesky(a, n)?, n);
        Some((0..n * n).map(|k| (0..n).map(|m| li[m * n + k / n] * li[m * n + k % n]).sum()).collect())
    }

    #[test]
    fn inverse_of_a_small_spd_matrix() {
        let a = vec![4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let inv = spd_inverse(a.clone(), 3).unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let p: f64 = (0..3).map(|k| a[i * 3 + k] * inv[k * 3 + j]).sum();
                assert!((p - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12, "{i},{j}: {p}");
            }
        }
        assert!(spd_inverse(vec![1.0, 2.0, 2.0, 1.0], 2).is_none());
        let r = [1.0, -2.0, 0.5];
        let (alpha, diagonal) = solve_with_diagonal(a, 3, &r).unwrap();
        for i in 0..3 {
            let want: f64 = (0..3).map(|j| inv[i * 3 + j] * r[j]).sum();
            assert!((alpha[i] - want).abs() < 1e-12 && (diagonal[i] - inv[i * 3 + i]).abs() < 1e-12);
        }
    }

    #[test]
    fn loo_shortcut_matches_refitting_without_each_row() {
        let rows: Vec<Vec<f64>> = (0..9).map(|i| vec![i as f64 * 0.7, (i * i % 5) as f64 * 0.3]).collect();
        let r: Vec<f64> = (0..9).map(|i| ((i * 7 % 5) as f64 - 2.0) * 0.4).collect();
        let (length, noise) = (0.8, 0.1);
        let gram = |idx: &[usize]| -> Vec<f64> {
            let m = idx.len();
            (0..m * m)
                .map(|k| {
                    kernel(&rows[idx[k / m]], &rows[idx[k % m]], length) + if k / m == k % m { noise } else { 0.0 }
                })
                .collect()
        };
        let all: Vec<usize> = (0..9).collect();
        let inv = spd_inverse(gram(&all), 9).unwrap();
        let alpha: Vec<f64> = (0..9).map(|i| (0..9).map(|j| inv[i * 9 + j] * r[j]).sum()).collect();
        for out in 0..9 {
            let keep: Vec<usize> = all.iter().copied().filter(|&i| i != out).collect();
            let inv_k = spd_inverse(gram(&keep), 8).unwrap();
            let a_k: Vec<f64> = (0..8).map(|i| (0..8).map(|j| inv_k[i * 8 + j] * r[keep[j]]).sum()).collect();
            let pred: f64 = keep.iter().zip(&a_k).map(|(&i, w)| w * kernel(&rows[out], &rows[i], length)).sum();
            let shortcut = r[out] - alpha[out] / inv[out * 9 + out];
            assert!((pred - shortcut).abs() < 1e-9, "row {out}: refit {pred}, shortcut {shortcut}");
        }
    }

    #[test]
    fn a_local_bump_is_learned_and_noise_is_left_alone() {
        // Residuals that vary smoothly over the rows: the fit reproduces them
        // and predicts a held-out row between two fitted ones.
        let rows: Vec<Vec<f64>> = (0..40).map(|i| vec![i as f64 * 0.25]).collect();
        let smooth: Vec<f64> = rows.iter().map(|x| (x[0] * 0.8).sin()).collect();
        let fit = fit(&rows, &smooth, 0.25).expect("smooth residuals are worth fitting");
        assert!(fit.loo_ratio < 0.2, "loo ratio {}", fit.loo_ratio);
        let between = term_at(&fit, &[3.125]);
        assert!((between - (3.125f64 * 0.8).sin()).abs() < 0.05, "{between}");
        // Far from every row the term fades away.
        assert!(term_at(&fit, &[100.0]).abs() < 1e-6);
        // Residuals that alternate row by row: no smooth term predicts a
        // held-out one, so there is none.
        let alternating: Vec<f64> = (0..40).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
        assert_eq!(super::fit(&rows, &alternating, 0.25), None);
        // Equal rows are merged.
        let twice: Vec<Vec<f64>> = rows.iter().chain(&rows).cloned().collect();
        let doubled: Vec<f64> = smooth.iter().chain(&smooth).copied().collect();
        assert_eq!(super::fit(&twice, &doubled, 0.25).unwrap().rows.len(), 40);
    }
}
