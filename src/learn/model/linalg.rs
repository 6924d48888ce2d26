//! Dense symmetric positive definite solves for the small kernel systems
//! of the Gaussian processes ([`crate::learn::model::residual`], [`crate::learn::active::selection_gp`]):
//! row-major `f64` matrices of at most a few thousand rows, in plain loops.

/// Cholesky factor `L` (lower triangle, row-major) of a symmetric positive
/// definite `n x n` matrix, in place; `None` if it is not positive definite.
pub(crate) fn cholesky(mut a: Vec<f64>, n: usize) -> Option<Vec<f64>> {
    for j in 0..n {
        let d = a[j * n + j] - (0..j).map(|k| a[j * n + k] * a[j * n + k]).sum::<f64>();
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let s = a[i * n + j] - (0..j).map(|k| a[i * n + k] * a[j * n + k]).sum::<f64>();
            a[i * n + j] = s / d;
        }
    }
    Some(a)
}

/// Solves `L x = b` for a lower-triangular row-major `l` (only its lower
/// triangle is read).
pub(crate) fn forward_solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i * n + k] * x[k]).sum();
        x[i] = (b[i] - s) / l[i * n + i];
    }
    x
}

/// Solves `Lᵀ x = b` for a lower-triangular row-major `l` (only its lower
/// triangle is read).
pub(crate) fn backward_solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k * n + i] * x[k]).sum();
        x[i] = (b[i] - s) / l[i * n + i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_and_the_triangular_solves_solve_a_known_system() {
        // [[4, 2], [2, 3]] x = [2, 1] has x = [0.5, 0].
        let l = cholesky(vec![4.0, 2.0, 2.0, 3.0], 2).unwrap();
        let x = backward_solve(&l, 2, &forward_solve(&l, 2, &[2.0, 1.0]));
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
        assert!(cholesky(vec![1.0, 2.0, 2.0, 1.0], 2).is_none());
    }
}
