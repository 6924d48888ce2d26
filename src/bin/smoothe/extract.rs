//! `smoothe extract`.

use crate::common::{init_threads, RunArgs, SmoothEArgs};
use crate::terminal::{bars, write_json};
use anyhow::Result;
use smoothe::extract::{SmoothEConfig, METHODS};
use smoothe::jobs::{ExtractJob, ModelVerdict, ParetoJob};
use smoothe::learn::model::objective::DesignFit;
use smoothe::learn::model::trust::Conservatism;
use smoothe::timing::objective::Constraint;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ExtractArgs {
    /// Extraction algorithm (default: smoothe with --model or
    /// --quadratic, dag-greedy otherwise).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(METHODS))]
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
    /// With --model: weight of the ensemble's standard deviation in the
    /// objective (mean + kappa * std).
    #[arg(long, default_value_t = Conservatism::FROZEN.kappa)]
    kappa: f64,
    /// With --model: target standard deviations charged per range-width a
    /// feature lies outside the labels the model was trained on, and per
    /// row spacing away from the nearest labelled row (0: off).
    #[arg(long, default_value_t = Conservatism::FROZEN.trust)]
    trust: f64,
    /// With --model and --method random: how many samples to judge.
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Minimise this metric with SmoothE instead of the node costs:
    /// dag-cost (the sum of the chosen nodes' costs), delay (arrival time,
    /// max-plus over the chosen DAG, under --op-delays or a model's learned
    /// delays), or a metric the --model learned (such as area).
    #[arg(long)]
    objective: Option<String>,
    /// An upper bound that the extraction must meet, METRIC<=VALUE (for
    /// example 'delay<=12'); repeatable. With no --objective, the model's
    /// metric (dag-cost without a model) is minimised under it.
    #[arg(long = "constraint", value_name = "METRIC<=VALUE")]
    constraints: Vec<Constraint>,
    /// Write a front of extractions instead of one, as a JSON array: A,B
    /// (such as area,delay) gives the least A, the least B, and the least A
    /// under bounds on B between them, keeping those no other beats in
    /// both by their predicted values.
    #[arg(long, value_name = "A,B", conflicts_with_all = ["objective", "constraints"])]
    pareto: Option<String>,
    /// With --pareto: most extractions on the front.
    #[arg(long, default_value_t = 5, requires = "pareto")]
    points: usize,
    /// Per-operator delays for the delay metric and depth-greedy: a JSON
    /// object {"OP": delay}. Nodes without children are "<leaf>" (default
    /// 0); operators it does not name take 1 [default: all 1, leaves 0].
    #[arg(long)]
    op_delays: Option<PathBuf>,
    /// TOML file whose [smoothe] table sets SmoothE's settings (the flags
    /// below override it).
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    smoothe: SmoothEArgs,
    /// The e-graph (egraph-serialize JSON).
    egraph: PathBuf,
}

