//! One `extract` run: load, preprocess, build the objective (the node
//! costs, a learned model or pairwise costs), extract, check, and describe
//! the result.

use super::answer::{self, Query};
pub use super::verdict::ModelVerdict;
use crate::cost::{CostModel, QuadraticCost};
use crate::extract::{self, DagGreedy, ExtractOptions, Extractor, SmoothEConfig, TimedSmoothE};
use crate::extraction::Extraction;
use crate::learn::model::network::Ensemble;
use crate::learn::model::objective::LearnedCost;
use crate::learn::model::trust::Conservatism;
use crate::progress::Observer;
use crate::timing::objective::{metric_model, Constrained, Constraint, ConstraintReport, DelayCost, METRICS};
use crate::timing::{OpDelays, TimingGraph};
use crate::{load, preprocess};
use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What to extract with.
#[derive(Debug, Clone)]
pub struct ExtractJob {
    /// The method (default: `smoothe` with a model or pairwise costs,
    /// `dag-greedy` otherwise).
    pub method: Option<String>,
    /// Seed of randomised methods.
    pub seed: u64,
    /// A learned cost model to optimise.
    pub model: Option<PathBuf>,
    /// Pairwise costs to optimise with the node costs.
    pub quadratic: Option<PathBuf>,
    /// How conservative a learned model's objective is (default
    /// [`Conservatism::FROZEN`]).
    pub conservatism: Conservatism,
    /// With a model and `random`: samples judged.
    pub samples: usize,
    /// SmoothE's settings.
    pub smoothe: SmoothEConfig,
    /// Device for tensor work (`cpu` or `cuda`).
    pub device: String,
    /// The metric to minimise with SmoothE (`dag-cost` or `delay`); set
    /// alone or with `constraints`, it replaces the node-cost objective.
    pub objective: Option<String>,
    /// Upper bounds on metrics that the extraction must meet.
    pub constraints: Vec<Constraint>,
    /// Per-operator delays (`{"OP": delay}`) for `delay` and
    /// `depth-greedy`; unit delays without.
    pub op_delays: Option<PathBuf>,
}

impl Default for ExtractJob {
    fn default() -> Self {
        ExtractJob {
            method: None,
            seed: 0,
            model: None,
            quadratic: None,
            conservatism: Conservatism::FROZEN,
            samples: 1000,
            smoothe: SmoothEConfig::default(),
            device: "cpu".into(),
            objective: None,
            constraints: Vec::new(),
            op_delays: None,
        }
    }
}

/// What an extraction gave.
pub struct ExtractResult {
    /// The method used.
    pub method: String,
    /// The result file's content: `choices`, costs, seconds, details.
    pub json: Value,
    /// DAG cost of the extraction (original graph).
    pub dag_cost: f64,
    /// Classes it chooses a node for.
    pub classes: usize,
    /// Seconds, preprocessing included.
    pub seconds: f64,
    /// With a learned model as the objective: its verdict on the
    /// extraction and what shaped it.
    pub verdict: Option<ModelVerdict>,
    /// With constraints: how each came out.
    pub constraints: Vec<ConstraintReport>,
    /// Each metric's value on the extraction by its model: the objective's
    /// and the constraints' metrics, and with `--model` every metric the
    /// model has (its ensemble's, as the optimiser scores it, and its
    /// timing head's arrival).
    pub predicted: BTreeMap<String, f64>,
    /// Where the answer is an extraction the model's training measured
    /// (a constrained query on a training design): every number the
    /// oracle printed for it.
    pub measured: Option<BTreeMap<String, f64>>,
}

