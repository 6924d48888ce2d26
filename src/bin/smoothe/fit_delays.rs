//! `smoothe fit-delays`.

use crate::common::{init_threads, OracleArgs, RunArgs};
use crate::terminal::{bars, write_json};
use anyhow::Result;
use smoothe::jobs::{FitDelaysJob, LabelJob};
use smoothe::timing::fit::FitConfig;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct FitDelaysArgs {
    #[command(flatten)]
    oracle: OracleArgs,
    /// Extractions to label and fit on (depth-greedy, dag-greedy and
    /// greedy among them; labels already in the log are free).
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// Share of the labels held out to test the fit.
    #[arg(long, default_value_t = 0.2)]
    test_share: f64,
    /// Seed of the random extractions.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Label log (default: runs/<egraph>/model.labels.jsonl, shared with
    /// train-cost; labels of another oracle or metric are kept apart).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Where to write the delays, an --op-delays file (default:
    /// runs/<egraph>/delays.json).
    #[arg(long, short)]
    output: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
}

pub fn run(a: FitDelaysArgs) -> Result<ExitCode> {
    init_threads(a.run.threads.unwrap_or(0))?;
    let labels = a.labels.unwrap_or_else(|| LabelJob::default_log(&a.egraph));
    let output = a.output.unwrap_or_else(|| labels.with_file_name("delays.json"));
    let job = FitDelaysJob {
        oracle: a.oracle.settings(),
        labels,
        samples: a.samples,
        test_share: a.test_share,
        seed: a.seed,
        fit: FitConfig::default(),
        output: output.clone(),
    };
    let result = job.run(&a.egraph, bars(!a.run.quiet))?;
    write_json(None, &serde_json::to_value(&result)?)?;
    eprintln!(
        "delays written to {}: fitted on {} labels ({} oracle calls, {} failed); held out {}: mean absolute \
         error {:.4} ({:.2}% of the delay), Spearman {:.3} (unit depth: {:.3})",
        output.display(),
        result.fit.train,
        result.calls,
        result.failed,
        result.fit.test,
        result.fit.test_mae,
        100.0 * result.fit.test_relative_mae,
        result.fit.test_spearman,
        result.fit.test_spearman_unit_depth
    );
    eprintln!(
        "use them with: smoothe extract --op-delays {} --constraint 'delay<=T' {}",
        output.display(),
        a.egraph.display()
    );
    Ok(ExitCode::SUCCESS)
}
