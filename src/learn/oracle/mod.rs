//! The oracle contract: running the user's cost oracle on an extraction
//! ([`process`]), the append-only label log ([`labels`]), labelling in
//! parallel with reuse of logged labels ([`labeler`]), and the identity of
//! an extraction that the log is keyed by ([`identity`]).

pub mod identity;
pub mod labeler;
pub mod labels;
pub mod process;
