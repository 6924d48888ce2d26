//! `smoothe saturate`: BLIF in, an e-graph of equivalent circuits out.
//! Every extraction of it computes the circuit's function (checked by
//! simulation on every input vector), and the round trip through `export`
//! is proven equivalent by ABC in the slow tier.

mod common;
use common::learned::need_abc;
use common::*;
use smoothe::egraph::EGraph;
use smoothe::extraction::OriginalExtraction;
use smoothe::saturate::blif::{parse, Circuit};
use smoothe::saturate::{saturate, Limits};
use std::collections::HashMap;

/// A full adder and a few oddities: an off-set cover, a don't-care, a
/// constant, a continued line, a comment and gates out of order.
const ADDER: &str = "\
# a full adder, and s2 = !(a & b), one = 1
.model adder
.inputs a b \\
  cin
.outputs sum cout s2 one
.names t cin sum
10 1
01 1
.names a b t
10 1
01 1
.names a b cin cout
11- 1
1-1 1
-11 1
.names a b s2
11 0
.names one
1
.end
";

/// The function of the outputs of `extraction` (of an e-graph `saturate`
/// made from a circuit with `inputs`) for the input values `values`.
fn evaluate(g: &EGraph, extraction: &OriginalExtraction, inputs: &[String], values: &[bool]) -> Vec<bool> {
    let order = extraction.check(g).unwrap();
    let by_name: HashMap<&str, bool> = inputs.iter().map(String::as_str).zip(values.iter().copied()).collect();
    let mut value: HashMap<usize, Vec<bool>> = HashMap::new();
    for c in order {
        let n = extraction.choices()[c.index()].unwrap();
        let kid = |i: usize| value[&g.children(n)[i].index()].clone();
        let v = match g.op(n) {
            "*" => vec![kid(0)[0] && kid(1)[0]],
            "+" => vec![kid(0)[0] || kid(1)[0]],
            "!" => vec![!kid(0)[0]],
            "^" => vec![kid(0)[0] ^ kid(1)[0]],
            "maj" => vec![(kid(0)[0] as u8 + kid(1)[0] as u8 + kid(2)[0] as u8) >= 2],
            "&" => [kid(0), kid(1)].concat(),
            "0" => vec![false],
            "1" => vec![true],
            input => vec![by_name[input]],
        };
        value.insert(c.index(), v);
    }
    value[&g.roots()[0].index()].clone()
}

fn every_vector(n: usize) -> impl Iterator<Item = Vec<bool>> {
    (0..1u32 << n).map(move |bits| (0..n).map(|i| bits >> i & 1 == 1).collect())
}

fn saturated(circuit: &Circuit, nodes: usize) -> (EGraph, serde_json::Value) {
    let limits = Limits { nodes, iterations: 12, seconds: 30.0 };
    let (json, report) = saturate(circuit, limits, smoothe::progress::quiet()).unwrap();
    assert!(report.nodes > 0 && report.iterations > 0, "{report:?}");
    (smoothe::load::parse_str(&json.to_string()).unwrap(), json)
}

#[test]
fn blif_covers_read_as_the_circuit_computes() {
    let c = parse(ADDER).unwrap();
    assert_eq!(c.inputs, ["a", "b", "cin"]);
    assert_eq!(c.outputs, ["sum", "cout", "s2", "one"]);
    for v in every_vector(3) {
        let (a, b, cin) = (v[0], v[1], v[2]);
        let want = vec![a ^ b ^ cin, [a, b, cin].iter().filter(|&&x| x).count() >= 2, !(a && b), true];
        assert_eq!(c.evaluate(&v).unwrap(), want, "{v:?}");
    }
}

/// The full adder as an ASCII and-inverter graph, with a symbol table.
const ADDER_AAG: &str = "aag 12 3 0 2 9\n2\n4\n6\n19\n25\n8 2 5\n10 3 4\n12 9 11\n14 13 7\n16 12 6\n18 15 17\n\
                         20 2 4\n22 13 6\n24 21 23\ni0 a\ni1 b\ni2 cin\no0 sum\no1 cout\nc\nmade by hand\n";

