//! Finite-difference checks of the relaxation's hand-written backward, on
//! acyclic and cyclic graphs, for every propagation rule; and of the same
//! gradient through Candle autograd.

mod common;
use candle_core::{Tensor, Var};
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smoothe::preprocess::{preprocess, Reduced};
use smoothe::relax::op::RelaxOp;
use smoothe::relax::{Combine, Iteration, Relaxation};
use std::sync::Arc;

const TIGHT: Iteration = Iteration { tolerance: 1e-14, max_sweeps: 100_000 };

fn problems() -> Vec<(String, Reduced)> {
    let mut out = Vec::new();
    for seed in 0..60u64 {
        let g = graph(&random_graph_json(seed, 4 + (seed as usize % 9), false));
        if let Ok(p) = preprocess(&g) {
            out.push((format!("random {seed}"), p));
        }
    }
    // A ring of 40 classes with chords: one cyclic component larger than
    // the dense-penalty limit.
    let mut nodes: Vec<(String, String, f64, Vec<String>)> = Vec::new();
    for i in 0..40 {
        nodes.push((format!("leaf{i}"), format!("C{i}"), 1.0 + i as f64, vec![]));
        nodes.push((format!("next{i}"), format!("C{i}"), 0.5, vec![format!("leaf{}", (i + 1) % 40)]));
        nodes.push((format!("back{i}"), format!("C{i}"), 0.7, vec![format!("leaf{}", (i + 39) % 40)]));
    }
    let refs: Vec<(&str, &str, f64, Vec<&str>)> =
        nodes.iter().map(|(a, b, c, d)| (a.as_str(), b.as_str(), *c, d.iter().map(|s| s.as_str()).collect())).collect();
    let refs2: Vec<(&str, &str, f64, &[&str])> = refs.iter().map(|(a, b, c, d)| (*a, *b, *c, d.as_slice())).collect();
    let ring = preprocess(&graph(&graph_json(&refs2, &["C0"]))).unwrap();
    assert_eq!(ring.sccs.cyclic_sizes(), vec![40]);
    out.push(("ring".into(), ring));
    let cyclic = out.iter().filter(|(_, p)| !p.sccs.cyclic_sizes().is_empty()).count();
    assert!(cyclic >= 10, "only {cyclic} cyclic test graphs");
    out
}

/// L = sum r * node_prob + sum g * penalty.
fn loss(relax: &Relaxation, s: &[f64], width: usize, r: &[f64], g: &[f64]) -> f64 {
    let f = relax.forward(s, width);
    f.node_prob.iter().zip(r).map(|(a, b)| a * b).sum::<f64>()
        + f.penalty.iter().zip(g).map(|(a, b)| a * b).sum::<f64>()
}

#[test]
fn backward_matches_finite_differences() {
    let mut rng = StdRng::seed_from_u64(99);
    let width = 3;
    for (name, p) in problems() {
        for combine in [Combine::Independent, Combine::Correlated, Combine::Hybrid, Combine::Mixed] {
            let relax = Relaxation::new(&p.graph, &p.sccs, combine, TIGHT);
            let nn = relax.num_nodes();
            let s: Vec<f64> = (0..nn * width).map(|_| rng.random_range(-2.0..2.0)).collect();
            let r: Vec<f64> = (0..nn * width).map(|_| rng.random_range(-1.0..1.0)).collect();
            let g: Vec<f64> = (0..width).map(|_| rng.random_range(0.5..2.0)).collect();
            let fwd = relax.forward(&s, width);
            for v in &fwd.node_prob {
                assert!((-1e-12..=1.0 + 1e-12).contains(v), "{name}: probability {v}");
            }
            let grad = relax.backward(&fwd, &r, &g);
            let eps = 1e-6;
            for i in 0..nn * width {
                let mut plus = s.clone();
                plus[i] += eps;
                let mut minus = s.clone();
                minus[i] -= eps;
                let fd = (loss(&relax, &plus, width, &r, &g) - loss(&relax, &minus, width, &r, &g)) / (2.0 * eps);
                assert!(
                    (fd - grad[i]).abs() <= 1e-5 * fd.abs().max(1.0),
                    "{name} {combine:?} score {i}: analytic {} vs numeric {fd}",
                    grad[i]
                );
            }
        }
    }
}

