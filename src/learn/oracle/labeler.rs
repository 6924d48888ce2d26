//! Labelling extractions with the oracle: in parallel, with a timeout per
//! call, every result appended to the label log the moment it exists, and
//! labels already in the log reused for free.

use crate::egraph::EGraph;
use crate::extraction::OriginalExtraction;
use crate::learn::oracle::identity::{extraction_key, oracle_file};
use crate::learn::oracle::labels::{Label, LabelLog};
use crate::learn::oracle::process::{Oracle, OracleSettings, Verdict};
use crate::progress::Observer;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What a labelling pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelStats {
    /// Oracle calls made (successful or not).
    pub calls: usize,
    /// Of those, failures.
    pub failed: usize,
    /// Extractions whose label was already in the log.
    pub reused: usize,
    /// Extractions left unlabelled because the budget ran out.
    pub skipped: usize,
}

/// Labels extractions of one e-graph with one oracle.
pub struct Labeler<'a> {
    /// The oracle.
    pub oracle: &'a Oracle,
    /// The e-graph file handed to the oracle.
    pub egraph_path: &'a Path,
    /// The loaded (original) e-graph.
    pub graph: &'a EGraph,
    /// Where extraction files are written for the oracle.
    pub work_dir: PathBuf,
    /// Oracle calls in parallel.
    pub jobs: usize,
    /// Where progress goes (labels done, failures, best cost).
    pub progress: Observer,
    /// How many more times an extraction whose label failed is sent to the
    /// oracle when asked for again (each attempt counts towards budgets;
    /// every failure stays in the log with its stderr tail).
    pub retries: usize,
}

impl<'a> Labeler<'a> {
    /// A labeller for `graph` (read from `egraph_path`) with the parallelism
    /// and retries of `settings`, writing oracle input files under a
    /// per-process temporary directory ([`Labeler::work_dir`], which the
    /// caller removes when done).
    pub fn new(
        oracle: &'a Oracle,
        settings: &OracleSettings,
        egraph_path: &'a Path,
        graph: &'a EGraph,
        progress: Observer,
    ) -> Self {
        Labeler {
            oracle,
            egraph_path,
            graph,
            work_dir: std::env::temp_dir().join(format!("smoothe-oracle-{}", std::process::id())),
            jobs: settings.jobs,
            progress,
            retries: settings.retries,
        }
    }

    /// The log key of `extraction` (original ids).
    pub fn key(&self, extraction: &OriginalExtraction, oracle_id: &str) -> Result<(String, String, String)> {
        Ok((self.graph.fingerprint(), extraction_key(self.graph, extraction)?, oracle_id.to_string()))
    }

    /// Labels `items` (valid extractions of the original graph), spending
    /// at most `*budget` oracle calls (decremented). Returns each item's
    /// cost when known (from the log or a successful call).
    pub fn label(
        &self,
        log: &mut LabelLog,
        items: &[OriginalExtraction],
        budget: &mut usize,
    ) -> Result<(Vec<Option<f64>>, LabelStats)> {
        let metric = self.oracle.primary();
        self.label_scored(log, items, budget, &|label: &Label| label.value(metric))
    }

    /// [`Labeler::label`], with each item's value read from its label by
    /// `score` (for example a [`crate::learn::active::goal::Goal`]'s) instead of the
    /// oracle's primary metric.
    pub fn label_scored(
        &self,
        log: &mut LabelLog,
        items: &[OriginalExtraction],
        budget: &mut usize,
        score: &(dyn Fn(&Label) -> Option<f64> + Sync),
    ) -> Result<(Vec<Option<f64>>, LabelStats)> {
        let oracle_id = self.oracle.identity();
        let mut stats = LabelStats::default();
        let mut costs = vec![None; items.len()];
        let mut todo: Vec<(usize, (String, String, String))> = Vec::new();
        let mut queued = std::collections::HashSet::new();
        for (i, ex) in items.iter().enumerate() {
            let key = self.key(ex, &oracle_id)?;
            let known = log.get(&key).filter(|l| !l.failed() || log.attempts(&key) > self.retries);
            if let Some(label) = known {
                costs[i] = score(label);
                stats.reused += 1;
            } else if queued.contains(&key) {
                // Same extraction twice in one batch: filled in below.
            } else if *budget > 0 {
                *budget -= 1;
                queued.insert(key.clone());
                todo.push((i, key));
            } else {
                stats.skipped += 1;
            }
        }
        std::fs::create_dir_all(&self.work_dir)
            .with_context(|| format!("cannot create {}", self.work_dir.display()))?;
        if !todo.is_empty() {
            self.progress.begin("labels", todo.len() as u64);
        }
        let done = AtomicUsize::new(0);
        let next = AtomicUsize::new(0);
        let shared = Mutex::new((log, &mut costs, &mut stats, f64::INFINITY));
        let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.max(1).min(todo.len().max(1)) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((item, key)) = todo.get(i) else { break };
                    let result = self.call_one(&items[*item], key);
                    let mut guard = shared.lock().expect("labeler lock");
                    let (log, costs, stats, best) = &mut *guard;
                    match result.and_then(|label| {
                        let cost = score(&label);
                        let failed = label.failed();
                        log.append(label).map(|_| (cost, failed))
                    }) {
                        Ok((cost, failed)) => {
                            stats.calls += 1;
                            if let Some(c) = cost {
                                costs[*item] = Some(c);
                                *best = best.min(c);
                            }
                            if failed {
                                stats.failed += 1;
                            }
                            let n = done.fetch_add(1, Ordering::SeqCst) as u64 + 1;
                            self.progress.advance(n, &format!("failed {}, best {:.6}", stats.failed, best));
                        }
                        Err(e) => {
                            first_error.lock().expect("error lock").get_or_insert(e);
                            break;
                        }
                    }
                });
            }
        });
        if !todo.is_empty() {
            self.progress.end();
        }
        if let Some(e) = first_error.into_inner().expect("error lock") {
            return Err(e);
        }
        let (log, costs, stats, _) = shared.into_inner().expect("labeler lock");
        // Duplicates within the batch take the label now in the log.
        for (i, ex) in items.iter().enumerate() {
            if costs[i].is_none() {
                if let Some(label) = log.get(&self.key(ex, &oracle_id)?) {
                    costs[i] = score(label);
                }
            }
        }
        Ok((costs.clone(), stats.clone()))
    }

    fn call_one(&self, extraction: &OriginalExtraction, key: &(String, String, String)) -> Result<Label> {
        let file = self.work_dir.join(format!("{}.json", key.1));
        let value = oracle_file(self.graph, extraction)?;
        std::fs::write(&file, serde_json::to_string_pretty(&value)?)
            .with_context(|| format!("cannot write {}", file.display()))?;
        let start = Instant::now();
        let verdict = self.oracle.call(self.egraph_path, &file)?;
        let _ = std::fs::remove_file(&file);
        let (metrics, error) = match verdict {
            Verdict::Measured(m) => (m, None),
            Verdict::Failed(e) => (Default::default(), Some(e)),
        };
        Ok(Label {
            egraph: key.0.clone(),
            extraction: key.1.clone(),
            oracle: key.2.clone(),
            metrics,
            cost: None,
            error,
            seconds: start.elapsed().as_secs_f64(),
            choices: value["choices"].as_object().cloned().unwrap_or_default(),
        })
    }
}
