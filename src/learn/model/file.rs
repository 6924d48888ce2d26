//! The model file: weights, anchors and residual term as safetensors
//! tensors, the [`ModelMeta`] record as JSON in the header, and a checksum
//! of the tensor data so that a damaged file is refused. Files of older
//! formats are read where their layout allows.

use crate::learn::model::meta::{ModelMeta, FORMAT, META_KEY};
use crate::learn::model::network::{Ensemble, Mlp};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use candle_nn::Linear;
use std::collections::HashMap;
use std::path::Path;

impl Ensemble {
    /// Writes weights and metadata to one safetensors file.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut tensors: Vec<(String, Vec<u8>, Vec<usize>)> = Vec::new();
        for (k, layers) in self.members.iter().map(Mlp::layers).enumerate() {
            for (i, layer) in layers.iter().enumerate() {
                for (what, t) in [("weight", Some(layer.weight())), ("bias", layer.bias())] {
                    let Some(t) = t else { continue };
                    let v: Vec<f32> = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
                    tensors.push((
                        format!("member{k}.layer{i}.{what}"),
                        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                        t.dims().to_vec(),
                    ));
                }
            }
        }
        let a: Vec<f32> = self.anchors.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
        tensors.push((
            "anchors".into(),
            a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            self.anchors.dims().to_vec(),
        ));
        if let Some(weights) = &self.residual {
            let v: Vec<f32> = weights.to_dtype(DType::F32)?.to_vec1()?;
            tensors.push((
                "residual.weights".into(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                weights.dims().to_vec(),
            ));
        }
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        let mut meta = self.meta.clone();
        // Whatever it was loaded from, it is written in this build's layout.
        meta.format = FORMAT;
        meta.checksum = checksum(tensors.iter().map(|(name, bytes, _)| (name.as_str(), bytes.as_slice())));
        let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
            .iter()
            .map(|(k, bytes, shape)| {
                Ok((k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)?))
            })
            .collect::<Result<_>>()?;
        let meta = HashMap::from([(META_KEY.to_string(), serde_json::to_string(&meta)?)]);
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        let bytes = safetensors::serialize(views, Some(meta))?;
        let tmp = path.with_extension("safetensors.tmp");
        std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// Reads a model written by [`Ensemble::save`], checking every shape,
    /// normalisation vector and weight. Errors name the file.
    pub fn load(path: &Path, device: &Device) -> Result<Ensemble> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_bytes(&bytes, device).with_context(|| format!("{}: not a usable smoothe model", path.display()))
    }

    fn from_bytes(bytes: &[u8], device: &Device) -> Result<Ensemble> {
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes).context("not a safetensors file")?;
        let meta_json =
            header.metadata().as_ref().and_then(|m| m.get(META_KEY)).context("no smoothe metadata record")?;
        let mut meta: ModelMeta = serde_json::from_str(meta_json).context("bad smoothe metadata record")?;
        let raw = safetensors::SafeTensors::deserialize(bytes).context("cannot read the tensors")?;
        let mut names: Vec<String> = raw.names().into_iter().map(String::from).collect();
        names.sort();
        let stored = std::mem::take(&mut meta.checksum);
        let mut ordered: Vec<(String, Vec<u8>)> = Vec::new();
        for name in &names {
            ordered.push((name.clone(), raw.tensor(name)?.data().to_vec()));
        }
        if stored.is_empty() {
            bail!("no checksum in the metadata record (not written by this version of smoothe); retrain it");
        }
        if checksum(ordered.iter().map(|(n, b)| (n.as_str(), b.as_slice()))) != stored {
            bail!("checksum mismatch: the weights were damaged after saving");
        }
        let tensors = candle_core::safetensors::load_buffer(bytes, device).context("cannot read the tensors")?;
        let mut members = Vec::new();
        for k in 0..meta.members {
            let mut layers = Vec::new();
            for i in 0..=meta.hidden.len() {
                let get = |what: &str| {
                    tensors
                        .get(&format!("member{k}.layer{i}.{what}"))
                        .cloned()
                        .with_context(|| format!("missing tensor member{k}.layer{i}.{what}"))
                };
                layers.push(Linear::new(get("weight")?, Some(get("bias")?)));
            }
            members.push(Mlp::from_layers(layers));
        }
        let anchors = tensors.get("anchors").cloned().context("missing tensor anchors")?;
        let mut e = Ensemble { members, anchors, residual: None, meta };
        e.residual = match (tensors.get("residual.rows"), tensors.get("residual.weights")) {
            // Format 5 stored the fitted rows beside their weights.
            (Some(rows), Some(weights)) if e.meta.format == 5 => {
                Some(e.weights_per_anchor(&rows.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?, &weights.to_vec1()?)?)
            }
            (None, Some(weights)) if e.meta.format > 5 => Some(weights.clone()),
            (None, None) => None,
            _ => bail!("the residual term's tensors do not match format {}", e.meta.format),
        };
        e.validate()?;
        Ok(e)
    }
}

/// Hash of named tensor data (sorted by name), in the order given.
fn checksum<'a>(tensors: impl Iterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut all = Vec::new();
    for (name, bytes) in tensors {
        all.extend_from_slice(name.as_bytes());
        all.push(0);
        all.extend_from_slice(bytes);
    }
    crate::egraph::hash_hex(&all)
}
