//! An extraction (one chosen node per needed class), its validity check,
//! its costs, and its JSON form.
//!
//! This is the one checker every extractor's output goes through; no
//! algorithm re-implements it.

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A choice of node per class (`None`: class not picked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extraction {
    /// Chosen node of each class, indexed by class.
    pub choices: Vec<Option<NodeIdx>>,
}

/// Hashes the choices as bytes, 64 classes per write: the searches keep
/// sets of every extraction they judged, and a derived impl (a tag and a
/// value per class, each its own write) made hashing a few per cent of a
/// learned-cost loop. Equal extractions write equal bytes.
impl Hash for Extraction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut bytes = [0u8; 256];
        for chunk in self.choices.chunks(64) {
            for (slot, choice) in bytes.chunks_exact_mut(4).zip(chunk) {
                slot.copy_from_slice(&choice.map_or(u32::MAX, NodeIdx::raw).to_le_bytes());
            }
            state.write(&bytes[..4 * chunk.len()]);
        }
        state.write_usize(self.choices.len());
    }
}

/// Why an extraction is not valid. Names are original ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Defect {
    /// A root class has no chosen node.
    RootMissing(String),
    /// A class's chosen node belongs to another class.
    WrongClass {
        /// The class.
        class: String,
        /// The node chosen for it.
        node: String,
    },
    /// A picked node needs a child class that has no chosen node.
    ChildMissing {
        /// The chosen node.
        node: String,
        /// Its child class without a choice.
        child_class: String,
    },
    /// Following chosen nodes returns to a class on the path.
    Cycle(Vec<String>),
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Defect::RootMissing(c) => write!(f, "root class {c:?} has no chosen node"),
            Defect::WrongClass { class, node } => {
                write!(f, "class {class:?} chooses node {node:?}, which belongs to another class")
            }
            Defect::ChildMissing { node, child_class } => {
                write!(f, "node {node:?} needs class {child_class:?}, which has no chosen node")
            }
            Defect::Cycle(path) => write!(f, "cycle through classes {}", path.join(" -> ")),
        }
    }
}

impl std::error::Error for Defect {}

impl Extraction {
    /// An extraction with no class picked.
    pub fn empty(num_classes: usize) -> Self {
        Extraction { choices: vec![None; num_classes] }
    }

    /// The classes reachable from the roots through chosen nodes, children
    /// before parents; or the first defect found. An `Ok` means the
    /// extraction is valid: roots picked, chosen nodes in their classes,
    /// complete and acyclic.
    pub fn check(&self, g: &EGraph) -> std::result::Result<Vec<ClassIdx>, Defect> {
        let nc = g.num_classes();
        if self.choices.len() != nc {
            return Err(Defect::RootMissing(format!("(extraction has {} classes, e-graph {nc})", self.choices.len())));
        }
        walk_choices(
            g,
            &self.choices,
            |parent, class| {
                Err(match parent {
                    None => Defect::RootMissing(g.class_name(class).into()),
                    Some(node) => {
                        Defect::ChildMissing { node: g.node_name(node).into(), child_class: g.class_name(class).into() }
                    }
                })
            },
            |cycle| Err(Defect::Cycle(cycle.iter().chain(&cycle[..1]).map(|&c| g.class_name(c).to_string()).collect())),
        )
    }

    /// Whether [`Extraction::check`] finds no defect.
    pub fn is_valid(&self, g: &EGraph) -> bool {
        self.check(g).is_ok()
    }

    /// DAG cost: each class reachable from the roots counted once. Errors
    /// with the defect when the extraction is invalid.
    pub fn dag_cost(&self, g: &EGraph) -> std::result::Result<f64, Defect> {
        let order = self.check(g)?;
        Ok(order.iter().map(|&c| g.cost(self.choices[c.index()].expect("checked"))).sum())
    }

    /// Tree cost: a shared class counted once per use. Errors with the
    /// defect when the extraction is invalid.
    pub fn tree_cost(&self, g: &EGraph) -> std::result::Result<f64, Defect> {
        let order = self.check(g)?;
        let mut cost = vec![0.0f64; g.num_classes()];
        for &c in &order {
            let n = self.choices[c.index()].expect("checked");
            cost[c.index()] = g.cost(n) + g.children(n).iter().map(|&k| cost[k.index()]).sum::<f64>();
        }
        Ok(g.roots().iter().map(|&r| cost[r.index()]).sum())
    }

    /// Keeps only the choices of classes reachable from the roots.
    /// Assumes a valid extraction.
    pub fn restricted_to_reachable(&self, g: &EGraph) -> Result<Extraction> {
        Ok(only_classes(&self.choices, self.check(g)?))
    }
}

/// `choices` kept for the classes in `order` only.
fn only_classes(choices: &[Option<NodeIdx>], order: Vec<ClassIdx>) -> Extraction {
    let mut out = Extraction::empty(choices.len());
    for c in order {
        out.choices[c.index()] = choices[c.index()];
    }
    out
}

