//! Running the user's cost oracle: `ORACLE EGRAPH.json EXTRACTION.json`,
//! which prints the real cost as the last line of stdout (a number, or a
//! JSON object of metrics such as `{"area": 12, "delay": 3.5}`) and exits 0.
//! Every number it prints is kept, so one call labels every metric.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a stopped oracle gets between SIGTERM and SIGKILL (srun, for
/// one, cancels its job on SIGTERM but not on SIGKILL).
pub const TERMINATION_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for an oracle's pipes to close after it exited.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Set by [`terminate_all`]: no new oracle call starts.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Process groups of the oracle calls running now.
fn live_groups() -> MutexGuard<'static, Vec<i32>> {
    static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());
    // A panic elsewhere while holding the lock leaves the list usable.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether any process of the group is left (zombies included).
fn group_alive(group: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the group exists.
    unsafe { libc::kill(-group, 0) == 0 }
}

/// SIGTERM to the process group, up to [`TERMINATION_GRACE`] for every
/// process in it to end (not only the shell: `srun` needs a moment to
/// cancel its job), then SIGKILL to what is left; reaps `child`.
fn stop_group(group: i32, child: &mut std::process::Child) {
    // SAFETY: plain kill(2) on a process group this program created.
    unsafe {
        libc::kill(-group, libc::SIGTERM);
    }
    let until = Instant::now() + TERMINATION_GRACE;
    while Instant::now() < until {
        // Reap the shell as soon as it ends, so it does not keep the group
        // alive as a zombie.
        let _ = child.try_wait();
        if !group_alive(group) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above; the group may already be gone.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Stops every oracle call still running (SIGTERM, then SIGKILL after
/// [`TERMINATION_GRACE`]) and refuses new ones from then on, for a program
/// that is being interrupted. Returns how many process groups it signalled.
pub fn terminate_all() -> usize {
    // One stop at a time: a second caller waits for the first to finish
    // (its SIGKILLs included) instead of returning early.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let groups: Vec<i32> = {
        let live = live_groups();
        STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
        live.iter().copied().collect()
    };
    for &g in &groups {
        // SAFETY: plain kill(2) on process groups this program created.
        unsafe {
            libc::kill(-g, libc::SIGTERM);
        }
    }
    let until = Instant::now() + TERMINATION_GRACE;
    while Instant::now() < until && groups.iter().any(|&g| group_alive(g)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &g in &groups {
        // SAFETY: as above.
        unsafe {
            libc::kill(-g, libc::SIGKILL);
        }
    }
    groups.len()
}

/// Bytes read from a pipe by a background thread; the thread holds the
/// second reference to the buffer until the pipe closes.
struct Drained(Arc<Mutex<Vec<u8>>>);

impl Drained {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> Drained {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let shared = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            shared.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&chunk[..n]);
        }
    });
    Drained(buf)
}

/// How to call the oracle.
#[derive(Debug, Clone)]
pub struct Oracle {
    /// The command: an executable path, or a shell command line to which the
    /// two file paths are appended (e.g. `srun -N1 ./synth.sh`).
    pub command: String,
    /// Metrics the oracle must print (a JSON object holding each); the
    /// first is the one a single-metric run learns. Empty: the oracle
    /// prints one number (bare, or the only number of its object).
    pub metrics: Vec<String>,
    /// Wall-clock limit per call.
    pub timeout: Duration,
    /// Text standing for dependencies no file shows (a tool version, a
    /// licence server), part of the identity.
    pub tag: Option<String>,
    /// Files never hashed into the identity although they sit beside the
    /// oracle (the label log and outputs of the run).
    pub exclude: Vec<std::path::PathBuf>,
    /// The identity, computed on first use and fixed from then on, so that
    /// files the oracle writes during a run cannot change it mid-run.
    identity: std::sync::OnceLock<String>,
}

/// Largest file hashed into an oracle's identity; larger ones count by
/// name and size only.
const IDENTITY_FILE_BYTES: u64 = 4 << 20;
/// Most files of one directory hashed into an oracle's identity.
const IDENTITY_DIR_FILES: usize = 256;

/// Every number an oracle printed, by name; a bare number is named
/// [`BARE_METRIC`].
pub type Measurement = std::collections::BTreeMap<String, f64>;

/// The name of the number an oracle prints bare (not in a JSON object).
pub const BARE_METRIC: &str = "cost";

/// The outcome of one call: what it measured, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The oracle succeeded and printed these numbers.
    Measured(Measurement),
    /// The oracle failed: non-zero exit, timeout, or no number; with the
    /// tail of its stderr (or stdout).
    Failed(String),
}

