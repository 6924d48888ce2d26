//! The cost model: the ensemble's fit, error bars and file formats, the
//! shipped models, and model-driven extraction (`extract --model`,
//! `predict`).

mod common;
use common::learned::*;
use common::*;
use smoothe::learn::model::fit::TrainConfig;
use smoothe::learn::model::measured::{MeasuredDesign, MeasuredRow};
use smoothe::learn::model::metrics::spearman;
use smoothe::learn::model::network::Ensemble;
use smoothe::learn::model::train::train;
use std::path::{Path, PathBuf};

#[test]
fn spearman_is_right() {
    assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]) - 1.0).abs() < 1e-12);
    assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
    assert!((spearman(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]) - 0.5).abs() < 1e-12);
}

#[test]
fn ensemble_fits_learns_ranks_round_trips_and_knows_what_it_does_not_know() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let f = 12;
    let x: Vec<Vec<f64>> = (0..240).map(|_| (0..f).map(|_| rng.random_range(0.0..1.0)).collect()).collect();
    // Non-linear target with an interaction.
    let y: Vec<f64> = x.iter().map(|r| (r[0] * 3.0).powi(2) + 4.0 * r[1] * r[2] - 2.0 * r[3]).collect();
    let test: Vec<bool> = (0..x.len()).map(|i| i % 5 == 0).collect();
    let layout = smoothe::learn::model::features::FeatureLayout {
        kind: smoothe::learn::model::features::FeatureKind::OpCounts,
        names: (0..f).map(|i| format!("count:f{i}")).collect(),
    };
    let dev = device();
    let cfg = TrainConfig::default();
    let model = train(&x, &y, &test, layout.clone(), &cfg, 7, &dev).unwrap();
    let report = &model.meta.report;
    assert_eq!((report.train, report.test), (192, 48), "{report:?}");
    assert!(report.test_spearman > 0.9 && report.validation_spearman > 0.85, "{report:?}");
    // The test rows take no part in fitting: changing their targets
    // changes no weight.
    let mut y_moved = y.clone();
    for (t, yv) in test.iter().zip(y_moved.iter_mut()) {
        if *t {
            *yv += 100.0;
        }
    }
    let rows = |x: &[Vec<f64>]| {
        candle_core::Tensor::from_vec(
            x.iter().flatten().map(|&v| v as f32).collect::<Vec<f32>>(),
            (x.len(), f),
            &device(),
        )
        .unwrap()
    };
    let means = |m: &Ensemble, x: &[Vec<f64>]| -> (Vec<f32>, Vec<f32>) {
        let p = m.predict(&rows(x)).unwrap();
        (p.mean.to_vec1().unwrap(), p.std.to_vec1().unwrap())
    };
    let untouched = train(&x, &y_moved, &test, layout.clone(), &cfg, 7, &dev).unwrap();
    assert_eq!(means(&model, &x).0, means(&untouched, &x).0, "test labels leaked into fitting");
    let again = train(&x, &y, &test, layout, &cfg, 7, &dev).unwrap();
    assert_eq!(means(&model, &x), means(&again, &x), "same seed, same model");
    // Far outside the training range the members disagree more.
    let far: Vec<Vec<f64>> = x.iter().map(|r| r.iter().map(|v| v * 10.0 + 5.0).collect()).collect();
    let spread = |s: Vec<f32>| s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64;
    let (inside, outside) = (spread(means(&model, &x).1), spread(means(&model, &far).1));
    assert!(outside > 3.0 * inside, "std inside {inside}, far outside {outside}");
    let path = temp_file("model.safetensors", "");
    model.save(&path).unwrap();
    let loaded = Ensemble::load(&path, &dev).unwrap();
    assert_eq!(loaded.meta, model.meta);
    assert_eq!(means(&loaded, &x), means(&model, &x));
    let not_a_model = temp_file("junk.safetensors", "garbage");
    assert!(Ensemble::load(&not_a_model, &dev).is_err());
}

