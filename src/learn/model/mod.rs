//! The cost model: features of an extraction ([`features`]), the ensemble
//! of MLPs and its file ([`network`]), training data from the label log
//! ([`dataset`]), fitting ([`train`]), the residual term ([`residual`]),
//! models that transfer across designs ([`mod@reference`]), the measurements
//! kept with a model ([`measured`], and the measured front: [`front`]), fit
//! reports ([`metrics`]), and the frozen model as SmoothE's conservative
//! objective ([`objective`]).

pub mod dataset;
pub mod features;
pub mod file;
pub mod fit;
pub mod front;
pub(crate) mod linalg;
pub mod measured;
pub mod meta;
pub mod metrics;
pub mod network;
pub mod objective;
pub mod reference;
pub mod residual;
pub mod train;
pub mod trust;
