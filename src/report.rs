//! Human-readable summaries of e-graphs (`smoothe info`).

use crate::egraph::EGraph;
use crate::preprocess::Reduced;
use crate::scc::Sccs;
use std::fmt::Write;

/// Longest chain of components from a root down the condensation DAG,
/// counted in components (1 for a graph with only leaves).
pub fn depth(g: &EGraph, sccs: &Sccs) -> usize {
    // Components are numbered roots-first, so one pass in order suffices.
    let mut level = vec![0usize; sccs.len()];
    for &r in g.roots() {
        level[sccs.component_of[r.index()] as usize] = 1;
    }
    let mut deepest = 0;
    for i in 0..sccs.len() {
        if level[i] == 0 {
            continue;
        }
        deepest = deepest.max(level[i]);
        for &c in sccs.members(i) {
            for &n in g.class_nodes(c) {
                for &k in g.children(n) {
                    let j = sccs.component_of[k.index()] as usize;
                    if j != i {
                        level[j] = level[j].max(level[i] + 1);
                    }
                }
            }
        }
    }
    deepest
}

/// The text printed by `smoothe info`: `problem` is `g` preprocessed for
/// extraction, `for_oracle` preprocessed for a real-cost oracle (twins
/// dropped too).
pub fn info(g: &EGraph, problem: &Reduced, for_oracle: &Reduced) -> String {
    let self_loops = g.nodes().filter(|&n| g.is_self_loop(n)).count();
    let sccs = Sccs::new(g);
    let cyclic = sccs.cyclic_sizes();
    let reduced_cyclic = problem.sccs.cyclic_sizes();
    let mut s = String::new();
    let _ = writeln!(s, "nodes: {}", g.num_nodes());
    let _ = writeln!(s, "classes: {}", g.num_classes());
    let _ = writeln!(s, "edges: {}", g.num_edges());
    let _ = writeln!(s, "roots: {}", g.roots().len());
    let _ = writeln!(s, "self-loop nodes: {self_loops}");
    let _ = writeln!(s, "cyclic components: {} (sizes {})", cyclic.len(), summarize_sizes(&cyclic));
    let _ = writeln!(s, "depth (components, longest root-to-leaf chain): {}", depth(g, &sccs));
    let st = &problem.stats;
    let _ = writeln!(
        s,
        "after preprocessing: {} nodes, {} classes, {} edges ({} self-loop, {} underivable, {} unreachable nodes dropped; {} classes merged)",
        problem.graph.num_nodes(),
        problem.graph.num_classes(),
        problem.graph.num_edges(),
        st.self_loop_nodes,
        st.underivable_nodes,
        st.unreachable_nodes,
        st.merged_classes
    );
    let _ = writeln!(
        s,
        "after preprocessing: cyclic components: {} (sizes {})",
        reduced_cyclic.len(),
        summarize_sizes(&reduced_cyclic)
    );
    let _ = writeln!(
        s,
        "for a real-cost oracle: {} nodes ({} twin nodes dropped too: a node that repeats another of its class with its operands in another order)",
        for_oracle.graph.num_nodes(),
        for_oracle.stats.twin_nodes
    );
    s
}

fn summarize_sizes(sizes: &[usize]) -> String {
    if sizes.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = sizes.iter().take(10).map(|s| s.to_string()).collect();
    if sizes.len() > 10 {
        format!("{}, ... {} more", shown.join(", "), sizes.len() - 10)
    } else {
        shown.join(", ")
    }
}
