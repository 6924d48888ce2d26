//! The `smoothe` command line: parses arguments and calls the library.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use smoothe::config::Choice;
use smoothe::egraph::EGraph;
use smoothe::extract::{self, ExtractOptions, OptimizerKind, Parameterisation, SmoothEConfig};
use smoothe::extraction::Extraction;
use smoothe::learn::network::Ensemble;
use smoothe::learn::objective::LearnedCost;
use smoothe::progress::{quiet, Observer, Progress};
use smoothe::relax::Combine;
use smoothe::{load, preprocess, report};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
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
        /// Extraction algorithm (default: smoothe with --model or
        /// --quadratic, dag-greedy otherwise).
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(extract::METHODS))]
        method: Option<String>,
        /// Seed for randomised methods.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the result here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Optimise against this trained cost model (smoothe, or random best-of-N).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Optimise linear plus pairwise costs from this JSON file
        /// ({"pairs": [[node_id, node_id, cost], ...]}).
        #[arg(long, conflicts_with = "model")]
        quadratic: Option<PathBuf>,
        /// With --model: add this multiple of the linear (node-cost) objective.
        #[arg(long, default_value_t = 0.0)]
        linear_weight: f64,
        /// With --model: weight of the ensemble's standard deviation in the
        /// objective (mean + kappa * std).
        #[arg(long, default_value_t = smoothe::learn::objective::Conservatism::default().kappa)]
        kappa: f64,
        /// With --model: target standard deviations charged per range-width a
        /// feature lies outside the labels the model was trained on (0: off).
        #[arg(long, default_value_t = smoothe::learn::objective::Conservatism::default().trust)]
        trust: f64,
        /// With --model and --method random: how many samples to judge.
        #[arg(long, default_value_t = 1000)]
        samples: usize,
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
    /// Learn a cost model from an oracle (a script measuring the real cost)
    /// and find a cheap extraction by it.
    TrainCost {
        #[command(flatten)]
        oracle: OracleArgs,
        /// TOML file whose [train-cost] and [smoothe] tables set the defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Most oracle calls (labels already in the log are free).
        #[arg(long)]
        budget: Option<usize>,
        /// Extractions labelled before the first model.
        #[arg(long)]
        initial: Option<usize>,
        /// Active rounds.
        #[arg(long)]
        rounds: Option<usize>,
        /// Extractions the model picks for labelling per round (up to a
        /// quarter from SmoothE against the model, the rest screened).
        #[arg(long)]
        per_round: Option<usize>,
        /// Candidates (moves, perturbations and crossovers of the best
        /// labelled extractions, uniform random ones) the model screens per round.
        #[arg(long)]
        screen: Option<usize>,
        /// Screened candidates labelled per round at random, unranked.
        #[arg(long)]
        explore: Option<usize>,
        /// Features of the model.
        #[arg(long, value_parser = choice::<smoothe::learn::features::FeatureKind>())]
        features: Option<smoothe::learn::features::FeatureKind>,
        /// How the model ranks screened candidates for labelling (random:
        /// ignore the model, an ablation).
        #[arg(long, value_parser = choice::<smoothe::learn::active::Acquisition>())]
        acquisition: Option<smoothe::learn::active::Acquisition>,
        /// SmoothE steps per optimisation run.
        #[arg(long)]
        smoothe_steps: Option<usize>,
        /// Where to write the model (default runs/<egraph>/model.safetensors;
        /// the label log, rounds and best extraction go beside it).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Label log (default: next to the model, .labels.jsonl).
        #[arg(long)]
        labels: Option<PathBuf>,
        /// Overwrite an existing model file that is not this job's (another
        /// e-graph or oracle, or not a smoothe model).
        #[arg(long)]
        force: bool,
        /// Adapt this model (trained on several designs) instead of
        /// starting from nothing: no initial samples, rounds guided by it
        /// from the start, and every model fine-tuned from it.
        #[arg(long)]
        init_model: Option<PathBuf>,
        /// Seed of sampling, training and optimisation.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        run: RunArgs,
        /// The e-graph(s) (egraph-serialize JSON). With several, each is
        /// labelled by its own loop (--budget calls each) and one model that
        /// transfers to new designs is trained on all of them.
        #[arg(required = true)]
        egraphs: Vec<PathBuf>,
    },
    /// Search with the oracle in the loop and no model: simulated annealing
    /// over valid extractions, every step an oracle call (a baseline for
    /// train-cost at equal calls).
    Search {
        #[command(flatten)]
        oracle: OracleArgs,
        /// Most oracle calls, the greedy, dag-greedy and linear-SmoothE
        /// starting points included (labels already in the log are free).
        #[arg(long, default_value_t = 300)]
        budget: usize,
        /// Most classes one move switches.
        #[arg(long, default_value_t = smoothe::learn::anneal::AnnealConfig::default().moves)]
        moves: usize,
        /// Label log.
        #[arg(long)]
        labels: PathBuf,
        /// Write the best extraction here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Seed of the moves and acceptances.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        run: RunArgs,
        /// The e-graph (egraph-serialize JSON).
        egraph: PathBuf,
    },
    /// Measure extractions with the oracle, through the label log: labels
    /// already logged are reused, new ones are logged. Prints one line per
    /// extraction.
    Label {
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
    },
    /// Write an extraction of a boolean e-graph as a netlist.
    Export {
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
    },
}