#[test]
fn aiger_reads_as_the_circuit_computes_ascii_and_binary() {
    let adder = smoothe::saturate::read_circuit(ADDER_AAG.as_bytes()).unwrap();
    assert_eq!(adder.inputs, ["a", "b", "cin"]);
    assert_eq!(adder.outputs, ["sum", "cout"]);
    for v in every_vector(3) {
        let want = vec![v[0] ^ v[1] ^ v[2], v.iter().filter(|&&x| x).count() >= 2];
        assert_eq!(adder.evaluate(&v).unwrap(), want, "{v:?}");
    }
    // Binary: y = i1 & x from deltas 2 and 2, and a constant output.
    let mut bytes = b"aig 3 2 0 2 1\n6\n1\n".to_vec();
    bytes.extend([2u8, 2]);
    bytes.extend(b"i0 x\no0 y\n");
    let and = smoothe::saturate::read_circuit(&bytes).unwrap();
    assert_eq!(and.inputs, ["x", "i1"]);
    assert_eq!(and.outputs, ["y", "o1"]);
    for v in every_vector(2) {
        assert_eq!(and.evaluate(&v).unwrap(), vec![v[0] && v[1], true], "{v:?}");
    }
    // It saturates like BLIF, and every extraction still computes it.
    let (g, _) = saturated(&adder, 2000);
    let x = smoothe::extract::run(&smoothe::extract::DagGreedy, &g, &smoothe::preprocess::preprocess(&g).unwrap());
    let x = x.unwrap().extraction;
    for v in every_vector(3) {
        assert_eq!(evaluate(&g, &x, &adder.inputs, &v), adder.evaluate(&v).unwrap());
    }
    for (text, want) in [
        ("aag 1 0 1 0 0\n2 3\n", "latch"),
        ("aag 2 1 0 1 1\n2\n4\n4 2 9\n", "line 4"),
        ("aig 1 1 0 1 0\n", "ends early"),
        ("aag x\n", "not a count"),
    ] {
        let err = format!("{:#}", smoothe::saturate::read_circuit(text.as_bytes()).unwrap_err());
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn bad_blif_is_an_error_naming_the_line() {
    let cases = [
        (".inputs a\n.outputs q\n.latch a q 0\n.end\n", "line 3"),
        (".inputs a\n.outputs q\n.names a q\n1 2\n", "line 4"),
        (".inputs a\n.outputs q\n.names a q\n11 1\n", "does not fit"),
        (".inputs a\n.outputs q\n.names a q\n1 1\n0 0\n", "mixes"),
        (".inputs a\n", "no .outputs"),
    ];
    for (text, want) in cases {
        let err = format!("{:#}", parse(text).unwrap_err());
        assert!(err.contains(want), "{text:?}: {err}");
    }
    // Loops and undriven signals are found when the terms are built.
    for (text, want) in [
        (".inputs a\n.outputs q\n.names p q\n1 1\n.names q p\n1 1\n", "combinational loop"),
        (".inputs a\n.outputs q\n.names z q\n1 1\n", "neither an input nor driven"),
    ] {
        let err = format!(
            "{:#}",
            saturate(&parse(text).unwrap(), Limits::default(), smoothe::progress::quiet()).unwrap_err()
        );
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn every_extraction_of_the_saturated_graph_computes_the_circuit() {
    let circuit = parse(ADDER).unwrap();
    let (g, json) = saturated(&circuit, 3000);
    assert_eq!(json["inputs"], serde_json::json!(["a", "b", "cin"]));
    assert_eq!(json["outputs"], serde_json::json!(["sum", "cout", "s2", "one"]));
    // The xor and majority covers of the adder gained their own gates.
    for op in ["^", "maj"] {
        assert!(g.nodes().any(|n| g.op(n) == op), "no {op} node in the saturated adder");
    }
    let problem = smoothe::preprocess::preprocess(&g).unwrap();
    let options = smoothe::extract::ExtractOptions {
        smoothe: smoothe::extract::SmoothEConfig { steps: 60, time_limit: 0.0, ..Default::default() },
        ..Default::default()
    };
    for method in ["greedy", "dag-greedy", "random", "smoothe"] {
        let extractor = smoothe::extract::by_name(method, &options).unwrap();
        let outcome = smoothe::extract::run(extractor.as_ref(), &g, &problem).unwrap();
        outcome.extraction.check(&g).unwrap();
        for v in every_vector(3) {
            assert_eq!(
                evaluate(&g, &outcome.extraction, &circuit.inputs, &v),
                circuit.evaluate(&v).unwrap(),
                "{method}"
            );
        }
    }
}

/// What the e-graph JSON `json` records beside its graph.
fn record(json: &serde_json::Value) -> smoothe::load::Recorded {
    smoothe::load::parse_str_recorded(&json.to_string()).unwrap().1
}

#[test]
fn the_saturated_graph_records_the_input_circuit_as_an_extraction() {
    let circuit = parse(ADDER).unwrap();
    let (g, json) = saturated(&circuit, 3000);
    let recorded = smoothe::saturate::recorded_circuit(&g, &record(&json)).unwrap().expect("a recorded circuit");
    recorded.check(&g).unwrap();
    for v in every_vector(3) {
        assert_eq!(evaluate(&g, &recorded, &circuit.inputs, &v), circuit.evaluate(&v).unwrap());
    }
    // (a & b) | (a & c) as given, not the a & (b | c) saturation finds:
    // three inputs (1 each), two ANDs (2 each) and an OR (4).
    let small = parse(".inputs a b c\n.outputs q\n.names a b c q\n11- 1\n1-1 1\n.end\n").unwrap();
    let (g, json) = saturated(&small, 200_000);
    let recorded = smoothe::saturate::recorded_circuit(&g, &record(&json)).unwrap().unwrap();
    assert_eq!(recorded.dag_cost(&g).unwrap(), 11.0);
    // An e-graph that records none, and a record naming a node it lacks.
    let mut plain = json.clone();
    plain.as_object_mut().unwrap().remove(smoothe::saturate::CIRCUIT_CHOICES);
    assert!(smoothe::saturate::recorded_circuit(&g, &record(&plain)).unwrap().is_none());
    let mut broken = json;
    let choices = broken[smoothe::saturate::CIRCUIT_CHOICES].as_object_mut().unwrap();
    let class = choices.keys().next().unwrap().clone();
    choices.insert(class, serde_json::json!("no-such-node"));
    let err = smoothe::saturate::recorded_circuit(&g, &record(&broken)).unwrap_err();
    assert!(format!("{err:#}").contains("no-such-node"), "{err:#}");
}

#[test]
fn the_recorded_circuit_exports_with_the_inputs_operand_order() {
    // Operands out of name order, an input before a wire and after one:
    // the export keeps each gate's order, as ABC's mapping depends on it.
    let circuit = parse(".inputs a b c\n.outputs q\n.names c b t\n11 1\n.names a t q\n10 1\n.end\n").unwrap();
    let (g, json) = saturated(&circuit, 1000);
    let recorded = smoothe::saturate::recorded_circuit(&g, &record(&json)).unwrap().unwrap();
    let names = smoothe::export::CircuitNames { inputs: circuit.inputs.clone(), outputs: circuit.outputs.clone() };
    let blif = smoothe::export::to_blif_named(&g, &recorded, "t", &names).unwrap();
    let gates: Vec<Vec<&str>> = blif
        .lines()
        .filter_map(|l| l.strip_prefix(".names "))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .collect();
    assert!(gates.iter().any(|g| g[..2] == ["c", "b"]), "{blif}");
    assert!(gates.iter().any(|g| g.len() == 3 && g[0] == "a" && g[1].starts_with("_n")), "{blif}");
    for v in every_vector(3) {
        assert_eq!(evaluate(&g, &recorded, &circuit.inputs, &v), circuit.evaluate(&v).unwrap());
    }
}

#[test]
fn train_cost_on_a_saturated_circuit_labels_the_circuit_itself() {
    let dir = std::env::temp_dir().join(format!("smoothe-circuit-label-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    std::fs::write(path("adder.blif"), ADDER).unwrap();
    let (code, _, err) =
        cli(&["saturate", &path("adder.blif"), "-o", &path("adder.json"), "--node-limit", "3000", "-q"]);
    assert_eq!(code, 0, "{err}");
    // The toy oracle, keeping a copy of every extraction it is given.
    let toy = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/oracles/toy.py");
    std::fs::create_dir_all(dir.join("asked")).unwrap();
    let oracle = path("oracle.sh");
    let body = format!("#!/bin/sh\ncp \"$2\" {}/$$.json\nexec python3 {toy} \"$1\" \"$2\"\n", path("asked"));
    std::fs::write(&oracle, body).unwrap();
    std::fs::set_permissions(&oracle, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (model, graph) = (path("m.safetensors"), path("adder.json"));
    let (code, _, err) = cli(&[
        "train-cost",
        "--oracle",
        &oracle,
        "--budget",
        "10",
        "--initial",
        "4",
        "--rounds",
        "1",
        "--per-round",
        "2",
        "--steps",
        "40",
        "-q",
        "--out",
        &model,
        &graph,
    ]);
    assert_eq!(code, 0, "{err}");
    // The oracle was asked about the circuit as given, and the loop
    // reports that cost and a best no worse.
    let (g, recorded) = smoothe::load::load_file_recorded(std::path::Path::new(&graph)).unwrap();
    let circuit = smoothe::saturate::recorded_circuit(&g, &recorded).unwrap().unwrap();
    // Node for node, operand order included: where the loop keeps one of
    // a set of twin nodes, it keeps the circuit's own.
    let asked = std::fs::read_dir(dir.join("asked")).unwrap().map(|e| e.unwrap().path()).find(|p| {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        OriginalExtraction::from_json(&g, &v).unwrap().choices() == circuit.choices()
    });
    let asked = asked.expect("the oracle was never asked about the input circuit");
    let out = std::process::Command::new("python3").args([toy, &path("adder.json"), asked.to_str().unwrap()]).output();
    let measured: f64 = String::from_utf8_lossy(&out.unwrap().stdout).trim().parse().unwrap();
    let rounds: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("m.rounds.json")).unwrap()).unwrap();
    let first = &rounds[0];
    assert!((first["circuit_real_cost"].as_f64().unwrap() - measured).abs() < 1e-6, "{first}");
    let last = rounds.as_array().unwrap().last().unwrap();
    assert!(last["best_real_cost"].as_f64().unwrap() <= measured + 1e-9, "{last}");
}

#[test]
fn saturation_stops_at_the_node_limit_and_finds_a_smaller_circuit() {
    // (a & b) | (a & c) is a & (b | c) after distribution: the e-graph
    // holds the cheaper form, which dag-greedy then finds.
    let circuit = parse(".inputs a b c\n.outputs q\n.names a b c q\n11- 1\n1-1 1\n.end\n").unwrap();
    let (g, _) = saturated(&circuit, 200_000);
    let problem = smoothe::preprocess::preprocess(&g).unwrap();
    let outcome = smoothe::extract::run(&smoothe::extract::DagGreedy, &g, &problem).unwrap();
    // a * (b + c): three leaves (1 each), one * (2) and one + (4), 9
    // against 11 for (a * b) + (a * c).
    assert_eq!(outcome.dag_cost, 9.0);
    let limits = Limits { nodes: 50, iterations: 30, seconds: 30.0 };
    let (_, report) = saturate(&circuit, limits, smoothe::progress::quiet()).unwrap();
    assert_eq!(report.stop, "node-limit", "{report:?}");
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn saturate_extract_export_round_trip_is_proven_equivalent_by_abc() {
    let Some(abc) = need_abc() else { return };
    let dir = std::env::temp_dir().join(format!("smoothe-saturate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    std::fs::write(path("adder.blif"), ADDER).unwrap();
    // mul3, written as BLIF by export, is a second circuit.
    let mul3 = concat!(env!("CARGO_MANIFEST_DIR"), "/datasets/esyn/mul3.json");
    let (code, _, err) = cli(&["extract", mul3, "-o", &path("mul3-x.json")]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["export", mul3, &path("mul3-x.json"), "-o", &path("mul3.blif")]);
    assert_eq!(code, 0, "{err}");
    // The adder once more, as binary AIGER written by ABC with its names.
    let script = format!("read {}; strash; write_aiger -s {}", path("adder.blif"), path("adder-aig.aig"));
    let out = std::process::Command::new(&abc).arg("-c").arg(script).output().unwrap();
    assert!(out.status.success() && dir.join("adder-aig.aig").is_file(), "{out:?}");
    for (circuit, source) in [("adder", "adder.blif"), ("mul3", "mul3.blif"), ("adder-aig", "adder-aig.aig")] {
        let blif = path(&format!("{}.blif", circuit.trim_end_matches("-aig")));
        let graph = path(&format!("{circuit}.egraph.json"));
        let (code, _, err) = cli(&["saturate", &path(source), "-o", &graph, "--node-limit", "20000", "-q"]);
        assert_eq!(code, 0, "{err}");
        for method in ["dag-greedy", "smoothe"] {
            let extraction = path(&format!("{circuit}-{method}.json"));
            let (code, _, err) =
                cli(&["extract", "--method", method, "--steps", "100", &graph, "-o", &extraction, "-q"]);
            assert_eq!(code, 0, "{err}");
            let back = path(&format!("{circuit}-{method}.blif"));
            let (code, _, err) = cli(&["export", &graph, &extraction, "-o", &back]);
            assert_eq!(code, 0, "{err}");
            let out = std::process::Command::new(&abc).arg("-c").arg(format!("cec {blif} {back}")).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("Networks are equivalent"), "{circuit} {method}: {text}");
        }
    }
}
