//! The exact program (`--method ilp`), the portfolio (`--method auto`) and
//! the lower bounds they report, against brute force on small graphs and
//! on shared e-graphs under a time limit. Every result goes through the
//! shared checker (`extract::run`).
#![cfg(feature = "ilp")]

mod common;
use common::*;
use smoothe::extract::{self, ilp, ExtractOptions};
use smoothe::preprocess::preprocess;
use std::path::Path;

fn opts(time_limit: f64) -> ExtractOptions {
    let mut o = ExtractOptions { device: device(), ..Default::default() };
    o.smoothe.steps = 40;
    o.smoothe.batch = 4;
    o.smoothe.time_limit = time_limit;
    o
}

fn number(outcome: &extract::Outcome, field: &str) -> f64 {
    outcome.details[field].as_f64().unwrap_or_else(|| panic!("{field} missing: {:?}", outcome.details))
}

#[test]
fn ilp_proves_the_brute_force_optimum_with_and_without_negative_costs() {
    let mut checked = [0, 0];
    for seed in 0..300u64 {
        let negative = seed % 2 == 1;
        let g = graph(&random_graph_json(seed, 2 + seed as usize % 7, negative));
        let Some((best, _)) = brute_force(&g) else { continue };
        let problem = preprocess(&g).expect("a valid extraction exists");
        for method in ["ilp", "auto"] {
            let m = extract::by_name(method, &opts(0.0)).unwrap();
            let out = extract::run(m.as_ref(), &g, &problem).unwrap();
            assert!((out.dag_cost - best).abs() < 1e-9, "seed {seed} {method}: {} vs optimum {best}", out.dag_cost);
            assert_eq!(out.details["status"], "optimal", "seed {seed} {method}");
            assert!((number(&out, "lower_bound") - out.dag_cost).abs() < 1e-9, "seed {seed} {method}");
            assert_eq!(number(&out, "gap"), 0.0, "seed {seed} {method}");
            if method == "auto" {
                assert!(number(&out, "smoothe_cost") >= out.dag_cost - 1e-9, "seed {seed}: worse than SmoothE");
            }
        }
        checked[negative as usize] += 1;
    }
    assert!(checked[0] > 100 && checked[1] > 50, "too few graphs had an extraction: {checked:?}");
}

#[test]
fn floors_and_the_linear_relaxation_are_lower_bounds() {
    let mut tight = 0;
    for seed in 0..200u64 {
        let negative = seed % 3 == 2;
        let g = graph(&random_graph_json(seed, 2 + seed as usize % 6, negative));
        let Ok(problem) = preprocess(&g) else { continue };
        let p = &problem.graph;
        let extractions = valid_extractions(p);
        let best = extractions.iter().map(|e| e.dag_cost(p).unwrap()).fold(f64::INFINITY, f64::min);
        let lp = ilp::lp_lower_bound(&problem, 0.0).expect("the relaxation solves");
        assert!(lp <= best + 1e-9, "seed {seed}: LP bound {lp} above the optimum {best}");
        tight += ((lp - best).abs() < 1e-6) as usize;
        let floors = ilp::cost_floors(&problem);
        for e in &extractions {
            let cost = e.dag_cost(p).unwrap();
            for c in e.check(p).unwrap() {
                let n = e.choices[c.index()].unwrap();
                assert!(floors[n.index()] <= cost + 1e-9, "seed {seed}: floor of {n:?} above a cost {cost}");
            }
        }
        if p.nodes().any(|n| p.cost(n) < 0.0) {
            assert!(floors.iter().all(|f| *f == f64::NEG_INFINITY), "seed {seed}: floors with negative costs");
        }
    }
    assert!(tight > 20, "the relaxation was tight on only {tight} graphs");
}

#[test]
fn an_incumbent_that_is_already_optimal_is_proven_so() {
    let Some(shared) = shared_datasets() else { return };
    // Given as a MIP start, this optimum once came back from HiGHS as
    // unproven with a bound 4 below it (its cost without what presolve
    // fixed): the incumbent now only fixes nodes and is the fallback.
    let path = shared.join("flexc/67addae9-f7db-4ebb-a02e-e1e045f87fc4.json");
    let g = smoothe::load::load_file(&path).unwrap();
    let problem = preprocess(&g).unwrap();
    let exact = extract::run(extract::by_name("ilp", &opts(60.0)).unwrap().as_ref(), &g, &problem).unwrap();
    assert_eq!(exact.details["status"], "optimal");
    let start = problem.from_original(&exact.extraction).unwrap();
    let again = ilp::solve(&problem, &start, 60.0, &smoothe::progress::quiet()).unwrap();
    assert_eq!(again.status, extract::IlpStatus::Optimal, "{again:?}");
    assert!((again.lower_bound - exact.dag_cost).abs() < 1e-9 && (again.cost - exact.dag_cost).abs() < 1e-9);
}

