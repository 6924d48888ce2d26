//! Commands that call the oracle directly, without a model: `search`
//! (simulated annealing, every step an oracle call) and `label` (measure
//! given extractions through the label log).

use crate::extraction::OriginalExtraction;
use crate::learn::active::anneal::{anneal, AnnealConfig, SearchOutcome};
use crate::learn::active::goal::Goal;
use crate::learn::oracle::labeler::Labeler;
use crate::learn::oracle::labels::LabelLog;
use crate::learn::oracle::process::OracleSettings;
use crate::progress::{quiet, Observer};
use crate::{load, preprocess};
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Opens a label log, warning (through `log`) when a torn last line was cut off.
pub(super) fn open_log(path: &Path) -> Result<LabelLog> {
    let log = LabelLog::open(path)?;
    if log.repaired() {
        log::warn!("{}: removed a last line cut short (no complete label was lost)", path.display());
    }
    Ok(log)
}

/// `smoothe search`: annealing with the oracle in the loop.
#[derive(Debug, Clone)]
pub struct SearchJob {
    /// The oracle.
    pub oracle: OracleSettings,
    /// The search's settings.
    pub anneal: AnnealConfig,
    /// What it minimises, under which bounds.
    pub goal: Goal,
    /// The label log.
    pub labels: PathBuf,
    /// Other files the run writes (kept out of the oracle's identity).
    pub outputs: Vec<PathBuf>,
    /// Seed of the moves and acceptances.
    pub seed: u64,
    /// Device for the linear-SmoothE starting point.
    pub device: String,
}

impl SearchJob {
    /// Searches the e-graph at `egraph`; returns the outcome and its result
    /// file (the best extraction with `real_cost`, `calls`, `trajectory`).
    pub fn run(&self, egraph: &Path, progress: Observer) -> Result<(SearchOutcome, Value)> {
        let device = crate::device::parse(&self.device)?;
        let mut outputs: Vec<&Path> = vec![&self.labels];
        outputs.extend(self.outputs.iter().map(|p| p.as_path()));
        let settings = self.goal.oracle_settings(&self.oracle)?;
        let oracle = settings.oracle(&outputs)?;
        let graph = load::load_file(egraph)?;
        let problem = preprocess::preprocess_for_oracle(&graph).with_context(|| format!("{}", egraph.display()))?;
        let mut log = open_log(&self.labels)?;
        let labeler = Labeler::new(&oracle, &settings, egraph, &graph, progress);
        let outcome = anneal(&problem, &labeler, &mut log, &self.anneal, &self.goal, self.seed, &device);
        let _ = std::fs::remove_dir_all(&labeler.work_dir);
        let outcome = outcome?;
        let mut extra = json!({ "real_cost": outcome.best_cost, "seed": self.seed, "calls": outcome.calls,
                            "screen": self.anneal.screen, "trajectory": outcome.trajectory,
                            "measured": outcome.measured });
        if !self.goal.constraints.is_empty() {
            extra["constraints"] = serde_json::to_value(&outcome.constraints)?;
        }
        let result = outcome.best.result_json(&graph, "search", 0.0, extra)?;
        Ok((outcome, result))
    }
}

/// `smoothe label`: measures extractions through the label log.
#[derive(Debug, Clone)]
pub struct LabelJob {
    /// The oracle.
    pub oracle: OracleSettings,
    /// The label log.
    pub labels: PathBuf,
}

impl LabelJob {
    /// The default label log of `egraph`: the one `train-cost` writes by
    /// default, `runs/<stem>/model.labels.jsonl`.
    pub fn default_log(egraph: &Path) -> PathBuf {
        let stem = egraph.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
        PathBuf::from("runs").join(stem).join("model.labels.jsonl")
    }

    /// Measures each extraction file (any file `smoothe check` accepts) of
    /// the e-graph at `egraph`: its cost, or why it failed. Logged labels
    /// are reused; an invalid extraction is an error.
    pub fn run(&self, egraph: &Path, extractions: &[PathBuf]) -> Result<Vec<std::result::Result<f64, String>>> {
        let graph = load::load_file(egraph)?;
        let oracle = self.oracle.oracle(&[&self.labels])?;
        let mut items = Vec::with_capacity(extractions.len());
        for path in extractions {
            let ex = OriginalExtraction::load_valid_file(&graph, path)?;
            items.push(ex.restricted_to_reachable(&graph)?);
        }
        let mut log = open_log(&self.labels)?;
        let labeler = Labeler::new(&oracle, &self.oracle, egraph, &graph, quiet());
        let mut budget = items.len();
        let result = labeler.label(&mut log, &items, &mut budget);
        let _ = std::fs::remove_dir_all(&labeler.work_dir);
        let (costs, _) = result?;
        let oracle_id = oracle.identity();
        items
            .iter()
            .zip(costs)
            .map(|(ex, cost)| match cost {
                Some(c) => Ok(Ok(c)),
                None => {
                    let why = log.get(&labeler.key(ex, &oracle_id)?).and_then(|l| l.error.clone());
                    Ok(Err(why.unwrap_or_else(|| "no label".into())))
                }
            })
            .collect()
    }
}
