//! `smoothe fit-delays`: learn per-operator delays from an oracle's delay.

use super::oracle_runs::open_log;
use crate::egraph::EGraph;
use crate::extract::moves::{broad_sample, crossover};
use crate::extract::{as_extracted, DagGreedy, DepthGreedy, Greedy};
use crate::extraction::Extraction;
use crate::learn::model::metrics::in_test_split;
use crate::learn::oracle::identity::extraction_key;
use crate::learn::oracle::labeler::Labeler;
use crate::learn::oracle::process::OracleSettings;
use crate::preprocess::preprocess;
use crate::progress::Observer;
use crate::timing::fit::{fit_and_test, FitConfig, TimingFit, TimingLabel};
use crate::timing::{OpDelays, TimingGraph};
use crate::{files, load};
use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Fits the delays of one design's operators to an oracle's measurements:
/// depth-greedy, dag-greedy, greedy and extractions sampled around them are
/// labelled through the label log (labels already there are free), a test
/// share is held out, and the fitted delays are written as an
/// `--op-delays` file.
#[derive(Debug, Clone)]
pub struct FitDelaysJob {
    /// The oracle; with a JSON-printing oracle, `metric` picks the delay.
    pub oracle: OracleSettings,
    /// The label log.
    pub labels: PathBuf,
    /// Extractions to label (the three baselines among them).
    pub samples: usize,
    /// Share of the labels held out to test the fit (by extraction hash,
    /// as `train-cost` splits).
    pub test_share: f64,
    /// Seed of the random extractions.
    pub seed: u64,
    /// How the delays are fitted.
    pub fit: FitConfig,
    /// Where the delays are written.
    pub output: PathBuf,
}

/// Share of the sampled extractions that cross two baselines over.
const CROSSOVER_SHARE: f64 = 0.4;

/// Share of the broad sampler's draws that are uniform random extractions.
const UNIFORM_SHARE: f64 = 0.3;

/// What a fit gave.
#[derive(Debug, Clone, Serialize)]
pub struct FitDelaysResult {
    /// The fit and how it tested.
    #[serde(flatten)]
    pub fit: TimingFit,
    /// Oracle calls that failed (left out of the fit).
    pub failed: usize,
    /// Oracle calls made (the rest came from the log).
    pub calls: usize,
}

impl FitDelaysJob {
    /// Runs the fit on the e-graph at `egraph` and writes the delays.
    pub fn run(&self, egraph: &Path, progress: Observer) -> Result<FitDelaysResult> {
        if self.samples < 2 {
            bail!("--samples must be at least 2, got {}", self.samples);
        }
        if !(0.0..1.0).contains(&self.test_share) {
            bail!("the test share must be in [0, 1), got {}", self.test_share);
        }
        let graph = load::load_file(egraph)?;
        let problem = preprocess(&graph).with_context(|| format!("{}", egraph.display()))?;
        let timing = Arc::new(TimingGraph::new(&problem));
        let candidates = timing_samples(&graph, &problem, self.samples, self.seed)?;
        let originals = candidates
            .iter()
            .map(|e| problem.to_original(e).restricted_to_reachable(&graph))
            .collect::<Result<Vec<_>>>()?;
        let oracle = self.oracle.oracle(&[&self.labels])?;
        let mut log = open_log(&self.labels)?;
        let labeler = Labeler::new(&oracle, &self.oracle, egraph, &graph, progress);
        let mut budget = candidates.len();
        let labelled = labeler.label(&mut log, &originals, &mut budget);
        let _ = std::fs::remove_dir_all(&labeler.work_dir);
        let (costs, stats) = labelled?;
        let mut labels = Vec::new();
        for ((extraction, original), cost) in candidates.into_iter().zip(&originals).zip(costs) {
            let Some(value) = cost else { continue };
            let test = in_test_split(&extraction_key(&graph, original)?, self.test_share);
            labels.push(TimingLabel { extraction, value, test });
        }
        if labels.iter().filter(|l| !l.test).count() < 2 {
            bail!(
                "only {} extraction(s) labelled for fitting: see the oracle's failures in {}",
                labels.iter().filter(|l| !l.test).count(),
                self.labels.display()
            );
        }
        let fit = fit_and_test(&timing, &labels, &self.fit)?;
        files::write_json(&self.output, &serde_json::to_value(&fit.delays)?)?;
        Ok(FitDelaysResult { fit, failed: stats.failed, calls: stats.calls })
    }
}

/// Up to `samples` distinct valid extractions of `problem` (`original`
/// preprocessed) to fit delays on: depth-greedy, dag-greedy and greedy (as
/// `smoothe extract` makes them, [`as_extracted`]), then crossovers and
/// perturbations of them and uniform random ones (drawn with `seed`), where
/// the constrained answers will lie rather than where uniform sampling
/// alone lands (far slower than every baseline).
pub fn timing_samples(
    original: &EGraph,
    problem: &crate::preprocess::Reduced,
    samples: usize,
    seed: u64,
) -> Result<Vec<Extraction>> {
    let depth = DepthGreedy { delays: OpDelays::unit() };
    let mut out = as_extracted(original, problem, &[&depth, &DagGreedy, &Greedy])?;
    let mut seen: HashSet<Vec<Option<u32>>> = HashSet::new();
    let key = |e: &Extraction| e.choices.iter().map(|c| c.map(|n| n.raw())).collect::<Vec<_>>();
    out.retain(|e| seen.insert(key(e)));
    let bases = out.clone();
    let g = &problem.graph;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tries = 0;
    while out.len() < samples && tries < 20 * samples {
        tries += 1;
        // Crossovers of two baselines fill the trade-off between the
        // fast and the cheap ones; the broad sampler perturbs them and
        // keeps a share of uniform draws.
        let e = if rng.random_bool(CROSSOVER_SHARE) {
            let (a, b) = (rng.random_range(0..bases.len()), rng.random_range(0..bases.len()));
            crossover(g, &bases[a], &bases[b], &mut rng)
        } else {
            broad_sample(g, &bases, UNIFORM_SHARE, &mut rng)
        };
        if seen.insert(key(&e)) {
            out.push(e);
        }
    }
    out.truncate(samples);
    Ok(out)
}
