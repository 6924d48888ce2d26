//! Arrival time: exact on the reduced graph, exact minimum by
//! depth-greedy, relaxed op equal on one-hot choices with checked
//! gradients, and SmoothE under a delay bound.

mod common;

use candle_core::{DType, Tensor, Var};
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smoothe::cost::CostModel;
use smoothe::egraph::{ClassIdx, EGraph};
use smoothe::extract::{self, random_extraction, DepthGreedy, ExtractOptions, Extractor, SmoothE, SmoothEConfig};
use smoothe::extraction::Extraction;
use smoothe::jobs::ExtractJob;
use smoothe::preprocess::{preprocess, Reduced};
use smoothe::timing::objective::{Constraint, DelayCost};
use smoothe::timing::op::ArrivalOp;
use smoothe::timing::{OpDelays, TimingGraph, LEAF_OP};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Arrival time computed directly on the original graph, by recursion.
fn original_arrival(g: &EGraph, e: &Extraction, delays: &OpDelays) -> f64 {
    fn at(g: &EGraph, e: &Extraction, delays: &OpDelays, c: ClassIdx, memo: &mut Vec<Option<f64>>) -> f64 {
        if let Some(t) = memo[c.index()] {
            return t;
        }
        let n = e.choices[c.index()].unwrap();
        let op = if g.children(n).is_empty() { LEAF_OP } else { g.op(n) };
        let kids = g.children(n).iter().map(|&k| at(g, e, delays, k, memo)).fold(0.0, f64::max);
        let t = delays.delay(op) + kids;
        memo[c.index()] = Some(t);
        t
    }
    let mut memo = vec![None; g.num_classes()];
    g.roots().iter().map(|&r| at(g, e, delays, r, &mut memo)).fold(f64::NEG_INFINITY, f64::max)
}

/// Random non-negative delays for the operators of `g`, leaves included.
fn random_delays(g: &EGraph, rng: &mut StdRng) -> OpDelays {
    let mut map = BTreeMap::new();
    for n in g.nodes() {
        let op = if g.children(n).is_empty() { LEAF_OP.to_string() } else { g.op(n).to_string() };
        map.entry(op).or_insert_with(|| rng.random_range(0.0..3.0));
    }
    OpDelays::from_map(map).unwrap()
}

fn shipped(path: &str) -> EGraph {
    smoothe::load::load_file(std::path::Path::new(&format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))).unwrap()
}

/// Random operator graphs (merged classes, cycles) and the shipped e-graphs.
fn problems() -> Vec<(EGraph, Reduced)> {
    let mut graphs: Vec<EGraph> = (0..40).map(random_ops_graph).collect();
    for path in [
        "datasets/esyn/mul3.json",
        "datasets/egg/math_simplify_factor.json",
        "datasets/diospyros/vector_mac_root_21.json",
    ] {
        graphs.push(shipped(path));
    }
    graphs.into_iter().filter_map(|g| preprocess(&g).ok().map(|p| (g, p))).collect()
}

fn one_hot(g: &EGraph, e: &Extraction) -> Vec<f64> {
    let mut p = vec![0f64; g.num_nodes()];
    for c in e.check(g).unwrap() {
        p[e.choices[c.index()].unwrap().index()] = 1.0;
    }
    p
}

#[test]
fn arrival_on_the_reduced_graph_equals_arrival_on_the_original() {
    let (mut checked, mut merged) = (0, 0);
    for (i, (original, problem)) in problems().iter().enumerate() {
        merged += problem.stats.merged_classes;
        let timing = TimingGraph::new(problem);
        let mut rng = StdRng::seed_from_u64(i as u64);
        for round in 0..6 {
            let delays = if round == 0 { OpDelays::unit() } else { random_delays(original, &mut rng) };
            let e = random_extraction(&problem.graph, &mut rng);
            let reduced = timing.arrival(&e, &timing.delay_vector(&delays)).unwrap();
            let direct = original_arrival(original, problem.to_original(&e).as_extraction(), &delays);
            assert!((reduced - direct).abs() <= 1e-9 * direct.abs().max(1.0), "graph {i}: {reduced} vs {direct}");
            checked += 1;
        }
    }
    assert!(checked > 200 && merged > 20, "{checked} extractions, {merged} merged classes");
}

