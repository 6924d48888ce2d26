//! `smoothe search`.

use crate::common::{init_threads, OracleArgs, RunArgs};
use crate::terminal::{bars, write_json};
use anyhow::Result;
use smoothe::jobs::SearchJob;
use smoothe::learn::active::anneal::AnnealConfig;
use smoothe::learn::active::goal::Goal;
use smoothe::timing::objective::Constraint;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SearchArgs {
    #[command(flatten)]
    oracle: OracleArgs,
    /// Most oracle calls, the greedy, dag-greedy and linear-SmoothE
    /// starting points included (labels already in the log are free).
    #[arg(long, default_value_t = 300)]
    budget: usize,
    /// Most classes one move switches.
    #[arg(long, default_value_t = AnnealConfig::default().moves)]
    moves: usize,
    /// Neighbours a learned model, refitted on the labels so far, screens
    /// per step (0: no model).
    #[arg(long, default_value_t = 0)]
    screen: usize,
    /// The measured metric to minimise (one the oracle prints; default: its
    /// first --metric).
    #[arg(long, value_name = "METRIC")]
    objective: Option<String>,
    /// An upper bound on a measured metric, such as 'delay<=12';
    /// repeatable. The result is the least objective meeting every bound,
    /// or the least-violating extraction when none found does.
    #[arg(long = "constraint", value_name = "METRIC<=VALUE")]
    constraints: Vec<Constraint>,
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
}

pub fn run(a: SearchArgs) -> Result<ExitCode> {
    init_threads(a.run.threads.unwrap_or(0))?;
    let oracle = a.oracle.settings();
    let goal = Goal { objective: a.objective, constraints: a.constraints };
    let anneal = AnnealConfig {
        budget: a.budget,
        moves: a.moves,
        proposals: oracle.jobs.max(1),
        screen: a.screen,
        ..Default::default()
    };
    let job = SearchJob {
        oracle,
        anneal,
        goal,
        labels: a.labels,
        outputs: a.output.iter().cloned().collect(),
        seed: a.seed,
        device: a.run.device.unwrap_or_else(|| "cpu".into()),
    };
    let (outcome, result) = job.run(&a.egraph, bars(!a.run.quiet))?;
    write_json(a.output.as_deref(), &result)?;
    eprintln!("search: best real cost {} after {} oracle calls", outcome.best_cost, outcome.calls);
    for c in &outcome.constraints {
        eprintln!("  {} {} (bound {}): {}", c.metric, c.measured, c.bound, if c.met { "met" } else { "NOT met" });
    }
    Ok(ExitCode::SUCCESS)
}