/// How to run an oracle, as data: the `[oracle]` table of a job file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OracleSettings {
    /// The command, called as `COMMAND EGRAPH.json EXTRACTION.json`; a
    /// command line such as `srun -N1 ./synth.sh` works too.
    pub command: String,
    /// When the oracle prints a JSON object, the metrics to learn, as a
    /// comma list (`area,delay`); the first leads.
    pub metric: Option<String>,
    /// Text that joins the oracle's identity (a tool version no file shows).
    pub tag: Option<String>,
    /// Oracle calls in parallel.
    pub jobs: usize,
    /// Seconds before a call is stopped and recorded as failed.
    pub timeout: f64,
    /// Times a failed label is tried again when asked for again.
    pub retries: usize,
}

impl Default for OracleSettings {
    fn default() -> Self {
        OracleSettings { command: String::new(), metric: None, tag: None, jobs: 2, timeout: 600.0, retries: 1 }
    }
}

impl OracleSettings {
    /// The oracle; `outputs` (the label log, model and result files) never
    /// count towards its identity.
    pub fn oracle(&self, outputs: &[&Path]) -> Result<Oracle> {
        if self.command.trim().is_empty() {
            bail!("no oracle command (--oracle, or `command` in the [oracle] table)");
        }
        if !(self.timeout > 0.0 && self.timeout.is_finite() && self.timeout < 1e9) {
            bail!("the oracle timeout must be a positive number of seconds, got {}", self.timeout);
        }
        let mut oracle = Oracle::new(self.command.clone(), Duration::from_secs_f64(self.timeout));
        oracle.metrics = parse_metric_list(self.metric.as_deref())?;
        oracle.tag = self.tag.clone();
        oracle.exclude = outputs.iter().map(|p| p.to_path_buf()).collect();
        Ok(oracle)
    }
}

impl Oracle {
    /// The oracle `command` with a per-call `timeout`, no metrics, tag or
    /// exclusions (set those fields before the first call).
    pub fn new(command: impl Into<String>, timeout: Duration) -> Self {
        Oracle {
            command: command.into(),
            metrics: Vec::new(),
            timeout,
            tag: None,
            exclude: Vec::new(),
            identity: std::sync::OnceLock::new(),
        }
    }

    /// A stable hash of what this oracle is, computed on first use: the
    /// command line and tag (not the metrics: a label holds every number
    /// the oracle printed, so runs learning different metrics share
    /// labels); the contents of every word of the command line that names a
    /// file; and the contents of the regular files beside each such file
    /// (its directory, not below; hidden files, `*.jsonl` and `*.log` logs
    /// and `exclude` left out), so that editing a cell library next to the
    /// script makes old labels stale. Files over 4 MiB count by name and
    /// size.
    pub fn identity(&self) -> String {
        self.identity.get_or_init(|| self.compute_identity()).clone()
    }

