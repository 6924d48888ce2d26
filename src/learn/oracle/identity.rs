//! An extraction's identity and the file an oracle receives: a canonical
//! hash of the choices, so a label is found again whatever the file's key
//! order, and the self-contained description of the chosen nodes.

use crate::egraph::EGraph;
use crate::extraction::{Extraction, OriginalExtraction};
use anyhow::Result;
use serde_json::{json, Value};

use crate::egraph::hash_hex;

/// Canonical hash of a valid extraction of `g`: the sorted (class id,
/// node id) pairs of the classes reachable from the roots, in original ids.
pub fn extraction_key(g: &EGraph, extraction: &OriginalExtraction) -> Result<String> {
    choices_key(g, extraction.as_extraction())
}

/// Canonical hash of a valid extraction of any graph `g` (the original or
/// a preprocessed one): the sorted (class name, node name) pairs of the
/// classes reachable from the roots.
pub fn choices_key(g: &EGraph, extraction: &Extraction) -> Result<String> {
    let mut pairs: Vec<(String, String)> = extraction
        .check(g)?
        .into_iter()
        .map(|c| {
            (g.class_name(c).to_string(), g.node_name(extraction.choices[c.index()].expect("checked")).to_string())
        })
        .collect();
    pairs.sort();
    let mut bytes = Vec::new();
    for (c, n) in pairs {
        bytes.extend_from_slice(c.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(n.as_bytes());
        bytes.push(1);
    }
    Ok(hash_hex(&bytes))
}

/// The file an oracle receives: the `choices` map that `smoothe extract`
/// writes, plus the chosen nodes in children-first order, each with its
/// class and node ids, operator, cost and `children` as indices into that
/// same list, and `roots` as indices too. A script can write a netlist from
/// it without reading the e-graph.
pub fn oracle_file(g: &EGraph, extraction: &OriginalExtraction) -> Result<Value> {
    let order = extraction.check(g)?;
    let mut position = vec![usize::MAX; g.num_classes()];
    for (i, &c) in order.iter().enumerate() {
        position[c.index()] = i;
    }
    let nodes: Vec<Value> = order
        .iter()
        .map(|&c| {
            let n = extraction.choices()[c.index()].expect("checked");
            json!({
                "class": g.class_name(c),
                "node": g.node_name(n),
                "op": g.op(n),
                "cost": g.cost(n),
                "children": g.children(n).iter().map(|&k| position[k.index()]).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(json!({
        "egraph_fingerprint": g.fingerprint(),
        "choices": extraction.choices_json(g)?,
        "nodes": nodes,
        "roots": g.roots().iter().map(|&r| position[r.index()]).collect::<Vec<_>>(),
    }))
}
