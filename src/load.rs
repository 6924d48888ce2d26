//! Reading egraph-serialize JSON into an [`EGraph`].
//!
//! Accepts the variants found in real benchmark files: children written as
//! node ids (the usual form) or as integer class ids (`boole`), `eclass` as a
//! string or a number, a missing or empty `root_eclasses` (roots are then the
//! classes no other class points to, with a warning), `subsumed` nodes
//! (skipped), and fields this tool does not use.

use crate::egraph::{ClassIdx, EGraph, NodeSpec};
use anyhow::{bail, Context, Result};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// An id as written in the file: a string or an integer.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawId {
    Text(String),
    Int(i64),
}

impl RawId {
    fn text(&self) -> String {
        match self {
            RawId::Text(s) => s.clone(),
            RawId::Int(i) => i.to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct RawNode {
    op: String,
    #[serde(default)]
    children: Vec<RawId>,
    eclass: RawId,
    #[serde(deserialize_with = "finite_cost")]
    cost: f64,
    #[serde(default)]
    subsumed: bool,
}

/// A node cost: a finite JSON number (or a numeric string, as some
/// exporters write), refusing NaN and infinities with a message that says so.
fn finite_cost<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(f64),
        Text(String),
    }
    let value = match Raw::deserialize(d)? {
        Raw::Number(x) => x,
        Raw::Text(s) => {
            s.trim().parse::<f64>().map_err(|_| serde::de::Error::custom(format!("cost {s:?} is not a number")))?
        }
    };
    if value.is_finite() {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(format!("cost {value} is not a finite number")))
    }
}

/// The `nodes` object, keeping file order and refusing duplicate ids.
struct OrderedNodes(Vec<(String, RawNode)>);

impl<'de> Deserialize<'de> for OrderedNodes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedNodes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping node ids to nodes")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<OrderedNodes, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, RawNode>()? {
                    out.push((k, v));
                }
                Ok(OrderedNodes(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
struct RawGraph {
    nodes: OrderedNodes,
    #[serde(default)]
    root_eclasses: Option<Vec<RawId>>,
    #[serde(default)]
    inputs: Option<Vec<String>>,
    #[serde(default)]
    outputs: Option<Vec<String>>,
    #[serde(default)]
    circuit_choices: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What an e-graph file made by `smoothe saturate` records beside the
/// graph; every field is `None` in other files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    /// The circuit's primary input names, in order (`"inputs"`).
    pub inputs: Option<Vec<String>>,
    /// The circuit's primary output names, in order (`"outputs"`).
    pub outputs: Option<Vec<String>>,
    /// The input circuit as an extraction, class id to node id
    /// (`"circuit_choices"`, see [`crate::saturate::recorded_circuit`]).
    pub circuit_choices: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Reads and indexes the e-graph in `path` (egraph-serialize JSON,
/// gzip-compressed when the name ends in `.gz`); errors name the file, and
/// warnings (such as inferred roots) go to the `log` facade, naming it.
pub fn load_file(path: &Path) -> Result<EGraph> {
    load_file_recorded(path).map(|(graph, _)| graph)
}

/// [`load_file`], and what the file records beside the graph, from one
/// parse of its text.
pub fn load_file_recorded(path: &Path) -> Result<(EGraph, Recorded)> {
    let (graph, warnings, recorded) = parse(&read_text(path)?).with_context(|| format!("{}", path.display()))?;
    for w in warnings {
        log::warn!("{}: {w}", path.display());
    }
    Ok((graph, recorded))
}

/// The text of `path`, decompressed when its name ends in `.gz` (gzip).
/// Errors name the file.
pub fn read_text(path: &Path) -> Result<String> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut text = String::new();
    let gzip = path.extension().is_some_and(|e| e == "gz");
    let read = if gzip {
        std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file)), &mut text)
    } else {
        std::io::Read::read_to_string(&mut std::io::BufReader::new(file), &mut text)
    };
    read.with_context(|| {
        let what = if gzip { "gzip-compressed UTF-8 text" } else { "UTF-8 text" };
        format!("cannot read {} as {what}", path.display())
    })?;
    Ok(text)
}

/// Parses egraph-serialize JSON text. Warnings (such as inferred roots) go
/// to the `log` facade.
pub fn parse_str(text: &str) -> Result<EGraph> {
    parse_str_recorded(text).map(|(graph, _)| graph)
}