/// Adds to `predicted` every metric `model` has that is not there yet:
/// its timing head's arrival and its ensemble's cost (by `learned`, or the
/// model bound by `bind`).
fn every_metric(
    model: &Ensemble,
    reduced: &Extraction,
    timing: &TimingGraph,
    learned: Option<&LearnedCost>,
    bind: &dyn Fn(&Ensemble) -> Result<LearnedCost>,
    predicted: &mut BTreeMap<String, f64>,
) -> Result<()> {
    if let Some(head) = model.meta.timing.as_ref().filter(|h| !predicted.contains_key(&h.metric)) {
        let arrival = timing.arrival(reduced, &timing.delay_vector(&head.fit.op_delays()))?;
        predicted.insert(head.metric.clone(), arrival);
    }
    let metric = model.meta.metric_name().to_string();
    if let std::collections::btree_map::Entry::Vacant(slot) = predicted.entry(metric) {
        slot.insert(match learned {
            Some(l) => l.cost_of(reduced),
            None => bind(model)?.cost_of(reduced),
        });
    }
    Ok(())
}

impl ExtractJob {
    /// Extracts from the e-graph at `egraph`; the result is checked, and an
    /// invalid one is an error (a bug), never returned.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("smoothe-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("tiny.json");
    /// std::fs::write(&path, r#"{"nodes": {
    ///     "x": {"op": "x", "children": [], "eclass": "a", "cost": 1.0},
    ///     "f": {"op": "f", "children": ["x", "x"], "eclass": "r", "cost": 1.0}},
    ///   "root_eclasses": ["r"]}"#).unwrap();
    /// let job = smoothe::jobs::ExtractJob::default();
    /// let result = job.run(&path, smoothe::progress::quiet()).unwrap();
    /// assert_eq!((result.method.as_str(), result.dag_cost), ("dag-greedy", 2.0));
    /// ```
    pub fn run(&self, egraph: &Path, progress: Observer) -> Result<ExtractResult> {
        let mut options = self.options(progress)?;
        let timed = self.objective.is_some() || !self.constraints.is_empty();
        let method = self.method_checked(timed)?;
        let graph = load::load_file(egraph)?;
        let start = Instant::now();
        let ensemble = self.model.as_ref().map(|path| Ensemble::load(path, &options.device)).transpose()?;
        // A model's timing head sets the delays of depth-greedy's start and
        // of the reported delay, unless --op-delays names others.
        if let (None, Some(head)) = (&self.op_delays, ensemble.as_ref().and_then(|m| m.meta.timing.as_ref())) {
            options.op_delays = head.fit.op_delays();
        }
        // A learned model judges the extractions of its oracle's graph.
        let problem = match self.model {
            Some(_) => preprocess::preprocess_for_oracle(&graph),
            None => preprocess::preprocess(&graph),
        }
        .with_context(|| format!("{}", egraph.display()))?;
        let bind = |m: &Ensemble| {
            LearnedCost::new(m.clone(), &problem, &graph, self.conservatism)
                .with_context(|| format!("{}", self.model.as_deref().unwrap_or(Path::new("")).display()))
        };
        let learned = ensemble.as_ref().filter(|_| !timed).map(bind).transpose()?;
        let quadratic = self
            .quadratic
            .as_ref()
            .map(|path| QuadraticCost::load(path, &problem, &graph, &options.device))
            .transpose()?;
        let cost_model =
            learned.as_ref().map(|m| m as &dyn CostModel).or(quadratic.as_ref().map(|q| q as &dyn CostModel));
        let timing = timed.then(|| Arc::new(TimingGraph::new(&problem)));
        let timed_objective = timing
            .as_ref()
            .map(|timing| self.timed_objective(&problem, timing, &options, ensemble.as_ref(), &bind))
            .transpose()?;
        let extractor = match (cost_model, &timed_objective) {
            (_, Some(objective)) => Box::new(TimedSmoothE {
                smoothe: options.smoothe(),
                model: objective,
                delays: options.op_delays.clone(),
            }),
            (Some(m), None) => extract::with_model(&method, &options, m, &graph, self.samples)?,
            (None, None) => extract::by_name(&method, &options)?,
        };
        let mut outcome = extract::run(extractor.as_ref(), &graph, &problem)?;
        let mut reduced = problem
            .from_original(&outcome.extraction)
            .context("the extraction does not map onto the preprocessed graph (a bug)")?;
        // A constrained query on a design the model was trained on: the
        // best measured answer, unless the optimum is clearly better.
        let measured = match (&timed_objective, ensemble.as_ref()) {
            (Some(objective), Some(model)) => {
                let query = Query { metric: &self.objective_metric(Some(model)), constraints: &self.constraints };
                answer::from_front(model, &graph, &problem, objective, &query, &mut outcome, &mut reduced)?
            }
            _ => None,
        };
        let seconds = start.elapsed().as_secs_f64();
        let linear = method == "smoothe" && cost_model.is_none() && timed_objective.is_none();
        let mut extra = self.base_details(&outcome, &problem, linear);
        let mut constraints = Vec::new();
        let mut predicted = BTreeMap::new();
        if let (Some(objective), Some(timing)) = (&timed_objective, &timing) {
            extra.insert("delay".into(), json!(timing.arrival(&reduced, &timing.delay_vector(&options.op_delays))?));
            extra.insert("objective".into(), json!(self.objective_metric(ensemble.as_ref())));
            predicted = objective.predicted(&reduced);
            constraints = objective.report(&reduced);
            if let Some(values) = &measured {
                answer::judge(values, &mut constraints, &mut extra);
            }
            extra.insert("constraints".into(), serde_json::to_value(&constraints)?);
        }
        if let Some(m) = ensemble.as_ref() {
            let timing = timing.clone().unwrap_or_else(|| Arc::new(TimingGraph::new(&problem)));
            every_metric(m, &reduced, &timing, learned.as_ref(), &bind, &mut predicted)?;
        }
        if timed || !predicted.is_empty() {
            extra.insert("predicted".into(), serde_json::to_value(&predicted)?);
        }
        let verdict = match &learned {
            Some(m) => Some(ModelVerdict::of(m, &reduced, &outcome.details)?),
            None => None,
        };
        if let Some(v) = &verdict {
            v.describe(&mut extra)?;
        }
        let classes = outcome.extraction.choices().iter().filter(|c| c.is_some()).count();
        let json = outcome.extraction.result_json(&graph, &method, seconds, Value::Object(extra))?;
        Ok(ExtractResult {
            method,
            json,
            dag_cost: outcome.dag_cost,
            classes,
            seconds,
            verdict,
            constraints,
            predicted,
            measured,
        })
    }

