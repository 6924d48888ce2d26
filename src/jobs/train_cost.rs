//! One `train-cost` run as data: what to train on, with which oracle and
//! settings, and where the results go. The same struct is read from TOML
//! (`--config`), overridden by command-line flags, and written beside the
//! results, so any run can be repeated from its own record.
//!
//! ```
//! use smoothe::jobs::TrainCostJob;
//! let job = TrainCostJob::from_toml(r#"
//!     egraphs = ["design.json"]
//!     seed = 3
//!     [oracle]
//!     command = "./synth.sh"
//!     [train-cost]
//!     budget = 50
//! "#).unwrap();
//! assert_eq!((job.seed, job.train_cost.budget, job.oracle.jobs), (3, 50, 2));
//! // Written back, it reads the same.
//! assert_eq!(TrainCostJob::from_toml(&job.to_toml().unwrap()).unwrap(), job);
//! ```

use crate::egraph::EGraph;
use crate::extract::{SmoothE, SmoothEConfig};
use crate::extraction::OriginalExtraction;
use crate::files::write_json;
use crate::learn::active::config::{loop_smoothe, TrainCostConfig};
use crate::learn::active::corpus::train_corpus;
use crate::learn::active::design::Design;
use crate::learn::active::front::fit_timing_head;
use crate::learn::active::train_cost::{train_cost, TrainCostOutcome};
use crate::learn::model::front::MeasuredFront;
use crate::learn::model::network::Ensemble;
use crate::learn::oracle::labeler::Labeler;
use crate::learn::oracle::labels::LabelLog;
use crate::learn::oracle::process::{Oracle, OracleSettings};
use crate::progress::{quiet, Observer};
use crate::saturate::recorded_circuit;
use crate::timing::TIMING_METRIC;
use crate::{load, preprocess};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Everything that describes a `train-cost` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainCostJob {
    /// The e-graphs: one gives a model of that design, several one model
    /// over all of them that transfers to new designs.
    pub egraphs: Vec<PathBuf>,
    /// Where the model goes (default `runs/<name>/model.safetensors`); the
    /// label log, rounds, best extractions and this job go beside it.
    pub out: Option<PathBuf>,
    /// Label log (default: beside the model, `.labels.jsonl`).
    pub labels: Option<PathBuf>,
    /// A corpus model to adapt instead of starting from nothing.
    pub init_model: Option<PathBuf>,
    /// Overwrite an existing model file that is not this job's.
    pub force: bool,
    /// Seed of sampling, training and optimisation.
    pub seed: u64,
    /// Worker threads (0: one per core); the caller sets up the pool.
    pub threads: usize,
    /// Device for tensor work (`cpu` or `cuda`).
    pub device: String,
    /// The oracle and how it is called.
    pub oracle: OracleSettings,
    /// The loop's settings.
    #[serde(rename = "train-cost")]
    pub train_cost: TrainCostConfig,
    /// The optimiser's settings inside the loop: a `[smoothe]` table sets
    /// fields over the loop's defaults ([`loop_smoothe`]: 600 steps, no
    /// time limit), not over `extract`'s. The linear-SmoothE baseline the
    /// loop labels is not run with them but with the start of
    /// `extract --model` at its defaults
    /// ([`crate::learn::active::config::linear_baseline`]).
    #[serde(deserialize_with = "over_loop_defaults")]
    pub smoothe: SmoothEConfig,
}

impl Default for TrainCostJob {
    fn default() -> Self {
        TrainCostJob {
            egraphs: Vec::new(),
            out: None,
            labels: None,
            init_model: None,
            force: false,
            seed: 0,
            threads: 0,
            device: "cpu".into(),
            oracle: OracleSettings::default(),
            train_cost: TrainCostConfig::default(),
            smoothe: loop_smoothe(),
        }
    }
}

/// `[train-cost]` settings that older job files may hold, with why they went.
const REMOVED_LOOP_SETTINGS: &[(&str, &str)] =
    &[("search_picks", "the loop no longer labels the model-guided search's picks, which did not improve its result")];

