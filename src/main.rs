//! The `smoothe` command line: parses arguments and calls the library.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use smoothe::egraph::EGraph;
use smoothe::extract::{self, ExtractOptions, OptimizerKind, Parameterisation, SmoothEConfig};
use smoothe::extraction::Extraction;
use smoothe::relax::Combine;
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
#[allow(clippy::large_enum_variant)] // parsed once
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
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        smoothe: SmoothEArgs,
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

/// Where and how long-running work runs.
#[derive(Args)]
struct RunArgs {
    /// Device for tensor work: cpu, or cuda (needs a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Worker threads (0: one per core). Same seed and thread count, same result.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// SmoothE settings: defaults from the built-in configuration (the same as
/// configs/smoothe.toml) or `--config`, each overridable here.
#[derive(Args)]
struct SmoothEArgs {
    /// TOML file whose [smoothe] table sets the defaults below.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Propagation rule.
    #[arg(long, value_enum)]
    combine: Option<Combine>,
    /// Optimiser.
    #[arg(long, value_enum)]
    optimizer: Option<OptimizerKind>,
    /// Learning rate.
    #[arg(long)]
    lr: Option<f64>,
    /// Most optimisation steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Restart (or stop) after this many steps without improvement.
    #[arg(long)]
    patience: Option<usize>,
    /// Restarts around the best so far after a plateau.
    #[arg(long)]
    restarts: Option<usize>,
    /// Wall-clock limit in seconds (0: none).
    #[arg(long)]
    time_limit: Option<f64>,
    /// Seeds optimised together (0: from the graph size).
    #[arg(long)]
    batch: Option<usize>,
    /// Score parameterisation.
    #[arg(long, value_enum)]
    parameterisation: Option<Parameterisation>,
    /// Embedding width (embedding parameterisation).
    #[arg(long)]
    embedding_dim: Option<usize>,
    /// Softmax temperature.
    #[arg(long)]
    temperature: Option<f64>,
    /// Gumbel noise scale (0: off).
    #[arg(long)]
    gumbel: Option<f64>,
    /// Decode every N steps.
    #[arg(long)]
    decode_every: Option<usize>,
    /// Initial acyclicity penalty weight.
    #[arg(long)]
    penalty_weight: Option<f64>,
    /// Penalty weight growth when a decoded seed had a cycle.
    #[arg(long)]
    penalty_growth: Option<f64>,
    /// Logit bonus of the starting (greedy) extraction.
    #[arg(long)]
    init_bias: Option<f64>,
    /// Initial logit noise of the last seed.
    #[arg(long)]
    init_noise: Option<f64>,
    /// Passes of single-class-switch polishing at the end (0: none).
    #[arg(long)]
    polish_passes: Option<usize>,
    /// Fixed-point tolerance in cyclic components.
    #[arg(long)]
    tolerance: Option<f64>,
    /// Most fixed-point sweeps in a cyclic component.
    #[arg(long)]
    max_sweeps: Option<usize>,
}

impl SmoothEArgs {
    fn resolve(&self) -> Result<SmoothEConfig> {
        let mut c: SmoothEConfig = match &self.config {
            Some(path) => smoothe::config::load_section(path, "smoothe")?,
            None => SmoothEConfig::default(),
        };
        macro_rules! set {
            ($($flag:ident => $field:ident),*) => { $( if let Some(v) = self.$flag { c.$field = v; } )* };
        }
        set!(combine => combine, optimizer => optimizer, lr => learning_rate, steps => steps,
             patience => patience, restarts => restarts, time_limit => time_limit, batch => batch,
             parameterisation => parameterisation, embedding_dim => embedding_dim,
             temperature => temperature, gumbel => gumbel, decode_every => decode_every,
             penalty_weight => penalty_weight, penalty_growth => penalty_growth,
             init_bias => init_bias, init_noise => init_noise, tolerance => tolerance, polish_passes => polish_passes,
             max_sweeps => max_sweeps);
        Ok(c)
    }
}

impl RunArgs {
    fn device(&self) -> Result<candle_core::Device> {
        smoothe::device::parse(&self.device)
    }
    fn init_threads(&self) -> Result<()> {
        if self.threads > 0 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .build_global()
                .context("cannot start the thread pool")?;
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    smoothe::device::tune_allocator();
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
        Command::Extract { method, seed, output, run, smoothe, egraph } => {
            run.init_threads()?;
            let options =
                ExtractOptions { seed, smoothe: smoothe.resolve()?, device: run.device()?, progress: !run.quiet };
            let graph = load::load_file(&egraph)?;
            let start = Instant::now();
            let problem = preprocess::preprocess(&graph).with_context(|| format!("{}", egraph.display()))?;
            let extractor = extract::by_name(&method, &options)?;
            let outcome = extract::run(extractor.as_ref(), &graph, &problem)?;
            let seconds = start.elapsed().as_secs_f64();
            let mut extra = outcome.details.clone();
            extra.insert("seed".into(), serde_json::json!(seed));
            let result = outcome.extraction.result_json(&graph, &method, seconds, serde_json::Value::Object(extra))?;
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
            std::io::stdout().write_all(text.as_bytes()).context("cannot write to stdout")
        }
    }
}
