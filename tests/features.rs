//! Features of extractions and their relaxed expectation, and the
//! conservative learned objective SmoothE descends: the expectation agrees
//! with the discrete features on one-hot probabilities, and gradients match
//! finite differences.

mod common;
use candle_core::{DType, Tensor, Var};
use common::*;
use rand::{Rng, SeedableRng};
use smoothe::cost::CostModel;
use smoothe::egraph::EGraph;
use smoothe::extract::{random_extraction, DagGreedy, Extractor};
use smoothe::extraction::Extraction;
use smoothe::learn::model::features::{FeatureKind, Featurizer};
use smoothe::learn::model::fit::TrainConfig;
use smoothe::learn::model::objective::LearnedCost;
use smoothe::learn::model::train::train;
use smoothe::learn::model::trust::Conservatism;
use smoothe::preprocess::{preprocess, Reduced};

fn one_hot(g: &EGraph, e: &Extraction) -> Tensor {
    let mut p = vec![0f64; g.num_nodes()];
    for c in e.check(g).unwrap() {
        p[e.choices[c.index()].unwrap().index()] = 1.0;
    }
    Tensor::from_vec(p, (g.num_nodes(), 1), &device()).unwrap()
}

fn problems() -> Vec<(EGraph, Reduced)> {
    let mut out = Vec::new();
    for seed in 0..40 {
        let g = random_ops_graph(seed);
        if let Ok(p) = preprocess(&g) {
            out.push((g, p));
        }
    }
    let mul3 = smoothe::load::load_file(std::path::Path::new(&format!(
        "{}/datasets/esyn/mul3.json",
        env!("CARGO_MANIFEST_DIR")
    )))
    .unwrap();
    let p = preprocess(&mul3).unwrap();
    out.push((mul3, p));
    out
}

#[test]
fn expected_features_equal_extraction_features_on_one_hot_probabilities() {
    let mut pairs_seen = 0.0;
    for (i, (original, problem)) in problems().iter().enumerate() {
        let g = &problem.graph;
        let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
        for kind in [FeatureKind::OpCounts, FeatureKind::Structure] {
            let fz = Featurizer::fresh(kind, problem, original);
            for _ in 0..5 {
                let e = random_extraction(g, &mut rng);
                let direct = fz.of_extraction(&e).unwrap();
                let relaxed: Vec<f64> =
                    fz.of_probabilities(&one_hot(g, &e)).unwrap().squeeze(0).unwrap().to_vec1().unwrap();
                for (j, (a, b)) in direct.iter().zip(&relaxed).enumerate() {
                    assert!((a - b).abs() < 1e-9, "graph {i} {kind:?} feature {}: {a} vs {b}", fz.layout.names[j]);
                }
                // Counts agree with the extraction itself.
                let n_nodes: f64 =
                    fz.layout.names.iter().zip(&direct).filter(|(n, _)| n.starts_with("count:")).map(|(_, v)| v).sum();
                let original_e = problem.to_original(&e).restricted_to_reachable(original).unwrap();
                assert_eq!(n_nodes as usize, original_e.check(original).unwrap().len(), "graph {i}");
                let linear = direct[fz.layout.names.iter().position(|n| n == "linear").unwrap()];
                assert!((linear - e.dag_cost(g).unwrap()).abs() < 1e-9);
                pairs_seen += fz
                    .layout
                    .names
                    .iter()
                    .zip(&direct)
                    .filter(|(n, _)| n.starts_with("pair:"))
                    .map(|(_, v)| v)
                    .sum::<f64>();
            }
        }
    }
    assert!(pairs_seen > 100.0, "operator pairs were hardly exercised: {pairs_seen}");
}

