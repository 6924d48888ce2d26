//! The `smoothe` command line: parses arguments and calls the library.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use smoothe::egraph::EGraph;
use smoothe::extract::{self, ExtractOptions};
use smoothe::extraction::Extraction;
use smoothe::{load, preprocess, report};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "smoothe", version, about = "Extract the best program from an e-graph")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Extract one term from an e-graph and write the result as JSON.
    Extract {
        /// Extraction algorithm.
        #[arg(long, default_value = "dag-greedy", value_parser = clap::builder::PossibleValuesParser::new(extract::METHODS))]
        method: String,
        /// Seed for randomised methods.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the result here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// The e-graph (egraph-serialize JSON).
        egraph: PathBuf,
    },
    /// Check an extraction (from any tool) against an e-graph; exit 1 if invalid.
    Check {
        /// The e-graph (egraph-serialize JSON).
        egraph: PathBuf,
        /// The extraction: an object with "choices", or a bare class -> node map.
        extraction: PathBuf,
    },
    /// Print the size and shape of an e-graph.
    Info {
        /// The e-graph (egraph-serialize JSON).
        egraph: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Extract {
            method,
            seed,
            output,
            egraph,
        } => {
            let graph = load::load_file(&egraph)?;
            let start = Instant::now();
            let problem = preprocess::preprocess(&graph).with_context(|| format!("{}", egraph.display()))?;
            let extractor = extract::by_name(&method, &ExtractOptions { seed })?;
            let outcome = extract::run(extractor.as_ref(), &graph, &problem)?;
            let seconds = start.elapsed().as_secs_f64();
            let result =
                outcome
                    .extraction
                    .result_json(&graph, &method, seconds, serde_json::json!({ "seed": seed }))?;
            write_json(output.as_deref(), &result)?;
            eprintln!(
                "{method}: dag cost {}, {} classes, {:.3} s",
                outcome.dag_cost,
                result["choices"].as_object().map_or(0, |m| m.len()),
                seconds
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { egraph, extraction } => {
            let graph = load::load_file(&egraph)?;
            let ex = Extraction::load_file(&graph, &extraction)?;
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
        Command::Info { egraph } => {
            let graph = load::load_file(&egraph)?;
            print!("{}", info_text(&graph, &egraph)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn info_text(graph: &EGraph, path: &Path) -> Result<String> {
    let problem = preprocess::preprocess(graph).with_context(|| format!("{}", path.display()))?;
    Ok(report::info(graph, &problem))
}

fn write_json(path: Option<&Path>, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    match path {
        Some(p) => std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display())),
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(text.as_bytes())
                .context("cannot write to stdout")
        }
    }
}
