//! Loading real-world variants, and clear errors (never panics) on bad input.

mod common;
use common::*;
use smoothe::egraph::{ClassIdx, NodeIdx};
use smoothe::load::parse_with_warnings;
use smoothe::preprocess::preprocess;

#[test]
fn children_as_class_ids_and_numeric_eclass() {
    let text = r#"{"nodes": {
        "0.0": {"op": "a", "children": [], "eclass": 0, "cost": 1, "id": "0.0"},
        "1.0": {"op": "not", "children": [0], "eclass": 1, "cost": 1},
        "1.1": {"op": "b", "children": [], "eclass": 1, "cost": 5}},
      "root_eclasses": [1], "class_data": {"0": {"type": null}}}"#;
    let (g, warnings) = parse_with_warnings(text).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(g.num_classes(), 2);
    assert_eq!(g.children(NodeIdx::from_raw(1)), &[ClassIdx::from_raw(0)]);
    assert_eq!(g.class_name(g.roots()[0]), "1");
}

#[test]
fn missing_or_empty_roots_are_inferred_with_a_warning() {
    for roots in ["", r#", "root_eclasses": []"#] {
        let text = format!(
            r#"{{"nodes": {{"x": {{"op": "x", "children": [], "eclass": "X", "cost": 1}},
                 "f": {{"op": "f", "children": ["x"], "eclass": "F", "cost": 1}}}}{roots}}}"#
        );
        let (g, warnings) = parse_with_warnings(&text).unwrap();
        assert_eq!(g.roots().len(), 1);
        assert_eq!(g.class_name(g.roots()[0]), "F");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}

#[test]
fn subsumed_nodes_are_skipped() {
    let text = r#"{"nodes": {
        "x": {"op": "x", "children": [], "eclass": "X", "cost": 1},
        "y": {"op": "y", "children": [], "eclass": "X", "cost": 0, "subsumed": true},
        "f": {"op": "f", "children": ["y"], "eclass": "F", "cost": 1}},
      "root_eclasses": ["F"]}"#;
    let (g, _) = parse_with_warnings(text).unwrap();
    assert_eq!(g.num_nodes(), 2);
    // The child names a subsumed node, which still means its class X.
    assert_eq!(g.class_name(g.children(NodeIdx::from_raw(1))[0]), "X");
}

const MALFORMED: &str = "{\"nodes\": {\n  \"a\": {\"op\": \"a\",\n  }}}";

/// Each bad input, with a word its error must contain.
fn bad_inputs() -> Vec<(&'static str, String, &'static str)> {
    let node = |cost: &str| {
        format!(
            r#"{{"nodes": {{"a": {{"op": "a", "children": [], "eclass": "A", "cost": {cost}}}}}, "root_eclasses": ["A"]}}"#
        )
    };
    vec![
        ("malformed", MALFORMED.to_string(), "line 3"),
        ("missing field", r#"{"nodes": {"a": {"op": "a", "children": [], "eclass": "A"}}}"#.to_string(), "missing field `cost`"),
        ("no nodes field", r#"{"root_eclasses": []}"#.to_string(), "missing field `nodes`"),
        ("empty", r#"{"nodes": {}}"#.to_string(), "no nodes"),
        ("bad child", r#"{"nodes": {"a": {"op": "a", "children": ["zz"], "eclass": "A", "cost": 1}}}"#.to_string(), "names no node or class"),
        ("bad root", r#"{"nodes": {"a": {"op": "a", "children": [], "eclass": "A", "cost": 1}}, "root_eclasses": ["Q"]}"#.to_string(), "names no class"),
        ("infinite cost", node("1e999"), "number out of range at line 1"),
        ("NaN cost", node("\"NaN\""), "cost NaN is not a finite number"),
        ("text cost", node("\"cheap\""), "cost \"cheap\" is not a number"),
        ("duplicate node", r#"{"nodes": {"a": {"op": "a", "children": [], "eclass": "A", "cost": 1}, "a": {"op": "a", "children": [], "eclass": "A", "cost": 1}}}"#.to_string(), "twice"),
        ("no valid extraction", graph_json(&[("a", "A", 1.0, &["b"]), ("b", "B", 1.0, &["a"])], &["A"]), "no valid extraction"),
        ("not an object", "[1, 2, 3]".to_string(), "invalid e-graph JSON"),
    ]
}

#[test]
fn bad_inputs_are_errors_in_the_library() {
    for (name, text, needle) in bad_inputs() {
        let err = match parse_with_warnings(&text) {
            Err(e) => format!("{e:#}"),
            Ok((g, _)) => match preprocess(&g) {
                Err(e) => format!("{e:#}"),
                Ok(_) => panic!("{name}: accepted"),
            },
        };
        assert!(err.contains(needle), "{name}: {err:?} lacks {needle:?}");
    }
}

#[test]
fn bad_inputs_exit_nonzero_without_panicking() {
    for (name, text, needle) in bad_inputs() {
        let path = temp_file(&format!("bad-{}.json", name.replace(' ', "-")), &text);
        for cmd in ["extract", "info"] {
            let (code, _, stderr) = cli(&[cmd, path.to_str().unwrap()]);
            assert_ne!(code, 0, "{name} {cmd}");
            assert!(!stderr.contains("panicked"), "{name} {cmd}: {stderr}");
            assert!(stderr.contains(needle), "{name} {cmd}: {stderr:?} lacks {needle:?}");
            assert_eq!(stderr.trim().lines().count(), 1, "{name} {cmd}: not one line: {stderr:?}");
        }
    }
    let (code, _, stderr) = cli(&["extract", "/nonexistent/graph.json"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("cannot read /nonexistent/graph.json"), "{stderr}");
}

#[test]
fn malformed_json_error_names_line_and_column() {
    let err = parse_with_warnings(MALFORMED).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("line 3") && msg.contains("column"), "{msg}");
}

#[test]
fn gzip_compressed_egraphs_load_as_the_plain_file_does_and_extract_from_the_cli() {
    use std::io::Write;
    let plain = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/esyn/mul3.json");
    let dir = std::env::temp_dir().join(format!("smoothe-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let packed = dir.join("mul3.json.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    std::fs::write(&packed, encoder.finish().unwrap()).unwrap();
    let a = smoothe::load::load_file(&plain).unwrap();
    let b = smoothe::load::load_file(&packed).unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!((a.num_classes(), a.num_nodes()), (b.num_classes(), b.num_nodes()));
    // A file named .gz that is not gzip is an error naming it.
    let fake = dir.join("fake.json.gz");
    std::fs::write(&fake, std::fs::read(&plain).unwrap()).unwrap();
    let err = format!("{:#}", smoothe::load::load_file(&fake).unwrap_err());
    assert!(err.contains("fake.json.gz") && err.contains("gzip"), "{err}");
    // The CLI extracts from it, checks the result against it, and reports
    // the run's peak memory.
    let out = dir.join("out.json");
    let (code, _, stderr) = cli(&["extract", packed.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = cli(&["check", packed.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    assert!(result["peak_memory_bytes"].as_u64().is_some_and(|b| b > 1 << 20), "{result}");
}
