//! Seeded standard normal draws, for the initialisations of SmoothE's
//! parameters and of the cost model's weights.

use rand::Rng;

/// A standard normal draw (Box-Muller).
pub fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random_range(1e-12..1.0);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
