//! Every benchmark e-graph in `../shared/datasets` (when present) and in the
//! shipped `datasets/` loads, and both greedy methods give valid results.

mod common;
use common::*;
use smoothe::extract::{self, ExtractOptions};
use smoothe::{load, preprocess};
use std::path::{Path, PathBuf};

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(json_files(&p));
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn check_all(dir: &Path) -> usize {
    let files = json_files(dir);
    for f in &files {
        let g = load::load_file(f).unwrap();
        let p = preprocess::preprocess(&g).unwrap();
        for method in ["greedy", "dag-greedy"] {
            let m = extract::by_name(method, &ExtractOptions::default()).unwrap();
            let out = extract::run(m.as_ref(), &g, &p).unwrap_or_else(|e| panic!("{}: {method}: {e:#}", f.display()));
            out.extraction.check(&g).unwrap();
            // The reduced graph's cost agrees with the original's.
            let reduced = p.from_original(&out.extraction).expect("maps onto the reduced graph");
            let reduced_cost = reduced.dag_cost(&p.graph).unwrap();
            assert!((reduced_cost - out.dag_cost).abs() <= 1e-9 * out.dag_cost.abs().max(1.0), "{}", f.display());
        }
    }
    files.len()
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn shipped_datasets_extract_validly() {
    assert!(check_all(&Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets")) >= 3);
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn shared_datasets_extract_validly() {
    match shared_datasets() {
        Some(dir) => assert!(check_all(&dir) > 50),
        None => eprintln!("../shared/datasets not present; skipped"),
    }
}
