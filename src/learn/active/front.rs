//! The area-delay front inside `train-cost`.
//!
//! When the oracle prints a delay beside the metric the ensemble learns,
//! the frozen model will be asked for the least area under any delay
//! target, not only for the least area. So each round of the loop fits
//! per-operator delays to the labels so far and makes its model optimum
//! the least predicted primary metric under a delay bound drawn at random
//! between the least predicted delay and the greatest predicted delay of
//! the baselines: an ε-constraint scalarisation drawn afresh per round, as
//! ParEGO draws its weights, so the labels spread along the trade-off
//! instead of crowding around the least area.

use crate::cost::CostModel;
use crate::egraph::EGraph;
use crate::extract::{DepthGreedy, Extractor};
use crate::extraction::Extraction;
use crate::learn::model::metrics::in_test_split;
use crate::learn::oracle::labels::LabelLog;
use crate::preprocess::Reduced;
use crate::timing::fit::{fit_and_test, fit_delays, FitConfig, TimingHead, TimingLabel};
use crate::timing::objective::{Constrained, Constraint, DelayCost};
use crate::timing::{OpDelays, TimingGraph, TIMING_METRIC};
use anyhow::Result;
use candle_core::Device;
use rand::Rng;
use std::sync::Arc;

/// Fewest labels of the delay metric a round fits delays to; below it the
/// round optimises the primary metric alone.
const LEAST_LABELS: usize = 10;

/// The labels of `metric` that `log` holds for the design `original`
/// (preprocessed as `problem`) under the oracle `oracle_id`, each marked
/// held out or not by its extraction hash, as the ensemble's split with
/// `test_fraction` does.
pub fn timing_labels(
    original: &EGraph,
    problem: &Reduced,
    log: &LabelLog,
    oracle_id: &str,
    metric: &str,
    test_fraction: f64,
) -> Result<Vec<TimingLabel>> {
    let mut labels = Vec::new();
    for (label, value) in log.values_for(&original.fingerprint(), oracle_id, Some(metric)) {
        let original_extraction = label.to_extraction(original)?;
        if let Some(extraction) = problem.from_original(&original_extraction) {
            labels.push(TimingLabel { extraction, value, test: in_test_split(&label.extraction, test_fraction) });
        }
    }
    Ok(labels)
}

/// Fits the static-timing model of `metric` to the labels of
/// [`timing_labels`], holding out `test_fraction` of them to report its
/// error.
pub fn fit_timing_head(
    original: &EGraph,
    problem: &Reduced,
    log: &LabelLog,
    oracle_id: &str,
    metric: &str,
    test_fraction: f64,
) -> Result<TimingHead> {
    let labels = timing_labels(original, problem, log, oracle_id, metric, test_fraction)?;
    let timing = Arc::new(TimingGraph::new(problem));
    let fit = fit_and_test(&timing, &labels, &FitConfig::default())?;
    Ok(TimingHead { metric: metric.to_string(), fit })
}

/// Per-operator delays fitted to the loop's labels of the delay metric
/// (none held out), refitted once the labels have grown by a quarter
/// since the last fit: a fit takes seconds, a round adds a few labels.
#[derive(Default)]
pub struct RoundDelays {
    fitted_on: usize,
    delays: Option<OpDelays>,
}

impl RoundDelays {
    /// The delays for this round, refitted if the labels of `metric` in
    /// `log` have grown enough; `None` while fewer than `LEAST_LABELS` (10)
    /// carry it.
    pub fn update(
        &mut self,
        original: &EGraph,
        problem: &Reduced,
        timing: &Arc<TimingGraph>,
        log: &LabelLog,
        oracle_id: &str,
        metric: &str,
    ) -> Result<Option<&OpDelays>> {
        // Counted from the log; read back into extractions only to refit.
        let count = log.values_for(&original.fingerprint(), oracle_id, Some(metric)).len();
        let stale = self.delays.is_none() || 4 * count >= 5 * self.fitted_on;
        if count >= LEAST_LABELS && stale {
            let labels = timing_labels(original, problem, log, oracle_id, metric, 0.0)?;
            if labels.len() >= LEAST_LABELS {
                self.fitted_on = count;
                let (xs, ys): (Vec<Extraction>, Vec<f64>) = labels.into_iter().map(|l| (l.extraction, l.value)).unzip();
                self.delays = Some(fit_delays(timing, &xs, &ys, &FitConfig::default())?.op_delays(timing));
            }
        }
        Ok(self.delays.as_ref())
    }
}

