//! Baseline extractions as `smoothe extract --method NAME` makes them, for
//! a graph preprocessed another way.
//!
//! The learned loop and the searches with an oracle work on the graph
//! preprocessed without commutative twins
//! ([`crate::preprocess::preprocess_for_oracle`]). There, the greedy
//! methods and SmoothE break their ties among other nodes and can land on
//! other extractions than the command, which keeps twins, returns; an
//! oracle can measure those differently. The baselines a loop labels and
//! reports are the ones a user compares with, so they are made on the
//! graph as the command preprocesses it and mapped onto the loop's graph,
//! where a dropped twin stands for its kept twin.

use super::Extractor;
use crate::egraph::EGraph;
use crate::extraction::Extraction;
use crate::preprocess::{preprocess, Reduced};
use anyhow::Result;

/// What each of `extractors` returns for `original` preprocessed as
/// `smoothe extract` preprocesses it, mapped onto `problem` (`original`
/// preprocessed any way), in order. A result that does not map onto
/// `problem` is made on `problem` itself instead, with a warning in the log.
pub fn as_extracted(original: &EGraph, problem: &Reduced, extractors: &[&dyn Extractor]) -> Result<Vec<Extraction>> {
    let plain = preprocess(original)?;
    extractors
        .iter()
        .map(|x| match problem.from_original(&plain.to_original(&x.extract(&plain)?)) {
            Some(mapped) => Ok(mapped),
            None => {
                log::warn!("the {} baseline does not map onto the preprocessed graph; making it there", x.name());
                x.extract(problem)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{DagGreedy, DepthGreedy, Greedy};
    use crate::preprocess::preprocess_for_oracle;
    use crate::timing::OpDelays;

    /// Each baseline made for the twin-free graph is valid there and,
    /// mapped back, is an extraction of the command's graph with the
    /// command's DAG cost: the command's own extraction, with each dropped
    /// twin replaced by its kept twin. On esyn/c7552 (beside the checkout,
    /// where present) dag-greedy run on the twin-free graph itself lands on
    /// another extraction, so there the check tells the two apart.
    #[test]
    fn baselines_for_the_twin_free_graph_are_the_commands_up_to_twins() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let graphs = [root.join("datasets/esyn/mul3.json"), root.join("../shared/datasets/esyn/c7552.json")];
        for path in graphs.iter().filter(|p| p.exists()) {
            let original = crate::load::load_file(path).unwrap();
            let plain = preprocess(&original).unwrap();
            let twin_free = preprocess_for_oracle(&original).unwrap();
            assert!(twin_free.stats.twin_nodes > 0, "{}: the test needs a graph with twins", path.display());
            let depth = DepthGreedy { delays: OpDelays::unit() };
            let extractors: [&dyn Extractor; 3] = [&Greedy, &DagGreedy, &depth];
            let made = as_extracted(&original, &twin_free, &extractors).unwrap();
            for (x, e) in extractors.iter().zip(&made) {
                let what = format!("{} on {}", x.name(), path.display());
                assert!(e.is_valid(&twin_free.graph), "{what}");
                let command = plain.to_original(&x.extract(&plain).unwrap());
                let back = twin_free.to_original(e);
                assert!(plain.from_original(&back).is_some_and(|p| p.is_valid(&plain.graph)), "{what}");
                assert_eq!(Some(e.clone()), twin_free.from_original(&command), "{what}");
                assert_eq!(back.dag_cost(&original).unwrap(), command.dag_cost(&original).unwrap(), "{what}");
            }
        }
    }
}
