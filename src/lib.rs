//! smoothe: e-graph extraction, from classic greedy baselines to
//! differentiable extraction (SmoothE) with learnable cost models.
//!
//! Data flows one way: [`load`] reads egraph-serialize JSON into a dense
//! [`egraph::EGraph`]; [`preprocess`] shrinks it and remembers how to map
//! back; an [`extract::Extractor`] picks nodes; [`extraction`] checks the
//! result and computes its costs.
//!
//! ```
//! let json = r#"{"nodes": {
//!     "x": {"op": "x", "children": [], "eclass": "a", "cost": 1.0},
//!     "f": {"op": "f", "children": ["x", "x"], "eclass": "r", "cost": 1.0}},
//!   "root_eclasses": ["r"]}"#;
//! let graph = smoothe::load::parse_str(json).unwrap();
//! let problem = smoothe::preprocess::preprocess(&graph).unwrap();
//! let method = smoothe::extract::by_name("dag-greedy", &Default::default()).unwrap();
//! let outcome = smoothe::extract::run(method.as_ref(), &graph, &problem).unwrap();
//! assert_eq!(outcome.dag_cost, 2.0); // x is shared, so counted once
//! ```

#![warn(missing_docs)]

pub mod config;
pub mod cost;
pub mod device;
pub mod egraph;
pub mod export;
pub mod extract;
pub mod extraction;
pub mod files;
pub mod jobs;
pub mod learn;
pub mod load;
pub mod memory;
pub mod merged;
pub mod normal;
pub mod preprocess;
pub mod progress;
pub mod relax;
pub mod report;
pub mod saturate;
pub mod scc;
pub mod timing;