/// `choices` (one per class of `g`) restricted to the classes reachable
/// from the roots, if they are a valid extraction; `None` otherwise.
/// [`Extraction::restricted_to_reachable`] without the copy in and the
/// defect out, which name the classes: for hot paths that only need to know.
pub(crate) fn restricted_if_valid(g: &EGraph, choices: &[Option<NodeIdx>]) -> Option<Extraction> {
    // Any defect stops the walk; which one is never read.
    let stop = || Err(Defect::Cycle(Vec::new()));
    walk_choices(g, choices, |_, _| stop(), |_| stop()).ok().map(|order| only_classes(choices, order))
}

/// An extraction of an *original* e-graph (as loaded, before
/// preprocessing), in its ids: what result files, oracles and users see.
/// Extractors work on the preprocessed graph with plain [`Extraction`]s,
/// and [`crate::preprocess::Reduced`] converts between the two, so handing
/// one where the other belongs does not compile.
///
/// ```
/// use smoothe::extract::{DagGreedy, Extractor};
/// let json = r#"{"nodes": {
///     "x": {"op": "x", "children": [], "eclass": "a", "cost": 1.0},
///     "f": {"op": "f", "children": ["x"], "eclass": "r", "cost": 1.0}},
///   "root_eclasses": ["r"]}"#;
/// let graph = smoothe::load::parse_str(json).unwrap();
/// let problem = smoothe::preprocess::preprocess(&graph).unwrap();
/// let reduced = DagGreedy.extract(&problem).unwrap();
/// let original = problem.to_original(&reduced);
/// assert_eq!(original.dag_cost(&graph), Ok(2.0));
/// assert_eq!(problem.from_original(&original), Some(reduced));
/// ```
///
/// whereas a reduced extraction handed where an original one belongs is
/// refused by the compiler:
///
/// ```compile_fail
/// use smoothe::extract::{DagGreedy, Extractor};
/// let json = r#"{"nodes": {"x": {"op": "x", "children": [], "eclass": "a", "cost": 1.0}},
///   "root_eclasses": ["a"]}"#;
/// let graph = smoothe::load::parse_str(json).unwrap();
/// let problem = smoothe::preprocess::preprocess(&graph).unwrap();
/// let reduced = DagGreedy.extract(&problem).unwrap();
/// problem.from_original(&reduced);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OriginalExtraction(Extraction);

impl OriginalExtraction {
    /// Declares `extraction` to be of an original e-graph (one loaded from
    /// a file, not a preprocessed one).
    pub fn of_original(extraction: Extraction) -> Self {
        OriginalExtraction(extraction)
    }

    /// The plain extraction, for algorithms that work on any graph.
    pub fn as_extraction(&self) -> &Extraction {
        &self.0
    }

    /// Chosen node of each class, indexed by class.
    pub fn choices(&self) -> &[Option<NodeIdx>] {
        &self.0.choices
    }

    /// See [`Extraction::check`].
    pub fn check(&self, g: &EGraph) -> std::result::Result<Vec<ClassIdx>, Defect> {
        self.0.check(g)
    }

    /// See [`Extraction::dag_cost`].
    pub fn dag_cost(&self, g: &EGraph) -> std::result::Result<f64, Defect> {
        self.0.dag_cost(g)
    }

    /// See [`Extraction::tree_cost`].
    pub fn tree_cost(&self, g: &EGraph) -> std::result::Result<f64, Defect> {
        self.0.tree_cost(g)
    }

    /// See [`Extraction::restricted_to_reachable`].
    pub fn restricted_to_reachable(&self, g: &EGraph) -> Result<OriginalExtraction> {
        Ok(OriginalExtraction(self.0.restricted_to_reachable(g)?))
    }

    /// The `"choices"` object: original class id -> original node id, for
    /// the classes reachable from the roots (sorted by class id).
    pub fn choices_json(&self, g: &EGraph) -> Result<Value> {
        let mut entries: Vec<(String, String)> = self
            .0
            .check(g)?
            .into_iter()
            .map(|c| {
                (g.class_name(c).to_string(), g.node_name(self.0.choices[c.index()].expect("checked")).to_string())
            })
            .collect();
        entries.sort();
        let mut map = Map::new();
        for (c, n) in entries {
            map.insert(c, Value::String(n));
        }
        Ok(Value::Object(map))
    }

    /// The result object written by `smoothe extract`: `choices`,
    /// `dag_cost`, `tree_cost`, `method`, `seconds`, plus the fields of
    /// `extra` (an object).
    pub fn result_json(&self, g: &EGraph, method: &str, seconds: f64, extra: Value) -> Result<Value> {
        let mut out = json!({
            "method": method,
            "dag_cost": self.0.dag_cost(g)?,
            "tree_cost": self.0.tree_cost(g)?,
            "seconds": seconds,
            "choices": self.choices_json(g)?,
        });
        if let (Value::Object(o), Value::Object(e)) = (&mut out, extra) {
            o.extend(e);
        }
        Ok(out)
    }

