//! The label log: one JSON line per oracle call, appended as soon as the
//! call finishes, so an interrupted run loses nothing and a rerun never
//! pays twice for the same extraction.

use crate::egraph::EGraph;
use crate::extraction::OriginalExtraction;
use crate::learn::oracle::process::{pick, Measurement, BARE_METRIC};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One labelled (or failed) extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Label {
    /// Fingerprint of the e-graph.
    pub egraph: String,
    /// Canonical hash of the extraction (see [`crate::learn::oracle::identity::extraction_key`]).
    pub extraction: String,
    /// Identity of the oracle (see [`crate::learn::oracle::process::Oracle::identity`]).
    pub oracle: String,
    /// Every number the oracle printed, by name (a bare number is named
    /// [`BARE_METRIC`]); empty when the call failed, and in labels written
    /// before metrics were kept.
    #[serde(default, skip_serializing_if = "Measurement::is_empty")]
    pub metrics: Measurement,
    /// The cost, in labels written before [`Label::metrics`] was kept
    /// (no longer written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Seconds the call took.
    pub seconds: f64,
    /// The extraction itself: original class id -> original node id.
    pub choices: serde_json::Map<String, serde_json::Value>,
}

impl Label {
    /// The labelled extraction, read from its choices onto `original`
    /// (the e-graph the label was made on); errors name what does not fit.
    pub fn to_extraction(&self, original: &EGraph) -> Result<OriginalExtraction> {
        OriginalExtraction::from_json(original, &serde_json::Value::Object(self.choices.clone()))
    }

    /// The label's value of `metric` (without one: its only number), if
    /// it has one. An older label's `cost` is the value of the oracle's
    /// only number.
    pub fn value(&self, metric: Option<&str>) -> Option<f64> {
        if self.metrics.is_empty() {
            return self.cost.filter(|_| metric.is_none_or(|m| m == BARE_METRIC));
        }
        pick(&self.metrics, metric)
    }

    /// Every metric measured: the oracle's numbers, or a legacy label's
    /// `cost` under [`BARE_METRIC`] (empty for a failed call).
    pub fn measured(&self) -> Measurement {
        match (self.metrics.is_empty(), self.cost) {
            (true, Some(c)) => [(BARE_METRIC.to_string(), c)].into(),
            _ => self.metrics.clone(),
        }
    }

    /// Whether the call failed.
    pub fn failed(&self) -> bool {
        self.error.is_some() || (self.metrics.is_empty() && self.cost.is_none())
    }

    /// The key under which this label is reused.
    pub fn key(&self) -> (String, String, String) {
        (self.egraph.clone(), self.extraction.clone(), self.oracle.clone())
    }
}

/// An append-only JSONL file of labels, indexed by key.
pub struct LabelLog {
    path: PathBuf,
    labels: Vec<Label>,
    index: HashMap<(String, String, String), usize>,
    attempts: HashMap<(String, String, String), usize>,
    repaired: bool,
    /// The log, opened for appending and locked for as long as this value lives.
    file: std::fs::File,
}

/// Takes an exclusive advisory lock on the open log, or explains who holds it.
fn lock(file: &std::fs::File, path: &Path) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock(2) on a file descriptor this function's caller owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            anyhow::bail!(
                "{} is in use by another smoothe run; wait for it to finish, or give this run its own --labels",
                path.display()
            );
        }
        return Err(err).with_context(|| format!("cannot lock {}", path.display()));
    }
    Ok(())
}

/// The oracle calls a log records for one e-graph and oracle
/// ([`LabelLog::calls`]).
#[derive(Debug, Clone, Copy)]
pub struct Calls<'l> {
    /// Calls, failed ones included.
    pub total: usize,
    /// Failed calls.
    pub failed: usize,
    /// The last failed call.
    pub last_failure: Option<&'l Label>,
}

