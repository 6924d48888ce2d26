//! The `smoothe` command line: parses flags into the library's job structs
//! ([`smoothe::jobs`]) and prints what they return. All terminal output
//! (results, tables, progress bars, warnings) happens here.

mod common;
mod extract;
mod fit_delays;
mod label;
mod predict;
mod saturate;
mod search;
mod terminal;
mod tools;
mod train_cost;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
#[command(name = "smoothe", version, about = "Extract the best program from an e-graph")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once
enum Command {
    /// Extract one term from an e-graph and write the result as JSON.
    Extract(extract::ExtractArgs),
    /// Check an extraction (from any tool) against an e-graph; exit 1 if invalid.
    Check(tools::CheckArgs),
    /// Print the size and shape of an e-graph.
    Info(tools::InfoArgs),
    /// Learn a cost model from an oracle (a script measuring the real cost)
    /// and find a cheap extraction by it.
    TrainCost(train_cost::TrainCostArgs),
    /// Search with the oracle in the loop: simulated annealing over valid
    /// extractions, every step an oracle call (a baseline for train-cost at
    /// equal calls), its moves optionally screened by a model (--screen).
    Search(search::SearchArgs),
    /// Measure extractions with the oracle, through the label log: labels
    /// already logged are reused, new ones are logged. Prints one line per
    /// extraction.
    Label(label::LabelArgs),
    /// Print a trained model's prediction for given extractions: mean,
    /// spread, the conservative score `extract --model` minimises, and how
    /// far each lies from the model's training data. No oracle call.
    Predict(predict::PredictArgs),
    /// Write an extraction of a boolean e-graph as a netlist.
    Export(tools::ExportArgs),
    /// Build an e-graph from a combinational circuit (BLIF or AIGER) by
    /// equality saturation with Boolean rewrites (esyn operators and costs).
    Saturate(saturate::SaturateArgs),
    /// Learn a delay per operator from an oracle's measured delay (a
    /// static-timing model: arrival time over the chosen DAG), for
    /// `extract --op-delays` with --objective delay or --constraint.
    FitDelays(fit_delays::FitDelaysArgs),
}

/// Set by SIGINT or SIGTERM.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// On SIGINT or SIGTERM, stop the oracle calls in flight (SIGTERM to each
/// process group, SIGKILL after a grace period) so no synthesis job or
/// cluster allocation outlives the run, then exit with 130. Labels already
/// logged stay in the log.
fn stop_oracles_on_interrupt() {
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_interrupt as *const () as libc::sighandler_t);
    }
    std::thread::spawn(|| loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            interrupted_exit();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    });
}

/// Stops the oracle calls in flight and exits with 130.
fn interrupted_exit() -> ! {
    let stopped = smoothe::learn::oracle::process::terminate_all();
    eprintln!("interrupted: stopped {stopped} oracle call(s) in flight; labels so far are in the log");
    std::process::exit(130);
}

fn main() -> ExitCode {
    smoothe::device::tune_allocator();
    stop_oracles_on_interrupt();
    terminal::show_warnings();
    let result = match Cli::parse().command {
        Command::Extract(args) => extract::run(args),
        Command::Check(args) => tools::check(args),
        Command::Info(args) => tools::info(args),
        Command::TrainCost(args) => train_cost::run(args),
        Command::Search(args) => search::run(args),
        Command::Label(args) => label::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Export(args) => tools::export(args),
        Command::Saturate(args) => saturate::run(args),
        Command::FitDelays(args) => fit_delays::run(args),
    };
    if INTERRUPTED.load(Ordering::SeqCst) {
        // The work ended because of the interrupt (calls refused or
        // killed): finish stopping the oracles, then exit as interrupted.
        interrupted_exit();
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