#[test]
fn a_proven_optimum_is_no_worse_than_smoothe_on_shared_graphs() {
    let Some(shared) = shared_datasets() else { return };
    // herbie/6439: HiGHS given dag-greedy's 4491 as a MIP start once
    // "proved" it optimal; SmoothE finds 3403.
    for name in ["herbie/6439.json", "flexc/67addae9-f7db-4ebb-a02e-e1e045f87fc4.json", "egg/math_powers.json"] {
        let g = smoothe::load::load_file(&shared.join(name)).unwrap();
        let problem = preprocess(&g).unwrap();
        let mut o = opts(0.0);
        o.smoothe.steps = 600;
        let smoothe = extract::run(extract::by_name("smoothe", &o).unwrap().as_ref(), &g, &problem).unwrap();
        let exact = extract::run(extract::by_name("ilp", &opts(60.0)).unwrap().as_ref(), &g, &problem).unwrap();
        let bound = number(&exact, "lower_bound");
        assert!(bound <= smoothe.dag_cost + 1e-9, "{name}: bound {bound} above SmoothE's {}", smoothe.dag_cost);
        if exact.details["status"] == "optimal" {
            assert!(
                exact.dag_cost <= smoothe.dag_cost + 1e-9,
                "{name}: 'optimal' {} > {}",
                exact.dag_cost,
                smoothe.dag_cost
            );
        }
    }
}

#[test]
fn a_time_limited_solve_keeps_its_incumbent_and_reports_an_honest_bound() {
    let Some(shared) = shared_datasets() else { return };
    // A cyclic circuit e-graph the solver cannot close in a second.
    let path = shared.join("esyn/mul3.json");
    let g = smoothe::load::load_file(&path).unwrap();
    let problem = preprocess(&g).unwrap();
    let greedy = extract::run(&extract::DagGreedy, &g, &problem).unwrap();
    let out = extract::run(extract::by_name("ilp", &opts(1.0)).unwrap().as_ref(), &g, &problem).unwrap();
    assert_eq!(out.details["status"], "time_limit");
    assert!(out.dag_cost <= greedy.dag_cost, "worse than its dag-greedy incumbent");
    let bound = number(&out, "lower_bound");
    assert!(bound > 0.0 && bound < out.dag_cost, "bound {bound}, cost {}", out.dag_cost);
    let gap = number(&out, "gap");
    assert!((gap - (out.dag_cost - bound) / out.dag_cost).abs() < 1e-12 && gap > 0.0 && gap < 1.0);
}

#[test]
fn a_presolve_that_contradicts_the_incumbent_is_not_trusted() {
    let Some(shared) = shared_datasets() else { return };
    // esyn/c7552: on some machines HiGHS 1.16's presolve declares this
    // program infeasible within seconds, though dag-greedy's extraction is
    // feasible. The solve must still end with an answer and an honest bound.
    let g = smoothe::load::load_file(&shared.join("esyn/c7552.json")).unwrap();
    let problem = preprocess(&g).unwrap();
    let greedy = extract::run(&extract::DagGreedy, &g, &problem).unwrap();
    let out = extract::run(extract::by_name("ilp", &opts(8.0)).unwrap().as_ref(), &g, &problem).unwrap();
    assert!(out.dag_cost <= greedy.dag_cost, "worse than its dag-greedy incumbent");
    let bound = number(&out, "lower_bound");
    assert!(bound > 0.0 && bound <= out.dag_cost, "bound {bound}, cost {}", out.dag_cost);
}

#[test]
fn the_cli_reports_bounds_and_refuses_nonlinear_costs_for_exact_methods() {
    let Some(shared) = shared_datasets() else { return };
    let graph_path = shared.join("egg/math_powers.json");
    let graph_arg = graph_path.to_str().unwrap();
    for method in ["ilp", "auto", "smoothe"] {
        let (code, out, err) = cli(&["extract", "--method", method, "--time-limit", "5", "-q", graph_arg]);
        assert_eq!(code, 0, "{method}: {err}");
        let result = parse_json(&out);
        let (cost, bound) = (result["dag_cost"].as_f64().unwrap(), result["lower_bound"].as_f64().unwrap());
        assert!(bound <= cost + 1e-9, "{method}: bound {bound} above cost {cost}");
        if method != "smoothe" {
            assert_eq!(result["status"], "optimal", "{method}");
        }
        let file = temp_file(&format!("ilp-{method}.json"), &out);
        let (code, _, err) = cli(&["check", graph_arg, file.to_str().unwrap()]);
        assert_eq!(code, 0, "{method}: {err}");
    }
    let pairs = temp_file("ilp-pairs.json", r#"{"pairs": []}"#);
    for method in ["ilp", "auto"] {
        for flag in [["--model", "nothing.safetensors"], ["--quadratic", pairs.to_str().unwrap()]] {
            let (code, _, err) = cli(&["extract", "--method", method, flag[0], flag[1], graph_arg]);
            assert_ne!(code, 0, "{method} {}", flag[0]);
            assert!(err.contains("linear costs only"), "{method} {}: {err}", flag[0]);
        }
    }
    assert!(!Path::new("nothing.safetensors").exists());
}
