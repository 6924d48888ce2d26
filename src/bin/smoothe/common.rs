//! Flags shared by several commands: the oracle, where work runs, and
//! SmoothE's settings.

use anyhow::{Context, Result};
use smoothe::config::Choice;
use smoothe::extract::{OptimizerKind, Parameterisation, SmoothEConfig};
use smoothe::learn::oracle::process::OracleSettings;
use smoothe::relax::Combine;

/// A clap parser offering a [`Choice`]'s names.
pub fn choice<T: Choice>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(T::NAMES).map(|name| T::parse(&name).expect("a listed name parses"))
}

/// The oracle and how it is called; each flag overrides a job file's
/// `[oracle]` table.
#[derive(clap::Args)]
pub struct OracleArgs {
    /// The oracle, called as `ORACLE EGRAPH.json EXTRACTION.json`; a
    /// command line such as 'srun -N1 ./synth.sh' works too.
    #[arg(long)]
    oracle: Option<String>,
    /// When the oracle prints a JSON object, the metric to use.
    #[arg(long)]
    metric: Option<String>,
    /// Oracle calls in parallel [default: 2].
    #[arg(long)]
    jobs: Option<usize>,
    /// Seconds before an oracle call is killed and recorded as failed [default: 600].
    #[arg(long)]
    timeout: Option<f64>,
    /// Text that joins the oracle's identity, for dependencies no file
    /// shows (a tool version): labels made under another tag are not reused.
    #[arg(long)]
    oracle_tag: Option<String>,
    /// Times a failed label (a timeout included) is tried again when an
    /// extraction is asked for again, on this run or a later one; each
    /// attempt counts towards the budget [default: 1].
    #[arg(long)]
    retries: Option<usize>,
}

impl OracleArgs {
    /// Overrides the settings of `s` given on the command line.
    pub fn apply(&self, s: &mut OracleSettings) {
        if let Some(c) = &self.oracle {
            s.command = c.clone();
        }
        if self.metric.is_some() {
            s.metric = self.metric.clone();
        }
        if self.oracle_tag.is_some() {
            s.tag = self.oracle_tag.clone();
        }
        s.jobs = self.jobs.unwrap_or(s.jobs);
        s.timeout = self.timeout.unwrap_or(s.timeout);
        s.retries = self.retries.unwrap_or(s.retries);
    }

    /// The settings these flags give on their own.
    pub fn settings(&self) -> OracleSettings {
        let mut s = OracleSettings::default();
        self.apply(&mut s);
        s
    }
}

/// Where and how long-running work runs.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Device for tensor work: cpu, or cuda (needs a build with `--features cuda`) [default: cpu, or $SMOOTHE_DEVICE].
    #[arg(long, env = "SMOOTHE_DEVICE")]
    pub device: Option<String>,
    /// Worker threads (0: one per core). Same seed and thread count, same result [default: 0].
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Starts the global thread pool with `threads` workers (0: one per core).
pub fn init_threads(threads: usize) -> Result<()> {
    if threads > 0 {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().context("cannot start the thread pool")?;
    }
    Ok(())
}

/// SmoothE settings, each overriding the configuration (built-in defaults,
/// the same as configs/smoothe.toml, or a `--config` file).
#[derive(clap::Args)]
pub struct SmoothEArgs {
    /// Propagation rule.
    #[arg(long, value_parser = choice::<Combine>())]
    combine: Option<Combine>,
    /// Optimiser.
    #[arg(long, value_parser = choice::<OptimizerKind>())]
    optimizer: Option<OptimizerKind>,
    /// Learning rate.
    #[arg(long)]
    lr: Option<f64>,
    /// Most optimisation steps (with a model: two thirds of them, after a
    /// linear-SmoothE start of a third of the default steps).
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
    /// Overrides the settings of `c` given on the command line.
    pub fn apply(&self, c: &mut SmoothEConfig) {
        macro_rules! set {
            ($($flag:ident => $field:ident),*) => { $( if let Some(v) = self.$flag { c.$field = v; } )* };
        }
        set!(combine => combine, optimizer => optimizer, lr => learning_rate, steps => steps,
             patience => patience, restarts => restarts, time_limit => time_limit, batch => batch,
             parameterisation => parameterisation, embedding_dim => embedding_dim,
             temperature => temperature, gumbel => gumbel, decode_every => decode_every,
             penalty_weight => penalty_weight, penalty_growth => penalty_growth,
             init_bias => init_bias, init_noise => init_noise, tolerance => tolerance,
             polish_passes => polish_passes, explore_seeds => explore_seeds, max_sweeps => max_sweeps);
    }
}
