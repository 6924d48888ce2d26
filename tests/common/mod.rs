//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod learned;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use smoothe::egraph::{ClassIdx, EGraph};
use smoothe::extraction::Extraction;

/// Builds egraph-serialize JSON from `(node id, class, op cost, children node ids)`.
pub fn graph_json(nodes: &[(&str, &str, f64, &[&str])], roots: &[&str]) -> String {
    let mut map = Map::new();
    for (id, class, cost, children) in nodes {
        map.insert(id.to_string(), json!({"op": id, "eclass": class, "cost": cost, "children": children}));
    }
    json!({"nodes": map, "root_eclasses": roots}).to_string()
}

/// Parses JSON built by [`graph_json`] or by hand.
pub fn graph(text: &str) -> EGraph {
    smoothe::load::parse_with_warnings(text).expect("test graph parses").0
}

/// A random e-graph with sharing and (often) cycles: `classes` classes of
/// 1-3 nodes, each with 0-3 children, mostly in later classes (so the root
/// reaches much of the graph) and sometimes anywhere (closing cycles); root
/// class "c0". Children name the first node of the child class.
pub fn random_graph_json(seed: u64, classes: usize, negative_costs: bool) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut nodes: Vec<(String, String, f64, Vec<String>)> = Vec::new();
    for c in 0..classes {
        let count = rng.random_range(1..=3);
        for i in 0..count {
            let kids = if rng.random_bool(0.35) { 0 } else { rng.random_range(1..=3) };
            let children = (0..kids)
                .map(|_| {
                    let k = if c + 1 < classes && rng.random_bool(0.8) {
                        rng.random_range(c + 1..classes)
                    } else {
                        rng.random_range(0..classes)
                    };
                    format!("n{k}_0")
                })
                .collect();
            let cost = if negative_costs { rng.random_range(-5..=10) as f64 } else { rng.random_range(0..=10) as f64 };
            nodes.push((format!("n{c}_{i}"), format!("c{c}"), cost, children));
        }
    }
    let mut map = Map::new();
    for (id, class, cost, children) in nodes {
        map.insert(id, json!({"op": "f", "eclass": class, "cost": cost, "children": children}));
    }
    json!({"nodes": map, "root_eclasses": ["c0"]}).to_string()
}

/// A random graph whose nodes carry one of four operators, so that
/// operator pairs, leaves and merged classes all occur.
pub fn random_ops_graph(seed: u64) -> EGraph {
    let mut v: serde_json::Value = serde_json::from_str(&random_graph_json(seed, 14, false)).unwrap();
    for (i, (_, node)) in v["nodes"].as_object_mut().unwrap().iter_mut().enumerate() {
        node["op"] = serde_json::json!(["and", "or", "not", "xor"][(i * 7 + seed as usize) % 4]);
    }
    graph(&v.to_string())
}

/// Every valid extraction of `g` (every assignment of one node per class
/// that passes the checker, unreachable classes included): exponential,
/// for small graphs.
pub fn valid_extractions(g: &EGraph) -> Vec<Extraction> {
    let nc = g.num_classes();
    let mut idx = vec![0usize; nc];
    let mut out = Vec::new();
    loop {
        let ex =
            Extraction { choices: (0..nc).map(|c| g.class_nodes(ClassIdx::new(c)).get(idx[c]).copied()).collect() };
        if ex.is_valid(g) {
            out.push(ex);
        }
        let mut c = 0;
        loop {
            if c == nc {
                return out;
            }
            idx[c] += 1;
            if idx[c] < g.class_nodes(ClassIdx::new(c)).len().max(1) {
                break;
            }
            idx[c] = 0;
            c += 1;
        }
    }
}

/// Exhaustive search over every assignment of one node per class:
/// (least DAG cost, least tree cost) over valid extractions, or `None`.
pub fn brute_force(g: &EGraph) -> Option<(f64, f64)> {
    valid_extractions(g)
        .iter()
        .map(|e| (e.dag_cost(g).unwrap(), e.tree_cost(g).unwrap()))
        .reduce(|a, b| (a.0.min(b.0), a.1.min(b.1)))
}

/// Runs the CLI binary, returning (exit code, stdout, stderr).
pub fn cli(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_smoothe")).args(args).output().expect("binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The shared benchmark folder, when present (it is beside the checkout).
pub fn shared_datasets() -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets");
    p.is_dir().then_some(p)
}

/// Writes `text` to a fresh temporary file and returns its path.
pub fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("smoothe-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write temp file");
    p
}

/// JSON value helper.
pub fn parse_json(text: &str) -> Value {
    serde_json::from_str(text).expect("valid JSON")
}

/// A random layered e-graph where sharing decides the optimum: cheap
/// operator nodes over a small pool of expensive shared leaves, so greedy
/// choices that look cheap per use are often wrong overall. Root "c0".
pub fn shared_graph_json(seed: u64, classes: usize) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let leaves = (classes / 3).max(2);
    let mut map = Map::new();
    for c in 0..classes {
        let count = rng.random_range(2..=3);
        for i in 0..count {
            let (cost, children): (f64, Vec<String>) = if c >= classes - leaves {
                (rng.random_range(5..=20) as f64, vec![])
            } else {
                let kids = rng.random_range(1..=2);
                let children = (0..kids).map(|_| format!("n{}_0", rng.random_range(c + 1..classes))).collect();
                (rng.random_range(0..=3) as f64, children)
            };
            map.insert(
                format!("n{c}_{i}"),
                json!({"op": "f", "eclass": format!("c{c}"), "cost": cost, "children": children}),
            );
        }
    }
    json!({"nodes": map, "root_eclasses": ["c0"]}).to_string()
}

/// R needs A and B; A and B each point cheaply at the other (a1 -> B,
/// b1 -> A) or take an expensive leaf. Optimum 12 (one cheap, one leaf);
/// both greedy methods settle both leaves first and get 21.
pub fn cheap_cycle_json() -> String {
    graph_json(
        &[
            ("r", "R", 1.0, &["a1", "b1"]),
            ("a1", "A", 1.0, &["b1"]),
            ("a2", "A", 10.0, &[]),
            ("b1", "B", 1.0, &["a1"]),
            ("b2", "B", 10.0, &[]),
        ],
        &["R"],
    )
}

/// The device the tests run tensor work on: `$SMOOTHE_DEVICE` (the same
/// variable the CLI reads), CPU when unset. `SMOOTHE_DEVICE=cuda` runs the
/// suite on a GPU (with a `--features cuda` build; `experiments/gpu.sh`).
pub fn device() -> candle_core::Device {
    let name = std::env::var("SMOOTHE_DEVICE").unwrap_or_else(|_| "cpu".into());
    smoothe::device::parse(&name).expect("SMOOTHE_DEVICE names a usable device")
}
