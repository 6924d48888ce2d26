//! How well a model fits: the test split, rank correlation and the fit
//! report saved with a model.

use serde::{Deserialize, Serialize};

/// A figure that JSON writes as `null` when it is NaN (no test labels,
/// say), read back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// NaN, the value of a figure a report does not hold.
fn nan() -> f64 {
    f64::NAN
}

/// How well a model fits. Test figures come from labels no member was
/// fitted or early-stopped on; validation figures are out-of-fold. Figures
/// without data (no test label) are NaN.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainReport {
    /// Labels the members were fitted and early-stopped on.
    pub train: usize,
    /// Labels in the test split.
    pub test: usize,
    /// Mean absolute error of the ensemble mean on the test split (oracle units).
    #[serde(deserialize_with = "nan_if_null")]
    pub test_mae: f64,
    /// Spearman rank correlation of the ensemble mean on the test split.
    #[serde(deserialize_with = "nan_if_null")]
    pub test_spearman: f64,
    /// Share of test labels within two ensemble standard deviations of the mean.
    #[serde(deserialize_with = "nan_if_null")]
    pub test_coverage: f64,
    /// Share of test labels within two expected errors of the mean
    /// ([`crate::learn::model::network::Ensemble::prediction_error`]: the spread
    /// with the members' out-of-fold error added). NaN in reports written
    /// before it was kept.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub test_error_coverage: f64,
    /// Spearman correlation of out-of-fold predictions on the training labels.
    #[serde(deserialize_with = "nan_if_null")]
    pub validation_spearman: f64,
    /// Mean epochs run per member (early stopping keeps the best).
    #[serde(deserialize_with = "nan_if_null")]
    pub epochs: f64,
}

/// Whether the label of the extraction with canonical key `key` belongs
/// to the test split.
pub fn in_test_split(key: &str, fraction: f64) -> bool {
    let h = crate::egraph::hash_hex(key.as_bytes());
    let mut v = u64::from_str_radix(&h[..16.min(h.len())], 16).unwrap_or(0);
    // The splitmix64 finaliser spreads FNV's weakly mixed high bits.
    v ^= v >> 30;
    v = v.wrapping_mul(0xbf58476d1ce4e5b9);
    v ^= v >> 27;
    v = v.wrapping_mul(0x94d049bb133111eb);
    v ^= v >> 31;
    ((v >> 11) as f64 / (1u64 << 53) as f64) < fraction
}

/// Mean and population standard deviation of `values`, each a sum in
/// order (NaN for an empty slice). Model files store figures computed so,
/// so its summation order is part of their format: keep it.
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Average ranks (ties share the mean rank).
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        for &k in &idx[i..=j] {
            r[k] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

/// Spearman rank correlation (NaN with fewer than 3 points or no spread).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    if a.len() < 3 || a.len() != b.len() {
        return f64::NAN;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}
