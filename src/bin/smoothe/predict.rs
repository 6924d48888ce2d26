//! `smoothe predict`.

use crate::extract::note_estimated_reference;
use anyhow::Result;
use smoothe::jobs::PredictJob;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PredictArgs {
    /// The trained model.
    #[arg(long)]
    model: PathBuf,
    /// Device for tensor work: cpu, or cuda (needs a build with `--features cuda`) [default: cpu, or $SMOOTHE_DEVICE].
    #[arg(long, env = "SMOOTHE_DEVICE")]
    device: Option<String>,
    /// Print one JSON object per extraction (its file, mean, std, score,
    /// distance, outside, features_outside) instead of a sentence, for scripts.
    #[arg(long)]
    json: bool,
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
    /// Extractions (any file `smoothe check` accepts).
    #[arg(required = true)]
    extractions: Vec<PathBuf>,
}

pub fn run(a: PredictArgs) -> Result<ExitCode> {
    let job = PredictJob { model: a.model, device: a.device.unwrap_or_else(|| "cpu".into()) };
    let (verdicts, reference) = job.run(&a.egraph, &a.extractions)?;
    for (path, v) in a.extractions.iter().zip(&verdicts) {
        if a.json {
            let mut line = serde_json::to_value(v)?;
            line["extraction"] = serde_json::json!(path);
            println!("{line}");
            continue;
        }
        let p = v.prediction;
        println!(
            "{}: {:.4} +- {:.4} (score {:.4}; {:.2} spacings from the nearest training row; {} feature(s) outside the training range)",
            path.display(),
            p.mean,
            p.std,
            v.score,
            p.distance,
            p.features_outside
        );
    }
    note_estimated_reference(reference);
    Ok(ExitCode::SUCCESS)
}
