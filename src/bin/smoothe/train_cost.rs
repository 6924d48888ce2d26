//! `smoothe train-cost`.

use crate::common::{choice, init_threads, OracleArgs, RunArgs, SmoothEArgs};
use crate::terminal::bars;
use anyhow::Result;
use smoothe::jobs::TrainCostJob;
use smoothe::learn::active::acquisition::Acquisition;
use smoothe::learn::active::round::{PickSource, RoundPick, RoundSummary};
use smoothe::learn::model::features::FeatureKind;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct TrainCostArgs {
    #[command(flatten)]
    oracle: OracleArgs,
    /// A job file (TOML: top-level settings and [oracle], [train-cost] and
    /// [smoothe] tables, as configs/train-cost.toml and the `.job.toml`
    /// every run writes); the flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Most oracle calls per e-graph (labels already in the log are free).
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
    #[arg(long, value_parser = choice::<FeatureKind>())]
    features: Option<FeatureKind>,
    /// How screened candidates are ranked for labelling (default
    /// selection-gp: a Gaussian process over the labelled extractions'
    /// choices; lcb: the ensemble; random: no model, an
    /// ablation).
    #[arg(long, value_parser = choice::<Acquisition>())]
    acquisition: Option<Acquisition>,
    /// Where to write the model (default runs/<egraph>/model.safetensors;
    /// the label log, rounds, best extraction and job go beside it).
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
    /// starting from nothing: at most half the calls on broad initial
    /// samples, the rest on rounds guided by it fine-tuned on them, and
    /// every model fine-tuned from it.
    #[arg(long)]
    init_model: Option<PathBuf>,
    /// Seed of sampling, training and optimisation [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    run: RunArgs,
    /// SmoothE inside the loop (defaults: 600 steps, no time limit; the
    /// linear baseline it labels is the start extract --model runs).
    #[command(flatten)]
    smoothe: SmoothEArgs,
    /// The e-graph(s) (egraph-serialize JSON). With several, each is
    /// labelled by its own loop (--budget calls each) and one model that
    /// transfers to new designs is trained on all of them. May come from
    /// the job file instead.
    egraphs: Vec<PathBuf>,
}

impl TrainCostArgs {
    /// The job: the file's (or the defaults), overridden by the flags.
    fn job(self) -> Result<(TrainCostJob, bool)> {
        let mut job = match &self.config {
            Some(p) => TrainCostJob::load(p)?,
            None => TrainCostJob::default(),
        };
        if !self.egraphs.is_empty() {
            job.egraphs = self.egraphs;
        }
        let c = &mut job.train_cost;
        macro_rules! set {
            ($($flag:ident),*) => { $( if let Some(v) = self.$flag { c.$flag = v; } )* };
        }
        set!(budget, initial, rounds, per_round, screen, explore, features, acquisition);
        job.out = self.out.or(job.out);
        job.labels = self.labels.or(job.labels);
        job.init_model = self.init_model.or(job.init_model);
        job.force |= self.force;
        job.seed = self.seed.unwrap_or(job.seed);
        job.threads = self.run.threads.unwrap_or(job.threads);
        job.device = self.run.device.unwrap_or(job.device);
        self.oracle.apply(&mut job.oracle);
        self.smoothe.apply(&mut job.smoothe);
        Ok((job, !self.run.quiet))
    }
}

pub fn run(args: TrainCostArgs) -> Result<ExitCode> {
    let (job, show) = args.job()?;
    if job.egraphs.is_empty() {
        anyhow::bail!("no e-graph to train on: give one or more, or `egraphs` in the --config file");
    }
    init_threads(job.threads)?;
    let result = job.run(bars(show))?;
    let several = result.designs.len() > 1;
    for (path, outcome) in &result.designs {
        if several {
            eprintln!("{}:", path.display());
        }
        print_rounds(&outcome.rounds);
    }
    if several {
        let r = &result.model.meta.report;
        eprintln!(
            "corpus model over {} designs: {} training and {} test labels, test Spearman {:.3}, \
             test MAE {:.4} (relative to each design's dag-greedy cost)",
            result.designs.len(),
            r.train,
            r.test,
            r.test_spearman,
            r.test_mae
        );
        if let Some(m) = result.model.meta.transfer_margin {
            eprintln!(
                "transfer margin {:.1}%: leaving each design out in turn, the model understated the cost \
                 difference of two of its extractions by at most this (9 pairs in 10), as a share of the \
                 design's dag-greedy cost",
                100.0 * m
            );
        }
    }
    let p = &result.paths;
    eprintln!(
        "wrote {} (model), {} (labels), {} (rounds), {} (best extraction{}), {} (this job)",
        p.model.display(),
        p.labels.display(),
        p.rounds.display(),
        p.best.display(),
        if several { " per design" } else { "" },
        p.job.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The per-round table of a design's loop, on stderr. `optimum-pred` is
/// the model's prediction for its own optimum and its expected error (the
/// spread with the members' out-of-fold error). `pool-gain` is how much
/// less the round's acquisition picks measured on average than its random
/// picks from the same screened pool (positive: the model's ranking
/// helped). `seconds` is the round's wall time and `labelling` the share
/// of it spent waiting for the oracle.
fn print_rounds(rounds: &[RoundSummary]) {
    let opt = |f: Option<f64>| f.map_or("-".to_string(), |c| format!("{c:.4}"));
    eprintln!(
        "round  labels  calls  test-MAE  test-rho  best-real  optimum-pred  optimum-real  pool-gain    greedy  dag-greedy  linear-smoothe  seconds  labelling"
    );
    for r in rounds {
        eprintln!(
            "{:>5}  {:>6}  {:>5}  {:>8.4}  {:>8.3}  {:>9.4}  {:>12}  {:>12}  {:>9}  {:>8}  {:>10}  {:>14}  {:>7.1}  {:>8.0}%",
            r.round,
            r.labels,
            r.oracle_calls,
            r.report.test_mae,
            r.report.test_spearman,
            r.best_real_cost,
            r.optimum.as_ref().map_or("-".into(), |o| format!("{:.2}+-{:.2}", o.predicted.mean, o.predicted.error)),
            opt(r.optimum.as_ref().and_then(|o| o.real)),
            pool_gain(&r.picks).map_or("-".into(), |g| format!("{g:.4}")),
            opt(r.greedy_real_cost),
            opt(r.dag_greedy_real_cost),
            opt(r.linear_smoothe_real_cost),
            r.seconds,
            100.0 * r.label_seconds / r.seconds.max(1e-9),
        );
    }
}

/// Mean real cost of a round's random pool picks less that of its
/// acquisition picks (`None` unless both were measured).
fn pool_gain(picks: &[RoundPick]) -> Option<f64> {
    let mean_of = |source: PickSource| {
        let costs: Vec<f64> = picks.iter().filter(|p| p.source == source).filter_map(|p| p.real).collect();
        (!costs.is_empty()).then(|| costs.iter().sum::<f64>() / costs.len() as f64)
    };
    Some(mean_of(PickSource::Explore)? - mean_of(PickSource::Acquisition)?)
}