#[test]
fn structure_pairs_count_the_edges_of_a_hand_made_graph() {
    // root = and(not(x), not(x)); `not` class also offers `or(x, x)`.
    let g = graph(&graph_json(
        &[
            ("and", "r", 1.0, &["not", "not"]),
            ("not", "n", 1.0, &["x"]),
            ("or", "n", 2.0, &["x", "x"]),
            ("x", "x", 0.0, &[]),
        ],
        &["r"],
    ));
    let problem = preprocess(&g).unwrap();
    let fz = Featurizer::fresh(FeatureKind::Structure, &problem, &g);
    let e = DagGreedy.extract(&problem).unwrap();
    let f = fz.of_extraction(&e).unwrap();
    let get = |name: &str| fz.layout.names.iter().position(|n| n == name).map_or(0.0, |i| f[i]);
    assert_eq!(get("pair:and>not"), 2.0, "{:?}", fz.layout.names);
    assert_eq!(get("pair:not><leaf>"), 1.0);
    assert_eq!(get("count:and") + get("count:not") + get("count:<leaf>"), 3.0);
    assert_eq!(get("pair:<unseen>"), 0.0);
}

fn small_model(problem: &Reduced, original: &EGraph, seed: u64) -> LearnedCost {
    let fz = Featurizer::fresh(FeatureKind::Structure, problem, original);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let data: Vec<Extraction> = (0..40).map(|_| random_extraction(&problem.graph, &mut rng)).collect();
    let x: Vec<Vec<f64>> = data.iter().map(|e| fz.of_extraction(e).unwrap()).collect();
    let y: Vec<f64> =
        x.iter().map(|r| r.iter().enumerate().map(|(j, v)| v * ((j % 3) as f64 - 0.7)).sum::<f64>().powi(2)).collect();
    let test = vec![false; x.len()];
    let cfg = TrainConfig { members: 3, epochs: 80, patience: 20, ..TrainConfig::default() };
    let model = train(&x, &y, &test, fz.layout.clone(), &cfg, seed, &device()).unwrap();
    LearnedCost::new(model, problem, original, Conservatism { kappa: 0.7, trust: 0.5, free_distance: 0.5 }).unwrap()
}

#[test]
fn conservative_objective_gradient_matches_finite_differences() {
    let (mut checked, mut with_residual) = (0, 0);
    for (i, (original, problem)) in problems().iter().enumerate().filter(|(_, (_, p))| p.graph.num_nodes() < 80).take(6)
    {
        let cost = small_model(problem, original, i as u64);
        with_residual += usize::from(cost.model().meta.residual_length > 0.0);
        let nn = problem.graph.num_nodes();
        let batch = 2;
        let mut rng = rand::rngs::StdRng::seed_from_u64(100 + i as u64);
        // Probabilities well inside (0, 1), some far outside the training
        // range once summed, so every term (mean, std, trust) is live.
        let p0: Vec<f64> = (0..nn * batch).map(|_| rng.random_range(0.15..0.95)).collect();
        let var = Var::from_vec(p0.clone(), (nn, batch), &device()).unwrap();
        let y = cost.expected(var.as_tensor()).unwrap();
        let grads = y.sum_all().unwrap().backward().unwrap();
        let g: Vec<f64> = grads.get(var.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let f = |p: &[f64]| -> f64 {
            let t = Tensor::from_vec(p.to_vec(), (nn, batch), &device()).unwrap();
            cost.expected(&t).unwrap().sum_all().unwrap().to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap()
        };
        for k in (0..nn * batch).step_by(3) {
            let h = 1e-6;
            let (mut a, mut b) = (p0.clone(), p0.clone());
            a[k] += h;
            b[k] -= h;
            let fd = (f(&a) - f(&b)) / (2.0 * h);
            assert!((fd - g[k]).abs() <= 1e-4 * fd.abs().max(1.0), "graph {i} entry {k}: autograd {} fd {fd}", g[k]);
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} entries checked");
    assert!(with_residual > 0, "no model with a residual term: its gradient went unchecked");
}

#[test]
fn objective_prices_extractions_as_its_expectation_does() {
    for (i, (original, problem)) in problems().iter().enumerate().take(8) {
        let cost = small_model(problem, original, 7 + i as u64);
        let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
        for _ in 0..4 {
            let e = random_extraction(&problem.graph, &mut rng);
            let relaxed = cost.expected(&one_hot(&problem.graph, &e)).unwrap().to_vec1::<f64>().unwrap()[0];
            let direct = cost.cost_of(&e);
            assert!((relaxed - direct).abs() <= 1e-4 * direct.abs().max(1.0), "graph {i}: {relaxed} vs {direct}");
        }
    }
}
