//! `smoothe predict`.

use crate::extract::note_design;
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
    /// distance, outside, features_outside, and measured: the real cost the
    /// oracle measured for this very extraction, the same choices in every
    /// class it reaches, in training, when it did) instead of a sentence,
    /// for scripts.
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
    let (verdicts, design) = job.run(&a.egraph, &a.extractions)?;
    for (path, v) in a.extractions.iter().zip(&verdicts) {
        if a.json {
            let mut line = serde_json::to_value(v)?;
            line["extraction"] = serde_json::json!(path);
            println!("{line}");
            continue;
        }
        let p = v.prediction;
        let measured = p.measured.map_or(String::new(), |c| format!("; measured {c:.4} in training"));
        println!(
            "{}: {:.4} +- {:.4} (the members' spread {:.4}; score {:.4}; {:.2} spacings from the nearest training row; {} feature(s) outside the training range{measured})",
            path.display(),
            p.mean,
            p.error,
            p.std,
            v.score,
            p.distance,
            p.features_outside
        );
    }
    note_design(design);
    Ok(ExitCode::SUCCESS)
}