    /// The extractors' options: seed, SmoothE's settings, the device, and
    /// the `--op-delays` file's delays (unit delays without).
    fn options(&self, progress: Observer) -> Result<ExtractOptions> {
        let op_delays = match &self.op_delays {
            Some(path) => OpDelays::load(path)?,
            None => OpDelays::unit(),
        };
        let device = crate::device::parse(&self.device)?;
        Ok(ExtractOptions { seed: self.seed, smoothe: self.smoothe.clone(), device, progress, op_delays })
    }

    /// The result's details every run has: the extractor's own, the seed,
    /// peak memory, and for SmoothE on node costs (`linear`) a lower bound.
    fn base_details(
        &self,
        outcome: &extract::Outcome,
        problem: &preprocess::Reduced,
        linear: bool,
    ) -> Map<String, Value> {
        let mut extra = outcome.details.clone();
        extra.insert("seed".into(), json!(self.seed));
        #[cfg(feature = "ilp")]
        if linear {
            linear_bound(problem, outcome.dag_cost, &mut extra);
        }
        #[cfg(not(feature = "ilp"))]
        let _ = (problem, linear);
        // Last, so that the peak counts the bound's solve too.
        extra.extend(crate::memory::peak_resident_bytes().map(|b| ("peak_memory_bytes".to_string(), json!(b))));
        extra
    }

    /// The method to run (the named one, or `smoothe` where a model,
    /// pairwise costs or metrics ask for one, else `dag-greedy`), checked
    /// against `--objective`/`--constraint` (`timed`).
    fn method_checked(&self, timed: bool) -> Result<String> {
        let method = self.method.clone().unwrap_or_else(|| {
            if self.model.is_some() || self.quadratic.is_some() || timed { "smoothe" } else { "dag-greedy" }.to_string()
        });
        if extract::EXACT_METHODS.contains(&method.as_str()) && (self.model.is_some() || self.quadratic.is_some()) {
            bail!(
                "--method {method} solves for the node costs exactly and takes linear costs only; it cannot be \
                 combined with --model or --quadratic (use --method smoothe)"
            );
        }
        if timed {
            if self.quadratic.is_some() {
                bail!(
                    "--objective and --constraint take the model-free metrics ({}) or a --model's; they cannot \
                     be combined with --quadratic",
                    METRICS.join(", ")
                );
            }
            if method != "smoothe" {
                bail!("--objective and --constraint need --method smoothe, not {method}");
            }
        }
        Ok(method)
    }

