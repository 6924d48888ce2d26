//! What the user sees on stderr: the library's `log` warnings, progress
//! bars for its observer, and result output.

use anyhow::{Context, Result};
use smoothe::progress::{quiet, Observer, Progress};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Prints the library's `log` warnings and errors on stderr. The HiGHS
/// binding warns whenever a solve stops at its time limit, which the
/// result's `status` already says, so only its errors are shown.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        let least = if metadata.target().starts_with("highs") { log::Level::Error } else { log::Level::Warn };
        metadata.level() <= least
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let level = if record.level() == log::Level::Error { "error" } else { "warning" };
            eprintln!("{level}: {}", record.args());
        }
    }
    fn flush(&self) {}
}

/// Routes the library's warnings to stderr.
pub fn show_warnings() {
    static LOGGER: StderrLog = StderrLog;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// Progress bars on stderr when `show` and stderr is a terminal; nothing
/// otherwise.
pub fn bars(show: bool) -> Observer {
    if show && std::io::stderr().is_terminal() {
        Arc::new(Bars(Mutex::new(None)))
    } else {
        quiet()
    }
}

/// Draws the library's progress as one indicatif bar at a time.
struct Bars(Mutex<Option<indicatif::ProgressBar>>);

impl Progress for Bars {
    fn begin(&self, what: &str, total: u64) {
        let bar = indicatif::ProgressBar::new(total);
        let template = format!("{{elapsed_precise}} [{{bar:30}}] {what} {{pos}}/{{len}} {{msg}}");
        bar.set_style(
            indicatif::ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        if let Some(old) = self.0.lock().expect("bar lock").replace(bar) {
            old.finish_and_clear();
        }
    }
    fn advance(&self, done: u64, status: &str) {
        if let Some(bar) = &*self.0.lock().expect("bar lock") {
            bar.set_position(done);
            bar.set_message(status.to_string());
        }
    }
    fn end(&self) {
        if let Some(bar) = self.0.lock().expect("bar lock").take() {
            bar.finish_and_clear();
        }
    }
}

/// Writes `value` as pretty JSON to `path` (atomically) or to stdout.
pub fn write_json(path: Option<&Path>, value: &serde_json::Value) -> Result<()> {
    match path {
        Some(p) => smoothe::files::write_json(p, value),
        None => write_stdout(&(serde_json::to_string_pretty(value)? + "\n")),
    }
}

/// Writes `text` to stdout.
pub fn write_stdout(text: &str) -> Result<()> {
    std::io::stdout().write_all(text.as_bytes()).context("cannot write to stdout")
}