/// A `[smoothe]` table read over [`loop_smoothe`].
fn over_loop_defaults<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<SmoothEConfig, D::Error> {
    use serde::de::Error;
    let given = toml::Table::deserialize(d)?;
    let mut table = toml::Table::try_from(loop_smoothe()).map_err(D::Error::custom)?;
    table.extend(given);
    table.try_into().map_err(D::Error::custom)
}

/// Where a job's results went.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputPaths {
    /// The model.
    pub model: PathBuf,
    /// The label log.
    pub labels: PathBuf,
    /// Per-round summaries.
    pub rounds: PathBuf,
    /// Best labelled extraction(s).
    pub best: PathBuf,
    /// This job, as run.
    pub job: PathBuf,
}

/// What a job produced.
pub struct TrainCostResult {
    /// The model saved at `paths.model`.
    pub model: Ensemble,
    /// Per e-graph, in order: its loop's outcome.
    pub designs: Vec<(PathBuf, TrainCostOutcome)>,
    /// Where everything went.
    pub paths: OutputPaths,
}

impl TrainCostJob {
    /// A job from TOML text; missing fields keep their defaults, unknown
    /// ones are errors, and a setting the loop no longer has (from an older
    /// run's record) is named with what to do.
    pub fn from_toml(text: &str) -> Result<Self> {
        toml::from_str(text).or_else(|err| {
            // Only a file that fails is looked at again, for a removed setting.
            let table: Option<toml::Table> = toml::from_str(text).ok();
            let loop_table = table.as_ref().and_then(|t| t.get("train-cost")).and_then(|t| t.as_table());
            match REMOVED_LOOP_SETTINGS.iter().find(|(key, _)| loop_table.is_some_and(|t| t.contains_key(*key))) {
                Some((key, why)) => {
                    bail!("invalid train-cost job: [train-cost] {key} is no longer a setting ({why}); delete the line")
                }
                None => Err(anyhow::Error::new(err).context("invalid train-cost job")),
            }
        })
    }

