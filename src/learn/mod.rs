//! The learned-cost pipeline, in three rooms:
//!
//! - [`oracle`]: the contract with the user's cost oracle (running it,
//!   its process group and timeout), the label log, and an extraction's
//!   identity;
//! - [`model`]: features of an extraction, the ensemble of MLPs and its
//!   file format, fitting it, and the frozen model as SmoothE's objective;
//! - [`active`]: the loop that samples, labels and refits, its acquisition
//!   rules, the area-delay front it explores, and search with the oracle.
//!
//! Arrows run one way: `active` uses `model` and `oracle`, `model` uses
//! `oracle` for the labels it learns from, and `oracle` uses neither.

pub mod active;
pub mod model;
pub mod oracle;