#[test]
fn depth_greedy_finds_the_least_arrival_of_all_extractions() {
    let mut compared = 0;
    for seed in 0..150 {
        let g = graph(&random_graph_json(seed, 3 + seed as usize % 6, false));
        let Ok(problem) = preprocess(&g) else { continue };
        let mut rng = StdRng::seed_from_u64(seed);
        let delays = if seed % 2 == 0 { OpDelays::unit() } else { random_delays(&g, &mut rng) };
        let least =
            valid_extractions(&g).iter().map(|e| original_arrival(&g, e, &delays)).fold(f64::INFINITY, f64::min);
        let options = ExtractOptions { op_delays: delays.clone(), ..Default::default() };
        let method = extract::by_name("depth-greedy", &options).unwrap();
        // `run` checks the result on the original graph.
        let out = extract::run(method.as_ref(), &g, &problem).unwrap();
        let got = original_arrival(&g, out.extraction.as_extraction(), &delays);
        assert!((got - least).abs() < 1e-9, "seed {seed}: depth-greedy {got}, least {least}");
        let reported = out.details["delay"].as_f64().unwrap();
        assert!((reported - got).abs() < 1e-9, "seed {seed}: reported delay {reported}, measured {got}");
        compared += 1;
    }
    assert!(compared > 100, "only {compared} graphs compared");
}

#[test]
fn relaxed_arrival_equals_the_exact_arrival_on_one_hot_choices() {
    let mut cyclic = 0;
    for (i, (original, problem)) in problems().iter().enumerate() {
        let g = &problem.graph;
        cyclic += usize::from(!problem.sccs.cyclic_sizes().is_empty());
        let timing = Arc::new(TimingGraph::new(problem));
        let mut rng = StdRng::seed_from_u64(50 + i as u64);
        let delays = random_delays(original, &mut rng);
        let cost = DelayCost::new(timing, &delays, &device()).unwrap();
        let extractions: Vec<Extraction> = (0..4).map(|_| random_extraction(g, &mut rng)).collect();
        let probs: Vec<Vec<f64>> = extractions.iter().map(|e| one_hot(g, e)).collect();
        // Node-major [nodes, batch]: one column per extraction.
        let flat: Vec<f64> = (0..g.num_nodes()).flat_map(|n| probs.iter().map(move |p| p[n])).collect();
        let relaxed: Vec<f64> = cost
            .expected(&Tensor::from_vec(flat, (g.num_nodes(), probs.len()), &device()).unwrap())
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec1()
            .unwrap();
        for (e, r) in extractions.iter().zip(relaxed) {
            let exact = cost.cost_of(e);
            assert!((r - exact).abs() <= 1e-9 * exact.abs().max(1.0), "graph {i}: relaxed {r}, exact {exact}");
        }
    }
    assert!(cyclic > 5, "only {cyclic} graphs with cyclic components");
}