    /// Reads an extraction of `g` from JSON: an object with a `"choices"`
    /// map, or a bare class id -> node id map. Errors name the unknown id.
    pub fn from_json(g: &EGraph, value: &Value) -> Result<OriginalExtraction> {
        let map = match value.get("choices") {
            Some(Value::Object(m)) => m,
            Some(_) => bail!("\"choices\" is not an object"),
            None => value.as_object().ok_or_else(|| anyhow!("expected a JSON object of class id -> node id"))?,
        };
        let class_index: HashMap<&str, ClassIdx> = g.classes().map(|c| (g.class_name(c), c)).collect();
        let node_index: HashMap<&str, NodeIdx> = g.nodes().map(|n| (g.node_name(n), n)).collect();
        let mut out = Extraction::empty(g.num_classes());
        for (class, node) in map {
            let node = match node {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => bail!("class {class:?}: node id must be a string, got {other}"),
            };
            let c = *class_index.get(class.as_str()).ok_or_else(|| anyhow!("class {class:?} is not in the e-graph"))?;
            let n = *node_index
                .get(node.as_str())
                .ok_or_else(|| anyhow!("class {class:?}: node {node:?} is not in the e-graph (or is subsumed)"))?;
            out.choices[c.index()] = Some(n);
        }
        Ok(OriginalExtraction(out))
    }

    /// Reads an extraction file (see [`OriginalExtraction::from_json`]).
    pub fn load_file(g: &EGraph, path: &std::path::Path) -> Result<OriginalExtraction> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let value: Value = serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))?;
        OriginalExtraction::from_json(g, &value).with_context(|| format!("{}", path.display()))
    }

    /// Reads an extraction file as [`OriginalExtraction::load_file`] does
    /// and checks it against `g`: an invalid one is an error naming the
    /// file and the defect, for commands that measure, judge or export a
    /// user's extraction.
    pub fn load_valid_file(g: &EGraph, path: &std::path::Path) -> Result<OriginalExtraction> {
        let ex = OriginalExtraction::load_file(g, path)?;
        if let Err(defect) = ex.check(g) {
            bail!("{}: invalid extraction: {defect}", path.display());
        }
        Ok(ex)
    }
}

/// Depth-first walk over `choices` from the roots of `g`, the one traversal
/// behind [`Extraction::check`] and the cycle finder SmoothE's decoder uses.
/// `missing(parent, class)` is called for a needed class with no choice
/// (`parent` is `None` for a root) and `cycle(classes)` for an edge back to
/// a class on the current path (the cycle's classes in order); either may
/// stop the walk with an error or let it go on past that class. A chosen
/// node outside its class is always an error. Returns the classes reached,
/// children before parents.
pub(crate) fn walk_choices(
    g: &EGraph,
    choices: &[Option<NodeIdx>],
    mut missing: impl FnMut(Option<NodeIdx>, ClassIdx) -> std::result::Result<(), Defect>,
    mut cycle: impl FnMut(&[ClassIdx]) -> std::result::Result<(), Defect>,
) -> std::result::Result<Vec<ClassIdx>, Defect> {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; g.num_classes()];
    let mut order = Vec::new();
    let mut frames: Vec<(ClassIdx, usize)> = Vec::new();
    let mut path: Vec<ClassIdx> = Vec::new();
    let wrong_class = |class: ClassIdx, node: NodeIdx| Defect::WrongClass {
        class: g.class_name(class).into(),
        node: g.node_name(node).into(),
    };
    for &root in g.roots() {
        if state[root.index()] != NEW {
            continue;
        }
        let Some(node) = choices[root.index()] else {
            missing(None, root)?;
            continue;
        };
        if g.class_of(node) != root {
            return Err(wrong_class(root, node));
        }
        state[root.index()] = ON_PATH;
        frames.push((root, 0));
        while let Some(&(c, pos)) = frames.last() {
            let node = choices[c.index()].expect("classes on the path are chosen");
            let kids = g.children(node);
            if pos == kids.len() {
                state[c.index()] = DONE;
                order.push(c);
                frames.pop();
                continue;
            }
            if let Some(top) = frames.last_mut() {
                top.1 += 1;
            }
            let k = kids[pos];
            match state[k.index()] {
                DONE => {}
                ON_PATH => {
                    let from = frames.iter().position(|&(f, _)| f == k).unwrap_or(0);
                    path.clear();
                    path.extend(frames[from..].iter().map(|&(f, _)| f));
                    cycle(&path)?;
                }
                _ => {
                    let Some(kn) = choices[k.index()] else {
                        missing(Some(node), k)?;
                        continue;
                    };
                    if g.class_of(kn) != k {
                        return Err(wrong_class(k, kn));
                    }
                    state[k.index()] = ON_PATH;
                    frames.push((k, 0));
                }
            }
        }
    }
    Ok(order)
}