/// The oracle and how it is called.
#[derive(Args)]
struct OracleArgs {
    /// The oracle, called as `ORACLE EGRAPH.json EXTRACTION.json`; a
    /// command line such as 'srun -N1 ./synth.sh' works too.
    #[arg(long)]
    oracle: String,
    /// When the oracle prints a JSON object, the metric to use.
    #[arg(long)]
    metric: Option<String>,
    /// Oracle calls in parallel.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Seconds before an oracle call is killed and recorded as failed.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Text that joins the oracle's identity, for dependencies no file
    /// shows (a tool version): labels made under another tag are not reused.
    #[arg(long)]
    oracle_tag: Option<String>,
    /// Times a failed label (a timeout included) is tried again when an
    /// extraction is asked for again, on this run or a later one; each
    /// attempt counts towards the budget.
    #[arg(long, default_value_t = 1)]
    retries: usize,
}

impl OracleArgs {
    /// The oracle; `outputs` (the label log, model and result files) never
    /// count towards its identity.
    fn oracle(&self, outputs: &[&Path]) -> Result<smoothe::learn::oracle::Oracle> {
        if !(self.timeout > 0.0 && self.timeout.is_finite() && self.timeout < 1e9) {
            anyhow::bail!("--timeout must be a positive number of seconds");
        }
        let mut oracle =
            smoothe::learn::oracle::Oracle::new(self.oracle.clone(), std::time::Duration::from_secs_f64(self.timeout));
        oracle.metric = self.metric.clone();
        oracle.tag = self.oracle_tag.clone();
        oracle.exclude = outputs.iter().map(|p| p.to_path_buf()).collect();
        Ok(oracle)
    }
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
    #[arg(long, value_parser = choice::<Combine>())]
    combine: Option<Combine>,
    /// Optimiser.
    #[arg(long, value_parser = choice::<OptimizerKind>())]
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
    #[arg(long, value_parser = choice::<Parameterisation>())]
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
    /// Share of seeds starting from noise alone, not near greedy.
    #[arg(long)]
    explore_seeds: Option<f64>,
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
             init_bias => init_bias, init_noise => init_noise, tolerance => tolerance, polish_passes => polish_passes, explore_seeds => explore_seeds,
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

/// Set by SIGINT or SIGTERM.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
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
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            interrupted_exit();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    });
}

fn main() -> ExitCode {
    smoothe::device::tune_allocator();
    stop_oracles_on_interrupt();
    static LOGGER: StderrLog = StderrLog;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let cli = Cli::parse();
    let result = run(cli);
    if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
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

/// The per-round table of a train-cost run, on stderr.
fn print_rounds(rounds: &[smoothe::learn::active::RoundSummary]) {
    let opt = |f: Option<f64>| f.map_or("-".to_string(), |c| format!("{c:.4}"));
    eprintln!(
        "round  labels  calls  test-MAE  test-rho  best-real  optimum-pred  optimum-real    greedy  dag-greedy  linear-smoothe"
    );
    for r in rounds {
        eprintln!(
            "{:>5}  {:>6}  {:>5}  {:>8.4}  {:>8.3}  {:>9.4}  {:>12}  {:>12}  {:>8}  {:>10}  {:>14}",
            r.round,
            r.labels,
            r.oracle_calls,
            r.report.test_mae,
            r.report.test_spearman,
            r.best_real_cost,
            r.optimum.as_ref().map_or("-".into(), |o| format!("{:.2}+-{:.2}", o.predicted.mean, o.predicted.std)),
            opt(r.optimum.as_ref().and_then(|o| o.real)),
            opt(r.greedy_real_cost),
            opt(r.dag_greedy_real_cost),
            opt(r.linear_smoothe_real_cost),
        );
    }
}

/// A clap parser offering a [`Choice`]'s names.
fn choice<T: Choice>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(T::NAMES).map(|name| T::parse(&name).expect("a listed name parses"))
}

