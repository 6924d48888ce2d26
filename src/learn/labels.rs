//! The label log: one JSON line per oracle call, appended as soon as the
//! call finishes, so an interrupted run loses nothing and a rerun never
//! pays twice for the same extraction.

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
    /// Canonical hash of the extraction (see [`crate::learn::extraction_key`]).
    pub extraction: String,
    /// Identity of the oracle (see [`crate::learn::oracle::Oracle::identity`]).
    pub oracle: String,
    /// The cost, or `None` when the call failed.
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
}

impl LabelLog {
    /// Opens (or starts) the log at `path`. A last line cut short by a kill
    /// is skipped with a warning; any other bad line is an error.
    pub fn open(path: &Path) -> Result<Self> {
        let mut log = LabelLog { path: path.to_path_buf(), labels: Vec::new(), index: HashMap::new() };
        if path.exists() {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Label>(line) {
                    Ok(label) => log.insert(label),
                    Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {
                        eprintln!("warning: {}: ignoring a last line cut short", path.display());
                    }
                    Err(e) => return Err(e).with_context(|| format!("{}: line {}", path.display(), i + 1)),
                }
            }
        }
        Ok(log)
    }

    fn insert(&mut self, label: Label) {
        self.index.insert(label.key(), self.labels.len());
        self.labels.push(label);
    }

    /// The label stored under `key`, if any.
    pub fn get(&self, key: &(String, String, String)) -> Option<&Label> {
        self.index.get(key).map(|&i| &self.labels[i])
    }

    /// Appends `label` to the file (flushed before returning) and the index.
    pub fn append(&mut self, label: Label) -> Result<()> {
        if let Some(dir) = self.path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        let mut line = serde_json::to_string(&label)?;
        line.push('\n');
        file.write_all(line.as_bytes()).with_context(|| format!("cannot write {}", self.path.display()))?;
        file.sync_data().ok();
        self.insert(label);
        Ok(())
    }

    /// Every label, in file order (later duplicates win in the index).
    pub fn labels(&self) -> &[Label] {
        &self.labels
    }

    /// The successful labels for one e-graph and oracle, one per
    /// extraction, sorted by extraction hash (a stable order).
    pub fn costs_for(&self, egraph: &str, oracle: &str) -> Vec<&Label> {
        let mut out: Vec<&Label> = self
            .index
            .iter()
            .filter(|(k, _)| k.0 == egraph && k.2 == oracle)
            .map(|(_, &i)| &self.labels[i])
            .filter(|l| l.cost.is_some())
            .collect();
        out.sort_by(|a, b| a.extraction.cmp(&b.extraction));
        out
    }
}
