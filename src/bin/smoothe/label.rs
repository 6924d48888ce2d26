//! `smoothe label`.

use crate::common::OracleArgs;
use anyhow::Result;
use smoothe::jobs::LabelJob;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LabelArgs {
    #[command(flatten)]
    oracle: OracleArgs,
    /// Label log (default: runs/<egraph>/model.labels.jsonl, the one
    /// train-cost uses by default).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
    /// Extractions (any file `smoothe check` accepts).
    #[arg(required = true)]
    extractions: Vec<PathBuf>,
}

pub fn run(a: LabelArgs) -> Result<ExitCode> {
    let labels = a.labels.unwrap_or_else(|| LabelJob::default_log(&a.egraph));
    let job = LabelJob { oracle: a.oracle.settings(), labels };
    let mut failed = false;
    for (path, cost) in a.extractions.iter().zip(job.run(&a.egraph, &a.extractions)?) {
        match cost {
            Ok(c) => println!("{}: {c}", path.display()),
            Err(why) => {
                failed = true;
                println!("{}: failed: {}", path.display(), why.replace('\n', " "));
            }
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