/// Prints the library's `log` warnings and errors on stderr.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let level = if record.level() == log::Level::Error { "error" } else { "warning" };
            eprintln!("{level}: {}", record.args());
        }
    }
    fn flush(&self) {}
}

/// Progress bars on stderr when `show` and stderr is a terminal; nothing
/// otherwise.
fn bars(show: bool) -> Observer {
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
        bar.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{{elapsed_precise}} [{{bar:30}}] {what} {{pos}}/{{len}} {{msg}}"
            ))
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

/// Stops the oracle calls in flight and exits with 130.
fn interrupted_exit() -> ! {
    let stopped = smoothe::learn::oracle::terminate_all();
    eprintln!("interrupted: stopped {stopped} oracle call(s) in flight; labels so far are in the log");
    std::process::exit(130);
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Extract {
            method,
            seed,
            output,
            model,
            quadratic,
            linear_weight,
            kappa,
            trust,
            samples,
            run,
            smoothe,
            egraph,
        } => {
            run.init_threads()?;
            let options =
                ExtractOptions { seed, smoothe: smoothe.resolve()?, device: run.device()?, progress: bars(!run.quiet) };
            let method = method.unwrap_or_else(|| {
                if model.is_some() || quadratic.is_some() { "smoothe" } else { "dag-greedy" }.to_string()
            });
            let graph = load::load_file(&egraph)?;
            let start = Instant::now();
            let problem = preprocess::preprocess(&graph).with_context(|| format!("{}", egraph.display()))?;
            let learned = match &model {
                Some(path) => {
                    let ensemble = Ensemble::load(path, &options.device)?;
                    let conservatism = smoothe::learn::objective::Conservatism { kappa, trust, ..Default::default() };
                    Some(
                        LearnedCost::new(ensemble, &problem, &graph, conservatism, linear_weight, &options.device)
                            .with_context(|| format!("{}", path.display()))?,
                    )
                }
                None => None,
            };
            let quadratic = match &quadratic {
                Some(path) => Some(smoothe::cost::QuadraticCost::load(path, &problem, &graph, &options.device)?),
                None => None,
            };
            let cost_model: Option<&dyn smoothe::cost::CostModel> = match (&learned, &quadratic) {
                (Some(m), _) => Some(m),
                (None, Some(q)) => Some(q),
                (None, None) => None,
            };
            let extractor = match cost_model {
                Some(m) => extract::with_model(&method, &options, m, samples)?,
                None => extract::by_name(&method, &options)?,
            };
            let outcome = extract::run(extractor.as_ref(), &graph, &problem)?;
            let seconds = start.elapsed().as_secs_f64();
            let mut extra = outcome.details.clone();
            extra.insert("seed".into(), serde_json::json!(seed));
            let mut verdict = None;
            if let Some(m) = &learned {
                let reduced = problem
                    .from_original(&outcome.extraction)
                    .context("the extraction does not map onto the preprocessed graph (a bug)")?;
                let p = m.predict(std::slice::from_ref(&reduced))?[0];
                extra.insert("prediction".into(), serde_json::to_value(p)?);
                if let Some(r) = m.reference() {
                    extra.insert("reference".into(), serde_json::to_value(r)?);
                }
                verdict = Some((p, m.reference()));
            }
            let result = outcome.extraction.result_json(&graph, &method, seconds, serde_json::Value::Object(extra))?;
            write_json(output.as_deref(), &result)?;
            eprintln!(
                "{method}: dag cost {}, {} classes, {:.3} s",
                outcome.dag_cost,
                result["choices"].as_object().map_or(0, |m| m.len()),
                seconds
            );
            if let Some((p, reference)) = verdict {
                eprintln!("model predicts {:.4} +- {:.4}", p.mean, p.std);
                if let Some(r) = reference.filter(|r| !r.measured) {
                    eprintln!(
                        "note: the model was not trained on this design; its prediction is relative to the \
                         dag-greedy extraction, whose cost is estimated at {:.4} (+-{:.0}%) from the training \
                         designs, so the absolute figure is rough (the choice of extraction does not depend on it)",
                        r.cost,
                        100.0 * r.spread
                    );
                }
                if p.features_outside > 0 {
                    eprintln!(
                        "warning: {} feature(s) of this extraction lie outside the range the model was trained on \
                         (total overshoot {:.2} range-widths); the prediction is an extrapolation",
                        p.features_outside, p.outside
                    );
                }
            }
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
        Command::TrainCost {
            oracle,
            config,
            budget,
            initial,
            rounds,
            per_round,
            screen,
            explore,
            features,
            acquisition,
            smoothe_steps,
            out,
            labels,
            force,
            init_model,
            seed,
            run,
            egraphs,
        } => {
            use smoothe::learn::active::{train_cost, TrainCostConfig};
            use smoothe::learn::corpus::{train_corpus, Design};
            run.init_threads()?;
            let device = run.device()?;
            let mut cfg: TrainCostConfig = match &config {
                Some(p) => smoothe::config::load_section(p, "train-cost")?,
                None => TrainCostConfig::default(),
            };
            let smoothe_cfg: extract::SmoothEConfig = match &config {
                Some(p) => smoothe::config::load_section(p, "smoothe")?,
                None => extract::SmoothEConfig::default(),
            };
            macro_rules! set {
                ($($flag:ident => $field:ident),*) => { $( if let Some(v) = $flag { cfg.$field = v; } )* };
            }
            set!(budget => budget, initial => initial, rounds => rounds, per_round => per_round,
                 screen => screen, explore => explore, features => features, acquisition => acquisition,
                 smoothe_steps => smoothe_steps);
            let graphs = egraphs.iter().map(|p| load::load_file(p)).collect::<Result<Vec<_>>>()?;
            let problems = graphs
                .iter()
                .zip(&egraphs)
                .map(|(g, p)| preprocess::preprocess(g).with_context(|| format!("{}", p.display())))
                .collect::<Result<Vec<_>>>()?;
            let stem = |p: &Path| p.file_stem().and_then(|s| s.to_str()).unwrap_or("model").to_string();
            let run_name = match egraphs.len() {
                1 => stem(&egraphs[0]),
                n => format!("{}-and-{}-more", stem(&egraphs[0]), n - 1),
            };
            let out = out.unwrap_or_else(|| PathBuf::from("runs").join(&run_name).join("model.safetensors"));
            let labels = labels.unwrap_or_else(|| out.with_extension("labels.jsonl"));
            let rounds_path = out.with_extension("rounds.json");
            let best_path = out.with_extension("best.json");
            let (jobs, retries) = (oracle.jobs, oracle.retries);
            let oracle = oracle.oracle(&[&out, &labels, &rounds_path, &best_path])?;
            if out.exists() && !force {
                // A rerun of the same job may replace its own model; nothing else.
                let ours = Ensemble::load(&out, &candle_core::Device::Cpu).is_ok_and(|m| {
                    graphs.iter().all(|g| m.meta.egraphs.contains(&g.fingerprint()))
                        && m.meta.oracle == oracle.identity()
                });
                if !ours {
                    anyhow::bail!(
                        "{} exists and is not a model of this e-graph and oracle; pass --force to overwrite it, \
                         or choose another --out",
                        out.display()
                    );
                }
            }
            let init = match &init_model {
                Some(p) => Some(Ensemble::load(p, &device)?),
                None => None,
            };
            let mut log = open_log(&labels)?;
            let labelers: Vec<_> =
                graphs.iter().zip(&egraphs).map(|(g, p)| labeler(&oracle, p, g, jobs, retries, !run.quiet)).collect();
            let optimiser = extract::SmoothE { config: smoothe_cfg, seed, device: device.clone(), progress: quiet() };
            let designs: Vec<Design> = egraphs
                .iter()
                .zip(&graphs)
                .zip(&problems)
                .zip(&labelers)
                .map(|(((p, original), problem), labeler)| Design {
                    name: p.display().to_string(),
                    original,
                    problem,
                    labeler,
                })
                .collect();
            let outcome = if designs.len() == 1 {
                let d = &designs[0];
                train_cost(d.original, d.problem, d.labeler, &mut log, &cfg, &optimiser, init.as_ref(), &device)
                    .map(|o| (o.model.clone(), vec![o]))
            } else {
                train_corpus(&designs, &mut log, &cfg, &optimiser, init.as_ref(), &device).map(|o| (o.model, o.designs))
            };
            let _ = std::fs::remove_dir_all(&labelers[0].work_dir);
            let (model, outcomes) = outcome?;
            model.save(&out)?;
            let mut bests = Vec::new();
            for ((p, g), o) in egraphs.iter().zip(&graphs).zip(&outcomes) {
                bests.push(o.best.result_json(
                    g,
                    "train-cost",
                    0.0,
                    serde_json::json!({ "real_cost": o.best_cost, "seed": seed, "egraph": p }),
                )?);
            }
            if outcomes.len() == 1 {
                write_json(Some(&rounds_path), &serde_json::to_value(&outcomes[0].rounds)?)?;
                write_json(Some(&best_path), &bests[0])?;
            } else {
                let per_design: serde_json::Map<String, serde_json::Value> = egraphs
                    .iter()
                    .zip(&outcomes)
                    .map(|(p, o)| Ok((p.display().to_string(), serde_json::to_value(&o.rounds)?)))
                    .collect::<Result<_>>()?;
                let rounds_json = serde_json::json!({ "designs": per_design, "corpus_report": model.meta.report });
                write_json(Some(&rounds_path), &rounds_json)?;
                write_json(Some(&best_path), &serde_json::Value::Array(bests))?;
            }
            for (p, o) in egraphs.iter().zip(&outcomes) {
                if outcomes.len() > 1 {
                    eprintln!("{}:", p.display());
                }
                print_rounds(&o.rounds);
            }
            if outcomes.len() > 1 {
                let r = &model.meta.report;
                eprintln!(
                    "corpus model over {} designs: {} training and {} test labels, test Spearman {:.3}, \
                     test MAE {:.4} (relative to each design's dag-greedy cost)",
                    outcomes.len(),
                    r.train,
                    r.test,
                    r.test_spearman,
                    r.test_mae
                );
            }
            eprintln!(
                "wrote {} (model), {} (labels), {} (rounds), {} (best extraction{})",
                out.display(),
                labels.display(),
                rounds_path.display(),
                best_path.display(),
                if outcomes.len() > 1 { " per design" } else { "" }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Search { oracle, budget, moves, labels, output, seed, run, egraph } => {
            use smoothe::learn::anneal::{anneal, AnnealConfig};
            run.init_threads()?;
            let device = run.device()?;
            let (jobs, retries) = (oracle.jobs, oracle.retries);
            let outputs: Vec<&Path> = [Some(labels.as_path()), output.as_deref()].into_iter().flatten().collect();
            let oracle = oracle.oracle(&outputs)?;
            let graph = load::load_file(&egraph)?;
            let problem = preprocess::preprocess(&graph).with_context(|| format!("{}", egraph.display()))?;
            let mut log = open_log(&labels)?;
            let labeler = labeler(&oracle, &egraph, &graph, jobs, retries, !run.quiet);
            let config = AnnealConfig { budget, moves, proposals: jobs.max(1), ..AnnealConfig::default() };
            // The linear-SmoothE starting point as train-cost makes it.
            let smoothe_cfg = extract::SmoothEConfig {
                steps: smoothe::learn::active::TrainCostConfig::default().smoothe_steps,
                ..extract::SmoothEConfig::default()
            };
            let optimiser = extract::SmoothE { config: smoothe_cfg, seed, device, progress: quiet() };
            let outcome = anneal(&problem, &labeler, &mut log, &config, &optimiser);
            let _ = std::fs::remove_dir_all(&labeler.work_dir);
            let outcome = outcome?;
            let result = outcome.best.result_json(
                &graph,
                "search",
                0.0,
                serde_json::json!({ "real_cost": outcome.best_cost, "seed": seed, "calls": outcome.calls,
                                    "trajectory": outcome.trajectory }),
            )?;
            write_json(output.as_deref(), &result)?;
            eprintln!("search: best real cost {} after {} oracle calls", outcome.best_cost, outcome.calls);
            Ok(ExitCode::SUCCESS)
        }
        Command::Label { oracle, labels, egraph, extractions } => {
            let graph = load::load_file(&egraph)?;
            let stem = egraph.file_stem().and_then(|s| s.to_str()).unwrap_or("model").to_string();
            let labels = labels.unwrap_or_else(|| PathBuf::from("runs").join(&stem).join("model.labels.jsonl"));
            let (jobs, retries) = (oracle.jobs, oracle.retries);
            let oracle = oracle.oracle(&[&labels])?;
            let mut items = Vec::with_capacity(extractions.len());
            for path in &extractions {
                let ex = Extraction::load_file(&graph, path)?;
                if let Err(defect) = ex.check(&graph) {
                    anyhow::bail!("{}: invalid extraction: {defect}", path.display());
                }
                items.push(ex.restricted_to_reachable(&graph)?);
            }
            let mut log = open_log(&labels)?;
            let labeler = labeler(&oracle, &egraph, &graph, jobs, retries, false);
            let mut budget = items.len();
            let result = labeler.label(&mut log, &items, &mut budget);
            let _ = std::fs::remove_dir_all(&labeler.work_dir);
            let (costs, _) = result?;
            let oracle_id = oracle.identity();
            let mut failed = false;
            for ((path, ex), cost) in extractions.iter().zip(&items).zip(costs) {
                match cost {
                    Some(c) => println!("{}: {c}", path.display()),
                    None => {
                        failed = true;
                        let why = log
                            .get(&labeler.key(ex, &oracle_id)?)
                            .and_then(|l| l.error.clone())
                            .unwrap_or_else(|| "no label".into());
                        println!("{}: failed: {}", path.display(), why.replace('\n', " "));
                    }
                }
            }
            Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Export { format, output, egraph, extraction } => {
            let graph = load::load_file(&egraph)?;
            let ex = Extraction::load_file(&graph, &extraction)?;
            if let Err(defect) = ex.check(&graph) {
                anyhow::bail!("{}: invalid extraction: {defect}", extraction.display());
            }
            debug_assert_eq!(format, "blif");
            let stem = egraph.file_stem().and_then(|s| s.to_str()).unwrap_or("design");
            let text = smoothe::export::to_blif(&graph, &ex, stem).with_context(|| format!("{}", egraph.display()))?;
            match output {
                Some(p) => std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?,
                None => {
                    use std::io::Write;
                    std::io::stdout().write_all(text.as_bytes()).context("cannot write to stdout")?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Info { egraph } => {
            let graph = load::load_file(&egraph)?;
            print!("{}", info_text(&graph, &egraph)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Opens a label log, saying so when a torn last line was cut off.
fn open_log(path: &Path) -> Result<smoothe::learn::labels::LabelLog> {
    let log = smoothe::learn::labels::LabelLog::open(path)?;
    if log.repaired() {
        eprintln!("warning: {}: removed a last line cut short (no complete label was lost)", path.display());
    }
    Ok(log)
}

/// A labeller for `graph` (read from `path`) writing oracle files under a
/// per-process temporary directory.
fn labeler<'a>(
    oracle: &'a smoothe::learn::oracle::Oracle,
    path: &'a Path,
    graph: &'a EGraph,
    jobs: usize,
    retries: usize,
    progress: bool,
) -> smoothe::learn::labeler::Labeler<'a> {
    smoothe::learn::labeler::Labeler {
        oracle,
        egraph_path: path,
        graph,
        work_dir: std::env::temp_dir().join(format!("smoothe-oracle-{}", std::process::id())),
        jobs,
        progress: bars(progress),
        retries,
    }
}

fn info_text(graph: &EGraph, path: &Path) -> Result<String> {
    let problem = preprocess::preprocess(graph).with_context(|| format!("{}", path.display()))?;
    Ok(report::info(graph, &problem))
}

fn write_json(path: Option<&Path>, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    match path {
        Some(p) => {
            // Through a temporary file and a rename, so a kill never leaves
            // half a result in place.
            let tmp = p.with_file_name(format!(".{}.tmp", p.file_name().and_then(|n| n.to_str()).unwrap_or("result")));
            std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
            std::fs::rename(&tmp, p).with_context(|| format!("cannot write {}", p.display()))
        }
        None => {
            use std::io::Write;
            std::io::stdout().write_all(text.as_bytes()).context("cannot write to stdout")
        }
    }
}
