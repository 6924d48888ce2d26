//! The train-cost loop: resumable, never paying twice, interruptible,
//! its job file, models over several designs, and what it hands the
//! frozen model.

mod common;
use common::learned::*;
use common::*;
use smoothe::learn::model::network::Ensemble;
use smoothe::learn::oracle::labels::{Label, LabelLog};
use smoothe::learn::oracle::process::Oracle;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn train_cost_resumes_after_a_kill_without_repeating_calls() {
    let dir = fresh_dir("resume");
    let (oracle, calls) = counting_oracle(&dir, true);
    let out = dir.join("m.safetensors");
    let graph = repo("datasets/eggcc-bril/nested_call.bril.json");
    let mut args = train_cost_args(oracle.to_str().unwrap(), out.to_str().unwrap(), "40");
    args.push(&graph);
    // Start, and kill it once a few labels exist.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_smoothe")).args(&args).spawn().unwrap();
    let labels = dir.join("m.labels.jsonl");
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&labels).map_or(0, |t| t.lines().count()) < 4 {
        assert!(start.elapsed() < Duration::from_secs(60), "no labels appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Oracle calls in flight at the kill finish unrecorded; they may be
    // repeated, but nothing the log holds may be.
    std::thread::sleep(Duration::from_millis(2000));
    let logged: std::collections::HashSet<String> = std::fs::read_to_string(&labels)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| format!("{}.json", v["extraction"].as_str().unwrap()))
        .collect();
    let calls_before = std::fs::read_to_string(&calls).unwrap().lines().count();
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let called: Vec<String> = std::fs::read_to_string(&calls).unwrap().lines().map(String::from).collect();
    let rerun = &called[calls_before..];
    assert!(rerun.iter().all(|k| !logged.contains(k)), "a labelled extraction was sent to the oracle again");
    let unique: std::collections::HashSet<&String> = rerun.iter().collect();
    assert_eq!(unique.len(), rerun.len(), "the rerun sent an extraction twice");
    assert!(called.len() <= 40 + 2 + 2, "budget exceeded: {}", called.len());
    // The budget caps the log, over all runs.
    let log_lines = std::fs::read_to_string(&labels).unwrap().lines().count();
    assert!(log_lines <= 40, "{log_lines} labels for a budget of 40");
    // A run with a budget already spent pays nothing.
    let before = called.len();
    let mut spent = train_cost_args(oracle.to_str().unwrap(), out.to_str().unwrap(), "20");
    spent.push(&graph);
    let (code, _, stderr) = cli(&spent);
    assert_eq!(code, 0, "{stderr}");
    let after = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert_eq!(after, before, "a run whose budget is spent called the oracle");
    // Everything it wrote is valid.
    let best = dir.join("m.best.json");
    let (code, _, stderr) = cli(&["check", &graph, best.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn train_cost_improves_on_its_first_round_and_the_model_drives_extraction() {
    let dir = fresh_dir("improve");
    let (oracle, _) = counting_oracle(&dir, false);
    let out = dir.join("m.safetensors");
    let graph = repo("datasets/esyn/mul3.json");
    let mut args = train_cost_args(oracle.to_str().unwrap(), out.to_str().unwrap(), "120");
    args.push(&graph);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let rounds = parse_json(&std::fs::read_to_string(dir.join("m.rounds.json")).unwrap());
    let rounds = rounds.as_array().unwrap();
    let first = rounds[0]["best_real_cost"].as_f64().unwrap();
    let last = rounds.last().unwrap()["best_real_cost"].as_f64().unwrap();
    let dag = rounds[0]["dag_greedy_real_cost"].as_f64().unwrap();
    assert!(last <= first && last < dag, "first {first}, last {last}, dag-greedy {dag}");
    // Each round records what it labelled: the model's prediction before
    // the label and the real cost after, with the random picks from the
    // same pool (--explore 3) marked as such.
    for pair in rounds.windows(2) {
        let (before, round) = (&pair[0], &pair[1]);
        let picks = round["picks"].as_array().unwrap();
        let reals: Vec<f64> = picks.iter().filter_map(|p| p["real"].as_f64()).collect();
        let new_labels = round["labels"].as_u64().unwrap() - before["labels"].as_u64().unwrap();
        assert_eq!(reals.len() as u64, new_labels, "{round}");
        assert_eq!(picks.iter().filter(|p| p["source"] == "explore").count(), 3, "{round}");
        assert!(picks.iter().all(|p| p["predicted"]["mean"].as_f64().unwrap().is_finite()), "{round}");
        let best = reals.iter().fold(before["best_real_cost"].as_f64().unwrap(), |a, &b| a.min(b));
        assert_eq!(best, round["best_real_cost"].as_f64().unwrap(), "{round}");
    }
    // The saved model drives SmoothE and random best-of-N, with valid output.
    for method in ["smoothe", "random"] {
        let res = dir.join(format!("{method}.json"));
        extract_with_model_checked(&graph, out.to_str().unwrap(), method, &res);
    }
    // A model applied to an e-graph with operators it never saw is refused,
    // naming them.
    let other = repo("datasets/diospyros/vector_mac_root_21.json");
    let (code, _, stderr) = cli(&["extract", "--model", out.to_str().unwrap(), "-q", &other]);
    assert_eq!(code, 2);
    assert!(stderr.contains("never seen the operator") && !stderr.contains("panicked"), "{stderr}");
    // extract --model alone runs SmoothE against the model and reports its
    // prediction.
    let res = dir.join("default.json");
    let (code, _, stderr) = cli(&[
        "extract",
        "--model",
        out.to_str().unwrap(),
        "--steps",
        "60",
        "--time-limit",
        "0",
        "-o",
        res.to_str().unwrap(),
        "-q",
        &graph,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let result = parse_json(&std::fs::read_to_string(&res).unwrap());
    assert_eq!(result["method"], "smoothe");
    let p = &result["prediction"];
    assert!(p["mean"].as_f64().unwrap().is_finite() && p["std"].as_f64().unwrap() >= 0.0, "{p}");
    assert!(stderr.contains("model predicts"), "{stderr}");
    // The model keeps what the oracle measured, one entry per labelled
    // extraction ...
    let model = Ensemble::load(&out, &device()).unwrap();
    assert_eq!(model.meta.measured.len(), 1);
    let measured = &model.meta.measured[0].rows;
    let labelled: usize = measured.iter().map(|r| r.labels).sum();
    assert_eq!(labelled as u64, rounds.last().unwrap()["labels"].as_u64().unwrap());
    let (low, high) =
        measured.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), r| (l.min(r.cost), h.max(r.cost)));
    // ... and the frozen choice judges a candidate it measured (greedy, a
    // baseline of every loop) by the measurement, not by the prediction.
    let greedy = dir.join("greedy.json");
    let (code, _, stderr) = cli(&["extract", "--method", "greedy", "-q", "-o", greedy.to_str().unwrap(), &graph]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) =
        cli(&["predict", "--json", "--model", out.to_str().unwrap(), &graph, greedy.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let verdict = parse_json(&stdout);
    let greedy_cost = verdict["measured"].as_f64().expect("the greedy extraction was labelled");
    assert!((low..=high).contains(&greedy_cost), "{greedy_cost} outside the labels' {low}..{high}");
    assert_ne!(verdict["mean"].as_f64().unwrap(), greedy_cost, "the prediction stays the model's own");
    let selection = &result["selection_costs"];
    assert_eq!(selection["greedy"].as_f64().unwrap(), greedy_cost, "{selection}");
    let least = ["smoothe", "greedy", "dag-greedy", "linear"].map(|k| selection[k].as_f64().unwrap());
    assert_eq!(
        selection[result["pick"].as_str().unwrap()].as_f64().unwrap(),
        least.iter().copied().fold(f64::INFINITY, f64::min)
    );
    // The loop labels the linear-SmoothE start that `extract --model` runs
    // at its defaults (bounded by steps, not by the clock), whatever the
    // loop's own SmoothE settings (--steps 120 here), so the frozen choice
    // judges that candidate by its label. A short time limit cuts the
    // model's part short, not the start (unless the start reaches four
    // times the limit, here 60 s).
    let linear = rounds[0]["linear_smoothe_real_cost"].as_f64().unwrap();
    for other in ["greedy_real_cost", "dag_greedy_real_cost"] {
        assert_ne!(rounds[0][other].as_f64().unwrap(), linear, "a start equal to {other} would pass unseen");
    }
    let frozen = dir.join("frozen.json");
    let (code, _, stderr) = cli(&[
        "extract",
        "--model",
        out.to_str().unwrap(),
        "--time-limit",
        "15",
        "-q",
        "-o",
        frozen.to_str().unwrap(),
        &graph,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let frozen = parse_json(&std::fs::read_to_string(&frozen).unwrap());
    assert_eq!(frozen["selection_costs"]["linear"].as_f64(), Some(linear), "{frozen}");
    // The model keeps how far its own optima measured from their
    // predictions over the rounds, and the frozen extraction reports it.
    let checks: Vec<(f64, f64)> = rounds
        .iter()
        .filter_map(|r| Some((r["optimum"]["predicted"]["mean"].as_f64()?, r["optimum"]["real"].as_f64()?)))
        .collect();
    assert!(!checks.is_empty(), "no round labelled its optimum");
    let kept = model.meta.optimum_error.expect("the loop's optima were measured");
    assert_eq!(kept.checked, checks.len());
    let shares: Vec<f64> = checks.iter().map(|(p, r)| (r - p) / p).collect();
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    let worst = shares.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert!((kept.mean - mean).abs() < 1e-9 && (kept.worst - worst).abs() < 1e-9, "{kept:?}: {shares:?}");
    assert_eq!(result["optimum_error"]["checked"].as_u64(), Some(checks.len() as u64), "{result}");
}

#[test]
fn shipped_train_cost_config_matches_the_defaults() {
    use smoothe::jobs::TrainCostJob;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/train-cost.toml");
    assert_eq!(TrainCostJob::load(&path).unwrap(), TrainCostJob::default());
    // A partial [smoothe] table is read over the loop's defaults.
    let job = TrainCostJob::from_toml("[smoothe]\nlearning_rate = 0.05").unwrap();
    assert_eq!((job.smoothe.steps, job.smoothe.time_limit, job.smoothe.learning_rate), (600, 0.0, 0.05));
}

#[test]
fn samplers_give_valid_extractions_near_their_parents() {
    use rand::SeedableRng;
    use smoothe::extract::moves::{crossover, nudge, perturb};
    use smoothe::extract::{DagGreedy, Extractor, Greedy};
    let mut moved = 0;
    let trials = 200;
    for seed in 0..trials {
        let g = graph(&random_graph_json(seed, 12, false));
        let Ok(problem) = smoothe::preprocess::preprocess(&g) else { continue };
        let pg = &problem.graph;
        let (Ok(a), Ok(b)) = (Greedy.extract(&problem), DagGreedy.extract(&problem)) else { continue };
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        assert_eq!(nudge(pg, &a, 0, &mut rng), a, "seed {seed}: no move keeps the parent");
        assert_eq!(crossover(pg, &b, &b, &mut rng), b, "seed {seed}: crossing a parent with itself keeps it");
        let near = nudge(pg, &a, 1, &mut rng);
        moved += usize::from(near != a);
        for e in [near, nudge(pg, &a, 5, &mut rng), perturb(pg, &b, 0.3, &mut rng), crossover(pg, &a, &b, &mut rng)] {
            e.check(pg).unwrap_or_else(|d| panic!("seed {seed}: invalid sample: {d}"));
        }
    }
    assert!(moved > trials as usize / 4, "one-class moves changed only {moved} of {trials} extractions");
}

#[test]
fn the_trust_region_loosens_only_where_the_loops_optima_measured_as_predicted() {
    use rand::SeedableRng;
    use smoothe::learn::model::meta::OptimumError;
    use smoothe::learn::model::objective::LearnedCost;
    use smoothe::learn::model::trust::Conservatism;
    let original = smoothe::load::load_file(Path::new(&repo("datasets/esyn/mul3.json"))).unwrap();
    let problem = smoothe::preprocess::preprocess(&original).unwrap();
    let shipped = Ensemble::load(Path::new(&repo("models/mul3-abc-area.safetensors")), &device()).unwrap();
    let (spread, level) = (shipped.meta.target_std, shipped.meta.target_mean);
    let bind = |error: Option<OptimumError>| {
        let mut model = shipped.clone();
        model.meta.optimum_error = error;
        LearnedCost::new(model, &problem, &original, Conservatism::FROZEN).unwrap()
    };
    // No record, or fewer than three optima: the label spread, as ever.
    assert_eq!(bind(None).trust_unit(), spread);
    assert_eq!(bind(OptimumError::of(&[(100.0, 100.5), (100.0, 100.2)])).trust_unit(), spread);
    // Optima off by more than a spread: never charged more than the spread.
    let off = spread / level * 2.0;
    assert_eq!(bind(OptimumError::of(&[(100.0, 100.0 * (1.0 + off)); 3])).trust_unit(), spread);
    // Three optima, the worst 1% above its prediction: 1% of the label level.
    let accurate = bind(OptimumError::of(&[(100.0, 101.0), (100.0, 99.0), (100.0, 100.5)]));
    assert!(0.01 * level < spread, "the fixture's spread {spread} is too small for this check");
    assert!((accurate.trust_unit() - 0.01 * level).abs() <= 1e-9 * level, "{}", accurate.trust_unit());
    // Pessimistic optima count by their mean size: 2% here.
    let pessimistic = bind(OptimumError::of(&[(100.0, 97.0), (100.0, 98.0), (100.0, 99.0)]));
    assert!((pessimistic.trust_unit() - 0.02 * level).abs() <= 1e-9 * level, "{}", pessimistic.trust_unit());
    // The charge of an extraction away from the data scales with the unit,
    // and so does the score SmoothE minimises (whose relaxation
    // `objective_prices_extractions_as_its_expectation_does` ties to it).
    use smoothe::cost::CostModel;
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let far = smoothe::extract::random_extraction(&problem.graph, &mut rng);
    let plain = bind(None);
    let p = plain.predict(std::slice::from_ref(&far)).unwrap()[0];
    let full = plain.charge(&p);
    assert!(full > 0.0, "a random extraction should lie away from the training rows: {p:?}");
    let scaled = accurate.charge(&p);
    assert!((scaled - full * 0.01 * level / spread).abs() <= 1e-9 * full, "{scaled} against {full}");
    let gap = plain.cost_of(&far) - accurate.cost_of(&far);
    assert!((gap - (full - scaled)).abs() <= 1e-4 * full, "score gap {gap}, charge gap {}", full - scaled);
}

#[test]
fn interrupting_train_cost_stops_its_oracle_calls() {
    let dir = fresh_dir("interrupt");
    let pids = dir.join("pids.txt");
    // Each call records its process id and works for a minute.
    let oracle = script("interrupted.sh", &format!("echo $$ >> {}\nsleep 60\necho 1", pids.display()));
    let graph = repo("datasets/esyn/mul3.json");
    let out = dir.join("m.safetensors");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_smoothe"))
        .args(["train-cost", "--oracle", oracle.to_str().unwrap(), "--jobs", "2", "--steps", "20", "-q"])
        .args(["--out", out.to_str().unwrap(), &graph])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&pids).map_or(0, |t| t.lines().count()) < 2 {
        assert!(start.elapsed() < Duration::from_secs(60), "the oracle never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Ctrl-C (the cluster test sends SIGTERM, as a scheduler does).
    // SAFETY: plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // Running, not a zombie waiting to be reaped.
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"))
            .unwrap_or(false)
    };
    let oracle_pids: Vec<i32> =
        std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
    let deadline =
        std::time::Instant::now() + smoothe::learn::oracle::process::TERMINATION_GRACE + Duration::from_secs(5);
    while oracle_pids.iter().any(|&p| alive(p)) {
        assert!(std::time::Instant::now() < deadline, "oracle processes outlived train-cost: {oracle_pids:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn train_cost_does_not_overwrite_another_jobs_model_without_force() {
    let dir = fresh_dir("overwrite");
    let (oracle, calls) = counting_oracle(&dir, false);
    let out = dir.join("shipped.safetensors");
    std::fs::copy(repo("models/mul3-abc-area.safetensors"), &out).unwrap();
    let graph = repo("datasets/esyn/mul3.json");
    let (code, _, stderr) = cli(&[
        "train-cost",
        "--oracle",
        oracle.to_str().unwrap(),
        "--budget",
        "5",
        "-q",
        "--out",
        out.to_str().unwrap(),
        &graph,
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--force") && stderr.trim().lines().count() == 1, "{stderr}");
    assert!(!calls.exists(), "the oracle was called before the refusal");
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(repo("models/mul3-abc-area.safetensors")).unwrap());
}

#[test]
fn one_model_over_several_designs_transfers_and_adapts() {
    let dir = fresh_dir("corpus");
    let (oracle, calls) = counting_oracle(&dir, false);
    let oracle = oracle.to_str().unwrap().to_string();
    let (a, b, c) = (circuit(&dir, "a", 1, None), circuit(&dir, "b", 2, None), circuit(&dir, "c", 3, None));
    let short = ["--initial", "14", "--rounds", "1", "--per-round", "6", "--steps", "60", "-q"];
    let lib = dir.join("lib.safetensors");
    let lib = lib.to_str().unwrap();
    let mut args = vec!["train-cost", "--oracle", &oracle, "--budget", "20", "--out", lib];
    args.extend(short);
    args.extend([a.as_str(), b.as_str()]);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("corpus model over 2 designs"), "{stderr}");
    let calls_now = || std::fs::read_to_string(&calls).map_or(0, |t| t.lines().count());
    assert!(calls_now() <= 2 * 20, "{} calls for a budget of 20 per design", calls_now());
    let model = Ensemble::load(Path::new(lib), &device()).unwrap();
    let frame = model.meta.relative.as_ref().expect("a corpus model is relative");
    assert_eq!(frame.references.len(), 2);
    assert_eq!(model.meta.egraphs.len(), 2);
    // Calibrated by leaving each design out in turn.
    let margin = model.meta.transfer_margin.expect("a corpus of two designs has a transfer margin");
    assert!(margin.is_finite() && margin >= 0.0, "{margin}");
    // One best extraction per design, each valid for its design.
    let bests = parse_json(&std::fs::read_to_string(dir.join("lib.best.json")).unwrap());
    for (best, g) in bests.as_array().unwrap().iter().zip([&a, &b]) {
        let p = dir.join("one-best.json");
        std::fs::write(&p, best.to_string()).unwrap();
        let (code, _, stderr) = cli(&["check", g, p.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
    }
    // A design it never saw: extraction with no oracle at all, valid, and
    // the prediction says its scale is an estimate.
    let zero = dir.join("zero.json");
    let (code, _, stderr) =
        cli(&["extract", "--model", lib, "--steps", "60", "--time-limit", "0", "-o", zero.to_str().unwrap(), &c]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("not trained on this design"), "{stderr}");
    let result = parse_json(&std::fs::read_to_string(&zero).unwrap());
    assert_eq!(result["reference"]["measured"], false, "{result}");
    // The optimum is charged the margin, in the design's estimated units.
    let charge = result["optimum_charge"].as_f64().unwrap();
    let reference_cost = result["reference"]["cost"].as_f64().unwrap();
    assert!((charge - margin * reference_cost).abs() <= 1e-9 * charge.abs().max(1.0), "{charge} {margin} {result}");
    let (code, _, stderr) = cli(&["check", &c, zero.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // Adapting it to the new design with a few calls.
    let before = calls_now();
    let tuned = dir.join("tuned.safetensors");
    let mut args = vec!["train-cost", "--oracle", &oracle, "--budget", "10", "--init-model", lib];
    args.extend(["--out", tuned.to_str().unwrap()]);
    args.extend(short);
    args.push(&c);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(calls_now() - before <= 10, "{} calls for a budget of 10", calls_now() - before);
    let tuned_model = Ensemble::load(&tuned, &device()).unwrap();
    assert_eq!(tuned_model.meta.relative.as_ref().unwrap().references.len(), 3);
    let rounds = parse_json(&std::fs::read_to_string(dir.join("tuned.rounds.json")).unwrap());
    assert!(rounds.as_array().unwrap().len() >= 2, "the library model guides rounds from the start: {rounds}");
    let (code, _, stderr) = cli(&[
        "extract",
        "--model",
        tuned.to_str().unwrap(),
        "--steps",
        "60",
        "--time-limit",
        "0",
        "-q",
        "-o",
        zero.to_str().unwrap(),
        &c,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let tuned_result = parse_json(&std::fs::read_to_string(&zero).unwrap());
    assert_eq!(tuned_result["reference"]["measured"], true);
    // No transfer margin on a design the model has labels of; only the
    // tuning loop's own optimism, on an optimum the oracle never measured.
    let tuned_charge = tuned_result["optimum_charge"].as_f64().unwrap();
    let optimism = tuned_model.meta.optimum_error.map_or(0.0, |o| o.worst.max(0.0));
    assert!(tuned_charge >= 0.0 && (optimism > 0.0 || tuned_charge == 0.0), "{tuned_charge} {optimism}");
    if tuned_result["pick"] == "smoothe" && tuned_result["prediction"]["measured"].is_null() {
        let mean = tuned_result["prediction"]["mean"].as_f64().unwrap();
        assert!((tuned_charge - optimism * mean).abs() <= 1e-6 * mean.abs(), "{tuned_charge} {optimism} {mean}");
    }
    // Measurements judge candidates of their own design only: the library
    // model has none of c, the tuned one has c's labels.
    let greedy = dir.join("greedy.json");
    let (code, _, stderr) = cli(&["extract", "--method", "greedy", "-q", "-o", greedy.to_str().unwrap(), &c]);
    assert_eq!(code, 0, "{stderr}");
    let measured = |model: &str| {
        let (code, stdout, stderr) = cli(&["predict", "--json", "--model", model, &c, greedy.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        parse_json(&stdout)["measured"].as_f64()
    };
    assert_eq!(measured(lib), None);
    assert!(measured(tuned.to_str().unwrap()).is_some_and(f64::is_finite));
    assert_eq!(model.meta.measured.len(), 2, "one entry per training design");
    assert_eq!(tuned_model.meta.measured.len(), 3, "the library's designs and c");
    // A design with an operator no training design has is refused, by name.
    let d = circuit(&dir, "d", 4, Some("xor"));
    let (code, _, stderr) = cli(&["extract", "--model", lib, "-q", &d]);
    assert_eq!(code, 2);
    assert!(stderr.contains("never seen the operator(s) xor"), "{stderr}");
    // In a corpus with it, the margin cannot leave it out (a model without
    // xor would refuse it), says so, and comes from the other design.
    let with_xor = dir.join("with-xor.safetensors");
    let mut args = vec!["train-cost", "--oracle", &oracle, "--budget", "20", "--out", with_xor.to_str().unwrap()];
    args.extend(short);
    args.extend([a.as_str(), d.as_str()]);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("does not cover") && stderr.contains("operator xor"), "{stderr}");
    let margin = Ensemble::load(&with_xor, &device()).unwrap().meta.transfer_margin;
    assert!(margin.is_some_and(|m| m.is_finite() && m >= 0.0), "{margin:?}");
    // A one-design model is in absolute units: it cannot adapt to another.
    let single = dir.join("single.safetensors");
    let mut args = vec!["train-cost", "--oracle", &oracle, "--budget", "16", "--out", single.to_str().unwrap()];
    args.extend(short);
    args.push(&a);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(Ensemble::load(&single, &device()).unwrap().meta.transfer_margin, None, "nothing to leave out");
    let mut args = vec!["train-cost", "--oracle", &oracle, "--budget", "10", "--init-model"];
    args.extend([single.to_str().unwrap(), "--out", tuned.to_str().unwrap(), "--force", "-q", &c]);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 2);
    assert!(stderr.contains("several designs"), "{stderr}");
}

#[test]
fn a_train_cost_run_writes_its_job_and_the_job_repeats_it() {
    let dir = fresh_dir("job");
    let (oracle, calls) = counting_oracle(&dir, false);
    let out = dir.join("m.safetensors");
    let graph = repo("datasets/egg/math_simplify_factor.json");
    let args = [
        "train-cost",
        "--oracle",
        oracle.to_str().unwrap(),
        "--budget",
        "12",
        "--initial",
        "8",
        "--rounds",
        "1",
        "--per-round",
        "3",
        "--steps",
        "40",
        "--lr",
        "0.1",
        "-q",
        "--out",
        out.to_str().unwrap(),
        &graph,
    ];
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let job = smoothe::jobs::TrainCostJob::load(&dir.join("m.job.toml")).unwrap();
    assert_eq!((job.train_cost.budget, job.smoothe.steps, job.smoothe.learning_rate), (12, 40, 0.1));
    assert_eq!(job.egraphs, vec![PathBuf::from(&graph)]);
    // The job file alone repeats the run: its budget is spent, so no new
    // oracle call, and a model of the same labels.
    let labels = |m: &Ensemble| (m.meta.report.train + m.meta.report.test, m.meta.egraphs.clone());
    let first = labels(&Ensemble::load(&out, &device()).unwrap());
    let before = std::fs::read_to_string(&calls).unwrap().lines().count();
    let (code, _, stderr) = cli(&["train-cost", "--config", dir.join("m.job.toml").to_str().unwrap(), "-q"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), before, "the repeat called the oracle");
    assert_eq!(labels(&Ensemble::load(&out, &device()).unwrap()), first);
    // Without an oracle anywhere, a clear message.
    let (code, _, stderr) = cli(&["train-cost", &graph, "-q", "--out", dir.join("x.safetensors").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no oracle command"), "{stderr}");
}

#[test]
fn train_cost_stops_at_once_when_the_oracle_fails_on_every_baseline() {
    let dir = fresh_dir("broken-oracle");
    let oracle = script("broken.sh", "echo 'abc: command not found' >&2\nexit 127");
    let out = dir.join("m.safetensors");
    let labels = dir.join("l.jsonl");
    let mut args = train_cost_args(oracle.to_str().unwrap(), out.to_str().unwrap(), "60");
    args.extend(["--labels", labels.to_str().unwrap()]);
    let graph = repo("datasets/esyn/mul3.json");
    args.push(&graph);
    let (code, _, stderr) = cli(&args);
    assert_ne!(code, 0);
    assert!(stderr.contains("stopping") && stderr.contains("abc: command not found"), "{stderr}");
    // Two calls (greedy and dag-greedy, labelled before linear SmoothE's
    // start is made), not the budget of 60.
    assert_eq!(LabelLog::open(&labels).unwrap().labels().len(), 2);
    assert!(!out.exists());
}

#[test]
fn baselines_stay_in_the_training_split_whatever_their_hash() {
    use rand::SeedableRng;
    use smoothe::extract::{random_extraction, DagGreedy, Extractor, Greedy};
    use smoothe::learn::model::dataset::dataset;
    use smoothe::learn::oracle::identity::extraction_key;
    use smoothe::preprocess::preprocess;
    let original = smoothe::load::load_file(Path::new(&repo("datasets/esyn/mul3.json"))).unwrap();
    let problem = preprocess(&original).unwrap();
    let baselines = [Greedy.extract(&problem).unwrap(), DagGreedy.extract(&problem).unwrap()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut extractions = baselines.to_vec();
    extractions.extend((0..6).map(|_| random_extraction(&problem.graph, &mut rng)));
    let path = temp_file("baselines.labels.jsonl", "");
    std::fs::remove_file(&path).unwrap();
    let mut log = LabelLog::open(&path).unwrap();
    let oracle = Oracle::new("true", Duration::from_secs(1));
    for (i, e) in extractions.iter().enumerate() {
        let o = problem.to_original(e);
        log.append(Label {
            egraph: original.fingerprint(),
            extraction: extraction_key(&original, &o).unwrap(),
            oracle: oracle.identity(),
            metrics: [("cost".to_string(), 10.0 + i as f64)].into(),
            cost: None,
            error: None,
            seconds: 0.1,
            choices: o.choices_json(&original).unwrap().as_object().unwrap().clone(),
        })
        .unwrap();
    }
    let fp = original.fingerprint();
    // Every label in the test split, except the baselines given.
    let data = dataset(&original, &problem, &log, &fp, &oracle, 1.0, &baselines).unwrap();
    assert_eq!(data.len(), extractions.len());
    for l in &data {
        assert_eq!(l.test, !baselines.contains(&l.extraction), "cost {}", l.cost);
    }
    assert_eq!(data.iter().filter(|l| !l.test).count(), 2);
    // With none given, the hash alone decides.
    assert!(dataset(&original, &problem, &log, &fp, &oracle, 1.0, &[]).unwrap().iter().all(|l| l.test));
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn train_cost_ranks_its_pool_by_a_process_over_the_extractions() {
    // `--acquisition selection-gp` runs the loop with the screened pool
    // ranked by the Gaussian process: it stays in budget, labels picks it
    // ranked, and what it writes is valid.
    let dir = fresh_dir("selection-gp");
    let (oracle, calls) = counting_oracle(&dir, false);
    let out = dir.join("m.safetensors");
    let graph = repo("datasets/esyn/mul3.json");
    let mut args = train_cost_args(oracle.to_str().unwrap(), out.to_str().unwrap(), "40");
    args.extend(["--acquisition", "selection-gp", &graph]);
    let (code, _, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let called = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert!(called <= 40, "{called} calls for a budget of 40");
    let rounds = parse_json(&std::fs::read_to_string(dir.join("m.rounds.json")).unwrap());
    let picks: Vec<&serde_json::Value> =
        rounds.as_array().unwrap().iter().flat_map(|r| r["picks"].as_array().unwrap()).collect();
    assert!(picks.iter().any(|p| p["source"] == "acquisition"), "{rounds}");
    let best = dir.join("m.best.json");
    let (code, _, stderr) = cli(&["check", &graph, best.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
}