    /// The metric `--objective` names, by default the model's own metric
    /// or, without a model, `dag-cost`.
    fn objective_metric(&self, model: Option<&Ensemble>) -> String {
        match (&self.objective, model) {
            (Some(name), _) => name.clone(),
            (None, Some(m)) => m.meta.metric_name().to_string(),
            (None, None) => "dag-cost".to_string(),
        }
    }

    /// The objective of `--objective`/`--constraint` on `problem`: the
    /// objective metric ([`ExtractJob::objective_metric`]) under the
    /// constraints' bounds, weighed at dag-greedy's scale. A metric is the
    /// model's ensemble (`bind`), its timing head, or a model-free one.
    fn timed_objective(
        &self,
        problem: &preprocess::Reduced,
        timing: &Arc<TimingGraph>,
        options: &ExtractOptions,
        ensemble: Option<&Ensemble>,
        bind: &dyn Fn(&Ensemble) -> Result<LearnedCost>,
    ) -> Result<Constrained<'static>> {
        let model = |name: &str| -> Result<Box<dyn CostModel>> {
            let Some(m) = ensemble else {
                return metric_model(name, problem, timing, &options.op_delays, &options.device);
            };
            if let Some(head) = m.meta.timing.as_ref().filter(|h| h.metric == name) {
                return Ok(Box::new(DelayCost::new(timing.clone(), &head.fit.op_delays(), &options.device)?));
            }
            if m.meta.metric_name() == name {
                return Ok(Box::new(bind(m)?));
            }
            if METRICS.contains(&name) {
                return metric_model(name, problem, timing, &options.op_delays, &options.device);
            }
            let mut known = vec![m.meta.metric_name().to_string()];
            known.extend(m.meta.timing.as_ref().map(|h| h.metric.clone()));
            known.extend(METRICS.iter().map(|s| s.to_string()));
            bail!("unknown metric {name:?}; with this model the metrics are {}", known.join(", "))
        };
        let metric = self.objective_metric(ensemble);
        let objective = model(&metric)?;
        let bounds = self.constraints.iter().map(|c| Ok((model(&c.metric)?, c.clone()))).collect::<Result<_>>()?;
        Ok(Constrained::new(&metric, objective, bounds, &DagGreedy.extract(problem)?))
    }
}

/// Seconds the linear relaxation may take to bound a SmoothE answer.
#[cfg(feature = "ilp")]
const LP_BOUND_SECONDS: f64 = 10.0;

/// Adds `lower_bound` and `gap` to a linear extraction's details, from the
/// linear relaxation of the exact program, when it solves within
/// [`LP_BOUND_SECONDS`].
#[cfg(feature = "ilp")]
fn linear_bound(problem: &preprocess::Reduced, dag_cost: f64, extra: &mut Map<String, Value>) {
    if let Some(bound) = extract::ilp::lp_lower_bound(problem, LP_BOUND_SECONDS) {
        let bound = bound.min(dag_cost);
        extra.insert("lower_bound".into(), json!(bound));
        extra.insert("gap".into(), json!(extract::ilp::relative_gap(dag_cost, bound)));
    }
}

/// Loads the model at `path` and binds it to `problem` (preprocessed from
/// `graph`) as a cost model; errors name the file.
pub(super) fn bind_model(
    path: &Path,
    problem: &preprocess::Reduced,
    graph: &crate::egraph::EGraph,
    conservatism: Conservatism,
    device: &candle_core::Device,
) -> Result<LearnedCost> {
    let ensemble = Ensemble::load(path, device)?;
    LearnedCost::new(ensemble, problem, graph, conservatism).with_context(|| format!("{}", path.display()))
}
