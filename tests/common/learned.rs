//! Helpers of the learned-pipeline tests: oracle scripts, scratch
//! folders, CLI runs of train-cost, search and extract --model.

use super::*;
use smoothe::learn::oracle::process::Oracle;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn repo(p: &str) -> String {
    format!("{}/{p}", env!("CARGO_MANIFEST_DIR"))
}

/// An executable shell script `name`, alone in a directory of its own:
/// files beside an oracle count towards its identity, so it must not share
/// one with files other tests write.
pub fn script(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smoothe-oracles-{}", std::process::id())).join(name.replace('.', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p
}

/// An oracle wrapper that records every call's extraction key.
pub fn counting_oracle(dir: &Path, slow: bool) -> (PathBuf, PathBuf) {
    // A `.log` name: files beside the oracle count towards its identity,
    // logs do not.
    let calls = dir.join("calls.log");
    let body = format!(
        "{}basename \"$2\" >> {}\nexec python3 {} \"$1\" \"$2\"",
        if slow { "sleep 0.2\n" } else { "" },
        calls.display(),
        repo("examples/oracles/toy.py")
    );
    let p = dir.join("oracle.sh");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (p, calls)
}

/// `smoothe extract --method METHOD --model MODEL` (a short, step-bounded
/// run) into `out`; asserts it succeeds and `smoothe check` accepts it.
/// Returns its stderr.
pub fn extract_with_model_checked(graph: &str, model: &str, method: &str, out: &Path) -> String {
    let out = out.to_str().unwrap();
    let (code, _, stderr) = cli(&[
        "extract",
        "--method",
        method,
        "--model",
        model,
        "--steps",
        "60",
        "--time-limit",
        "0",
        "--samples",
        "50",
        "-q",
        "-o",
        out,
        graph,
    ]);
    assert_eq!(code, 0, "{method}: {stderr}");
    let (code, _, check_stderr) = cli(&["check", graph, out]);
    assert_eq!(code, 0, "{method}: {check_stderr}");
    stderr
}

pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smoothe-learn-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn train_cost_args<'a>(oracle: &'a str, out: &'a str, budget: &'a str) -> Vec<&'a str> {
    vec![
        "train-cost",
        "--oracle",
        oracle,
        "--budget",
        budget,
        "--initial",
        "24",
        "--rounds",
        "3",
        "--per-round",
        "6",
        "--explore",
        "3",
        "--steps",
        "120",
        "--jobs",
        "2",
        "-q",
        "--out",
        out,
    ]
}

pub fn abc() -> Option<String> {
    ["berkeley-abc", "yosys-abc", "abc"].iter().find_map(|b| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {b}"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    })
}

pub fn need_abc() -> Option<String> {
    let found = abc();
    if found.is_none() {
        assert!(std::env::var("CI").is_err(), "CI must install berkeley-abc (.ci/run does)");
        eprintln!("ABC not installed; skipped");
    }
    found
}

/// `smoothe search` on `graph` in `dir`, with the counting toy oracle and
/// its label log and result there, plus `extra` flags; asserts that it
/// succeeds and that `smoothe check` accepts its result. Returns the calls
/// log, the label log and the result file.
pub fn search_checked(dir: &Path, graph: &str, extra: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    let (oracle, calls) = counting_oracle(dir, false);
    let labels = dir.join("search.labels.jsonl");
    let out = dir.join("best.json");
    let mut args = vec!["search", "--oracle", oracle.to_str().unwrap(), "--labels", labels.to_str().unwrap()];
    args.extend(["-o", out.to_str().unwrap(), "-q"]);
    args.extend(extra);
    args.push(graph);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = cli(&["check", graph, out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    (calls, labels, out)
}

/// An oracle running `body` (a shell script) with a 2 s timeout.
pub fn misbehaving(name: &str, body: &str) -> Oracle {
    Oracle::new(script(name, body).display().to_string(), Duration::from_secs(2))
}

/// Rows of a linear-plus-interaction target in `f` features, for the
/// transfer tests: `shift` moves the target function.
pub fn synthetic(seed: u64, n: usize, f: usize, shift: f64) -> (Vec<Vec<f64>>, Vec<f64>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let x: Vec<Vec<f64>> = (0..n).map(|_| (0..f).map(|_| rng.random_range(-0.1..0.1)).collect()).collect();
    let y = x.iter().map(|r| r[0] - 0.5 * r[1] + shift * r[2] + 3.0 * r[0] * r[3]).collect();
    (x, y)
}

pub fn tensor(x: &[Vec<f64>]) -> candle_core::Tensor {
    let f = x[0].len();
    candle_core::Tensor::from_vec(x.iter().flatten().map(|&v| v as f32).collect::<Vec<f32>>(), (x.len(), f), &device())
        .unwrap()
}

pub fn vec32(t: &candle_core::Tensor) -> Vec<f64> {
    t.to_dtype(candle_core::DType::F64).unwrap().to_vec1().unwrap()
}

pub fn layout(f: usize) -> smoothe::learn::model::features::FeatureLayout {
    smoothe::learn::model::features::FeatureLayout {
        kind: smoothe::learn::model::features::FeatureKind::OpCounts,
        names: (0..f).map(|i| format!("count:f{i}")).collect(),
    }
}

/// A random e-graph in a small circuit language (`and`, `or`, `not` over
/// inputs `x`), written to `dir/name.json`; `extra_op` renames one node's
/// operator, for a design with an operator no other has.
pub fn circuit(dir: &Path, name: &str, seed: u64, extra_op: Option<&str>) -> String {
    let mut v = parse_json(&random_graph_json(seed, 70, false));
    let ops = ["and", "or", "not"];
    let mut renamed = false;
    for (i, (_, node)) in v["nodes"].as_object_mut().unwrap().iter_mut().enumerate() {
        let leaf = node["children"].as_array().unwrap().is_empty();
        node["op"] = serde_json::json!(if leaf { "x" } else { ops[i % 3] });
        if !leaf && !renamed {
            if let Some(op) = extra_op {
                node["op"] = serde_json::json!(op);
                renamed = true;
            }
        }
    }
    let p = dir.join(format!("{name}.json"));
    std::fs::write(&p, v.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}
