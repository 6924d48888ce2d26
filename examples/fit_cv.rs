// Temporary: k-fold CV of model variants on a label log.
use candle_core::{DType, Device, Tensor};
use smoothe::learn::active::dataset;
use smoothe::learn::features::{FeatureKind, Featurizer};
use smoothe::learn::labels::LabelLog;
use smoothe::learn::model::{spearman, train, TrainConfig};
use std::path::Path;

fn main() -> anyhow::Result<()> {
    smoothe::device::tune_allocator();
    let args: Vec<String> = std::env::args().collect();
    let graph = smoothe::load::load_file(Path::new(&args[1]))?;
    let problem = smoothe::preprocess::preprocess(&graph)?;
    let log = LabelLog::open(Path::new(&args[2]))?;
    let l0 = &log.labels()[0];
    let data = dataset(&graph, &problem, &log, &l0.egraph, &l0.oracle)?;
    let kind = match std::env::var("KIND").as_deref() {
        Ok("op") => FeatureKind::OpCounts,
        _ => FeatureKind::Selection,
    };
    let ens: usize = std::env::var("ENS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut cfg = TrainConfig::default();
    if let Ok(h) = std::env::var("HID") {
        cfg.hidden = h.parse()?;
    }
    if let Ok(h) = std::env::var("WD") {
        cfg.weight_decay = h.parse()?;
    }
    if let Ok(h) = std::env::var("LR") {
        cfg.learning_rate = h.parse()?;
    }
    let fz = Featurizer::new(kind, &problem, &graph, None);
    let fz2 = Featurizer::new(FeatureKind::OpCounts, &problem, &graph, None);
    let both = std::env::var("BOTH").is_ok();
    let x: Vec<Vec<f32>> = data
        .iter()
        .map(|(e, _)| {
            let mut v = fz.of_extraction(e);
            if both {
                v.extend(fz2.of_extraction(e));
            }
            v
        })
        .collect();
    let mut layout = fz.layout.clone();
    if both {
        layout.names.extend(fz2.layout.names.clone());
    }
    let dim = layout.names.len();
    let y: Vec<f64> = data.iter().map(|(_, c)| *c).collect();
    let n = x.len();
    let k = 5;
    let dev = Device::Cpu;
    let mut preds = vec![0.0; n];
    for fold in 0..k {
        let test: Vec<usize> = (0..n).filter(|i| i % k == fold).collect();
        let tr: Vec<usize> = (0..n).filter(|i| i % k != fold).collect();
        let xt: Vec<Vec<f32>> = tr.iter().map(|&i| x[i].clone()).collect();
        let yt: Vec<f64> = tr.iter().map(|&i| y[i]).collect();
        let xs: Vec<f32> = test.iter().flat_map(|&i| x[i].iter().copied()).collect();
        let xs = Tensor::from_vec(xs, (test.len(), dim), &dev)?;
        let mut acc = vec![0.0; test.len()];
        for e in 0..ens {
            let (m, _) = train(&xt, &yt, layout.clone(), &cfg, 1 + e as u64 * 7919 + fold as u64, &dev)?;
            let p: Vec<f64> = m.predict(&xs)?.to_dtype(DType::F64)?.to_vec1()?;
            for (a, b) in acc.iter_mut().zip(p) {
                *a += b / ens as f64;
            }
        }
        for (j, &i) in test.iter().enumerate() {
            preds[i] = acc[j];
        }
    }
    println!("{} n={} cv_spearman={:.3}", args[2], n, spearman(&y, &preds));
    Ok(())
}
