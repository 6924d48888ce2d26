//! Each command's logic as one library call on a plain settings struct:
//! the `smoothe` CLI only parses flags into these and prints what they
//! return, and a program embedding the library can do the same.

mod answer;
mod extract;
mod fit_delays;
mod oracle_runs;
mod pareto;
mod predict;
mod train_cost;
mod verdict;

pub use extract::{ExtractJob, ExtractResult, ModelVerdict};
pub use fit_delays::{FitDelaysJob, FitDelaysResult};
pub use oracle_runs::{LabelJob, SearchJob};
pub use pareto::ParetoJob;
pub use predict::{PredictJob, Verdict};
pub use train_cost::{OutputPaths, TrainCostJob, TrainCostResult};
