//! The small commands: `check`, `info` and `export`.

use crate::terminal::write_stdout;
use anyhow::{Context, Result};
use smoothe::extraction::OriginalExtraction;
use smoothe::{load, preprocess, report};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
    /// The extraction: an object with "choices", or a bare class -> node map.
    extraction: PathBuf,
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Output format.
    #[arg(long, default_value = "blif", value_parser = ["blif"])]
    format: String,
    /// Write here instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
    /// The extraction (any file `smoothe check` accepts).
    extraction: PathBuf,
}

pub fn check(a: CheckArgs) -> Result<ExitCode> {
    let graph = load::load_file(&a.egraph)?;
    let ex = OriginalExtraction::load_file(&graph, &a.extraction)?;
    match ex.check(&graph) {
        Ok(order) => {
            println!(
                "valid: dag cost {}, tree cost {}, {} classes",
                ex.dag_cost(&graph)?,
                ex.tree_cost(&graph)?,
                order.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(defect) => {
            eprintln!("invalid: {defect}");
            Ok(ExitCode::from(1))
        }
    }
}

pub fn info(a: InfoArgs) -> Result<ExitCode> {
    let graph = load::load_file(&a.egraph)?;
    let problem = preprocess::preprocess(&graph).with_context(|| format!("{}", a.egraph.display()))?;
    let for_oracle = preprocess::preprocess_for_oracle(&graph)?;
    write_stdout(&report::info(&graph, &problem, &for_oracle))?;
    Ok(ExitCode::SUCCESS)
}

pub fn export(a: ExportArgs) -> Result<ExitCode> {
    // Read once: the graph and, for an e-graph made by `saturate`, its
    // circuit's input and output names.
    let (graph, recorded) = load::load_file_recorded(&a.egraph)?;
    let names = smoothe::export::CircuitNames::of_record(&recorded);
    let ex = OriginalExtraction::load_valid_file(&graph, &a.extraction)?;
    debug_assert_eq!(a.format, "blif");
    let stem = a.egraph.file_stem().and_then(|s| s.to_str()).unwrap_or("design");
    let text = match names {
        Some(names) => smoothe::export::to_blif_named(&graph, &ex, stem, &names),
        None => smoothe::export::to_blif(&graph, &ex, stem),
    }
    .with_context(|| format!("{}", a.egraph.display()))?;
    match a.output {
        Some(p) => smoothe::files::write_text(&p, &text)?,
        None => write_stdout(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