#[test]
fn relaxed_arrival_gradients_match_finite_differences() {
    let (mut checked, mut cyclic) = (0, 0);
    for (i, (original, problem)) in
        problems().iter().enumerate().filter(|(_, (_, p))| p.graph.num_nodes() < 60).take(12)
    {
        let g = &problem.graph;
        cyclic += usize::from(!problem.sccs.cyclic_sizes().is_empty());
        let timing = Arc::new(TimingGraph::new(problem));
        let mut op = ArrivalOp::new(timing.clone());
        op.tolerance = 1e-14;
        op.max_sweeps = 10_000;
        let mut rng = StdRng::seed_from_u64(200 + i as u64);
        let (nn, batch) = (g.num_nodes(), 2);
        let d0 = timing.delay_vector(&random_delays(original, &mut rng));
        let p0: Vec<f64> = (0..nn * batch).map(|_| rng.random_range(0.15..0.95)).collect();
        let p = Var::from_vec(p0.clone(), (nn, batch), &device()).unwrap();
        let d = Var::from_vec(d0.clone(), d0.len(), &device()).unwrap();
        let grads = op.apply(p.as_tensor(), d.as_tensor()).unwrap().sum_all().unwrap().backward().unwrap();
        let gp: Vec<f64> = grads.get(p.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let gd: Vec<f64> = grads.get(d.as_tensor()).unwrap().to_vec1().unwrap();
        let f = |p: &[f64], d: &[f64]| -> f64 {
            let p = Tensor::from_vec(p.to_vec(), (nn, batch), &device()).unwrap();
            let d = Tensor::from_vec(d.to_vec(), d.len(), &device()).unwrap();
            op.apply(&p, &d).unwrap().sum_all().unwrap().to_scalar::<f64>().unwrap()
        };
        let h = 1e-6;
        let close = |fd: f64, got: f64, what: String| {
            assert!((fd - got).abs() <= 1e-4 * fd.abs().max(1.0), "graph {i} {what}: autograd {got}, fd {fd}");
        };
        for k in 0..nn * batch {
            let (mut a, mut b) = (p0.clone(), p0.clone());
            a[k] += h;
            b[k] -= h;
            close((f(&a, &d0) - f(&b, &d0)) / (2.0 * h), gp[k], format!("probability {k}"));
            checked += 1;
        }
        for k in 0..d0.len() {
            let (mut a, mut b) = (d0.clone(), d0.clone());
            a[k] += h;
            b[k] -= h;
            close((f(&p0, &a) - f(&p0, &b)) / (2.0 * h), gd[k], format!("delay of {}", timing.ops()[k]));
            checked += 1;
        }
    }
    assert!(checked > 300 && cyclic > 2, "{checked} entries checked, {cyclic} cyclic graphs");
}

#[test]
fn smoothe_descends_the_relaxed_delay_to_the_least_arrival() {
    // SmoothE started from greedy and dag-greedy only (no depth-greedy
    // start): the gradient of the relaxed arrival has to find the least.
    let mut reached = 0;
    let cases: Vec<(EGraph, Reduced)> =
        problems().into_iter().filter(|(_, p)| p.graph.num_nodes() > 8).take(10).collect();
    for (i, (_, problem)) in cases.iter().enumerate() {
        let timing = Arc::new(TimingGraph::new(problem));
        let delay = timing.delay_vector(&OpDelays::unit());
        let least = timing
            .arrival(&DepthGreedy { delays: OpDelays::unit() }.extract_with_details(problem).unwrap().0, &delay)
            .unwrap();
        let cost = DelayCost::new(timing.clone(), &OpDelays::unit(), &device()).unwrap();
        let smoothe = SmoothE {
            config: SmoothEConfig { steps: 300, time_limit: 0.0, polish_passes: 0, ..Default::default() },
            seed: i as u64,
            device: device(),
            progress: smoothe::progress::quiet(),
        };
        let (e, _) = smoothe.optimise(problem, &cost).unwrap();
        e.check(&problem.graph).unwrap();
        let got = timing.arrival(&e, &delay).unwrap();
        assert!(got >= least - 1e-9, "case {i}: below the least arrival");
        reached += usize::from(got <= least + 1e-9);
    }
    assert!(reached >= 9, "SmoothE reached the least arrival on {reached} of 10");
}

fn extract_job(path: &std::path::Path, constraints: &[&str], objective: Option<&str>) -> smoothe::jobs::ExtractResult {
    let job = ExtractJob {
        constraints: constraints.iter().map(|c| c.parse().unwrap()).collect(),
        objective: objective.map(str::to_string),
        smoothe: SmoothEConfig { steps: 150, time_limit: 0.0, ..Default::default() },
        ..Default::default()
    };
    job.run(path, smoothe::progress::quiet()).unwrap()
}

fn method_result(path: &std::path::Path, method: &str) -> (f64, f64) {
    let job = ExtractJob { method: Some(method.into()), ..Default::default() };
    let r = job.run(path, smoothe::progress::quiet()).unwrap();
    let g = smoothe::load::load_file(path).unwrap();
    let e = Extraction {
        choices: smoothe::extraction::OriginalExtraction::from_json(&g, &r.json).unwrap().choices().to_vec(),
    };
    (r.dag_cost, original_arrival(&g, &e, &OpDelays::unit()))
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn a_delay_bound_is_met_whenever_depth_greedy_meets_it_and_a_loose_one_costs_nothing() {
    let mut paths = vec![std::path::PathBuf::from(format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR")))];
    for seed in 0..4 {
        paths.push(temp_file(&format!("timing-{seed}.json"), &shared_graph_json(seed, 30)));
    }
    for path in &paths {
        let (fast_cost, least) = method_result(path, "depth-greedy");
        let (dag_cost, dag_delay) = method_result(path, "dag-greedy");
        // At the least delay: met, and no dearer than depth-greedy itself.
        let r = extract_job(path, &[&format!("delay<={least}")], None);
        assert!(r.constraints[0].met && r.constraints[0].predicted <= least, "{}: {:?}", path.display(), r.constraints);
        assert!(r.dag_cost <= fast_cost + 1e-9, "{}: {} over depth-greedy's {fast_cost}", path.display(), r.dag_cost);
        // At dag-greedy's delay: no dearer than dag-greedy.
        let r = extract_job(path, &[&format!("delay<={dag_delay}")], None);
        assert!(r.constraints[0].met, "{}: {:?}", path.display(), r.constraints);
        assert!(r.dag_cost <= dag_cost + 1e-9, "{}: {} over dag-greedy's {dag_cost}", path.display(), r.dag_cost);
        // Below the least delay nothing is feasible: the least-violating
        // extraction comes back, said to miss the bound.
        let r = extract_job(path, &[&format!("delay<={}", least - 1.0)], None);
        assert!(!r.constraints[0].met, "{}: {:?}", path.display(), r.constraints);
        assert_eq!(r.constraints[0].predicted, least, "{}: not the least-violating", path.display());
        assert_eq!(r.json["constraints"][0]["met"], false);
        // The objective delay alone reaches the least delay.
        let r = extract_job(path, &[], Some("delay"));
        assert_eq!(r.json["delay"].as_f64(), Some(least), "{}", path.display());
    }
}

#[test]
fn constraints_and_delay_files_are_checked() {
    assert_eq!("delay <= 12.5".parse::<Constraint>().unwrap(), Constraint { metric: "delay".into(), bound: 12.5 });
    for bad in ["delay", "delay<=fast", "delay<=inf", "delay>=3"] {
        assert!(bad.parse::<Constraint>().is_err(), "{bad} parsed");
    }
    let negative = temp_file("neg-delays.json", r#"{"*": -1}"#);
    let err = format!("{:#}", OpDelays::load(&negative).unwrap_err());
    assert!(err.contains("neg-delays.json") && err.contains("\"*\""), "{err}");
    let list = temp_file("list-delays.json", "[1, 2]");
    let err = format!("{:#}", OpDelays::load(&list).unwrap_err());
    assert!(err.contains("list-delays.json") && err.contains("operator delays"), "{err}");
    let good = temp_file("delays.json", r#"{"*": 2, "!": 0.5}"#);
    let d = OpDelays::load(&good).unwrap();
    assert_eq!((d.delay("*"), d.delay("!"), d.delay("+"), d.delay(LEAF_OP)), (2.0, 0.5, 1.0, 0.0));
}

#[test]
fn cli_extracts_under_a_delay_bound_and_refuses_pairwise_costs_with_one() {
    let mul3 = format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR"));
    let delays = temp_file("cli-delays.json", r#"{"*": 2, "+": 3, "!": 1}"#);
    let (code, out, err) =
        cli(&["extract", "--method", "depth-greedy", "--op-delays", delays.to_str().unwrap(), &mul3]);
    assert_eq!(code, 0, "{err}");
    let least = parse_json(&out)["delay"].as_f64().unwrap();
    let bound = format!("delay<={}", least + 4.0);
    let (code, out, err) = cli(&[
        "extract",
        "-q",
        "--steps",
        "300",
        "--time-limit",
        "0",
        "--constraint",
        &bound,
        "--op-delays",
        delays.to_str().unwrap(),
        &mul3,
    ]);
    assert_eq!(code, 0, "{err}");
    let result = parse_json(&out);
    assert_eq!(result["constraints"][0]["met"], true, "{out}");
    assert!(result["delay"].as_f64().unwrap() <= least + 4.0);
    assert!(err.contains(&format!("{bound}: ")), "{err}");
    let (code, _, err) = cli(&["extract", "--quadratic", "nowhere.json", "--objective", "delay", &mul3]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot be combined with --quadratic"), "{err}");
}

/// The three baselines and random extractions of `problem`, `count` in all.
fn labelled_sample(problem: &Reduced, count: usize, seed: u64) -> Vec<Extraction> {
    let mut out = vec![
        DepthGreedy { delays: OpDelays::unit() }.extract_with_details(problem).unwrap().0,
        extract::DagGreedy.extract_with_details(problem).unwrap().0,
    ];
    let mut rng = StdRng::seed_from_u64(seed);
    while out.len() < count {
        let e = random_extraction(&problem.graph, &mut rng);
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn fitted_delays_predict_held_out_delays_within_one_percent_and_extract_the_least() {
    use smoothe::timing::fit::{fit_delays, FitConfig};
    let mut hidden = BTreeMap::new();
    for (op, d) in [("*", 2.0), ("+", 3.0), ("!", 0.5), ("&", 1.5), (LEAF_OP, 0.25)] {
        hidden.insert(op.to_string(), d);
    }
    let path = std::path::PathBuf::from(format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR")));
    let original = smoothe::load::load_file(&path).unwrap();
    let problem = preprocess(&original).unwrap();
    let timing = Arc::new(TimingGraph::new(&problem));
    // The issue's oracle (unit depth) and one with delays the fit must find.
    for truth in [OpDelays::unit(), OpDelays::from_map(hidden).unwrap()] {
        let sample = labelled_sample(&problem, 125, 3);
        let label = |e: &Extraction| original_arrival(&original, problem.to_original(e).as_extraction(), &truth);
        let (train, test) = sample.split_at(100);
        let y: Vec<f64> = train.iter().map(label).collect();
        let fit = fit_delays(&timing, train, &y, &FitConfig::default()).unwrap();
        let (mut error, mut magnitude) = (0.0, 0.0);
        for e in test {
            error += (timing.arrival(e, &fit.delay).unwrap() - label(e)).abs();
            magnitude += label(e);
        }
        assert!(error < 0.01 * magnitude, "{truth:?}: held-out error {error} of {magnitude}");
        // SmoothE against the fitted delays reaches the least true delay.
        let file = temp_file("fitted.json", &serde_json::to_string(&fit.op_delays(&timing).by_op()).unwrap());
        let job = ExtractJob {
            objective: Some("delay".into()),
            op_delays: Some(file),
            smoothe: SmoothEConfig { steps: 100, time_limit: 0.0, ..Default::default() },
            ..Default::default()
        };
        let got = job.run(&path, smoothe::progress::quiet()).unwrap();
        let got = smoothe::extraction::OriginalExtraction::from_json(&original, &got.json).unwrap();
        let true_delay = timing.delay_vector(&truth);
        let (all, _) = extract::least_arrival(&timing, &true_delay);
        let least = timing.arrival(&all.restricted_to_reachable(&problem.graph).unwrap(), &true_delay).unwrap();
        assert_eq!(original_arrival(&original, got.as_extraction(), &truth), least, "{truth:?}");
    }
}

#[test]
fn cli_fits_delays_from_an_oracle_and_refuses_too_few_samples() {
    let mul3 = format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR"));
    let command = hidden_delay_oracle();
    let dir = std::env::temp_dir().join(format!("smoothe-fit-{}", std::process::id()));
    let (labels, out) = (dir.join("labels.jsonl"), dir.join("delays.json"));
    let args = [
        "fit-delays",
        "-q",
        "--oracle",
        &command,
        "--metric",
        "delay",
        "--samples",
        "30",
        "--labels",
        labels.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        &mul3,
    ];
    let (code, stdout, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    let report = parse_json(&stdout);
    assert_eq!(report["calls"], 30, "{stdout}");
    assert!(report["test_relative_mae"].as_f64().unwrap() < 0.01, "{stdout}");
    let delays = OpDelays::load(&out).unwrap();
    assert!((delays.delay("+") - 3.0).abs() < 0.1 && (delays.delay("*") - 2.0).abs() < 0.1, "{delays:?}");
    // Run again: every label is in the log, so no call is made.
    let (code, stdout, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(parse_json(&stdout)["calls"], 0, "{stdout}");
    let mut few = args.to_vec();
    few[7] = "1";
    let (code, _, err) = cli(&few);
    assert_ne!(code, 0);
    assert!(err.contains("--samples must be at least 2"), "{err}");
}

/// A Python oracle printing `{"area": nodes chosen, "delay": arrival}`
/// under hidden delays (`*` 2, `+` 3, `!` 0.5, leaves 0.25).
fn hidden_delay_oracle() -> String {
    let oracle = temp_file(
        "hidden_delay.py",
        "import json, sys\n\
         e = json.load(open(sys.argv[2]))\n\
         D = {'*': 2.0, '+': 3.0, '!': 0.5}\n\
         t = []\n\
         for n in e['nodes']:\n    \
             k = n['children']\n    \
             t.append((D.get(n['op'], 1.0) if k else 0.25) + max([t[i] for i in k], default=0.0))\n\
         print(json.dumps({'area': len(t), 'delay': max(t[r] for r in e['roots'])}))\n",
    );
    format!("python3 {}", oracle.display())
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn train_cost_learns_area_and_delay_from_the_same_calls_and_extract_bounds_the_learned_delay() {
    let mul3 = format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR"));
    let command = hidden_delay_oracle();
    let dir = std::env::temp_dir().join(format!("smoothe-two-metrics-{}", std::process::id()));
    let model = dir.join("m.safetensors");
    let model_arg = model.to_str().unwrap();
    let args = [
        "train-cost",
        "-q",
        "--oracle",
        &command,
        "--metric",
        "area,delay",
        "--budget",
        "60",
        "--initial",
        "24",
        "--rounds",
        "2",
        "--per-round",
        "6",
        "--explore",
        "2",
        "--steps",
        "120",
        "--out",
        model_arg,
        &mul3,
    ];
    let (code, _, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    // Every call's label holds both numbers.
    let log = std::fs::read_to_string(dir.join("m.labels.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = log.lines().map(parse_json).collect();
    assert!(lines.len() >= 30, "{} labels", lines.len());
    assert!(lines.iter().all(|l| l["metrics"]["area"].is_number() && l["metrics"]["delay"].is_number()));
    // The model file carries the ensemble's metric and a timing head
    // that predicts held-out delays.
    let meta = smoothe::learn::model::network::Ensemble::load(&model, &candle_core::Device::Cpu).unwrap().meta;
    assert_eq!(meta.metric.as_deref(), Some("area"));
    let head = meta.timing.expect("a timing head");
    assert!(head.fit.test > 0 && head.fit.test_relative_mae < 0.01, "{head:?}");
    // The least delay under the hidden delays, by depth-greedy.
    let truth = temp_file("two-metrics-truth.json", r#"{"*": 2, "+": 3, "!": 0.5, "<leaf>": 0.25}"#);
    let (code, out, err) = cli(&["extract", "--method", "depth-greedy", "--op-delays", truth.to_str().unwrap(), &mul3]);
    assert_eq!(code, 0, "{err}");
    let least = parse_json(&out)["delay"].as_f64().unwrap();
    let quick = ["-q", "--steps", "200", "--time-limit", "0", "--model", model_arg];
    let run = |extra: &[&str], name: &str| {
        let path = dir.join(name);
        let mut a = vec!["extract", "-o", path.to_str().unwrap()];
        a.extend(quick);
        a.extend(extra);
        a.push(&mul3);
        let (code, _, err) = cli(&a);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = cli(&["check", &mul3, path.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        parse_json(&std::fs::read_to_string(&path).unwrap())
    };
    // The learned delay's optimum is the least delay.
    let fastest = run(&["--objective", "delay"], "fastest.json");
    assert!(fastest["delay"].as_f64().unwrap() <= least * 1.01, "{fastest} against {least}");
    // Least learned area under a bound on the learned delay.
    let bound = format!("delay<={}", least + 3.0);
    let bounded = run(&["--objective", "area", "--constraint", &bound], "bounded.json");
    let c = &bounded["constraints"][0];
    assert_eq!((c["metric"].as_str(), c["met"].as_bool()), (Some("delay"), Some(true)), "{bounded}");
    assert!(c["predicted"].as_f64().unwrap() <= least + 3.0, "{bounded}");
    assert!(bounded["predicted"]["area"].is_number() && bounded["predicted"]["delay"].is_number(), "{bounded}");
    // The model keeps the measured front: labelled extractions (each a
    // line of the log), none beaten on both metrics by another label.
    let model_front =
        &smoothe::learn::model::network::Ensemble::load(&model, &candle_core::Device::Cpu).unwrap().meta.front[0];
    let labelled: Vec<(f64, f64)> = lines
        .iter()
        .map(|l| (l["metrics"]["area"].as_f64().unwrap(), l["metrics"]["delay"].as_f64().unwrap()))
        .collect();
    assert!(model_front.points.len() >= 2, "{model_front:?}");
    for p in &model_front.points {
        let (x, y) = (p.metrics["area"], p.metrics["delay"]);
        assert!(labelled.contains(&(x, y)));
        assert!(!labelled.iter().any(|&(a, b)| a <= x && b <= y && (a < x || b < y)), "({x}, {y}) is dominated");
    }
    // Under a bound between two measured points' delays, the answer
    // measures within the bound and no larger than the best measured
    // extraction that meets it.
    let slow = &model_front.points[0].metrics;
    let t = (slow["delay"] + model_front.points[1].metrics["delay"]) / 2.0;
    let best = model_front
        .points
        .iter()
        .filter(|p| p.metrics["delay"] <= t)
        .map(|p| p.metrics["area"])
        .fold(f64::MAX, f64::min);
    let answer = run(&["--objective", "area", "--constraint", &format!("delay<={t}")], "between.json");
    let g = smoothe::load::load_file(std::path::Path::new(&mul3)).unwrap();
    let chosen = smoothe::extraction::OriginalExtraction::from_json(&g, &answer["choices"]).unwrap();
    let input = dir.join("between.oracle.json");
    std::fs::write(&input, smoothe::learn::oracle::identity::oracle_file(&g, &chosen).unwrap().to_string()).unwrap();
    let oracle_args: Vec<&str> = command.split(' ').collect();
    let measured =
        std::process::Command::new(oracle_args[0]).args(&oracle_args[1..]).arg(&mul3).arg(&input).output().unwrap();
    let measured = parse_json(std::str::from_utf8(&measured.stdout).unwrap().trim());
    let (area, delay) = (measured["area"].as_f64().unwrap(), measured["delay"].as_f64().unwrap());
    assert!(delay <= t + 1e-9 && area <= best, "measured ({area}, {delay}) against {best} under {t}: {answer}");
    if answer["answer"] == "measured" {
        assert_eq!(
            (answer["measured"]["area"].as_f64(), answer["constraints"][0]["predicted"].as_f64()),
            (Some(area), Some(delay))
        );
    }
    // The front: valid extractions, none predicted worse in both metrics
    // than another, in increasing delay.
    let front_path = dir.join("front.json");
    let mut a = vec!["extract", "--pareto", "area,delay", "--points", "3", "-o", front_path.to_str().unwrap()];
    a.extend(quick);
    a.push(&mul3);
    let (code, _, err) = cli(&a);
    assert_eq!(code, 0, "{err}");
    let front = parse_json(&std::fs::read_to_string(&front_path).unwrap());
    let front = front.as_array().unwrap();
    assert!(!front.is_empty());
    let pairs: Vec<(f64, f64)> = front
        .iter()
        .map(|r| (r["predicted"]["area"].as_f64().unwrap(), r["predicted"]["delay"].as_f64().unwrap()))
        .collect();
    for (i, r) in front.iter().enumerate() {
        let path = dir.join(format!("front{i}.json"));
        std::fs::write(&path, r.to_string()).unwrap();
        let (code, _, err) = cli(&["check", &mul3, path.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let (x, y) = pairs[i];
        assert!(!pairs.iter().enumerate().any(|(j, &(a, b))| j != i && a <= x && b <= y && (a < x || b < y)));
    }
    assert!(pairs.windows(2).all(|w| w[0].1 <= w[1].1), "{pairs:?}");
    // A metric the model does not have is refused, naming those it has.
    let (code, _, err) = cli(&["extract", "-q", "--model", model_arg, "--objective", "power", &mul3]);
    assert_ne!(code, 0);
    assert!(err.contains("power") && err.contains("area") && err.contains("delay"), "{err}");
}

#[test]
fn arrival_is_the_delays_summed_along_the_critical_path() {
    let mul3 = format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR"));
    let graphs: Vec<(String, EGraph)> = (0..20)
        .map(|s| (format!("random {s}"), random_ops_graph(s)))
        .chain([(mul3.clone(), smoothe::load::load_file(std::path::Path::new(&mul3)).unwrap())])
        .collect();
    for (i, (name, g)) in graphs.iter().enumerate() {
        let Ok(problem) = preprocess(g) else { continue };
        let timing = TimingGraph::new(&problem);
        let mut rng = StdRng::seed_from_u64(i as u64);
        for _ in 0..5 {
            let delay: Vec<f64> = timing.ops().iter().map(|_| rng.random_range(0.0..3.0)).collect();
            let e = random_extraction(&problem.graph, &mut rng);
            let counts = timing.critical_ops(&e, &delay).unwrap();
            let dot: f64 = counts.iter().zip(&delay).map(|(c, d)| c * d).sum();
            let arrival = timing.arrival(&e, &delay).unwrap();
            assert!((dot - arrival).abs() <= 1e-9 * arrival.abs().max(1.0), "{name}: {dot} vs {arrival}");
        }
    }
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn search_minimises_measured_area_under_a_measured_delay_bound() {
    let mul3 = format!("{}/datasets/esyn/mul3.json", env!("CARGO_MANIFEST_DIR"));
    let original = smoothe::load::load_file(std::path::Path::new(&mul3)).unwrap();
    let problem = preprocess(&original).unwrap();
    let truth = OpDelays::from_map(BTreeMap::from([
        ("*".to_string(), 2.0),
        ("+".to_string(), 3.0),
        ("!".to_string(), 0.5),
        (LEAF_OP.to_string(), 0.25),
    ]))
    .unwrap();
    // Unit depth-greedy is one of the starts, so the bound can be met.
    let fast = DepthGreedy { delays: OpDelays::unit() }.extract(&problem).unwrap();
    let bound = original_arrival(&original, problem.to_original(&fast).as_extraction(), &truth);
    let command = hidden_delay_oracle();
    let dir = std::env::temp_dir().join(format!("smoothe-search-goal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let labels = dir.join("labels.jsonl");
    let out = dir.join("best.json");
    let constraint = format!("delay<={bound}");
    let search = |metric: Option<&str>| {
        let mut a = vec!["search", "-q", "--oracle", &command, "--labels", labels.to_str().unwrap()];
        a.extend(["--budget", "40", "--jobs", "1", "--objective", "area", "--constraint", &constraint]);
        a.extend(metric.map(|m| ["--metric", m]).into_iter().flatten());
        a.extend(["-o", out.to_str().unwrap(), &mul3]);
        cli(&a)
    };
    let (code, _, err) = search(None);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["check", &mul3, out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    let c = &result["constraints"][0];
    assert_eq!((c["metric"].as_str(), c["met"].as_bool()), (Some("delay"), Some(true)), "{result}");
    assert!(result["measured"]["delay"].as_f64().unwrap() <= bound, "{result}");
    // The answer is the least area among the labels that meet the bound.
    let log = std::fs::read_to_string(&labels).unwrap();
    let labelled: Vec<(f64, f64)> = log
        .lines()
        .map(parse_json)
        .map(|l| (l["metrics"]["area"].as_f64().unwrap(), l["metrics"]["delay"].as_f64().unwrap()))
        .collect();
    assert!(labelled.len() > 10 && labelled.len() <= 40, "{} labels", labelled.len());
    let least = labelled.iter().filter(|(_, d)| *d <= bound).map(|(a, _)| *a).fold(f64::INFINITY, f64::min);
    assert_eq!(result["measured"]["area"].as_f64(), Some(least), "{result}");
    assert!(labelled.iter().any(|&(a, d)| d > bound && a < least), "the bound never bit: {labelled:?}");
    // A metric list that leaves out a bounded metric is refused, naming it.
    let (code, _, err) = search(Some("area"));
    assert_ne!(code, 0);
    assert!(err.contains("\"delay\" is not among --metric area"), "{err}");
}
