//! Dense matrix exponential by Padé approximation with scaling and
//! squaring, for the acyclicity penalty of small cyclic components.

/// `exp(a)` for a row-major `d x d` matrix, by the degree-6 Padé
/// approximant of `a / 2^s` squared `s` times, with `s` chosen so the
/// scaled 1-norm is at most 0.5 (relative error far below 1e-12 there).
pub fn expm(a: &[f64], d: usize) -> Vec<f64> {
    assert_eq!(a.len(), d * d, "expm: matrix is not d x d");
    let norm = (0..d).map(|j| (0..d).map(|i| a[i * d + j].abs()).sum::<f64>()).fold(0.0, f64::max);
    let mut s = 0;
    while norm / f64::powi(2.0, s) > 0.5 && s < 60 {
        s += 1;
    }
    let scale = f64::powi(2.0, -s);
    let x: Vec<f64> = a.iter().map(|v| v * scale).collect();
    // Padé(6,6) coefficients: c_k = (12-k)! 6! / (12! k! (6-k)!).
    const C: [f64; 7] = [1.0, 0.5, 5.0 / 44.0, 1.0 / 66.0, 1.0 / 792.0, 1.0 / 15840.0, 1.0 / 665280.0];
    let mut num = identity(d);
    let mut den = identity(d);
    let mut power = identity(d);
    for (k, c) in C.iter().enumerate().skip(1) {
        power = matmul(&power, &x, d);
        let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
        for i in 0..d * d {
            num[i] += c * power[i];
            den[i] += sign * c * power[i];
        }
    }
    let mut e = solve(den, num, d);
    for _ in 0..s {
        e = matmul(&e, &e, d);
    }
    e
}

fn identity(d: usize) -> Vec<f64> {
    let mut m = vec![0.0; d * d];
    for i in 0..d {
        m[i * d + i] = 1.0;
    }
    m
}

/// Row-major product of two `d x d` matrices.
pub fn matmul(a: &[f64], b: &[f64], d: usize) -> Vec<f64> {
    let mut out = vec![0.0; d * d];
    for i in 0..d {
        for k in 0..d {
            let aik = a[i * d + k];
            if aik == 0.0 {
                continue;
            }
            let row = &b[k * d..(k + 1) * d];
            let dst = &mut out[i * d..(i + 1) * d];
            for (o, &bv) in dst.iter_mut().zip(row) {
                *o += aik * bv;
            }
        }
    }
    out
}

/// Solves `a x = b` for `d x d` matrices by LU with partial pivoting.
/// `a` is a Padé denominator, which is well conditioned for the scaled
/// norms used here.
fn solve(mut a: Vec<f64>, mut b: Vec<f64>, d: usize) -> Vec<f64> {
    for col in 0..d {
        let pivot = (col..d).max_by(|&i, &j| a[i * d + col].abs().total_cmp(&a[j * d + col].abs())).unwrap_or(col);
        if pivot != col {
            for j in 0..d {
                a.swap(pivot * d + j, col * d + j);
                b.swap(pivot * d + j, col * d + j);
            }
        }
        let p = a[col * d + col];
        for i in col + 1..d {
            let f = a[i * d + col] / p;
            if f == 0.0 {
                continue;
            }
            for j in col..d {
                a[i * d + j] -= f * a[col * d + j];
            }
            for j in 0..d {
                b[i * d + j] -= f * b[col * d + j];
            }
        }
    }
    for col in (0..d).rev() {
        let p = a[col * d + col];
        for j in 0..d {
            b[col * d + j] /= p;
        }
        for i in 0..col {
            let f = a[i * d + col];
            if f == 0.0 {
                continue;
            }
            for j in 0..d {
                b[i * d + j] -= f * b[col * d + j];
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taylor(a: &[f64], d: usize) -> Vec<f64> {
        let mut sum = identity(d);
        let mut term = identity(d);
        for k in 1..60 {
            term = matmul(&term, a, d);
            for v in term.iter_mut() {
                *v /= k as f64;
            }
            for i in 0..d * d {
                sum[i] += term[i];
            }
        }
        sum
    }

    #[test]
    fn matches_taylor_series_on_random_matrices() {
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
        };
        for d in [1, 2, 3, 5, 8] {
            for scale in [0.1, 1.0, 3.0] {
                let a: Vec<f64> = (0..d * d).map(|_| next() * scale).collect();
                let (p, t) = (expm(&a, d), taylor(&a, d));
                for (x, y) in p.iter().zip(&t) {
                    assert!((x - y).abs() <= 1e-10 * y.abs().max(1.0), "d={d} scale={scale}: {x} vs {y}");
                }
            }
        }
    }

    #[test]
    fn two_cycle_closed_form() {
        // tr exp([[0, a], [b, 0]]) = 2 cosh(sqrt(ab)).
        let (a, b) = (0.7, 0.4);
        let e = expm(&[0.0, a, b, 0.0], 2);
        assert!((e[0] + e[3] - 2.0 * (a * b).sqrt().cosh()).abs() < 1e-12);
    }

    #[test]
    fn nilpotent_matrix_has_zero_penalty() {
        // A strictly upper triangular (acyclic) matrix: trace(exp(A)) = d.
        let a = [0.0, 0.9, 0.3, 0.0, 0.0, 0.8, 0.0, 0.0, 0.0];
        let e = expm(&a, 3);
        assert!((e[0] + e[4] + e[8] - 3.0).abs() < 1e-12);
    }
}