    /// A job from a TOML file (such as one written beside earlier results,
    /// or `configs/train-cost.toml`).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_toml(&text).with_context(|| format!("{}", path.display()))
    }

    /// The job as TOML.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).context("cannot write the job as TOML")
    }

    /// The output paths, defaults filled in.
    pub fn paths(&self) -> Result<OutputPaths> {
        let Some(first) = self.egraphs.first() else { bail!("no e-graph to train on") };
        let stem = |p: &Path| p.file_stem().and_then(|s| s.to_str()).unwrap_or("model").to_string();
        let name = match self.egraphs.len() {
            1 => stem(first),
            n => format!("{}-and-{}-more", stem(first), n - 1),
        };
        let model = self.out.clone().unwrap_or_else(|| PathBuf::from("runs").join(name).join("model.safetensors"));
        Ok(OutputPaths {
            labels: self.labels.clone().unwrap_or_else(|| model.with_extension("labels.jsonl")),
            rounds: model.with_extension("rounds.json"),
            best: model.with_extension("best.json"),
            job: model.with_extension("job.toml"),
            model,
        })
    }

    /// Each e-graph, and the circuit it was built from where it records
    /// one (see [`recorded_circuit`]); errors name the file.
    fn load_egraphs(&self) -> Result<(Vec<EGraph>, Vec<Option<OriginalExtraction>>)> {
        let mut graphs = Vec::with_capacity(self.egraphs.len());
        let mut circuits = Vec::with_capacity(self.egraphs.len());
        for p in &self.egraphs {
            let (graph, recorded) = load::load_file_recorded(p)?;
            circuits.push(recorded_circuit(&graph, &recorded).with_context(|| format!("{}", p.display()))?);
            graphs.push(graph);
        }
        Ok((graphs, circuits))
    }

    /// Runs the job: labels, trains, and writes the model, the rounds, the
    /// best extraction(s) and the job itself. Progress goes to `progress`;
    /// warnings (a repaired label log) to the `log` facade.
    pub fn run(&self, progress: Observer) -> Result<TrainCostResult> {
        let paths = self.paths()?;
        let device = crate::device::parse(&self.device)?;
        let (graphs, circuits) = self.load_egraphs()?;
        let problems = graphs
            .iter()
            .zip(&self.egraphs)
            .map(|(g, p)| preprocess::preprocess_for_oracle(g).with_context(|| format!("{}", p.display())))
            .collect::<Result<Vec<_>>>()?;
        let outputs = [&paths.model, &paths.labels, &paths.rounds, &paths.best, &paths.job];
        let oracle = self.oracle.oracle(&outputs.map(|p| p.as_path()))?;
        self.refuse_to_overwrite(&paths.model, &graphs, &oracle)?;
        let init = self.init_model.as_deref().map(|p| Ensemble::load(p, &device)).transpose()?;
        let mut log = super::oracle_runs::open_log(&paths.labels)?;
        let labelers: Vec<Labeler> = graphs
            .iter()
            .zip(&self.egraphs)
            .map(|(graph, path)| Labeler::new(&oracle, &self.oracle, path, graph, progress.clone()))
            .collect();
        let optimiser =
            SmoothE { config: self.smoothe.clone(), seed: self.seed, device: device.clone(), progress: quiet() };
        let designs: Vec<Design> = self
            .egraphs
            .iter()
            .zip(&graphs)
            .zip(&problems)
            .zip(&labelers)
            .zip(circuits)
            .map(|((((p, original), problem), labeler), circuit)| Design {
                name: p.display().to_string(),
                original,
                problem,
                labeler,
                circuit,
            })
            .collect();
        let init = init.as_ref();
        let timed = oracle.metrics.iter().any(|m| m == TIMING_METRIC);
        if timed && designs.len() > 1 {
            bail!(
                "the {TIMING_METRIC} model is learned on one design at a time; train each design alone \
                 (its delays are per operator, so they apply to the others)"
            );
        }
        let outcome = if let [d] = designs.as_slice() {
            let mut config = self.train_cost.clone();
            if timed {
                let labelled = label_timing_samples(d, &mut log, &config, self.seed)?;
                // They are the loop's broad initial samples too.
                config.initial = config.initial.saturating_sub(labelled);
            }
            train_cost(d, &mut log, &config, &optimiser, init, &device).and_then(|mut o| {
                if timed {
                    add_timing(&mut o, d, &log, self.train_cost.train.test_fraction)?;
                }
                Ok((o.model.clone(), vec![o]))
            })
        } else {
            train_corpus(&designs, &mut log, &self.train_cost, &optimiser, init, &device).map(|o| (o.model, o.designs))
        };
        // Every labeller writes under the same per-process directory.
        let _ = std::fs::remove_dir_all(&labelers[0].work_dir);
        let (model, outcomes) = outcome?;
        model.save(&paths.model)?;
        let mut bests = Vec::new();
        for ((p, g), o) in self.egraphs.iter().zip(&graphs).zip(&outcomes) {
            let extra = serde_json::json!({ "real_cost": o.best_cost, "seed": self.seed, "egraph": p });
            bests.push(o.best.result_json(g, "train-cost", 0.0, extra)?);
        }
        if let [o] = outcomes.as_slice() {
            write_json(&paths.rounds, &serde_json::to_value(&o.rounds)?)?;
            write_json(&paths.best, &bests[0])?;
        } else {
            let per_design: serde_json::Map<String, serde_json::Value> = self
                .egraphs
                .iter()
                .zip(&outcomes)
                .map(|(p, o)| Ok((p.display().to_string(), serde_json::to_value(&o.rounds)?)))
                .collect::<Result<_>>()?;
            let rounds = serde_json::json!({ "designs": per_design, "corpus_report": model.meta.report });
            write_json(&paths.rounds, &rounds)?;
            write_json(&paths.best, &serde_json::Value::Array(bests))?;
        }
        let mut record = self.clone();
        record.out = Some(paths.model.clone());
        record.labels = Some(paths.labels.clone());
        crate::files::write_text(&paths.job, &record.to_toml()?)?;
        let designs = self.egraphs.iter().cloned().zip(outcomes).collect();
        Ok(TrainCostResult { model, designs, paths })
    }

    /// Refuses to replace a model file that is not this job's (another
    /// design's or oracle's, or not a model) unless `force` is set.
    fn refuse_to_overwrite(&self, out: &Path, graphs: &[crate::egraph::EGraph], oracle: &Oracle) -> Result<()> {
        if !out.exists() || self.force {
            return Ok(());
        }
        let ours = Ensemble::load(out, &candle_core::Device::Cpu).is_ok_and(|m| {
            graphs.iter().all(|g| m.meta.egraphs.contains(&g.fingerprint())) && m.meta.oracle == oracle.identity()
        });
        if !ours {
            bail!(
                "{} exists and is not a model of this e-graph and oracle; pass --force to overwrite it, \
                 or choose another --out",
                out.display()
            );
        }
        Ok(())
    }
}