/// One round's objective on the front, and the extraction of least
/// predicted delay to start it from.
pub struct FrontRound<'a> {
    /// `objective` under the drawn bound on the delay metric.
    pub objective: Constrained<'a>,
    /// Depth-greedy with the fitted delays: exact for the least predicted
    /// delay, so it meets any bound drawn.
    pub fastest: Extraction,
    /// The bound drawn.
    pub bound: f64,
}

/// Draws a round of the front: bounds `objective` (the model of the
/// primary metric `primary`) by a delay (`metric`, predicted with
/// `delays`) drawn uniformly between the least predicted delay and the
/// greatest predicted delay among `bases`. `None` when the two ends meet.
#[allow(clippy::too_many_arguments)]
pub fn draw_round<'a>(
    problem: &Reduced,
    timing: &Arc<TimingGraph>,
    delays: &OpDelays,
    (primary, metric): (&str, &str),
    objective: &'a dyn CostModel,
    bases: &[Extraction],
    rng: &mut impl Rng,
    device: &Device,
) -> Result<Option<FrontRound<'a>>> {
    let vector = timing.delay_vector(delays);
    let fastest = DepthGreedy { delays: delays.clone() }.extract(problem)?;
    let lo = timing.arrival(&fastest, &vector)?;
    let hi = bases.iter().map(|b| timing.arrival(b, &vector)).collect::<Result<Vec<f64>>>()?;
    let hi = hi.into_iter().fold(f64::NEG_INFINITY, f64::max);
    if hi.is_nan() || hi <= lo {
        return Ok(None);
    }
    let bound = lo + rng.random::<f64>() * (hi - lo);
    let delay = Box::new(DelayCost::new(timing.clone(), delays, device)?);
    let constraint = Constraint { metric: metric.to_string(), bound };
    let objective = Constrained::new(primary, Box::new(objective), vec![(delay, constraint)], &bases[0]);
    Ok(Some(FrontRound { objective, fastest, bound }))
}

/// The front exploration of one loop: the metric the ensemble learns, the
/// delay metric printed beside it, the design's timing structure and the
/// delays fitted so far.
pub struct Front {
    primary: String,
    metric: String,
    timing: Arc<TimingGraph>,
    delays: RoundDelays,
}

impl Front {
    /// For an oracle printing `metrics` (the first is the one the ensemble
    /// learns) on `problem`: `None` unless a later one is the delay metric.
    pub fn of(metrics: &[String], problem: &Reduced) -> Option<Front> {
        let (primary, rest) = metrics.split_first()?;
        let metric = rest.iter().find(|m| *m == TIMING_METRIC)?;
        Some(Front {
            primary: primary.clone(),
            metric: metric.clone(),
            timing: Arc::new(TimingGraph::new(problem)),
            delays: RoundDelays::default(),
        })
    }

