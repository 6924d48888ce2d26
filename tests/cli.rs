//! The `smoothe` binary end to end: extract, check, info.

mod common;
use common::*;

fn shipped(name: &str) -> String {
    format!("{}/datasets/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn extract_writes_a_result_that_check_accepts() {
    let graph = shipped("esyn/mul3.json");
    for method in ["greedy", "dag-greedy", "random"] {
        let out = temp_file(&format!("mul3-{method}.json"), "");
        let (code, stdout, stderr) =
            cli(&["extract", "--method", method, "--seed", "4", "-o", out.to_str().unwrap(), &graph]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.starts_with(method) && stderr.contains("dag cost"), "{stderr}");
        let result = parse_json(&std::fs::read_to_string(&out).unwrap());
        assert_eq!(result["method"], method);
        assert!(result["seconds"].as_f64().unwrap() >= 0.0);
        let (code, stdout, stderr) = cli(&["check", &graph, out.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        let cost = result["dag_cost"].as_f64().unwrap();
        assert!(stdout.contains(&format!("dag cost {cost},")), "{stdout} vs {cost}");
    }
}

#[test]
fn check_accepts_a_bare_map_and_reports_defects() {
    let text = graph_json(
        &[("r", "R", 1.0, &["a1"]), ("a1", "A", 1.0, &["r"]), ("a2", "A", 2.0, &[]), ("z", "Z", 1.0, &[])],
        &["R"],
    );
    let g = temp_file("small.json", &text);
    let g = g.to_str().unwrap();
    let good = temp_file("good.json", r#"{"R": "r", "A": "a2"}"#);
    let (code, stdout, _) = cli(&["check", g, good.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(stdout.contains("dag cost 3"), "{stdout}");
    for (bad, needle) in [
        (r#"{"choices": {"R": "r", "A": "a1"}}"#, "cycle"),
        (r#"{"choices": {"R": "r"}}"#, "no chosen node"),
        (r#"{"A": "a2"}"#, "root class"),
        (r#"{"R": "a2", "A": "a2"}"#, "another class"),
        (r#"{"R": "nope"}"#, "not in the e-graph"),
    ] {
        let f = temp_file("bad-ex.json", bad);
        let (code, _, stderr) = cli(&["check", g, f.to_str().unwrap()]);
        assert_ne!(code, 0, "{bad}");
        assert!(stderr.contains(needle), "{bad}: {stderr}");
        assert!(!stderr.contains("panicked"));
    }
}

#[test]
fn info_reports_shape() {
    let text = graph_json(
        &[
            ("r", "R", 1.0, &["a1", "b"]),
            ("a1", "A", 1.0, &["b"]),
            ("a2", "A", 1.0, &["a2"]),
            ("b", "B", 1.0, &["a1"]),
            ("b2", "B", 1.0, &[]),
        ],
        &["R"],
    );
    let g = temp_file("info.json", &text);
    let (code, stdout, stderr) = cli(&["info", g.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nodes: 5"), "{stdout}");
    assert!(stdout.contains("classes: 3"), "{stdout}");
    assert!(stdout.contains("self-loop nodes: 1"), "{stdout}");
    assert!(stdout.contains("cyclic components: 1 (sizes 2)"), "{stdout}");
}

#[test]
fn help_is_available_everywhere() {
    for args in [vec!["--help"], vec!["extract", "--help"], vec!["check", "--help"], vec!["info", "--help"]] {
        let (code, stdout, _) = cli(&args);
        assert_eq!(code, 0);
        assert!(stdout.contains("Usage"), "{stdout}");
    }
}

#[test]
fn time_limits_that_are_not_numbers_of_seconds_are_errors_and_inf_means_none() {
    let graph = shipped("esyn/mul3.json");
    let toml = temp_file("inf.toml", "[smoothe]\ntime_limit = inf\nsteps = 20\n");
    for (limit, ok) in [("inf", true), ("1e300", true), ("nan", false), ("-1", false)] {
        let flag = format!("--time-limit={limit}");
        let (code, _, stderr) = cli(&["extract", "--method", "smoothe", "--steps", "20", &flag, "-q", &graph]);
        assert_eq!(code, if ok { 0 } else { 2 }, "{limit}: {stderr}");
        assert!(!stderr.contains("panicked"), "{limit}: {stderr}");
        if !ok {
            assert!(stderr.contains("time_limit must be"), "{limit}: {stderr}");
        }
    }
    let (code, _, stderr) = cli(&["extract", "--method", "smoothe", "--config", toml.to_str().unwrap(), "-q", &graph]);
    assert_eq!(code, 0, "{stderr}");
    let toml = temp_file("nan.toml", "[smoothe]\ntime_limit = nan\nsteps = 20\n");
    let (code, _, stderr) = cli(&["extract", "--method", "smoothe", "--config", toml.to_str().unwrap(), "-q", &graph]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("time_limit must be") && !stderr.contains("panicked"), "{stderr}");
}

/// Every name a setting lists parses, and serialises back to itself, so
/// the command line, the TOML files and the result files agree.
#[test]
fn every_listed_setting_name_parses_and_round_trips() {
    use smoothe::config::Choice;
    fn check<T: Choice + serde::Serialize>() {
        for name in T::NAMES {
            let value = T::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(serde_json::to_value(&value).unwrap(), serde_json::json!(name));
        }
        assert!(T::parse("no-such-name").is_err());
    }
    check::<smoothe::relax::Combine>();
    check::<smoothe::extract::OptimizerKind>();
    check::<smoothe::extract::Parameterisation>();
    check::<smoothe::learn::model::features::FeatureKind>();
    check::<smoothe::learn::active::acquisition::Acquisition>();
}

#[test]
fn the_device_comes_from_the_flag_or_else_from_smoothe_device() {
    let graph = shipped("esyn/mul3.json");
    let run = |env: Option<&str>, flag: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_smoothe"));
        cmd.args(["extract", "--method", "smoothe", "--steps", "2", "-q", &graph]);
        if let Some(d) = flag {
            cmd.args(["--device", d]);
        }
        match env {
            Some(e) => cmd.env("SMOOTHE_DEVICE", e),
            None => cmd.env_remove("SMOOTHE_DEVICE"),
        };
        let out = cmd.output().expect("binary runs");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, stderr) = run(Some("tpu"), None);
    assert_ne!(code, 0);
    assert!(stderr.contains("unknown device \"tpu\""), "{stderr}");
    let (code, stderr) = run(Some("tpu"), Some("cpu"));
    assert_eq!(code, 0, "the flag overrides the variable: {stderr}");
    let (code, stderr) = run(None, None);
    assert_eq!(code, 0, "{stderr}");
}
