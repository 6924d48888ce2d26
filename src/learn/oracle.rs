//! Running the user's cost oracle: `ORACLE EGRAPH.json EXTRACTION.json`,
//! which prints the real cost as the last line of stdout (a number, or a
//! JSON object of metrics of which `metric` picks one) and exits 0.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to call the oracle.
#[derive(Debug, Clone)]
pub struct Oracle {
    /// The command: an executable path, or a shell command line to which the
    /// two file paths are appended (e.g. `srun -N1 ./synth.sh`).
    pub command: String,
    /// Metric to read when the oracle prints a JSON object.
    pub metric: Option<String>,
    /// Wall-clock limit per call.
    pub timeout: Duration,
}

/// The outcome of one call: a cost, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The oracle succeeded and printed this cost.
    Cost(f64),
    /// The oracle failed: non-zero exit, timeout, or no number; with the
    /// tail of its stderr (or stdout).
    Failed(String),
}

impl Oracle {
    /// A stable hash of what this oracle is: the contents of its executable
    /// when the command's first word is a file, plus the whole command line
    /// and metric.
    pub fn identity(&self) -> String {
        let first = self.command.split_whitespace().next().unwrap_or("");
        let mut bytes = self.command.clone().into_bytes();
        if let Some(m) = &self.metric {
            bytes.extend_from_slice(m.as_bytes());
        }
        if let Ok(contents) = std::fs::read(first) {
            bytes.extend_from_slice(&contents);
        }
        crate::learn::hash_hex(&bytes)
    }

    /// Runs the oracle on the two files and reads its verdict. Errors only
    /// when the process cannot be started at all.
    pub fn call(&self, egraph: &Path, extraction: &Path) -> Result<Verdict> {
        let start = Instant::now();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("{} \"$1\" \"$2\"", self.command))
            .arg("smoothe-oracle")
            .arg(egraph)
            .arg(extraction)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start oracle {:?}", self.command))?;
        // Drain the pipes on threads so a chatty oracle cannot block.
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if start.elapsed() >= self.timeout {
                // Kill the whole process group: the shell and whatever it
                // started (which would otherwise hold the pipes open).
                // SAFETY: plain kill(2) on the group this call created.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        let tail = |s: &str| {
            let lines: Vec<&str> = s.lines().rev().take(5).collect();
            lines.into_iter().rev().collect::<Vec<_>>().join("\n")
        };
        let Some(status) = status else {
            return Ok(Verdict::Failed(format!("timed out after {:?}; stderr: {}", self.timeout, tail(&stderr))));
        };
        if !status.success() {
            return Ok(Verdict::Failed(format!("exit status {status}; stderr: {}", tail(&stderr))));
        }
        Ok(match parse_cost(&stdout, self.metric.as_deref()) {
            Ok(cost) => Verdict::Cost(cost),
            Err(e) => Verdict::Failed(format!("{e:#}; stdout: {}; stderr: {}", tail(&stdout), tail(&stderr))),
        })
    }
}

/// Reads the cost from an oracle's stdout: its last non-empty line is a
/// finite number, or a JSON object holding `metric` (or, without a metric,
/// exactly one number).
pub fn parse_cost(stdout: &str, metric: Option<&str>) -> Result<f64> {
    let Some(line) = stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        bail!("the oracle printed nothing");
    };
    let value = if let Ok(x) = line.parse::<f64>() {
        if metric.is_some() {
            bail!("the oracle printed a bare number, but --metric was given");
        }
        x
    } else {
        let obj: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("last line {line:?} is neither a number nor JSON"))?;
        let obj = obj.as_object().with_context(|| format!("last line {line:?} is not a JSON object"))?;
        match metric {
            Some(m) => obj.get(m).and_then(|v| v.as_f64()).with_context(|| format!("no number {m:?} in {line}"))?,
            None => {
                let numbers: Vec<f64> = obj.values().filter_map(|v| v.as_f64()).collect();
                if numbers.len() != 1 {
                    bail!("the oracle printed several metrics; choose one with --metric");
                }
                numbers[0]
            }
        }
    };
    if !value.is_finite() {
        bail!("the oracle printed a non-finite cost {value}");
    }
    Ok(value)
}