/// [`parse_str`], and what the text records beside the graph.
pub fn parse_str_recorded(text: &str) -> Result<(EGraph, Recorded)> {
    let (graph, warnings, recorded) = parse(text)?;
    for w in warnings {
        log::warn!("{w}");
    }
    Ok((graph, recorded))
}

/// Parses egraph-serialize JSON text, returning the warnings instead of
/// printing them.
pub fn parse_with_warnings(text: &str) -> Result<(EGraph, Vec<String>)> {
    parse(text).map(|(graph, warnings, _)| (graph, warnings))
}

fn parse(text: &str) -> Result<(EGraph, Vec<String>, Recorded)> {
    let raw: RawGraph = serde_json::from_str(text).context("invalid e-graph JSON")?;
    let recorded = Recorded { inputs: raw.inputs, outputs: raw.outputs, circuit_choices: raw.circuit_choices };
    let mut warnings = Vec::new();
    if raw.nodes.0.is_empty() {
        bail!("the e-graph has no nodes");
    }
    // Classes in order of first appearance, and every node's class
    // (subsumed nodes included, since a child may name one).
    let mut class_index: HashMap<String, ClassIdx> = HashMap::new();
    let mut class_names: Vec<String> = Vec::new();
    let mut node_class: HashMap<&str, ClassIdx> = HashMap::with_capacity(raw.nodes.0.len());
    for (id, node) in &raw.nodes.0 {
        let name = node.eclass.text();
        let next = ClassIdx::new(class_names.len());
        let c = *class_index.entry(name.clone()).or_insert_with(|| {
            class_names.push(name);
            next
        });
        if node_class.insert(id.as_str(), c).is_some() {
            bail!("node id {id:?} appears twice");
        }
    }
    let mut specs = Vec::with_capacity(raw.nodes.0.len());
    let mut class_has_live_node = vec![false; class_names.len()];
    for (id, node) in &raw.nodes.0 {
        if node.subsumed {
            continue;
        }
        let mut children = Vec::with_capacity(node.children.len());
        for child in &node.children {
            let c = match child {
                RawId::Text(s) => node_class.get(s.as_str()).copied().or_else(|| class_index.get(s).copied()),
                RawId::Int(i) => class_index.get(&i.to_string()).copied(),
            };
            match c {
                Some(c) => children.push(c),
                None => bail!("node {id:?}: child {:?} names no node or class", child.text()),
            }
        }
        if !node.cost.is_finite() {
            bail!("node {id:?}: cost {} is not a finite number", node.cost);
        }
        let class = node_class[id.as_str()];
        class_has_live_node[class.index()] = true;
        specs.push(NodeSpec { name: id.clone(), op: node.op.clone(), cost: node.cost, class, children });
    }
    if specs.is_empty() {
        bail!("the e-graph has no nodes that are not subsumed");
    }
    for s in &specs {
        if let Some(&c) = s.children.iter().find(|&&c| !class_has_live_node[c.index()]) {
            bail!("node {:?}: child class {:?} has only subsumed nodes", s.name, class_names[c.index()]);
        }
    }
    let roots: Vec<ClassIdx> = match raw.root_eclasses.as_deref() {
        Some(list) if !list.is_empty() => {
            let mut roots = Vec::with_capacity(list.len());
            for r in list {
                match class_index.get(&r.text()) {
                    Some(&c) if class_has_live_node[c.index()] => roots.push(c),
                    Some(_) => bail!("root class {:?} has only subsumed nodes", r.text()),
                    None => bail!("root class {:?} names no class in the e-graph", r.text()),
                }
            }
            roots
        }
        _ => {
            let mut pointed = vec![false; class_names.len()];
            for s in &specs {
                for &c in &s.children {
                    if c != s.class {
                        pointed[c.index()] = true;
                    }
                }
            }
            let roots: Vec<ClassIdx> = ClassIdx::range(class_names.len())
                .filter(|&c| class_has_live_node[c.index()] && !pointed[c.index()])
                .collect();
            if roots.is_empty() {
                bail!("no root_eclasses given, and every class has a parent, so no root can be inferred");
            }
            warnings.push(format!(
                "no root_eclasses given; using the {} class(es) that no other class points to",
                roots.len()
            ));
            roots
        }
    };
    Ok((EGraph::new(class_names, specs, roots)?, warnings, recorded))
}