pub fn run(a: ExtractArgs) -> Result<ExitCode> {
    init_threads(a.run.threads.unwrap_or(0))?;
    let mut smoothe: SmoothEConfig = match &a.config {
        Some(p) => smoothe::config::load_section(p, "smoothe")?,
        None => SmoothEConfig::default(),
    };
    a.smoothe.apply(&mut smoothe);
    let job = ExtractJob {
        method: a.method,
        seed: a.seed,
        model: a.model,
        quadratic: a.quadratic,
        conservatism: Conservatism { kappa: a.kappa, trust: a.trust, ..Conservatism::FROZEN },
        samples: a.samples,
        smoothe,
        device: a.run.device.unwrap_or_else(|| "cpu".into()),
        objective: a.objective,
        constraints: a.constraints,
        op_delays: a.op_delays,
    };
    if let Some(pair) = &a.pareto {
        return run_pareto(job, pair, &a.egraph, a.points, a.output.as_deref(), a.run.quiet);
    }
    let result = job.run(&a.egraph, bars(!a.run.quiet))?;
    write_json(a.output.as_deref(), &result.json)?;
    eprintln!("{}: dag cost {}, {} classes, {:.3} s", result.method, result.dag_cost, result.classes, result.seconds);
    for c in &result.constraints {
        let verdict = if c.met { "met" } else { "NOT met" };
        eprintln!("{}<={}: {} ({verdict}, margin {})", c.metric, c.bound, c.predicted, c.margin);
    }
    if result.constraints.iter().any(|c| !c.met) {
        eprintln!("warning: no extraction found meets every constraint; this is the least-violating one found");
    }
    if let Some(verdict) = &result.verdict {
        note_verdict(verdict);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--pareto A,B`: the non-dominated extractions, written as one array.
fn run_pareto(
    job: ExtractJob,
    pair: &str,
    egraph: &std::path::Path,
    points: usize,
    output: Option<&std::path::Path>,
    quiet: bool,
) -> Result<ExitCode> {
    let Some((minimise, against)) = pair.split_once(',') else {
        anyhow::bail!("--pareto takes two metrics, A,B (such as area,delay), got {pair:?}");
    };
    let pareto =
        ParetoJob { extract: job, minimise: minimise.trim().to_string(), against: against.trim().to_string(), points };
    let front = pareto.run(egraph, bars(!quiet))?;
    let json = serde_json::Value::Array(front.iter().map(|r| r.json.clone()).collect());
    write_json(output, &json)?;
    for r in &front {
        let values: Vec<String> = r.predicted.iter().map(|(k, v)| format!("{k} {v:.4}")).collect();
        eprintln!("{}", values.join(", "));
    }
    eprintln!("{} non-dominated extraction(s)", front.len());
    Ok(ExitCode::SUCCESS)
}

/// What the user should know of a learned model's verdict: its prediction
/// and error bar, a measured label it used, what it picked and charged,
/// and whether it extrapolates.
fn note_verdict(verdict: &ModelVerdict) {
    let p = verdict.prediction;
    let trained_here = verdict.design.trained_on_design;
    eprintln!("model predicts {:.4} +- {:.4} (the members' spread {:.4})", p.mean, p.error, p.std);
    if let Some(cost) = p.measured {
        eprintln!("the oracle measured {cost:.4} for this extraction in training; the choice used that");
    }
    if let Some(pick) = verdict.pick.as_deref().filter(|&p| p != "smoothe") {
        eprintln!("the model ranks the {pick} extraction first among its own optimum and the model-free ones");
    } else if let Some(o) = verdict.optimum_error.filter(|_| p.measured.is_none() && trained_here) {
        let wider = if o.worst * p.mean.abs() > p.error { ": a wider error bar than the one above" } else { "" };
        eprintln!(
            "in the loop that trained it, this model's own optima measured {:+.1}% from their predictions \
             on average (worst {:+.1}%, {} rounds){wider}",
            100.0 * o.mean,
            100.0 * o.worst,
            o.checked
        );
    }
    if let Some(charge) = verdict.optimum_charge.filter(|&c| c > 0.0) {
        if let Some(o) = verdict.optimum_error.filter(|_| trained_here) {
            eprintln!(
                "the model's own optimum was charged {charge:.4} before it was compared with the other \
                 extractions: in the loop that trained it, its optima measured up to {:+.1}% from their \
                 predictions",
                100.0 * o.worst
            );
        } else {
            eprintln!(
                "on a design it was not trained on, the model's own optimum must beat the model-free \
                 extractions by its transfer margin, {charge:.4} here"
            );
        }
    }
    let (unit, spread) = (verdict.trust_unit, verdict.label_spread);
    if unit < spread {
        eprintln!(
            "leaving the training data cost the optimiser {unit:.4} per step, less than the label spread \
             {spread:.4}, since the loop that trained it measured its optima close to their predictions \
             (`optimum_error` in the result file)"
        );
    }
    note_design(verdict.design);
    if p.features_outside > 0 {
        eprintln!(
            "warning: {} feature(s) of this extraction lie outside the range the model was trained on \
             (total overshoot {:.2} range-widths); the prediction is an extrapolation",
            p.features_outside, p.outside
        );
    }
}

/// On a design the model was not trained on: for a relative model, says
/// that the predictions' absolute level is an estimate; for an absolute
/// one (trained on other designs, uncalibrated for transfer), warns that
/// its predictions here are extrapolations.
pub fn note_design(design: DesignFit) {
    if let Some(r) = design.reference.filter(|r| !r.measured) {
        eprintln!(
            "note: the model was not trained on this design; its prediction is relative to the \
             dag-greedy extraction, whose cost is estimated at {:.4} (+-{:.0}%) from the training \
             designs, so the absolute figure is rough (the ranking of extractions does not depend on it)",
            r.cost,
            100.0 * r.spread
        );
    } else if design.uncalibrated_transfer() {
        eprintln!(
            "warning: the model was trained on {} other design(s), not on this one, and was not \
             calibrated for transfer: its predictions here are extrapolations. To extract new designs \
             with no oracle call, train one model over several designs (`train-cost --oracle O A.json \
             B.json ...`)",
            design.training_designs
        );
    }
}