    /// This round's objective: `objective` (the model of the primary
    /// metric) under a drawn delay bound ([`draw_round`]), with the delays
    /// refitted to `log` when stale ([`RoundDelays::update`]); `None`
    /// until enough labels carry the delay, or when no bound can be drawn.
    #[allow(clippy::too_many_arguments)]
    pub fn draw<'a>(
        &mut self,
        original: &EGraph,
        problem: &Reduced,
        log: &LabelLog,
        oracle_id: &str,
        objective: &'a dyn CostModel,
        bases: &[Extraction],
        rng: &mut impl Rng,
        device: &Device,
    ) -> Result<Option<FrontRound<'a>>> {
        let Some(delays) = self.delays.update(original, problem, &self.timing, log, oracle_id, &self.metric)? else {
            return Ok(None);
        };
        let metrics = (self.primary.as_str(), self.metric.as_str());
        draw_round(problem, &self.timing, delays, metrics, objective, bases, rng, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{random_extraction, DagGreedy, Greedy};
    use crate::learn::oracle::labels::Label;
    use crate::timing::OpDelays;
    use rand::SeedableRng;

    /// A scratch folder, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// mul3 with `n` random extractions in a fresh log, each labelled
    /// with its DAG cost as `area` and its unit depth as `delay`.
    fn labelled_mul3(n: usize) -> (EGraph, Reduced, LabelLog, Scratch) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/esyn/mul3.json");
        let g = crate::load::load_file(&path).unwrap();
        let p = crate::preprocess::preprocess_for_oracle(&g).unwrap();
        let timing = TimingGraph::new(&p);
        let unit = timing.delay_vector(&OpDelays::unit());
        let dir = Scratch(std::env::temp_dir().join(format!("smoothe-front-{}-{n}", std::process::id())));
        std::fs::create_dir_all(&dir.0).unwrap();
        let mut log = LabelLog::open(&dir.0.join("labels.jsonl")).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for i in 0..n {
            let e = random_extraction(&p.graph, &mut rng);
            let original = p.to_original(&e);
            let json = original.result_json(&g, "random", 0.0, serde_json::json!({})).unwrap();
            let metrics = [
                ("area".to_string(), e.dag_cost(&p.graph).unwrap()),
                ("delay".to_string(), timing.arrival(&e, &unit).unwrap()),
            ];
            log.append(Label {
                egraph: g.fingerprint(),
                extraction: format!("x{i}"),
                oracle: "o".into(),
                metrics: metrics.into_iter().collect(),
                cost: None,
                error: None,
                seconds: 0.0,
                choices: json["choices"].as_object().cloned().unwrap(),
            })
            .unwrap();
        }
        (g, p, log, dir)
    }

    fn draw<'a>(
        p: &Reduced,
        delays: &OpDelays,
        objective: &'a dyn CostModel,
        bases: &[Extraction],
        seed: u64,
    ) -> Option<FrontRound<'a>> {
        let timing = Arc::new(TimingGraph::new(p));
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        draw_round(p, &timing, delays, ("area", "delay"), objective, bases, &mut rng, &Device::Cpu).unwrap()
    }

    fn fitted(g: &EGraph, p: &Reduced, log: &LabelLog, delays: &mut RoundDelays) -> Option<OpDelays> {
        let timing = Arc::new(TimingGraph::new(p));
        delays.update(g, p, &timing, log, "o", "delay").unwrap().cloned()
    }

    #[test]
    fn a_round_bounds_the_delay_between_the_fastest_extraction_and_the_slowest_base() {
        let (g, p, log, _dir) = labelled_mul3(40);
        let bases = [Greedy.extract(&p).unwrap(), DagGreedy.extract(&p).unwrap()];
        let least_depth = {
            let timing = TimingGraph::new(&p);
            let fastest = DepthGreedy { delays: OpDelays::unit() }.extract(&p).unwrap();
            timing.arrival(&fastest, &timing.delay_vector(&OpDelays::unit())).unwrap()
        };
        let delays = fitted(&g, &p, &log, &mut RoundDelays::default()).expect("40 labels are enough to fit delays");
        let area = crate::cost::LinearCost::new(&p.graph, &Device::Cpu).unwrap();
        let mut bounds = Vec::new();
        for seed in 0..8 {
            let round = draw(&p, &delays, &area, &bases, seed).expect("the bases are slower than the fastest");
            let fastest = round.objective.report(&round.fastest)[0].clone();
            // Labels that are the unit depth fit delays that predict it.
            assert!((fastest.predicted - least_depth).abs() <= 0.05 * least_depth, "{fastest:?} vs {least_depth}");
            assert!(fastest.met && fastest.predicted <= round.bound);
            let slowest = bases.iter().map(|b| round.objective.report(b)[0].predicted).fold(f64::MIN, f64::max);
            assert!(round.bound <= slowest + 1e-9, "{} above the slowest base {slowest}", round.bound);
            // The discrete objective ranks a violating extraction behind a
            // feasible one.
            if let Some(over) = bases.iter().find(|b| !round.objective.report(b)[0].met) {
                assert!(round.objective.cost_of(over) > round.objective.cost_of(&round.fastest));
            }
            bounds.push(round.bound);
        }
        // Drawn afresh per round, not one fixed bound.
        assert!(bounds.iter().any(|b| (b - bounds[0]).abs() > 1e-6), "{bounds:?}");
    }

    #[test]
    fn delays_are_fitted_from_enough_labels_and_refitted_once_they_grow_by_a_quarter() {
        let (g, p, log, _dir) = labelled_mul3(LEAST_LABELS - 1);
        assert!(fitted(&g, &p, &log, &mut RoundDelays::default()).is_none());
        let (g, p, log, _dir) = labelled_mul3(LEAST_LABELS + 2);
        let mut delays = RoundDelays::default();
        assert!(fitted(&g, &p, &log, &mut delays).is_some());
        assert_eq!(delays.fitted_on, LEAST_LABELS + 2);
        // The same labels again: no refit.
        fitted(&g, &p, &log, &mut delays);
        assert_eq!(delays.fitted_on, LEAST_LABELS + 2);
        let (g, p, log, _dir) = labelled_mul3(2 * LEAST_LABELS);
        fitted(&g, &p, &log, &mut delays);
        assert_eq!(delays.fitted_on, 2 * LEAST_LABELS);
    }
}