#[test]
fn acyclic_graph_probabilities_are_exact() {
    // r = f(a, b) or g(b); a = h(b) or leaf; b leaf. With independent
    // combination P(b) = 1 - (1 - q_f)(1 - q_g)... computed by hand.
    let text = graph_json(
        &[
            ("f", "R", 1.0, &["a1", "b"]),
            ("g", "R", 1.0, &["b"]),
            ("a1", "A", 1.0, &["b"]),
            ("a2", "A", 1.0, &[]),
            ("b", "B", 1.0, &[]),
        ],
        &["R"],
    );
    let p = preprocess(&graph(&text)).unwrap();
    let relax = Relaxation::new(&p.graph, &p.sccs, Combine::Independent, TIGHT);
    let g = &p.graph;
    let idx = |name: &str| g.nodes().find(|&n| g.node_name(n) == name).unwrap().index();
    let mut s = vec![0.0; g.num_nodes()];
    s[idx("f")] = 0.5;
    s[idx("a1")] = -0.3;
    let f = relax.forward(&s, 1);
    let qf = 1.0 / (1.0 + (-0.5f64).exp());
    let qa1 = 1.0 / (1.0 + 0.3f64.exp());
    let pa = qf;
    let pb = 1.0 - (1.0 - 1.0 * 1.0) * (1.0 - pa * qa1); // R -> B via f or g: w = q_f + q_g = 1
    assert!((f.node_prob[idx("f")] - qf).abs() < 1e-12);
    assert!((f.node_prob[idx("a1")] - pa * qa1).abs() < 1e-12);
    assert!((f.node_prob[idx("b")] - pb).abs() < 1e-12);
    assert_eq!(f.sweeps, 0, "no cyclic component to iterate");
}

#[test]
fn candle_autograd_through_the_op_matches_finite_differences() {
    let (_, p) = problems().into_iter().find(|(_, p)| !p.sccs.cyclic_sizes().is_empty()).unwrap();
    let relax = Arc::new(Relaxation::new(&p.graph, &p.sccs, Combine::Mixed, TIGHT));
    let nn = relax.num_nodes();
    let batch = 5;
    let dev = device();
    let mut rng = StdRng::seed_from_u64(5);
    let s: Vec<f64> = (0..nn * batch).map(|_| rng.random_range(-1.0..1.0)).collect();
    let costs: Vec<f64> = (0..nn).map(|_| rng.random_range(0.0..3.0)).collect();
    let costs_t = Tensor::from_vec(costs.clone(), (nn, 1), &dev).unwrap();
    let objective = |scores: &Tensor| -> Tensor {
        let out = RelaxOp::new(relax.clone(), 2).apply(scores).unwrap();
        let probs = out.narrow(0, 0, nn).unwrap();
        let pen = out.narrow(0, nn, 1).unwrap();
        (probs.broadcast_mul(&costs_t).unwrap().sum_all().unwrap() + (pen.sum_all().unwrap() * 3.0).unwrap()).unwrap()
    };
    let var = Var::from_vec(s.clone(), (nn, batch), &dev).unwrap();
    let l = objective(var.as_tensor());
    let grads = l.backward().unwrap();
    let grad: Vec<f64> = grads.get(var.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap();
    let eps = 1e-6;
    for i in 0..nn * batch {
        let eval = |delta: f64| {
            let mut v = s.clone();
            v[i] += delta;
            objective(&Tensor::from_vec(v, (nn, batch), &dev).unwrap()).to_scalar::<f64>().unwrap()
        };
        let fd = (eval(eps) - eval(-eps)) / (2.0 * eps);
        assert!((fd - grad[i]).abs() <= 1e-5 * fd.abs().max(1.0), "score {i}: {} vs {fd}", grad[i]);
    }
}

#[test]
fn the_ops_values_and_gradients_do_not_depend_on_how_the_batch_is_chunked() {
    // Batches wider than a chunk's column cap are split further; Mixed
    // gives each column its rule by its index in the whole batch.
    for (_, p) in problems().into_iter().filter(|(_, p)| !p.sccs.cyclic_sizes().is_empty()).take(2) {
        let relax = Arc::new(Relaxation::new(&p.graph, &p.sccs, Combine::Mixed, TIGHT));
        let nn = relax.num_nodes();
        let mut rng = StdRng::seed_from_u64(8);
        for batch in [7, 70] {
            let s: Vec<f64> = (0..nn * batch).map(|_| rng.random_range(-2.0..2.0)).collect();
            let weights: Vec<f64> = (0..(nn + 1) * batch).map(|_| rng.random_range(-1.0..1.0)).collect();
            let run = |chunks: usize| -> (Vec<f64>, Vec<f64>) {
                let var = Var::from_vec(s.clone(), (nn, batch), &device()).unwrap();
                let w = Tensor::from_vec(weights.clone(), (nn + 1, batch), &device()).unwrap();
                let out = RelaxOp::new(relax.clone(), chunks).apply(var.as_tensor()).unwrap();
                let grads = (&out * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let grad = grads.get(var.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap();
                (out.flatten_all().unwrap().to_vec1().unwrap(), grad)
            };
            let one = run(1);
            for chunks in [2, 3, batch] {
                assert_eq!(run(chunks), one, "batch {batch}, {chunks} chunks");
            }
        }
    }
}
