//! The SmoothE extractor: valid, never worse than greedy, better where
//! greedy is blind, reproducible, and configurable.

mod common;
use common::*;
use smoothe::extract::{self, ExtractOptions, Extractor, OptimizerKind, Parameterisation, SmoothE, SmoothEConfig};
use smoothe::preprocess::preprocess;

fn quick(seed: u64) -> SmoothE {
    let mut config = SmoothEConfig { steps: 300, time_limit: 0.0, batch: 6, ..Default::default() };
    config.patience = 100;
    config.restarts = 1;
    SmoothE { config, seed, device: device(), progress: smoothe::progress::quiet() }
}

fn greedy_best(text: &str) -> f64 {
    let g = graph(text);
    let p = preprocess(&g).unwrap();
    ["greedy", "dag-greedy"]
        .iter()
        .map(|m| {
            let e = extract::by_name(m, &ExtractOptions::default()).unwrap();
            extract::run(e.as_ref(), &g, &p).unwrap().dag_cost
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn finds_the_optimum_greedy_misses_on_a_cycle() {
    let text = cheap_cycle_json();
    let g = graph(&text);
    let p = preprocess(&g).unwrap();
    let out = extract::run(&quick(0), &g, &p).unwrap();
    assert_eq!(greedy_best(&text), 21.0);
    assert_eq!(out.dag_cost, 12.0);
}

#[test]
fn valid_and_never_worse_than_greedy_on_random_graphs() {
    let (mut greedy_suboptimal, mut improved, mut solved) = (0, 0, 0);
    for seed in 0..150 {
        let text = if seed % 2 == 0 {
            shared_graph_json(seed, 5 + (seed as usize % 5))
        } else {
            random_graph_json(seed, 4 + (seed as usize % 6), seed % 3 == 0)
        };
        let g = graph(&text);
        let Ok(p) = preprocess(&g) else { continue };
        let out = extract::run(&quick(seed), &g, &p).unwrap();
        out.extraction.check(&g).unwrap();
        let greedy = greedy_best(&text);
        assert!(out.dag_cost <= greedy + 1e-9, "seed {seed}: {} > greedy {greedy}", out.dag_cost);
        let (optimum, _) = brute_force(&g).unwrap();
        assert!(out.dag_cost >= optimum - 1e-9);
        if greedy > optimum + 1e-9 {
            greedy_suboptimal += 1;
            improved += (out.dag_cost < greedy - 1e-9) as usize;
            solved += (out.dag_cost <= optimum + 1e-9) as usize;
        }
    }
    eprintln!("greedy suboptimal on {greedy_suboptimal}; SmoothE improved {improved}, reached the optimum on {solved}");
    assert!(greedy_suboptimal >= 10, "too few hard graphs: {greedy_suboptimal}");
    assert!(improved * 2 >= greedy_suboptimal, "improved only {improved} of {greedy_suboptimal}");
}

#[test]
fn same_seed_same_result() {
    let text = random_graph_json(77, 200, false);
    let g = graph(&text);
    let p = preprocess(&g).unwrap();
    let a = quick(5).extract(&p).unwrap();
    let b = quick(5).extract(&p).unwrap();
    assert_eq!(a, b);
}

#[test]
fn every_optimiser_and_parameterisation_gives_valid_results() {
    let text = random_graph_json(3, 60, false);
    let g = graph(&text);
    let p = preprocess(&g).unwrap();
    for optimizer in [OptimizerKind::Adam, OptimizerKind::Rmsprop] {
        for parameterisation in [Parameterisation::Logits, Parameterisation::Embedding] {
            let mut s = quick(1);
            s.config.steps = 40;
            s.config.optimizer = optimizer;
            s.config.parameterisation = parameterisation;
            s.config.gumbel = 0.5;
            s.config.temperature = 0.7;
            let out = extract::run(&s, &g, &p).unwrap();
            out.extraction.check(&g).unwrap();
        }
    }
}

#[test]
fn shipped_config_matches_the_built_in_defaults() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/smoothe.toml");
    let cfg: SmoothEConfig = smoothe::config::load_section(&path, "smoothe").unwrap();
    assert_eq!(cfg, SmoothEConfig::default());
    let err =
        smoothe::config::parse_section::<SmoothEConfig>("[smoothe]\nlearning_rat = 1.0\n", "smoothe").unwrap_err();
    assert!(format!("{err:#}").contains("learning_rat"), "{err:#}");
}

#[test]
fn cli_smoothe_beats_greedy_on_a_shipped_graph_and_reports_progress_data() {
    let graph = format!("{}/datasets/eggcc-bril/nested_call.bril.json", env!("CARGO_MANIFEST_DIR"));
    let out = temp_file("nested-smoothe.json", "");
    let (code, _, stderr) = cli(&[
        "extract",
        "--method",
        "smoothe",
        "--time-limit",
        "5",
        "--steps",
        "400",
        "-q",
        "-o",
        out.to_str().unwrap(),
        &graph,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    let cost = result["dag_cost"].as_f64().unwrap();
    assert!(cost < result["start_cost"].as_f64().unwrap(), "{cost}");
    assert!(result["ms_per_step"].as_f64().unwrap() > 0.0);
    assert!(!result["trajectory"].as_array().unwrap().is_empty());
    let (code, _, stderr) = cli(&["check", &graph, out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // A bad config is a clear error.
    let bad = temp_file("bad.toml", "[smoothe]\nsteps = \"many\"\n");
    let (code, _, stderr) = cli(&["extract", "--method", "smoothe", "--config", bad.to_str().unwrap(), &graph]);
    assert_ne!(code, 0);
    assert!(stderr.contains("bad.toml") && !stderr.contains("panicked"), "{stderr}");
}

#[test]
fn quadratic_costs_change_the_optimum() {
    let text = graph_json(
        &[
            ("r", "R", 1.0, &["a1", "b1"]),
            ("a1", "A", 1.0, &[]),
            ("a2", "A", 2.0, &[]),
            ("b1", "B", 1.0, &[]),
            ("b2", "B", 2.0, &[]),
        ],
        &["R"],
    );
    let g = temp_file("quad-graph.json", &text);
    let pairs = temp_file("pairs.json", r#"{"pairs": [["a1", "b1", 10.0]]}"#);
    let out = temp_file("quad-out.json", "");
    let (code, _, stderr) = cli(&[
        "extract",
        "--method",
        "smoothe",
        "--quadratic",
        pairs.to_str().unwrap(),
        "--steps",
        "200",
        "--time-limit",
        "0",
        "-q",
        "-o",
        out.to_str().unwrap(),
        g.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    // Linear optimum a1 + b1 costs 3 + 10 with the pair; a1 + b2 or a2 + b1 cost 4.
    assert_eq!(result["model_cost"].as_f64().unwrap(), 4.0, "{result}");
    let choices = &result["choices"];
    assert!(!(choices["A"] == "a1" && choices["B"] == "b1"), "{choices}");
    let bad = temp_file("bad-pairs.json", r#"{"pairs": [["a1", "zz", 1.0]]}"#);
    let (code, _, stderr) =
        cli(&["extract", "--method", "smoothe", "--quadratic", bad.to_str().unwrap(), "-q", g.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(stderr.contains("zz") && !stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_run_reports_the_bytes_its_steps_copy_between_device_and_host() {
    let text = random_graph_json(3, 40, false);
    let g = graph(&text);
    let p = preprocess(&g).unwrap();
    for gumbel in [0.0, 0.5] {
        let mut s = quick(1);
        s.config.gumbel = gumbel;
        let out = extract::run(&s, &g, &p).unwrap();
        let bytes = out.details["host_bytes_per_step"].as_f64().expect("recorded");
        if device().is_cpu() {
            assert_eq!(bytes, 0.0, "gumbel {gumbel}");
        } else {
            // The sweep has no device kernel yet: at least the scores go
            // to the host and the probabilities come back, each step.
            let (nodes, batch) = (p.graph.num_nodes() as f64, s.config.batch as f64);
            assert!(bytes >= 2.0 * nodes * batch * 4.0, "gumbel {gumbel}: {bytes}");
        }
    }
}

#[test]
fn a_run_reports_how_often_its_sweeps_visit_each_edge() {
    let passes = |text: &str, max_sweeps: usize| {
        let g = graph(text);
        let p = preprocess(&g).unwrap();
        let mut s = quick(2);
        s.config.max_sweeps = max_sweeps;
        let out = extract::run(&s, &g, &p).unwrap();
        out.details["edge_passes_per_step"].as_f64().expect("recorded")
    };
    // Without cycles, one pass visits every class edge once.
    let tree = graph_json(
        &[("r", "R", 1.0, &["a1", "b1"]), ("a1", "A", 1.0, &["b1"]), ("a2", "A", 3.0, &[]), ("b1", "B", 2.0, &[])],
        &["R"],
    );
    assert_eq!(passes(&tree, 10), 1.0);
    // Inside a cyclic component: once per fixed-point sweep (at least one,
    // at most max_sweeps) and once for the derivatives.
    let cyclic = cheap_cycle_json();
    for max_sweeps in [1, 3, 10] {
        let p = passes(&cyclic, max_sweeps);
        assert!(p > 1.0 && p <= (max_sweeps + 1) as f64, "max_sweeps {max_sweeps}: {p}");
    }
    // Here every class edge enters the cycle of A and B: with one sweep,
    // exactly two visits each.
    assert_eq!(passes(&cyclic, 1), 2.0);
}