impl LabelLog {
    /// Opens (or starts) the log at `path`. A last line cut short by a kill
    /// or a full disk is cut off the file (it holds no complete label), so
    /// later appends start on a line of their own; any other bad line is an
    /// error naming the file and line. [`LabelLog::repaired`] says whether a
    /// torn tail was removed. The log stays locked (an advisory `flock`)
    /// while the value lives: a second run on the same log is refused with
    /// a message instead of interleaving writes.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        lock(&file, path)?;
        let mut log = LabelLog {
            path: path.to_path_buf(),
            labels: Vec::new(),
            index: HashMap::new(),
            attempts: HashMap::new(),
            repaired: false,
            file,
        };
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Label>(line) {
                Ok(label) => log.insert(label),
                Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => log.repaired = true,
                Err(e) => return Err(e).with_context(|| format!("{}: line {}", path.display(), i + 1)),
            }
        }
        if !text.is_empty() && !text.ends_with('\n') {
            // Keep everything up to the last newline: a complete last line
            // without one gets it back, a torn one is dropped.
            if log.repaired {
                let keep = text.rfind('\n').map_or(0, |i| i + 1);
                log.file.set_len(keep as u64).with_context(|| format!("cannot repair {}", path.display()))?;
            } else {
                log.file.write_all(b"\n").with_context(|| format!("cannot repair {}", path.display()))?;
            }
            log.file.sync_all().with_context(|| format!("cannot sync {}", path.display()))?;
        }
        Ok(log)
    }

    /// Whether [`LabelLog::open`] cut a torn last line off the file.
    pub fn repaired(&self) -> bool {
        self.repaired
    }

    fn insert(&mut self, label: Label) {
        *self.attempts.entry(label.key()).or_insert(0) += 1;
        self.index.insert(label.key(), self.labels.len());
        self.labels.push(label);
    }

    /// How many labels (oracle calls) the log holds under `key`.
    pub fn attempts(&self, key: &(String, String, String)) -> usize {
        self.attempts.get(key).copied().unwrap_or(0)
    }

    /// The label stored under `key`, if any (the latest of its attempts).
    pub fn get(&self, key: &(String, String, String)) -> Option<&Label> {
        self.index.get(key).map(|&i| &self.labels[i])
    }

    /// Appends `label` to the file (synced to disk before returning) and
    /// the index.
    pub fn append(&mut self, label: Label) -> Result<()> {
        let mut line = serde_json::to_string(&label)?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).with_context(|| format!("cannot write {}", self.path.display()))?;
        self.file.sync_data().with_context(|| format!("cannot sync {}", self.path.display()))?;
        self.insert(label);
        Ok(())
    }

    /// Every label, in file order (later duplicates win in the index).
    pub fn labels(&self) -> &[Label] {
        &self.labels
    }

    /// How the oracle calls on the e-graph with fingerprint `egraph` by the
    /// oracle `oracle` went, over every run that wrote this log.
    pub fn calls(&self, egraph: &str, oracle: &str) -> Calls<'_> {
        let mut calls = Calls { total: 0, failed: 0, last_failure: None };
        for l in self.labels.iter().filter(|l| l.egraph == egraph && l.oracle == oracle) {
            calls.total += 1;
            if l.failed() {
                calls.failed += 1;
                calls.last_failure = Some(l);
            }
        }
        calls
    }

    /// The labels for one e-graph and oracle that have a value of `metric`
    /// (see [`Label::value`]), with it, one per extraction, sorted by
    /// extraction hash (a stable order).
    pub fn values_for(&self, egraph: &str, oracle: &str, metric: Option<&str>) -> Vec<(&Label, f64)> {
        self.scored_for(egraph, oracle, |l| l.value(metric))
    }

    /// The labels for one e-graph and oracle that `score` gives a value,
    /// with it, one per extraction, sorted by extraction hash.
    pub fn scored_for(&self, egraph: &str, oracle: &str, score: impl Fn(&Label) -> Option<f64>) -> Vec<(&Label, f64)> {
        let mut out: Vec<(&Label, f64)> = self
            .index
            .iter()
            .filter(|(k, _)| k.0 == egraph && k.2 == oracle)
            .map(|(_, &i)| &self.labels[i])
            .filter_map(|l| score(l).map(|v| (l, v)))
            .collect();
        out.sort_by(|a, b| a.0.extraction.cmp(&b.0.extraction));
        out
    }
}
