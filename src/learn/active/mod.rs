//! Choosing what to label: the active loop of `train-cost`
//! ([`train_cost`]) and its corpus form over several designs
//! ([`corpus`]), the acquisition rules that rank candidates
//! ([`acquisition`], [`selection_gp`]), the area-delay front a timed loop
//! explores ([`front`]), and search with the oracle in the loop
//! ([`anneal`], judged by a [`goal`]).

pub mod acquisition;
pub mod anneal;
pub mod config;
pub mod corpus;
pub mod design;
pub mod front;
pub mod goal;
mod picks;
pub mod round;
pub mod selection_gp;
pub mod train_cost;