#[test]
fn test_split_is_stable_and_about_the_asked_share() {
    use smoothe::learn::model::metrics::in_test_split;
    let keys: Vec<String> = (0..4000).map(|i| format!("extraction-{i}")).collect();
    let share = keys.iter().filter(|k| in_test_split(k, 0.15)).count() as f64 / keys.len() as f64;
    assert!((share - 0.15).abs() < 0.03, "{share}");
    assert!(keys.iter().all(|k| in_test_split(k, 0.15) == in_test_split(k, 0.15)));
    assert!(keys.iter().filter(|k| in_test_split(k, 0.15)).all(|k| in_test_split(k, 0.3)), "splits nest");
    assert!(!keys.iter().any(|k| in_test_split(k, 0.0)));
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn shipped_model_loads_and_drives_extraction() {
    let graph = repo("datasets/esyn/mul3.json");
    let model = repo("models/mul3-abc-area.safetensors");
    let loaded = Ensemble::load(Path::new(&model), &device()).unwrap();
    assert!(loaded.meta.report.test_spearman > 0.5, "{:?}", loaded.meta.report);
    let dir = fresh_dir("shipped");
    let out = dir.join("e.json");
    let stderr = extract_with_model_checked(&graph, &model, "smoothe", &out);
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(result["trained_on_design"], true, "{result}");
    assert!(!stderr.contains("not on this one"), "{stderr}");
    // On another design of the same operators (here mul3 with one node's
    // cost changed, so another fingerprint) the one-design model still
    // extracts (validly), but records and says that it was not trained
    // there and has no calibration for it.
    let mut changed = parse_json(&std::fs::read_to_string(&graph).unwrap());
    let node = changed["nodes"].as_object_mut().unwrap().values_mut().next().unwrap();
    node["cost"] = serde_json::json!(node["cost"].as_f64().unwrap() + 1.0);
    let other = dir.join("other.json");
    std::fs::write(&other, changed.to_string()).unwrap();
    let other = other.to_str().unwrap().to_string();
    let stderr = extract_with_model_checked(&other, &model, "smoothe", &out);
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(result["trained_on_design"], false, "{result}");
    assert!(stderr.contains("trained on 1 other design(s), not on this one"), "{stderr}");
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn shipped_corpus_models_know_their_designs_and_extract_a_new_one() {
    let graph = repo("datasets/esyn/mul3.json");
    let dir = fresh_dir("shipped-corpus");
    for (model, trained_on_mul3) in
        [("models/esyn-abc-area.safetensors", true), ("models/esyn-abc-area-without-mul3.safetensors", false)]
    {
        let loaded = Ensemble::load(Path::new(&repo(model)), &device()).unwrap();
        let designs = loaded.meta.relative.as_ref().expect("a corpus model is relative").references.len();
        assert_eq!(designs, if trained_on_mul3 { 6 } else { 5 }, "{model}");
        let out = dir.join("e.json");
        extract_with_model_checked(&graph, &repo(model), "smoothe", &out);
        let result = parse_json(&std::fs::read_to_string(&out).unwrap());
        assert_eq!(result["reference"]["measured"], trained_on_mul3, "{model}: {}", result["reference"]);
        assert_eq!(result["trained_on_design"], trained_on_mul3, "{model}");
        // The final pick is the cheapest candidate by the selection costs:
        // on mul3 itself the conservative score, so the optimum stays; on a
        // new design the reported prediction's mean plus one spread (the
        // default kappa), without the trust region's charge.
        let costs = result["selection_costs"].as_object().expect("selection costs recorded");
        let pick = result["pick"].as_str().expect("pick recorded");
        let least = costs.values().map(|v| v.as_f64().unwrap()).fold(f64::INFINITY, f64::min);
        assert_eq!(costs[pick].as_f64().unwrap(), least, "{model}: {pick} of {costs:?}");
        if trained_on_mul3 {
            assert_eq!(pick, "smoothe", "{model}: {costs:?}");
            // An optimum the oracle measured in training is judged by that
            // measurement; any other by its conservative score.
            let judged_by = match result["prediction"]["measured"].as_f64() {
                Some(measured) => measured,
                None => result["model_cost"].as_f64().unwrap(),
            };
            assert_eq!(costs[pick].as_f64().unwrap(), judged_by, "{model}: {}", result["prediction"]);
        } else {
            let (mean, std) =
                (result["prediction"]["mean"].as_f64().unwrap(), result["prediction"]["std"].as_f64().unwrap());
            // The optimum also carries the calibrated transfer margin.
            let margin = loaded.meta.transfer_margin.expect("the shipped corpus models are calibrated");
            let charge = result["optimum_charge"].as_f64().unwrap();
            let reference_cost = result["reference"]["cost"].as_f64().unwrap();
            assert!((charge - margin * reference_cost).abs() <= 1e-9 * charge.max(1.0), "{model}: {charge}");
            let cost = costs[pick].as_f64().unwrap() - if pick == "smoothe" { charge } else { 0.0 };
            assert!((cost - (mean + std)).abs() < 1e-6 * mean.abs(), "{model}: {costs:?} {mean} {std}");
            assert!(
                result["model_cost"].as_f64().unwrap() >= cost - 1e-6 * cost.abs(),
                "{model}: the score adds a charge"
            );
        }
    }
}

#[test]
fn batched_predictions_match_one_at_a_time() {
    use rand::SeedableRng;
    use smoothe::cost::CostModel;
    use smoothe::learn::model::objective::LearnedCost;
    use smoothe::learn::model::trust::Conservatism;
    let original = smoothe::load::load_file(Path::new(&repo("datasets/esyn/mul3.json"))).unwrap();
    let problem = smoothe::preprocess::preprocess(&original).unwrap();
    let model = Ensemble::load(Path::new(&repo("models/mul3-abc-area.safetensors")), &device()).unwrap();
    let cost = LearnedCost::new(model, &problem, &original, Conservatism::default()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // More than one chunk of 256, so the chunk boundary is crossed.
    let samples: Vec<_> = (0..300).map(|_| smoothe::extract::random_extraction(&problem.graph, &mut rng)).collect();
    let batched = cost.scores(&samples).unwrap();
    assert_eq!(batched.len(), samples.len());
    for (e, b) in samples.iter().zip(&batched) {
        let one = cost.cost_of(e);
        assert!((one - b).abs() <= 1e-4 * one.abs().max(1.0), "batched {b} against one at a time {one}");
    }
    assert!(batched.iter().any(|&b| (b - batched[0]).abs() > 1e-6), "predictions should differ between extractions");
    // Uniform random extractions lie far from the labelled data: beyond
    // the typical spacing of the training rows.
    let preds = cost.predict(&samples).unwrap();
    let far = preds.iter().filter(|p| p.distance > 1.0).count();
    assert!(far > samples.len() / 2, "{far} of {} beyond the spacing", samples.len());
}

#[test]
fn an_unmeasured_optimum_on_its_own_design_pays_the_loops_optimism() {
    use rand::SeedableRng;
    use smoothe::cost::CostModel;
    use smoothe::extract::{DagGreedy, Extractor, Greedy};
    use smoothe::learn::model::meta::OptimumError;
    use smoothe::learn::model::objective::LearnedCost;
    use smoothe::learn::model::trust::Conservatism;
    let original = smoothe::load::load_file(Path::new(&repo("datasets/esyn/mul3.json"))).unwrap();
    let problem = smoothe::preprocess::preprocess(&original).unwrap();
    let shipped = Ensemble::load(Path::new(&repo("models/mul3-abc-area.safetensors")), &device()).unwrap();
    let bind = |error: Option<OptimumError>| {
        let mut model = shipped.clone();
        model.meta.optimum_error = error;
        LearnedCost::new(model, &problem, &original, Conservatism::default()).unwrap()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let unmeasured = smoothe::extract::random_extraction(&problem.graph, &mut rng);
    let baselines = [Greedy.extract(&problem).unwrap(), DagGreedy.extract(&problem).unwrap()];
    // The loop's optima measured 10% above their predictions on average,
    // 15% at worst: the worst share is charged.
    let optimistic = bind(OptimumError::of(&[(100.0, 105.0), (100.0, 115.0)]));
    let p = &optimistic.predict(std::slice::from_ref(&unmeasured)).unwrap()[0];
    assert!(p.measured.is_none(), "a random extraction was labelled");
    let charge = optimistic.optimum_charge(&unmeasured);
    assert!((charge - 0.15 * p.mean).abs() <= 1e-9 * p.mean.abs(), "charge {charge} for a prediction {}", p.mean);
    // An optimum the oracle measured is judged by that and pays nothing.
    let measured: Vec<_> = baselines
        .iter()
        .filter(|e| optimistic.predict(std::slice::from_ref(e)).unwrap()[0].measured.is_some())
        .collect();
    assert!(!measured.is_empty(), "the loop labels its baselines, and the model keeps those labels");
    for e in measured {
        assert_eq!(optimistic.optimum_charge(e), 0.0);
    }
    // Optima that all measured below their predictions, or no record: no charge.
    assert_eq!(bind(OptimumError::of(&[(100.0, 95.0), (100.0, 99.0)])).optimum_charge(&unmeasured), 0.0);
    assert_eq!(bind(None).optimum_charge(&unmeasured), 0.0);
}

#[test]
fn a_frozen_choice_charges_an_unmeasured_candidate_its_expected_error() {
    use rand::SeedableRng;
    use smoothe::cost::CostModel;
    use smoothe::extract::moves::nudge;
    use smoothe::extract::{DagGreedy, Extractor, Greedy};
    use smoothe::learn::model::objective::LearnedCost;
    use smoothe::learn::model::trust::Conservatism;
    let original = smoothe::load::load_file(Path::new(&repo("datasets/esyn/mul3.json"))).unwrap();
    let problem = smoothe::preprocess::preprocess(&original).unwrap();
    let shipped = Ensemble::load(Path::new(&repo("models/mul3-abc-area.safetensors")), &device()).unwrap();
    assert!(shipped.meta.error_floor > 0.0, "the shipped model keeps its out-of-fold error");
    let bind = |floor: f64| {
        let mut model = shipped.clone();
        model.meta.error_floor = floor;
        LearnedCost::new(model, &problem, &original, Conservatism::FROZEN).unwrap()
    };
    // The baselines, which the loop labelled, and small moves from greedy,
    // most of which it did not.
    let greedy = Greedy.extract(&problem).unwrap();
    let mut candidates = vec![greedy.clone(), DagGreedy.extract(&problem).unwrap()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    candidates.extend((0..40).map(|i| nudge(&problem.graph, &greedy, 1 + i % 4, &mut rng)));
    let cost = bind(shipped.meta.error_floor);
    let preds = cost.predict(&candidates).unwrap();
    let chosen = cost.selection_costs(&candidates);
    let scores = cost.costs_of(&candidates);
    let floor = shipped.meta.error_floor * shipped.meta.target_std;
    let mut unmeasured = 0;
    for ((p, c), s) in preds.iter().zip(&chosen).zip(&scores) {
        match p.measured {
            Some(m) => assert_eq!(*c, m, "a measured candidate is judged by its measurement"),
            None => {
                unmeasured += 1;
                // One expected error (kappa 1): the spread and the floor in
                // quadrature, in place of the spread the score charges.
                assert!((p.error.powi(2) - p.std.powi(2) - floor.powi(2)).abs() <= 1e-6 * p.error.powi(2), "{p:?}");
                let want = p.mean + p.error + cost.charge(p);
                assert!((c - want).abs() <= 1e-6 * want.abs(), "{c} against {want}: {p:?}");
                assert!(*c > s + 0.5 * (p.error - p.std), "choice {c}, score {s}: {p:?}");
            }
        }
    }
    assert!(unmeasured > 0 && unmeasured < candidates.len(), "{unmeasured} unmeasured of {}", candidates.len());
    // A model file without the floor chooses by the score itself.
    let plain = bind(0.0);
    for ((p, c), s) in plain
        .predict(&candidates)
        .unwrap()
        .iter()
        .zip(plain.selection_costs(&candidates))
        .zip(plain.costs_of(&candidates))
    {
        if p.measured.is_none() {
            assert!((c - s).abs() <= 1e-6 * s.abs(), "{c} against the score {s}");
        }
    }
    // Where predictions are far less sure than the members agree, a
    // measured candidate wins the choice whatever the model predicts.
    let wary = bind(100.0);
    let costs = wary.selection_costs(&candidates);
    let best = (0..costs.len()).fold(0, |b, i| if costs[i] < costs[b] { i } else { b });
    assert!(wary.predict(std::slice::from_ref(&candidates[best])).unwrap()[0].measured.is_some(), "{costs:?}");
}

#[test]
fn a_relative_model_measures_its_trust_region_in_the_spread_of_the_designs_own_labels() {
    use smoothe::learn::model::objective::LearnedCost;
    use smoothe::learn::model::trust::Conservatism;
    let original = smoothe::load::load_file(Path::new(&repo("datasets/esyn/mul3.json"))).unwrap();
    let problem = smoothe::preprocess::preprocess(&original).unwrap();
    let load = |path: &str| Ensemble::load(Path::new(&repo(path)), &device()).unwrap();
    let bind = |model: Ensemble| LearnedCost::new(model, &problem, &original, Conservatism::FROZEN).unwrap();
    // The corpus model has labels of mul3: their spread, whatever the
    // spread of relative costs over all six designs (here made five times
    // wider, as a fine-tuned model's can be) scaled to mul3.
    let mut corpus = load("models/esyn-abc-area.safetensors");
    corpus.meta.target_std *= 5.0;
    let labels: Vec<f64> = corpus
        .meta
        .measured
        .iter()
        .filter(|d| d.egraph == original.fingerprint())
        .flat_map(|d| d.rows.iter().map(|r| r.cost))
        .collect();
    assert!(labels.len() > 10, "the shipped corpus model keeps mul3's labels");
    let mean = labels.iter().sum::<f64>() / labels.len() as f64;
    let spread = (labels.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / labels.len() as f64).sqrt();
    let bound = bind(corpus);
    assert!((bound.label_spread() - spread).abs() <= 1e-9 * spread, "{} against {spread}", bound.label_spread());
    assert!(bound.model().meta.target_std > 2.0 * spread, "{}", bound.model().meta.target_std);
    assert_eq!(bound.trust_unit(), bound.label_spread(), "a corpus model has no loop record to loosen it");
    // Without labels of mul3 there is no design spread: the corpus's, scaled.
    let new = bind(load("models/esyn-abc-area-without-mul3.safetensors"));
    assert_eq!(new.label_spread(), new.model().meta.target_std);
    // A model trained on one design keeps the spread it was trained on.
    let own = bind(load("models/mul3-abc-area.safetensors"));
    assert_eq!(own.label_spread(), own.model().meta.target_std);
}

#[test]
fn damaged_model_files_are_refused_with_one_line() {
    let dev = device();
    let good = std::fs::read(repo("models/mul3-abc-area.safetensors")).unwrap();
    let graph = repo("datasets/esyn/mul3.json");
    let dir = fresh_dir("damaged");
    let mut cases: Vec<(&str, Vec<u8>)> = vec![("truncated", good[..good.len() / 2].to_vec())];
    let model = Ensemble::load(Path::new(&repo("models/mul3-abc-area.safetensors")), &dev).unwrap();
    let (_, header) = safetensors::SafeTensors::read_metadata(&good).unwrap();
    // Loading takes the checksum out of the record; edits keep the stored
    // one, so they are refused for what they change, not for lacking it.
    let stored: serde_json::Value = serde_json::from_str(&header.metadata().as_ref().unwrap()["smoothe"]).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&good).unwrap();
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors.tensors();
    // The good file's tensors under its metadata record edited by `edit`.
    let edited = |edit: &dyn Fn(&mut smoothe::learn::model::meta::ModelMeta)| {
        let mut meta = model.meta.clone();
        meta.checksum = stored["checksum"].as_str().unwrap().to_string();
        edit(&mut meta);
        let mut new_meta = header.metadata().clone().unwrap();
        new_meta.insert("smoothe".into(), serde_json::to_string(&meta).unwrap());
        safetensors::serialize(views.clone(), Some(new_meta)).unwrap()
    };
    // A shape that does not chain: a hidden width the weights lack.
    cases.push(("shape", edited(&|m| m.hidden = vec![m.hidden[0], m.hidden[1] + 1])));
    // A transfer margin that is no share of a cost.
    cases.push(("margin", edited(&|m| m.transfer_margin = Some(-0.5))));
    // A measured row that averages no label.
    cases.push((
        "measured",
        edited(&|m| {
            let row = MeasuredRow { extraction: "0".into(), cost: 1.0, labels: 0 };
            m.measured = vec![MeasuredDesign { egraph: "e".into(), rows: vec![row] }];
        }),
    ));
    // Bits flipped inside the weights: still parses, values may go wrong;
    // a NaN must be caught.
    // One bit flipped in the middle of the weights: caught by the checksum.
    let data_start = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut flipped = good.clone();
    flipped[data_start + (good.len() - data_start) / 2] ^= 0x10;
    cases.push(("bitflip", flipped));
    let mut nan = good.clone();
    let n = nan.len();
    nan[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
    cases.push(("nan", nan));
    for (name, bytes) in cases {
        let path = dir.join(format!("{name}.safetensors"));
        std::fs::write(&path, bytes).unwrap();
        let (code, _, stderr) = cli(&["extract", "--model", path.to_str().unwrap(), "-q", &graph]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.contains(path.to_str().unwrap()) && !stderr.contains("panicked"), "{name}: {stderr}");
        let reason = match name {
            "shape" => "layer",
            "margin" => "transfer margin",
            "measured" => "measured costs",
            _ => "",
        };
        assert!(stderr.contains(reason), "{name}: refused for another reason: {stderr}");
    }
}

#[test]
fn a_relative_model_bound_to_a_design_predicts_in_its_units() {
    use smoothe::learn::model::reference::Reference;
    let f = 5;
    let (x, y) = synthetic(3, 150, f, 1.0);
    let test = vec![false; x.len()];
    let dev = device();
    let model = train(&x, &y, &test, layout(f), &TrainConfig::default(), 1, &dev).unwrap();
    // A design whose reference extraction has these features and 40 nodes,
    // and costs 250.
    let reference = Reference {
        extraction: smoothe::extraction::Extraction::empty(0),
        features: vec![10.0, 4.0, 7.0, 1.0, 18.0],
        nodes: 40.0,
    };
    let bound = reference.absolute(&model, 250.0).unwrap();
    // Raw features of the design: the reference plus relative moves.
    let raw: Vec<Vec<f64>> =
        x.iter().take(30).map(|r| r.iter().zip(&reference.features).map(|(d, f0)| f0 + 40.0 * d).collect()).collect();
    let rel: Vec<Vec<f64>> = raw.iter().map(|r| reference.relative_row(r)).collect();
    let (p_rel, p_abs) = (model.predict(&tensor(&rel)).unwrap(), bound.predict(&tensor(&raw)).unwrap());
    for ((m_rel, m_abs), (s_rel, s_abs)) in
        vec32(&p_rel.mean).iter().zip(vec32(&p_abs.mean)).zip(vec32(&p_rel.std).iter().zip(vec32(&p_abs.std)))
    {
        assert!((250.0 * (1.0 + m_rel) - m_abs).abs() < 1e-3 * 250.0, "mean {m_rel} -> {m_abs}");
        assert!((250.0 * s_rel - s_abs).abs() < 1e-3 * 250.0, "std {s_rel} -> {s_abs}");
    }
    for (a, b) in vec32(&p_rel.distance).iter().zip(vec32(&p_abs.distance)) {
        assert!((a - b).abs() < 1e-3 * a.max(1.0), "distance {a} -> {b}");
    }
    // The feature range moves with the features.
    for j in 0..f {
        let expect = reference.features[j] + 40.0 * model.meta.feature_low[j];
        assert!((bound.meta.feature_low[j] - expect).abs() < 1e-9);
    }
    assert!(reference.absolute(&model, 0.0).is_err(), "a zero reference cost cannot scale a relative model");
}

#[test]
fn fine_tuning_adapts_to_new_labels_and_keeps_the_model_with_too_few() {
    use smoothe::learn::model::train::fine_tune;
    let f = 5;
    let dev = device();
    let cfg = TrainConfig::default();
    let (x, y) = synthetic(4, 200, f, 1.0);
    let mut base = train(&x, &y, &vec![false; x.len()], layout(f), &cfg, 1, &dev).unwrap();
    // As if a loop had trained it: the error of its optima there is its
    // own, not the fine-tuned model's.
    base.meta.optimum_error = smoothe::learn::model::meta::OptimumError::of(&[(100.0, 104.0)]);
    assert!(base.meta.optimum_error.is_some());
    // A related design: the same function with one term changed.
    let (x_new, y_new) = synthetic(5, 60, f, -2.0);
    let (x_eval, y_eval) = synthetic(6, 200, f, -2.0);
    let mae = |m: &Ensemble| {
        let p = vec32(&m.predict(&tensor(&x_eval)).unwrap().mean);
        p.iter().zip(&y_eval).map(|(a, b)| (a - b).abs()).sum::<f64>() / p.len() as f64
    };
    let tuned = fine_tune(&base, &x_new, &y_new, &vec![false; x_new.len()], &cfg, 2, &dev).unwrap();
    assert!(mae(&tuned) < 0.7 * mae(&base), "fine-tuned MAE {} against {}", mae(&tuned), mae(&base));
    // It keeps the base normalisation, and its anchors are the new rows
    // alone: the trust region of a tuned model is the tuned design's labels.
    assert_eq!(tuned.meta.input_mean, base.meta.input_mean);
    let standardised = |rows: &[Vec<f64>]| -> Vec<Vec<u32>> {
        let (mu, sd) = (&base.meta.input_mean, &base.meta.input_scale);
        let mut out: Vec<Vec<u32>> = rows
            .iter()
            .map(|r| r.iter().enumerate().map(|(j, x)| (((x - mu[j]) / sd[j]) as f32).to_bits()).collect())
            .collect();
        out.sort();
        out.dedup();
        out
    };
    let anchors = |m: &Ensemble| -> Vec<Vec<u32>> {
        let a: Vec<f32> = m.anchors().flatten_all().unwrap().to_vec1().unwrap();
        let mut out: Vec<Vec<u32>> = a.chunks(f).map(|r| r.iter().map(|v| v.to_bits()).collect()).collect();
        out.sort();
        out
    };
    assert_eq!(anchors(&tuned), standardised(&x_new), "the anchors are not the fine-tuning rows");
    assert_eq!(tuned.meta.optimum_error, None, "the base's optimum error carried over");
    // With fewer labels than folds need, nothing tells fitting from
    // forgetting: the weights stay, and so does the residual term (its
    // weights spread over more anchors, zero on the new ones, so the sums
    // may round differently).
    let few = fine_tune(&base, &x_new[..4], &y_new[..4], &[false; 4], &cfg, 2, &dev).unwrap();
    assert_eq!(anchors(&few).len(), anchors(&base).len() + 4, "an unchanged model keeps its anchors");
    let (a, b) =
        (vec32(&few.predict(&tensor(&x_eval)).unwrap().mean), vec32(&base.predict(&tensor(&x_eval)).unwrap().mean));
    for (a, b) in a.iter().zip(&b) {
        assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{a} against {b}");
    }
}

#[test]
fn the_residual_term_learns_what_the_members_cannot_and_survives_saving() {
    use rand::{Rng, SeedableRng};
    // Clusters of near-equal rows, each cluster with its own offset that no
    // smooth function of the features predicts (a rugged landscape), plus a
    // smooth trend. One row of each cluster is in the test split.
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let f = 4;
    let (mut x, mut y, mut test) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..70 {
        let centre: Vec<f64> = (0..f).map(|_| rng.random_range(0.0..1.0)).collect();
        let offset = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
        for k in 0..3 {
            let row: Vec<f64> = centre.iter().map(|c| c + rng.random_range(-0.002..0.002)).collect();
            y.push(2.0 * row[0] - row[1] + offset);
            x.push(row);
            test.push(k == 0);
        }
    }
    let dev = device();
    let cfg = TrainConfig { members: 3, ..TrainConfig::default() };
    let model = train(&x, &y, &test, layout(f), &cfg, 5, &dev).unwrap();
    assert!(model.meta.residual_length > 0.0, "no residual term fitted");
    // The members alone against the whole model, on the test rows.
    let test_rows: Vec<Vec<f64>> = x.iter().zip(&test).filter(|(_, &t)| t).map(|(r, _)| r.clone()).collect();
    let truth: Vec<f64> = y.iter().zip(&test).filter(|(_, &t)| t).map(|(v, _)| *v).collect();
    let members = model.member_outputs(&model.standardise(&tensor(&test_rows)).unwrap()).unwrap();
    let alone: Vec<f64> =
        vec32(&members.mean(0).unwrap()).iter().map(|v| v * model.meta.target_std + model.meta.target_mean).collect();
    let whole = vec32(&model.predict(&tensor(&test_rows)).unwrap().mean);
    let mae = |p: &[f64]| p.iter().zip(&truth).map(|(a, b)| (a - b).abs()).sum::<f64>() / truth.len() as f64;
    assert!(mae(&whole) < 0.5 * mae(&alone), "with the residual {}, members alone {}", mae(&whole), mae(&alone));
    assert!((model.meta.report.test_mae - mae(&whole)).abs() < 1e-3, "the report measures the whole model");
    // Far from every row the term is gone.
    let far = vec![vec![10.0; f]];
    let members_far = model.member_outputs(&model.standardise(&tensor(&far)).unwrap()).unwrap();
    let alone_far = vec32(&members_far.mean(0).unwrap())[0] * model.meta.target_std + model.meta.target_mean;
    assert!((vec32(&model.predict(&tensor(&far)).unwrap().mean)[0] - alone_far).abs() < 1e-3);
    let path = temp_file("residual.safetensors", "");
    model.save(&path).unwrap();
    let loaded = Ensemble::load(&path, &dev).unwrap();
    assert_eq!(loaded.meta, model.meta);
    assert_eq!(vec32(&loaded.predict(&tensor(&x)).unwrap().mean), vec32(&model.predict(&tensor(&x)).unwrap().mean));
}

#[test]
fn the_error_bar_adds_the_label_noise_the_members_agree_about() {
    use rand::{Rng, SeedableRng};
    use smoothe::normal::standard_normal;
    // A smooth target plus noise that no feature explains: the members
    // agree on the trend, so their spread misses the noise; the
    // out-of-fold error the floor holds does not.
    let f = 4;
    let noise = 0.5;
    let rows = |seed: u64, sigma: f64| -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let x: Vec<Vec<f64>> = (0..300).map(|_| (0..f).map(|_| rng.random_range(0.0..1.0)).collect()).collect();
        let y = x.iter().map(|r| 2.0 * r[0] - r[1] + 0.5 * r[2] + sigma * standard_normal(&mut rng)).collect();
        (x, y)
    };
    let test: Vec<bool> = (0..300).map(|i| i % 4 == 0).collect();
    let dev = device();
    let cfg = TrainConfig::default();
    let (x, y) = rows(21, noise);
    let noisy = train(&x, &y, &test, layout(f), &cfg, 3, &dev).unwrap();
    let (x0, y0) = rows(21, 0.0);
    let clean = train(&x0, &y0, &test, layout(f), &cfg, 3, &dev).unwrap();
    let floor = |m: &Ensemble| m.meta.error_floor * m.meta.target_std;
    // The floor is the noise's size (plus a little misfit), and far above
    // what the same fit leaves without noise.
    assert!(floor(&noisy) > 0.8 * noise && floor(&noisy) < 1.3 * noise, "floor {} for noise {noise}", floor(&noisy));
    assert!(floor(&clean) < 0.3 * floor(&noisy), "floor without noise {}, with {}", floor(&clean), floor(&noisy));
    // The expected error adds the floor to the spread in quadrature.
    let p = noisy.predict(&tensor(&x)).unwrap();
    for s in vec32(&p.std).into_iter().take(20) {
        let e = noisy.prediction_error(s);
        assert!(e >= s && e >= floor(&noisy), "error {e} under spread {s} or floor {}", floor(&noisy));
        assert!((e * e - s * s - floor(&noisy).powi(2)).abs() < 1e-9 * e * e);
    }
    // On the test split, two spreads hold too few noisy labels; two
    // expected errors hold about the share a Gaussian error would (95%).
    let r = &noisy.meta.report;
    assert!(r.test_coverage < 0.7, "two spreads already hold {} of the test labels", r.test_coverage);
    assert!(r.test_error_coverage > 0.85 && r.test_error_coverage >= r.test_coverage, "{r:?}");
    // The floor is kept in the model file.
    let path = temp_file("floor.safetensors", "");
    noisy.save(&path).unwrap();
    let loaded = Ensemble::load(&path, &dev).unwrap();
    assert_eq!(loaded.meta.error_floor, noisy.meta.error_floor);
    assert_eq!(loaded.prediction_error(1.0), noisy.prediction_error(1.0));
}

#[test]
fn format_5_models_read_their_residual_rows_as_one_weight_per_anchor() {
    // A corpus model written by the build that stored the residual term's
    // rows beside its weights (format 5), kept as it was shipped.
    let path = PathBuf::from(repo("tests/data/esyn-without-mul3.format5.safetensors"));
    let dev = device();
    let model = Ensemble::load(&path, &dev).unwrap();
    assert_eq!(model.meta.format, 5);
    let raw = candle_core::safetensors::load(&path, &dev).unwrap();
    let to_vec = |name: &str| -> Vec<f32> { raw[name].flatten_all().unwrap().to_vec1().unwrap() };
    let (rows, weights, anchors) = (to_vec("residual.rows"), to_vec("residual.weights"), to_vec("anchors"));
    let f = model.dim();
    let length = model.meta.residual_length;
    assert!(length > 0.0 && !weights.is_empty());
    // Points at, near and far from the anchors, in standardised units.
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3);
    let mut points: Vec<Vec<f64>> = Vec::new();
    for (i, anchor) in anchors.chunks(f).step_by(37).enumerate() {
        let shift = [0.0, 0.05, 0.5, 3.0][i % 4];
        points.push(anchor.iter().map(|&a| a as f64 + shift * rand::Rng::random_range(&mut rng, -1.0..1.0)).collect());
    }
    // The term as format 5 defined it, from the stored rows.
    let term: Vec<f64> = points
        .iter()
        .map(|p| {
            rows.chunks(f)
                .zip(&weights)
                .map(|(r, &w)| {
                    let d2 = p.iter().zip(r).map(|(x, &y)| (x - y as f64).powi(2)).sum::<f64>() / f as f64;
                    w as f64 * (-d2 / (2.0 * length * length)).exp()
                })
                .sum()
        })
        .collect();
    let m = &model.meta;
    let raw_features: Vec<f32> = points
        .iter()
        .flat_map(|p| p.iter().enumerate().map(|(j, &x)| (x * m.input_scale[j] + m.input_mean[j]) as f32))
        .collect();
    let x = candle_core::Tensor::from_vec(raw_features, (points.len(), f), &dev).unwrap();
    let standardised =
        candle_core::Tensor::from_vec(points.iter().flatten().map(|&v| v as f32).collect(), (points.len(), f), &dev)
            .unwrap();
    let members: Vec<f32> = model.member_outputs(&standardised).unwrap().mean(0).unwrap().to_vec1().unwrap();
    let check = |model: &Ensemble, what: &str| {
        let mean: Vec<f32> = model.predict(&x).unwrap().mean.to_vec1().unwrap();
        for (i, ((&got, &base), &t)) in mean.iter().zip(&members).zip(&term).enumerate() {
            let want = (base as f64 + t) * m.target_std + m.target_mean;
            assert!((got as f64 - want).abs() < 1e-3 * m.target_std, "{what}, point {i}: {got} against {want}");
        }
    };
    check(&model, "as loaded");
    assert!(term.iter().any(|t| t.abs() > 1e-2), "the term matters at some point: {term:?}");
    // Saved again, it is format 6: one weight per anchor, no rows.
    let dir = fresh_dir("format5");
    let again = dir.join("again.safetensors");
    model.save(&again).unwrap();
    let names: Vec<String> = candle_core::safetensors::load(&again, &dev).unwrap().into_keys().collect();
    assert!(names.contains(&"residual.weights".to_string()) && !names.contains(&"residual.rows".to_string()));
    let reloaded = Ensemble::load(&again, &dev).unwrap();
    assert_eq!(reloaded.meta.format, smoothe::learn::model::meta::MODEL_FORMAT);
    check(&reloaded, "saved and reloaded");
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn predict_gives_the_verdict_extract_reported_and_refuses_what_is_not_an_extraction() {
    let graph = repo("datasets/esyn/mul3.json");
    let model = repo("models/mul3-abc-area.safetensors");
    let dir = fresh_dir("predict");
    let frozen = dir.join("frozen.json");
    extract_with_model_checked(&graph, &model, "smoothe", &frozen);
    let greedy = dir.join("greedy.json");
    let (code, _, stderr) = cli(&["extract", "--method", "greedy", "-q", "-o", greedy.to_str().unwrap(), &graph]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) =
        cli(&["predict", "--model", &model, &graph, frozen.to_str().unwrap(), greedy.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with(frozen.to_str().unwrap()) && lines[1].starts_with(greedy.to_str().unwrap()));
    // The same model on the same extraction: the verdict extract wrote.
    let written = parse_json(&std::fs::read_to_string(&frozen).unwrap())["prediction"].clone();
    let mean: f64 = lines[0].split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!((mean - written["mean"].as_f64().unwrap()).abs() < 1e-3, "{} against {written}", lines[0]);
    // `--json`: one object per extraction, with the same verdicts.
    let (code, stdout, stderr) =
        cli(&["predict", "--json", "--model", &model, &graph, frozen.to_str().unwrap(), greedy.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let verdicts: Vec<serde_json::Value> = stdout.lines().map(parse_json).collect();
    assert_eq!(verdicts.len(), 2, "{stdout}");
    assert_eq!(verdicts[1]["extraction"], greedy.to_str().unwrap());
    for key in ["mean", "std", "error", "distance", "outside"] {
        let (a, b) = (verdicts[0][key].as_f64().unwrap(), written[key].as_f64().unwrap());
        assert!((a - b).abs() < 1e-6 * b.abs().max(1.0), "{key}: {a} against {b}");
    }
    assert_eq!(verdicts[0]["features_outside"], written["features_outside"]);
    let score = verdicts[1]["score"].as_f64().unwrap();
    let text_score: f64 = lines[1].split("; score ").nth(1).unwrap().split(';').next().unwrap().parse().unwrap();
    assert!((score - text_score).abs() < 1e-3, "{score} against {}", lines[1]);
    // A file that is not a valid extraction of this e-graph is refused by
    // name and defect, as the user's error it is: no choice at all, and
    // the greedy extraction with a class it needs left out.
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "{}").unwrap();
    let mut choices = parse_json(&std::fs::read_to_string(&greedy).unwrap())["choices"].clone();
    let roots: Vec<String> = parse_json(&std::fs::read_to_string(&graph).unwrap())["root_eclasses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let map = choices.as_object_mut().unwrap();
    let needed = map.keys().find(|c| !roots.contains(c)).unwrap().clone();
    map.remove(&needed);
    let holed = dir.join("holed.json");
    std::fs::write(&holed, serde_json::to_string(&choices).unwrap()).unwrap();
    for (bad, defect) in [(&empty, "has no chosen node"), (&holed, "which has no chosen node")] {
        let (code, _, stderr) = cli(&["predict", "--model", &model, &graph, bad.to_str().unwrap()]);
        assert_ne!(code, 0);
        let name = bad.file_name().unwrap().to_str().unwrap();
        assert!(stderr.contains(&format!("{name}: invalid extraction: ")) && stderr.contains(defect), "{stderr}");
        assert!(!stderr.contains("a bug"), "{stderr}");
    }
}
