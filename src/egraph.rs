//! The dense, index-based e-graph every algorithm works on.
//!
//! Nodes and classes are numbered `0..n`; children are stored as *class*
//! indices in one CSR array, and each class lists its nodes in another.
//! String ids from the input file are kept only for output.
//!
//! Node and class indices are distinct types, [`NodeIdx`] and [`ClassIdx`]:
//!
//! ```
//! let json = r#"{"nodes": {
//!     "x": {"op": "x", "children": [], "eclass": "a", "cost": 1.0},
//!     "f": {"op": "f", "children": ["x"], "eclass": "r", "cost": 2.0}},
//!   "root_eclasses": ["r"]}"#;
//! let g = smoothe::load::parse_str(json).unwrap();
//! let root = g.roots()[0];
//! let f = g.class_nodes(root)[0];
//! assert_eq!((g.op(f), g.cost(f)), ("f", 2.0));
//! assert_eq!(g.class_name(g.children(f)[0]), "a");
//! ```
//!
//! so asking for the children of a class, rather than of a node, does not
//! compile:
//!
//! ```compile_fail
//! # let json = r#"{"nodes": {"x": {"op": "x", "children": [], "eclass": "a", "cost": 1.0}},
//! #   "root_eclasses": ["a"]}"#;
//! let g = smoothe::load::parse_str(json).unwrap();
//! g.children(g.roots()[0]);
//! ```

use anyhow::{bail, Result};