    fn compute_identity(&self) -> String {
        let mut bytes = self.command.clone().into_bytes();
        // An empty slot where the metric once was keeps the identities of
        // oracles that print one number, and so their logged labels.
        bytes.push(0);
        bytes.push(0);
        if let Some(t) = &self.tag {
            bytes.extend_from_slice(t.as_bytes());
        }
        let excluded: Vec<std::path::PathBuf> =
            self.exclude.iter().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())).collect();
        let mut files = std::collections::BTreeSet::new();
        for word in self.command.split_whitespace() {
            let path = Path::new(word.trim_matches(|c| c == '\'' || c == '"'));
            let Ok(path) = std::fs::canonicalize(path) else { continue };
            if !path.is_file() {
                continue;
            }
            files.insert(path.clone());
            if let Some(Ok(entries)) = path.parent().map(std::fs::read_dir) {
                let mut siblings: Vec<std::path::PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .filter(|p| {
                        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        !name.starts_with('.') && !name.ends_with(".jsonl") && !name.ends_with(".log")
                    })
                    .collect();
                siblings.sort();
                files.extend(siblings.into_iter().take(IDENTITY_DIR_FILES));
            }
        }
        for path in files.iter().filter(|p| !excluded.contains(p)) {
            bytes.push(0);
            bytes.extend_from_slice(path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default().as_bytes());
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if size <= IDENTITY_FILE_BYTES {
                if let Ok(contents) = std::fs::read(path) {
                    bytes.extend_from_slice(&contents);
                }
            } else {
                bytes.extend_from_slice(&size.to_le_bytes());
            }
        }
        crate::egraph::hash_hex(&bytes)
    }

    /// Runs the oracle on the two files and reads its verdict. Errors only
    /// when the process cannot be started at all.
    pub fn call(&self, egraph: &Path, extraction: &Path) -> Result<Verdict> {
        let start = Instant::now();
        // Registered under the same lock that `terminate_all` takes, so no
        // call starts unseen after it.
        let mut live = live_groups();
        if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(Verdict::Failed("not started: smoothe is being interrupted".into()));
        }
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
        let group = child.id() as i32;
        live.push(group);
        drop(live);
        // Drain the pipes on threads so a chatty oracle cannot block; what
        // they read stays readable even if a descendant never closes them.
        let out_buf = drain(child.stdout.take().expect("piped"));
        let err_buf = drain(child.stderr.take().expect("piped"));
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if start.elapsed() >= self.timeout {
                stop_group(group, &mut child);
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        live_groups().retain(|&g| g != group);
        // A descendant that left the group may hold the pipes open: wait a
        // moment for them to close, then take what was read.
        let closed_by = Instant::now() + PIPE_GRACE;
        while (Arc::strong_count(&out_buf.0) > 1 || Arc::strong_count(&err_buf.0) > 1) && Instant::now() < closed_by {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stdout = out_buf.text();
        let stderr = err_buf.text();
        let tail = |s: &str| {
            let lines: Vec<&str> = s.lines().rev().take(5).collect();
            lines.into_iter().rev().collect::<Vec<_>>().join("\n")
        };
        let Some(status) = status else {
            return Ok(Verdict::Failed(format!("timed out after {:?}; stderr: {}", self.timeout, tail(&stderr))));
        };
        if !status.success() {
            return Ok(Verdict::Failed(format!("{status}; stderr: {}", tail(&stderr))));
        }
        Ok(match parse_metrics(&stdout, &self.metrics) {
            Ok(measured) => Verdict::Measured(measured),
            Err(e) => Verdict::Failed(format!("{e:#}; stdout: {}; stderr: {}", tail(&stdout), tail(&stderr))),
        })
    }

    /// The metric a single-metric run learns: the first listed, or `None`
    /// for the oracle's only number.
    pub fn primary(&self) -> Option<&str> {
        self.metrics.first().map(String::as_str)
    }
}

/// The metrics of a comma list (`area,delay`), each named once; none for
/// `None`.
pub fn parse_metric_list(list: Option<&str>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for name in list.unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if out.iter().any(|m| m == name) {
            bail!("metric {name:?} is listed twice in {:?}", list.unwrap_or(""));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// Reads what an oracle printed: its last non-empty line is a finite number
/// (named [`BARE_METRIC`]) or a JSON object whose finite numbers are all
/// kept. Each of `wanted` must be among them; with none wanted, exactly
/// one number must be.
pub fn parse_metrics(stdout: &str, wanted: &[String]) -> Result<Measurement> {
    let Some(line) = stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        bail!("the oracle printed nothing");
    };
    let mut measured = Measurement::new();
    if let Ok(x) = line.parse::<f64>() {
        if !wanted.is_empty() {
            bail!("the oracle printed a bare number, but --metric {} was given", wanted.join(","));
        }
        if !x.is_finite() {
            bail!("the oracle printed a non-finite cost {x}");
        }
        measured.insert(BARE_METRIC.to_string(), x);
        return Ok(measured);
    }
    let obj: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("last line {line:?} is neither a number nor JSON"))?;
    let obj = obj.as_object().with_context(|| format!("last line {line:?} is not a JSON object"))?;
    for (name, value) in obj {
        if let Some(x) = value.as_f64().filter(|x| x.is_finite()) {
            measured.insert(name.clone(), x);
        }
    }
    for m in wanted {
        if !measured.contains_key(m) {
            bail!("no finite number {m:?} in {line}");
        }
    }
    if wanted.is_empty() && measured.len() != 1 {
        bail!("the oracle printed {} numbers; choose the metrics with --metric", measured.len());
    }
    Ok(measured)
}

/// The one number a single-metric reader takes from `measured`: `metric`,
/// or without one the only number there is.
pub fn pick(measured: &Measurement, metric: Option<&str>) -> Option<f64> {
    match metric {
        Some(m) => measured.get(m).copied(),
        None if measured.len() == 1 => measured.values().next().copied(),
        None => None,
    }
}

/// Reads one cost from an oracle's stdout: [`parse_metrics`] with `metric`
/// wanted, then [`pick`].
pub fn parse_cost(stdout: &str, metric: Option<&str>) -> Result<f64> {
    let wanted: Vec<String> = metric.map(String::from).into_iter().collect();
    let measured = parse_metrics(stdout, &wanted)?;
    pick(&measured, metric).context("the oracle printed no usable number")
}
