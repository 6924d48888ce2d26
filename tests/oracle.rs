//! The oracle contract: parsing what an oracle prints, the label log,
//! the oracle's identity, misbehaving oracles, and the BLIF export
//! checked by ABC.

mod common;
use common::learned::*;
use common::*;
use smoothe::learn::oracle::labels::{Label, LabelLog};
use smoothe::learn::oracle::process::{parse_cost, parse_metric_list, parse_metrics, Oracle, Verdict};
use std::time::Duration;

#[test]
fn oracle_output_is_parsed_strictly() {
    assert_eq!(parse_cost("log line\n12.5\n\n", None).unwrap(), 12.5);
    assert_eq!(parse_cost("{\"area\": 3, \"name\": \"x\"}", None).unwrap(), 3.0);
    assert_eq!(parse_cost("{\"area\": 3, \"power\": 7}", Some("power")).unwrap(), 7.0);
    for (out, metric) in [
        ("", None),
        ("area: big", None),
        ("{\"area\": 3, \"power\": 7}", None),
        ("{\"area\": 3}", Some("power")),
        ("5", Some("area")),
        ("inf", None),
    ] {
        assert!(parse_cost(out, metric).is_err(), "{out:?} accepted");
    }
}

#[test]
fn every_metric_an_oracle_prints_is_kept_and_old_logs_stay_readable() {
    let wanted = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let all = parse_metrics("{\"area\": 3, \"delay\": 2.5, \"name\": \"x\"}", &wanted(&["delay"])).unwrap();
    assert_eq!(all, [("area".to_string(), 3.0), ("delay".to_string(), 2.5)].into());
    assert!(parse_metrics("{\"area\": 3}", &wanted(&["area", "delay"])).is_err());
    assert_eq!(parse_metric_list(Some(" area, delay ")).unwrap(), wanted(&["area", "delay"]));
    assert!(parse_metric_list(Some("area,area")).is_err());
    // The identity does not depend on the metrics a run learns, so runs
    // learning different metrics share labels; without one it is as before.
    let bare = Oracle::new("echo", Duration::from_secs(1));
    let mut two = Oracle::new("echo", Duration::from_secs(1));
    two.metrics = wanted(&["area", "delay"]);
    assert_eq!(bare.identity(), two.identity());
    assert_eq!(two.primary(), Some("area"));
    // A label written before metrics were kept reads as the only number.
    let old: Label =
        serde_json::from_str(r#"{"egraph":"g","extraction":"e","oracle":"o","cost":4.5,"seconds":0.1,"choices":{}}"#)
            .unwrap();
    assert_eq!((old.value(None), old.value(Some("cost")), old.value(Some("area"))), (Some(4.5), Some(4.5), None));
    assert!(!old.failed());
    let new = Label { metrics: all, cost: None, ..old.clone() };
    assert_eq!((new.value(Some("delay")), new.value(None)), (Some(2.5), None));
    let line = serde_json::to_string(&new).unwrap();
    assert!(line.contains("\"metrics\"") && !line.contains("\"cost\""), "{line}");
}

#[test]
fn oracle_failures_are_recorded_not_costs() {
    let dummy = temp_file("dummy.json", "{}");
    let ok = Oracle::new(script("ok.sh", "echo 4.25").display().to_string(), Duration::from_secs(10));
    assert_eq!(ok.call(&dummy, &dummy).unwrap(), Verdict::Measured([("cost".to_string(), 4.25)].into()));
    let fails = Oracle::new(
        script("fail.sh", "echo 'synthesis exploded' >&2; exit 3").display().to_string(),
        Duration::from_secs(10),
    );
    match fails.call(&dummy, &dummy).unwrap() {
        Verdict::Failed(why) => assert!(why.contains("synthesis exploded") && why.contains('3'), "{why}"),
        other => panic!("{other:?}"),
    }
    let slow = Oracle::new(script("slow.sh", "sleep 5; echo 1").display().to_string(), Duration::from_millis(300));
    let start = std::time::Instant::now();
    match slow.call(&dummy, &dummy).unwrap() {
        Verdict::Failed(why) => assert!(why.contains("timed out"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(4));
    let silent = Oracle::new(script("silent.sh", "true").display().to_string(), Duration::from_secs(5));
    assert!(matches!(silent.call(&dummy, &dummy).unwrap(), Verdict::Failed(_)));
}

#[test]
fn label_log_survives_a_cut_short_line() {
    let path = temp_file("labels.jsonl", "");
    std::fs::remove_file(&path).unwrap();
    let label = |k: &str, cost: Option<f64>| Label {
        egraph: "g".into(),
        extraction: k.into(),
        oracle: "o".into(),
        metrics: cost.map(|c| ("cost".to_string(), c)).into_iter().collect(),
        cost: None,
        error: cost.is_none().then(|| "boom".into()),
        seconds: 0.1,
        choices: Default::default(),
    };
    {
        let mut log = LabelLog::open(&path).unwrap();
        log.append(label("a", Some(1.0))).unwrap();
        log.append(label("b", None)).unwrap();
    }
    // A kill in the middle of a write leaves half a line.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"egraph\": \"g\", \"extr");
    std::fs::write(&path, text).unwrap();
    let log = LabelLog::open(&path).unwrap();
    assert!(log.repaired());
    assert_eq!(log.labels().len(), 2);
    assert_eq!(log.get(&("g".into(), "a".into(), "o".into())).unwrap().value(None), Some(1.0));
    assert_eq!(log.values_for("g", "o", None).len(), 1, "failed labels are not training data");
    // While one run holds the log, another is refused with a message.
    let err = LabelLog::open(&path).err().expect("a second open is refused").to_string();
    assert!(err.contains("in use by another smoothe run"), "{err}");
    drop(log);
    // Resumed three times, each appending after the repair: nothing
    // complete is lost and the file stays parseable.
    for (round, key) in ["c", "d", "e"].iter().enumerate() {
        let mut log = LabelLog::open(&path).unwrap();
        assert_eq!(log.labels().len(), 2 + round, "round {round}");
        log.append(label(key, Some(2.0))).unwrap();
    }
    let log = LabelLog::open(&path).unwrap();
    assert!(!log.repaired());
    assert_eq!(log.labels().len(), 5);
    drop(log);
    // A complete last line that lost only its newline is kept.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.pop();
    std::fs::write(&path, text).unwrap();
    let mut log = LabelLog::open(&path).unwrap();
    assert_eq!(log.labels().len(), 5);
    log.append(label("f", Some(3.0))).unwrap();
    drop(log);
    assert_eq!(LabelLog::open(&path).unwrap().labels().len(), 6);
}

#[test]
fn oracle_identity_covers_the_files_it_depends_on() {
    let dir = fresh_dir("identity");
    let script = dir.join("synth.sh");
    std::fs::write(&script, "#!/bin/sh\necho 1\n").unwrap();
    std::fs::write(dir.join("cells.genlib"), "GATE a 1 Y=A;\n").unwrap();
    let oracle = |command: String, tag: Option<&str>| {
        let mut o = Oracle::new(command, Duration::from_secs(5));
        o.tag = tag.map(String::from);
        o.exclude = vec![dir.join("model.safetensors")];
        o
    };
    let direct = format!("{}", script.display());
    let wrapped = format!("sh {}", script.display());
    let before = [oracle(direct.clone(), None).identity(), oracle(wrapped.clone(), None).identity()];
    // A label log or excluded output beside the script changes nothing.
    std::fs::write(dir.join("labels.jsonl"), "{}\n").unwrap();
    std::fs::write(dir.join("model.safetensors"), "weights").unwrap();
    assert_eq!(oracle(direct.clone(), None).identity(), before[0]);
    // A tag, or an edit to a file beside the script, makes old labels stale,
    // also when the script is an argument of another command.
    assert_ne!(oracle(direct.clone(), Some("abc 1.01")).identity(), before[0]);
    std::fs::write(dir.join("cells.genlib"), "GATE a 2 Y=A;\n").unwrap();
    assert_ne!(oracle(direct, None).identity(), before[0]);
    assert_ne!(oracle(wrapped, None).identity(), before[1]);
}

#[test]
fn label_measures_extractions_through_the_log() {
    let dir = fresh_dir("label");
    let (oracle, calls) = counting_oracle(&dir, false);
    let graph = repo("datasets/esyn/mul3.json");
    let mut files = Vec::new();
    for method in ["greedy", "dag-greedy"] {
        let out = dir.join(format!("{method}.json"));
        let (code, _, stderr) = cli(&["extract", "--method", method, "-o", out.to_str().unwrap(), &graph]);
        assert_eq!(code, 0, "{stderr}");
        files.push(out.to_str().unwrap().to_string());
    }
    let labels = dir.join("l.jsonl");
    let mut args = vec!["label", "--oracle", oracle.to_str().unwrap(), "--labels", labels.to_str().unwrap(), &graph];
    args.extend(files.iter().map(String::as_str));
    let (code, stdout, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, file) in lines.iter().zip(&files) {
        let cost: f64 = line.strip_prefix(&format!("{file}: ")).unwrap().parse().unwrap();
        assert!(cost > 0.0);
    }
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 2);
    // Again: the same lines, from the log, with no call.
    let (code, again, _) = cli(&args);
    assert_eq!((code, again), (0, stdout));
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 2);
}

#[test]
fn misbehaving_oracles_get_the_right_verdict_in_bounded_time() {
    let dummy = temp_file("dummy-misbehave.json", "{}");
    let bound = Duration::from_secs(2) + smoothe::learn::oracle::process::TERMINATION_GRACE + Duration::from_secs(3);
    let cases: Vec<(&str, &str, Option<f64>)> = vec![
        ("nan.sh", "echo NaN", None),
        ("inf.sh", "echo inf", None),
        ("negative.sh", "echo -3.5", Some(-3.5)),
        ("huge.sh", "echo 1e300", Some(1e300)),
        ("binary.sh", "printf '\\377\\376\\n'", None),
        ("nothing.sh", "true", None),
        ("nonzero.sh", "echo 12; exit 1", None),
        // A descendant in its own session holds stdout open for a minute:
        // the printed cost still counts once the pipes stay quiet.
        ("setsid.sh", "setsid sleep 60 & echo 7", Some(7.0)),
        // Ignores SIGTERM and never finishes: killed after the grace period.
        ("stubborn.sh", "trap '' TERM; while true; do sleep 1; done", None),
    ];
    for (name, body, want) in cases {
        let start = std::time::Instant::now();
        let verdict = misbehaving(name, body).call(&dummy, &dummy).unwrap();
        assert!(start.elapsed() < bound, "{name}: took {:?}", start.elapsed());
        match (want, verdict) {
            (Some(c), Verdict::Measured(got)) => assert_eq!(got, [("cost".to_string(), c)].into(), "{name}"),
            (None, Verdict::Failed(_)) => {}
            (want, got) => panic!("{name}: wanted {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn failed_labels_are_retried_on_a_later_run_and_stay_logged() {
    let dir = fresh_dir("retry");
    let marker = dir.join("failed-once");
    let calls = dir.join("calls.txt");
    // Fails on its first call (a preempted job), succeeds afterwards.
    let oracle = script(
        "flaky.sh",
        &format!(
            "echo x >> {c}\nif [ ! -e {m} ]; then touch {m}; echo preempted >&2; exit 1; fi\necho 5",
            c = calls.display(),
            m = marker.display()
        ),
    );
    let graph = repo("datasets/esyn/mul3.json");
    let extraction = dir.join("g.json");
    let (code, _, stderr) = cli(&["extract", "--method", "greedy", "-o", extraction.to_str().unwrap(), &graph]);
    assert_eq!(code, 0, "{stderr}");
    let labels = dir.join("l.jsonl");
    let run = |retries: &str| {
        cli(&[
            "label",
            "--oracle",
            oracle.to_str().unwrap(),
            "--labels",
            labels.to_str().unwrap(),
            "--retries",
            retries,
            &graph,
            extraction.to_str().unwrap(),
        ])
    };
    let (code, stdout, _) = run("1");
    assert_eq!(code, 1);
    assert!(stdout.contains("failed: ") && stdout.contains("preempted"), "{stdout}");
    // No retries asked: the failure is reused, no call.
    let (code, _, _) = run("0");
    assert_eq!(code, 1);
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    // One retry: called again, and the failure stays in the log.
    let (code, stdout, stderr) = run("1");
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert!(stdout.trim().ends_with(": 5"), "{stdout}");
    let log = LabelLog::open(&labels).unwrap();
    assert_eq!(log.labels().len(), 2);
    assert!(log.labels()[0].error.as_deref().unwrap_or("").contains("preempted"));
    drop(log);
    // Retries used up or not, a success is never repeated.
    let (code, _, _) = run("5");
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 2);
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn blif_of_different_extractions_is_equivalent_by_abc() {
    let Some(abc) = need_abc() else { return };
    let dir = fresh_dir("cec");
    for graph in [repo("datasets/esyn/mul3.json")] {
        let mut blifs = Vec::new();
        for (method, seed) in [("greedy", "0"), ("random", "1"), ("random", "2")] {
            let ex = dir.join(format!("{method}{seed}.json"));
            let blif = dir.join(format!("{method}{seed}.blif"));
            let (code, _, e) =
                cli(&["extract", "--method", method, "--seed", seed, "-q", "-o", ex.to_str().unwrap(), &graph]);
            assert_eq!(code, 0, "{e}");
            let (code, _, e) = cli(&["export", "-o", blif.to_str().unwrap(), &graph, ex.to_str().unwrap()]);
            assert_eq!(code, 0, "{e}");
            blifs.push(blif);
        }
        for other in &blifs[1..] {
            let out = std::process::Command::new(&abc)
                .arg("-c")
                .arg(format!("cec {} {}", blifs[0].display(), other.display()))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("Networks are equivalent"), "{text}");
        }
    }
}

#[test]
fn blif_keeps_the_chosen_nodes_operand_order_and_rejects_unknown_ops() {
    let text = graph_json(
        &[("a", "A", 0.0, &[]), ("b", "B", 0.0, &[]), ("ab", "R", 1.0, &["a", "b"]), ("ba", "R", 1.0, &["b", "a"])],
        &["R"],
    );
    // Ops are the node ids in graph_json; rename to AND gates.
    let text = text.replace("\"op\":\"ab\"", "\"op\":\"*\"").replace("\"op\":\"ba\"", "\"op\":\"*\"");
    let g = graph(&text);
    let pick = |node: &str| {
        smoothe::extraction::OriginalExtraction::from_json(
            &g,
            &parse_json(&format!("{{\"A\": \"a\", \"B\": \"b\", \"R\": \"{node}\"}}")),
        )
        .unwrap()
    };
    let one = smoothe::export::to_blif(&g, &pick("ab"), "t").unwrap();
    let two = smoothe::export::to_blif(&g, &pick("ba"), "t").unwrap();
    assert!(one.contains(".names a b _nR\n11 1"), "{one}");
    assert!(two.contains(".names b a _nR\n11 1"), "{two}");
    assert_eq!(one.replace(".names b a", ".names a b"), two.replace(".names b a", ".names a b"));
    let bad = graph(&graph_json(&[("x", "X", 0.0, &[]), ("f", "F", 1.0, &["x"])], &["F"]));
    let ex =
        smoothe::extraction::OriginalExtraction::from_json(&bad, &parse_json("{\"X\": \"x\", \"F\": \"f\"}")).unwrap();
    let err = smoothe::export::to_blif(&bad, &ex, "t").unwrap_err().to_string();
    assert!(err.contains("\"f\"") && err.contains("not a boolean gate"), "{err}");
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn abc_oracle_measures_a_shipped_circuit() {
    if need_abc().is_none() {
        return;
    }
    let graph = repo("datasets/esyn/mul3.json");
    let dir = fresh_dir("abc");
    let ex = dir.join("g.json");
    let (code, _, e) = cli(&["extract", "-q", "-o", ex.to_str().unwrap(), &graph]);
    assert_eq!(code, 0, "{e}");
    let out = std::process::Command::new(repo("examples/oracles/abc_area.sh"))
        .arg(&graph)
        .arg(&ex)
        .env("SMOOTHE", env!("CARGO_BIN_EXE_smoothe"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let area = parse_cost(&String::from_utf8_lossy(&out.stdout), None).unwrap();
    assert!(area > 10.0 && area < 10_000.0, "{area}");
    // The metrics sibling reports the same area, and delay and power that
    // `--metric` picks, through `label` and its log.
    // abc_area.sh's flow, named in the oracle's command line.
    let metrics = format!("ABC_SCRIPT='strash; dch; map -a' {}", repo("examples/oracles/abc_metrics.sh"));
    let mut seen = Vec::new();
    for metric in ["area", "delay", "power"] {
        let labels = dir.join(format!("{metric}.jsonl"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_smoothe"))
            .args(["label", "--oracle", &metrics, "--metric", metric, "--labels", labels.to_str().unwrap()])
            .arg(&graph)
            .arg(&ex)
            .env("SMOOTHE", env!("CARGO_BIN_EXE_smoothe"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{metric}: {}", String::from_utf8_lossy(&out.stdout));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let value: f64 = stdout.trim().rsplit(": ").next().unwrap().parse().unwrap();
        assert!(value > 0.0, "{metric}: {stdout}");
        seen.push(value);
    }
    assert_eq!(seen[0], area);
    assert!(seen[1] != seen[2], "delay and power are different metrics: {seen:?}");
}