/// Defines a dense `u32` index newtype: cheap to copy, ordered, and
/// impossible to pass where the other kind of index is expected.
macro_rules! dense_index {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[repr(transparent)]
        pub struct $name(u32);

        impl $name {
            /// The index with number `i`. Assumes `i` fits in a `u32`, as
            /// every index of a loaded e-graph does.
            #[inline]
            pub fn new(i: usize) -> Self {
                debug_assert!(i <= u32::MAX as usize, "index {i} does not fit in u32");
                $name(i as u32)
            }
            /// The index with raw number `i`.
            #[inline]
            pub const fn from_raw(i: u32) -> Self {
                $name(i)
            }
            /// The index as a position in a `Vec` or slice.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
            /// The raw number (for tensors and hashing).
            #[inline]
            pub const fn raw(self) -> u32 {
                self.0
            }
            /// The indices `0..n`.
            pub fn range(n: usize) -> impl DoubleEndedIterator<Item = $name> + ExactSizeIterator + Clone {
                (0..n as u32).map($name)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

dense_index!(
    /// Dense index of an e-node in one [`EGraph`] (printed `n5`).
    NodeIdx,
    "n"
);
dense_index!(
    /// Dense index of an e-class in one [`EGraph`] (printed `c5`).
    ClassIdx,
    "c"
);

/// One e-node as handed to [`EGraph::new`]: the input form before indexing.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Original node id (for output).
    pub name: String,
    /// Operator symbol.
    pub op: String,
    /// Cost of choosing this node (finite; may be negative).
    pub cost: f64,
    /// Dense class this node belongs to.
    pub class: ClassIdx,
    /// Child classes in operand order (duplicates allowed).
    pub children: Vec<ClassIdx>,
}

/// An e-graph in compressed sparse row form.
///
/// Invariants (checked by [`EGraph::new`]): every node's class and children
/// are valid class indices, every cost is finite, every root is a valid
/// class, and there is at least one root.
#[derive(Debug, Clone)]
pub struct EGraph {
    node_names: Vec<String>,
    node_ops: Vec<String>,
    node_cost: Vec<f64>,
    node_class: Vec<ClassIdx>,
    child_start: Vec<u32>,
    child_classes: Vec<ClassIdx>,
    class_names: Vec<String>,
    class_node_start: Vec<u32>,
    class_nodes: Vec<NodeIdx>,
    parent_start: Vec<u32>,
    parent_nodes: Vec<NodeIdx>,
    roots: Vec<ClassIdx>,
}

/// Builds CSR offsets and items from `(key, item)` pairs with keys `< n`,
/// keeping the items of each key in input order.
pub(crate) fn csr_from_pairs<T: Copy + Default>(
    n: usize,
    pairs: impl Iterator<Item = (usize, T)> + Clone,
) -> (Vec<u32>, Vec<T>) {
    let mut start = vec![0u32; n + 1];
    for (k, _) in pairs.clone() {
        start[k + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut items = vec![T::default(); start[n] as usize];
    for (k, v) in pairs {
        items[fill[k] as usize] = v;
        fill[k] += 1;
    }
    (start, items)
}

impl EGraph {
    /// Indexes `nodes` over classes named `class_names`, with the given roots.
    ///
    /// Errors when a class or child index is out of range, a cost is not
    /// finite, a root is out of range, or there are no roots.
    pub fn new(class_names: Vec<String>, nodes: Vec<NodeSpec>, roots: Vec<ClassIdx>) -> Result<Self> {
        let num_classes = class_names.len();
        if roots.is_empty() {
            bail!("the e-graph has no root class");
        }
        for &r in &roots {
            if r.index() >= num_classes {
                bail!("root class index {r} is out of range ({num_classes} classes)");
            }
        }
        let mut roots = roots;
        let mut seen = vec![false; num_classes];
        roots.retain(|&r| !std::mem::replace(&mut seen[r.index()], true));
        for n in &nodes {
            if !n.cost.is_finite() {
                bail!("node {}: cost {} is not a finite number", n.name, n.cost);
            }
            if n.class.index() >= num_classes {
                bail!("node {}: class index {} is out of range", n.name, n.class);
            }
            if let Some(&c) = n.children.iter().find(|&&c| c.index() >= num_classes) {
                bail!("node {}: child class index {c} is out of range", n.name);
            }
        }
        let mut child_start = Vec::with_capacity(nodes.len() + 1);
        child_start.push(0u32);
        let mut child_classes = Vec::new();
        for n in &nodes {
            child_classes.extend_from_slice(&n.children);
            child_start.push(child_classes.len() as u32);
        }
        let (class_node_start, class_nodes) =
            csr_from_pairs(num_classes, nodes.iter().enumerate().map(|(i, n)| (n.class.index(), NodeIdx::new(i))));
        let (parent_start, parent_nodes) = {
            let mut pairs = Vec::with_capacity(child_classes.len());
            for (i, n) in nodes.iter().enumerate() {
                let mut kids = n.children.clone();
                kids.sort_unstable();
                kids.dedup();
                pairs.extend(kids.into_iter().map(|c| (c.index(), NodeIdx::new(i))));
            }
            csr_from_pairs(num_classes, pairs.into_iter())
        };
        let mut node_names = Vec::with_capacity(nodes.len());
        let mut node_ops = Vec::with_capacity(nodes.len());
        let mut node_cost = Vec::with_capacity(nodes.len());
        let mut node_class = Vec::with_capacity(nodes.len());
        for n in nodes {
            node_names.push(n.name);
            node_ops.push(n.op);
            node_cost.push(n.cost);
            node_class.push(n.class);
        }
        Ok(EGraph {
            node_names,
            node_ops,
            node_cost,
            node_class,
            child_start,
            child_classes,
            class_names,
            class_node_start,
            class_nodes,
            parent_start,
            parent_nodes,
            roots,
        })
    }

    /// Number of e-nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_cost.len()
    }
    /// Number of e-classes.
    pub fn num_classes(&self) -> usize {
        self.class_names.len()
    }
    /// Number of (node, child class) edges, duplicates included.
    pub fn num_edges(&self) -> usize {
        self.child_classes.len()
    }
    /// All node indices, in order.
    pub fn nodes(&self) -> impl DoubleEndedIterator<Item = NodeIdx> + ExactSizeIterator + Clone {
        NodeIdx::range(self.num_nodes())
    }
    /// All class indices, in order.
    pub fn classes(&self) -> impl DoubleEndedIterator<Item = ClassIdx> + ExactSizeIterator + Clone {
        ClassIdx::range(self.num_classes())
    }
    /// Root classes (deduplicated, in input order).
    pub fn roots(&self) -> &[ClassIdx] {
        &self.roots
    }
    /// Child classes of node `n`, in operand order.
    pub fn children(&self, n: NodeIdx) -> &[ClassIdx] {
        let n = n.index();
        &self.child_classes[self.child_start[n] as usize..self.child_start[n + 1] as usize]
    }
    /// Nodes of class `c`.
    pub fn class_nodes(&self, c: ClassIdx) -> &[NodeIdx] {
        let c = c.index();
        &self.class_nodes[self.class_node_start[c] as usize..self.class_node_start[c + 1] as usize]
    }
    /// Nodes that have class `c` among their children (each listed once).
    pub fn parents(&self, c: ClassIdx) -> &[NodeIdx] {
        let c = c.index();
        &self.parent_nodes[self.parent_start[c] as usize..self.parent_start[c + 1] as usize]
    }
    /// Cost of node `n`.
    pub fn cost(&self, n: NodeIdx) -> f64 {
        self.node_cost[n.index()]
    }
    /// All node costs, indexed by node.
    pub fn costs(&self) -> &[f64] {
        &self.node_cost
    }
    /// Class of node `n`.
    pub fn class_of(&self, n: NodeIdx) -> ClassIdx {
        self.node_class[n.index()]
    }
    /// Operator of node `n`.
    pub fn op(&self, n: NodeIdx) -> &str {
        &self.node_ops[n.index()]
    }
    /// Original id of node `n`.
    pub fn node_name(&self, n: NodeIdx) -> &str {
        &self.node_names[n.index()]
    }
    /// Original id of class `c`.
    pub fn class_name(&self, c: ClassIdx) -> &str {
        &self.class_names[c.index()]
    }
    /// Whether node `n` has its own class as a child (it can never be chosen).
    pub fn is_self_loop(&self, n: NodeIdx) -> bool {
        let c = self.class_of(n);
        self.children(n).contains(&c)
    }

    /// A short stable fingerprint of the graph's structure and costs
    /// (FNV-1a over ids, ops, costs and edges), for tying artefacts to it.
    pub fn fingerprint(&self) -> String {
        let mut bytes = Vec::new();
        let mut eat = |b: &[u8]| bytes.extend_from_slice(b);
        for n in self.nodes() {
            eat(self.node_name(n).as_bytes());
            eat(&[0]);
            eat(self.op(n).as_bytes());
            eat(&[0]);
            eat(self.class_name(self.class_of(n)).as_bytes());
            eat(&self.cost(n).to_le_bytes());
            for &c in self.children(n) {
                eat(&c.raw().to_le_bytes());
            }
        }
        for &r in &self.roots {
            eat(&r.raw().to_le_bytes());
        }
        hash_hex(&bytes)
    }
}

/// FNV-1a 64-bit hash of `bytes`, as 16 hex digits: the stable hash behind
/// e-graph fingerprints and the label log's keys.
pub fn hash_hex(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}
