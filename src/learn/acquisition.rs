//! How the active loop ranks candidates for labelling: acquisition rules
//! over the ensemble's mean and spread.

use serde::{Deserialize, Serialize};

/// How the model picks what to label from the screened candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Acquisition {
    /// Lowest `mean - beta * std` (plus the trust-region charge).
    Lcb,
    /// Highest expected improvement over the best real cost so far (less
    /// the trust-region charge).
    Ei,
    /// Lowest predicted mean (plus the trust-region charge).
    Mean,
    /// Lowest `mean - beta * std` of a Gaussian process over this design's
    /// labelled extractions with a Hamming kernel on their choices (see
    /// [`super::selection_gp`]), instead of the ensemble.
    SelectionGp,
    /// Uniformly at random, ignoring the model (an ablation: the loop's
    /// own candidate pool without a model).
    Random,
}

impl crate::config::Choice for Acquisition {
    const NAMES: &'static [&'static str] = &["lcb", "ei", "mean", "selection-gp", "random"];
}

/// Expected improvement of a Gaussian `N(mean, std^2)` below `incumbent`.
pub fn expected_improvement(incumbent: f64, mean: f64, std: f64) -> f64 {
    if std <= 0.0 {
        return (incumbent - mean).max(0.0);
    }
    let z = (incumbent - mean) / std;
    let pdf = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let cdf = 0.5 * (1.0 + erf(z / std::f64::consts::SQRT_2));
    (incumbent - mean) * cdf + std * pdf
}

/// The error function (Abramowitz and Stegun 7.1.26, error below 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let y = 1.0 - poly * (-x * x).exp();
    if x < 0.0 {
        -y
    } else {
        y
    }
}
