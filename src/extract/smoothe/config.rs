//! SmoothE's settings.

use crate::egraph::EGraph;
use crate::relax::Combine;
use serde::{Deserialize, Serialize};

/// Which optimiser updates the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (candle-optimisers).
    Adam,
    /// RMSprop (candle-optimisers).
    Rmsprop,
}

/// How node scores are parameterised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Parameterisation {
    /// One free logit per node and seed.
    Logits,
    /// Per-seed node embeddings through a shared
    /// Linear -> LayerNorm -> ReLU -> Linear(1) head, as the published code.
    Embedding,
}

/// Settings of the SmoothE optimiser; `configs/smoothe.toml` holds the
/// defaults, and every field has a command-line flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmoothEConfig {
    /// How a class's incoming edge probabilities combine.
    pub combine: Combine,
    /// Optimiser.
    pub optimizer: OptimizerKind,
    /// Learning rate.
    pub learning_rate: f64,
    /// Most optimisation steps.
    pub steps: usize,
    /// Restart (or stop, when restarts are used up) after this many steps
    /// without a better decoded extraction.
    pub patience: usize,
    /// Restarts around the best extraction so far after a plateau.
    pub restarts: usize,
    /// Wall-clock limit in seconds for the optimisation (0: none); the last
    /// tenth is left for the final local search.
    pub time_limit: f64,
    /// Seeds optimised together (0: chosen from the graph size).
    pub batch: usize,
    /// Parameterisation of the scores.
    pub parameterisation: Parameterisation,
    /// Embedding width for the `embedding` parameterisation.
    pub embedding_dim: usize,
    /// Softmax temperature.
    pub temperature: f64,
    /// Scale of the Gumbel noise added to the scores each step (0: none).
    pub gumbel: f64,
    /// Decode every this many steps.
    pub decode_every: usize,
    /// Initial weight of the acyclicity penalty.
    pub penalty_weight: f64,
    /// Factor applied to the penalty weight when a decoded seed had a cycle.
    pub penalty_growth: f64,
    /// Logit bonus of the starting extraction's nodes.
    pub init_bias: f64,
    /// Standard deviation of the initial logit noise of the last seed
    /// (seed 0 has none; the others in between).
    pub init_noise: f64,
    /// Share of seeds that start from noise alone instead of near the
    /// greedy extraction (logits parameterisation).
    pub explore_seeds: f64,
    /// Passes of hill climbing (single-class switches, sharing moves) on the final result
    /// (0: none).
    pub polish_passes: usize,
    /// Fixed-point tolerance inside cyclic components.
    pub tolerance: f64,
    /// Most fixed-point sweeps inside a cyclic component, in the forward
    /// pass and again in the backward pass. A step costs up to
    /// `max_sweeps + 1` acyclic passes over such a component's edges, so
    /// this bounds the step's cost at a constant times the edges. The
    /// iteration starts from zero, so stopping early leaves some class
    /// probabilities below their fixed point.
    pub max_sweeps: usize,
}

impl Default for SmoothEConfig {
    fn default() -> Self {
        SmoothEConfig {
            combine: Combine::Mixed,
            optimizer: OptimizerKind::Adam,
            learning_rate: 0.15,
            steps: 5000,
            patience: 300,
            restarts: 10,
            time_limit: 30.0,
            batch: 0,
            parameterisation: Parameterisation::Logits,
            embedding_dim: 32,
            temperature: 1.0,
            gumbel: 0.0,
            decode_every: 5,
            penalty_weight: 0.01,
            penalty_growth: 1.5,
            init_bias: 3.0,
            init_noise: 2.0,
            explore_seeds: 0.25,
            polish_passes: 20,
            tolerance: 1e-4,
            max_sweeps: 4,
        }
    }
}

impl SmoothEConfig {
    /// The batch size to use on `g`: the configured one, or a size that
    /// keeps `nodes * batch` near 200k (between 4 and 32 seeds).
    pub fn batch_for(&self, g: &EGraph) -> usize {
        if self.batch > 0 {
            return self.batch;
        }
        (200_000 / g.num_nodes().max(1)).clamp(4, 32)
    }
}

impl crate::config::Choice for OptimizerKind {
    const NAMES: &'static [&'static str] = &["adam", "rmsprop"];
}

impl crate::config::Choice for Parameterisation {
    const NAMES: &'static [&'static str] = &["logits", "embedding"];
}