/// Share of a design's oracle calls spent, before the loop, on extractions
/// chosen to fit delays ([`super::fit_delays::timing_samples`]): the
/// loop's own picks crowd around the least area, where delay varies
/// little.
const TIMING_SHARE: f64 = 0.2;

/// Fewest delay-fitting samples, budget allowing (half the budget at
/// most): fewer leave the leaf delay and the operators' confounded.
const TIMING_LEAST: usize = 30;

/// Labels the delay-fitting samples of design `d` within its share of the
/// budget; returns how many of them have labels.
fn label_timing_samples(d: &Design, log: &mut LabelLog, config: &TrainCostConfig, seed: u64) -> Result<usize> {
    let want = ((config.budget as f64 * TIMING_SHARE).round() as usize).max(TIMING_LEAST.min(config.budget / 2));
    let spent = log.calls(&d.original.fingerprint(), &d.labeler.oracle.identity()).total;
    let mut budget = want.min(config.budget.saturating_sub(spent));
    let samples = super::fit_delays::timing_samples(d.original, d.problem, want, seed)?;
    let originals: Vec<_> = samples.iter().map(|e| d.problem.to_original(e)).collect();
    let (costs, _) = d.labeler.label(log, &originals, &mut budget)?;
    Ok(costs.iter().flatten().count())
}

/// Adds to the model of `outcome`, trained on design `d` with the labels
/// of `log`, its timing head (per-operator delays fitted to the labels'
/// delays, `test_fraction` held out) and the design's measured front over
/// its two learned metrics.
fn add_timing(outcome: &mut TrainCostOutcome, d: &Design, log: &LabelLog, test_fraction: f64) -> Result<()> {
    let oracle = d.labeler.oracle.identity();
    let head = fit_timing_head(d.original, d.problem, log, &oracle, TIMING_METRIC, test_fraction)
        .with_context(|| format!("{}: fitting the {TIMING_METRIC} model", d.name))?;
    let meta = &mut outcome.model.meta;
    meta.timing = Some(head);
    // Both learned metrics name themselves: with a delay there are two.
    let primary = meta.metric_name().to_string();
    let egraph = d.original.fingerprint();
    let front = MeasuredFront::of(log, &egraph, &oracle, &[primary, TIMING_METRIC.to_string()]);
    meta.front.retain(|f| f.egraph != egraph);
    meta.front.push(front);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_setting_is_named_and_a_typo_keeps_its_line() {
        let old = "[train-cost]\nbudget = 50\nsearch_picks = 6\n";
        let err = format!("{:#}", TrainCostJob::from_toml(old).unwrap_err());
        assert!(err.contains("search_picks is no longer a setting") && err.contains("delete the line"), "{err}");
        let typo = "[train-cost]\nbudget = 50\nrounds_ = 6\n";
        let err = format!("{:#}", TrainCostJob::from_toml(typo).unwrap_err());
        assert!(err.contains("rounds_") && err.contains("line 3"), "{err}");
        assert_eq!(TrainCostJob::from_toml("[train-cost]\nbudget = 50\n").unwrap().train_cost.budget, 50);
    }
}
