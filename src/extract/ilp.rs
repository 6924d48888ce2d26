//! Exact extraction as an integer linear program, solved by HiGHS.
//!
//! The program, on the preprocessed graph: one binary per node, and per
//! class a column for how many of its nodes are chosen, at most one; exactly
//! one in each root class; a chosen node needs its child classes chosen
//! (child implication).
//! Acyclicity takes one order variable per class, only inside the strongly
//! connected components with more than one class (the only places a cycle
//! can close): a chosen node's class is ordered after each child class of
//! the same component. The objective, the sum of the chosen nodes' costs,
//! is the DAG cost of the extraction.
//!
//! Where some node costs are negative, the program could lower its
//! objective with chosen classes the roots do not reach; there it also
//! requires every chosen non-root class to have a chosen parent node, which
//! with acyclicity makes the chosen classes exactly those reached.
//!
//! Every solve has an incumbent (a valid extraction): nodes that cannot be
//! part of an extraction cheaper than it are fixed to zero before the solve
//! (see [`cost_floors`]), and it is the answer when the solver finds
//! nothing better in its time, so a time limit always ends with an answer
//! and the solver's lower bound beside it. The incumbent is not handed to
//! HiGHS as a MIP start: HiGHS 1.16 evaluates such a start wrongly after
//! presolve (on herbie/6439 it declared dag-greedy's 4491 optimal, where
//! SmoothE finds 3403).
//!
//! HiGHS's presolve can also contradict the incumbent outright, declaring
//! the program infeasible (solutions it finds break a row once mapped back
//! to the original program). Nothing from such a solve is trusted: the
//! program is solved again without presolve in the time left.

use super::{DagGreedy, Extractor};
use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use crate::progress::Observer;
use anyhow::{bail, Context, Result};
use highs::{Col, HighsModelStatus, RowProblem, Sense};
use serde_json::{json, Map, Value};
use std::ffi::CString;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How a solve ended: the answer is proven optimal, or the time ran out
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IlpStatus {
    /// The answer is a proven optimum.
    Optimal,
    /// The time limit (or another limit of the solver) stopped it first;
    /// the answer is its best found.
    TimeLimit,
}

impl IlpStatus {
    /// The name written in result files: `optimal` or `time_limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            IlpStatus::Optimal => "optimal",
            IlpStatus::TimeLimit => "time_limit",
        }
    }
}

/// The outcome of [`solve`]: an extraction of the reduced graph with a
/// certificate of how far from optimal it can be.
#[derive(Debug, Clone)]
pub struct Certified {
    /// The best extraction found (never worse than the incumbent).
    pub extraction: Extraction,
    /// Its DAG cost on the reduced graph.
    pub cost: f64,
    /// A lower bound on the DAG cost of every valid extraction, at most
    /// `cost`.
    pub lower_bound: f64,
    /// Whether `extraction` is proven optimal.
    pub status: IlpStatus,
}

impl Certified {
    /// (cost - lower bound) / |cost|, 0 when both are 0.
    pub fn gap(&self) -> f64 {
        relative_gap(self.cost, self.lower_bound)
    }

    /// The result-file fields: `status`, `lower_bound` and `gap`.
    pub fn describe(&self, details: &mut Map<String, Value>) {
        details.insert("status".into(), json!(self.status.as_str()));
        details.insert("lower_bound".into(), json!(self.lower_bound));
        details.insert("gap".into(), json!(self.gap()));
    }
}

/// (cost - bound) / |cost|, 0 when the two are equal.
pub fn relative_gap(cost: f64, bound: f64) -> f64 {
    if cost == bound {
        0.0
    } else {
        (cost - bound) / cost.abs()
    }
}

/// `--method ilp`: the exact program, dag-greedy's extraction its
/// incumbent, for at most `time_limit` seconds (0: no limit).
pub struct Ilp {
    /// Wall-clock limit of the solver in seconds (0: none).
    pub time_limit: f64,
    /// Where the solve reports the seconds it has run.
    pub progress: Observer,
}

impl Extractor for Ilp {
    fn name(&self) -> &'static str {
        "ilp"
    }

    fn extract_with_details(&self, problem: &Reduced) -> Result<(Extraction, Map<String, Value>)> {
        let incumbent = DagGreedy.extract(problem)?;
        let certified = solve(problem, &incumbent, self.time_limit, &self.progress)?;
        let mut details = Map::new();
        certified.describe(&mut details);
        Ok((certified.extraction, details))
    }
}

/// Solves the program on `problem` to beat `incumbent` (a valid extraction
/// of the reduced graph), for at most `time_limit` seconds (0: none),
/// reporting the seconds it has run to `progress`. The answer is never
/// worse than the incumbent.
pub fn solve(problem: &Reduced, incumbent: &Extraction, time_limit: f64, progress: &Observer) -> Result<Certified> {
    let g = &problem.graph;
    let upper = incumbent.dag_cost(g).context("the ILP's incumbent is not a valid extraction (a bug)")?;
    let floors = cost_floors(problem);
    let beyond = |n: NodeIdx| floors[n.index()] > upper + 1e-9 * upper.abs().max(1.0);
    let (rows, columns) = build(problem, beyond, true);
    let started = Instant::now();
    let status_line = format!("exact solve from {upper}");
    let mut solved = run_highs(rows, time_limit, true, progress, &status_line)?;
    if !solved_or_stopped(solved.status()) {
        // The incumbent is feasible, so any other ending is HiGHS's presolve
        // contradicting it, a known fault of HiGHS 1.16 (solutions that break
        // a row once mapped back to the original program). Nothing it proved
        // on that path is trusted: the program is solved again without
        // presolve, in the time left.
        let left = if time_limit > 0.0 { (time_limit - started.elapsed().as_secs_f64()).max(1e-3) } else { 0.0 };
        log::warn!(
            "HiGHS ended with status {:?} on a program whose incumbent is feasible; solving again without presolve ({})",
            solved.status(),
            if left > 0.0 { format!("{left:.0} s left") } else { "no time limit".into() }
        );
        // Built again rather than kept as a copy: the copy would double every
        // solve's program for a path taken rarely. The build is deterministic,
        // so `columns` still maps its columns.
        let (rows, _) = build(problem, beyond, true);
        solved = run_highs(rows, left, false, progress, &status_line)?;
    }
    let status = match solved.status() {
        HighsModelStatus::Optimal => IlpStatus::Optimal,
        s if solved_or_stopped(s) => IlpStatus::TimeLimit,
        other => bail!("HiGHS ended with status {other:?} on a graph with a valid extraction, even without presolve"),
    };
    let values = solved.get_solution().columns().to_vec();
    let found = columns.extraction(g, &values);
    // The solver's objective must be the cost of the solution it returns;
    // where it is not, none of its figures is trusted.
    let consistent = found.is_none()
        || (columns.cost_of(g, &values) - solved.objective_value()).abs() <= 1e-6 * upper.abs().max(1.0);
    let dual_bound = match consistent {
        true => info_value(&solved, "mip_dual_bound").unwrap_or(f64::NEG_INFINITY),
        false => f64::NEG_INFINITY,
    };
    let status = if consistent { status } else { IlpStatus::TimeLimit };
    let (extraction, cost) = match found.and_then(|e| e.dag_cost(g).ok().map(|c| (e, c))) {
        Some((e, c)) if c < upper => (e, c),
        _ => (incumbent.clone(), upper),
    };
    // The solver proves its optimum up to its tolerances; a bound
    // above a feasible cost is rounding, so the bound is clamped to it.
    let trivial = trivial_bound(problem, &floors);
    let lower_bound = dual_bound.max(trivial).min(cost);
    let status = if status == IlpStatus::Optimal && cost - lower_bound <= 1e-6 * cost.abs().max(1.0) {
        IlpStatus::Optimal
    } else {
        IlpStatus::TimeLimit
    };
    let lower_bound = if status == IlpStatus::Optimal { cost } else { lower_bound };
    Ok(Certified { extraction, cost, lower_bound, status })
}

/// Whether HiGHS ended as a solve with a feasible program can: proven
/// optimal, or stopped by a limit with its best and a bound.
fn solved_or_stopped(status: HighsModelStatus) -> bool {
    matches!(
        status,
        HighsModelStatus::Optimal
            | HighsModelStatus::ReachedTimeLimit
            | HighsModelStatus::ReachedInterrupt
            | HighsModelStatus::ReachedIterationLimit
            | HighsModelStatus::ReachedSolutionLimit
            | HighsModelStatus::ReachedMemoryLimit
    )
}

/// One HiGHS solve of `rows` to a zero gap, for at most `time_limit`
/// seconds (0: none), with or without its presolve.
fn run_highs(
    rows: RowProblem,
    time_limit: f64,
    presolve: bool,
    progress: &Observer,
    status_line: &str,
) -> Result<highs::SolvedModel> {
    let mut model = rows.optimise(Sense::Minimise);
    model.set_option("mip_rel_gap", 0.0);
    if time_limit > 0.0 {
        model.set_option("time_limit", time_limit);
    }
    if !presolve {
        model.set_option("presolve", "off");
    }
    with_clock(progress, time_limit, status_line, || model.try_solve())
        .map_err(|e| anyhow::anyhow!("HiGHS failed: {e:?}"))
}

/// The linear relaxation's optimum on `problem` (no integrality, no order
/// variables): a lower bound on the DAG cost of every valid extraction, or
/// `None` when the LP does not finish within `time_limit` seconds.
pub fn lp_lower_bound(problem: &Reduced, time_limit: f64) -> Option<f64> {
    let (rows, _) = build(problem, |_| false, false);
    let mut model = rows.optimise(Sense::Minimise);
    if time_limit > 0.0 {
        model.set_option("time_limit", time_limit);
    }
    let solved = model.try_solve().ok()?;
    (solved.status() == HighsModelStatus::Optimal).then(|| {
        let value = solved.objective_value();
        // The simplex's optimum can sit a rounding error above the true one.
        value - 1e-9 * value.abs().max(1.0)
    })
}

/// Runs `work` while a second thread reports the seconds it has taken to
/// `progress` (a task of `time_limit` seconds, or of none when 0), since
/// the solver itself reports nothing until it returns.
fn with_clock<T>(progress: &Observer, time_limit: f64, status: &str, work: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    progress.begin("s", time_limit.ceil() as u64);
    // Dropping `done` wakes the clock at once, so the solve's result never
    // waits for the clock's next tick.
    let (done, finished) = mpsc::channel::<()>();
    let out = std::thread::scope(|scope| {
        scope.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(Duration::from_millis(200)) {
                progress.advance(start.elapsed().as_secs(), status);
            }
        });
        let out = work();
        drop(done);
        out
    });
    progress.end();
    out
}

/// A double from HiGHS's information record (such as `mip_dual_bound`),
/// if it is there and finite.
fn info_value(solved: &highs::SolvedModel, name: &str) -> Option<f64> {
    let name = CString::new(name).ok()?;
    solved.double_info_value(&name).ok().filter(|v| v.is_finite())
}

/// The program's columns standing for nodes and class orders.
struct Columns {
    /// Column of each node, in node order (`None` for a node fixed to 0).
    node_cols: Vec<Option<Col>>,
}

/// The program on `problem`, without the nodes `fixed` says are 0: binary
/// node columns and order rows when `integral`, else the linear relaxation
/// with no order rows. Each class also has a column equal to the sum of its
/// nodes' columns (at most 1; exactly 1 at a root), and a child implication
/// reads that one column: the program then holds each node once per class
/// it belongs to, not once per parent of its class, which on a saturated
/// circuit with classes of thousands of nodes is the difference between
/// millions and billions of nonzeros.
fn build(problem: &Reduced, fixed: impl Fn(NodeIdx) -> bool, integral: bool) -> (RowProblem, Columns) {
    let g = &problem.graph;
    let mut rows = RowProblem::default();
    let mut node_cols = Vec::with_capacity(g.num_nodes());
    for n in g.nodes() {
        node_cols.push((!fixed(n)).then(|| match integral {
            true => rows.add_integer_column(g.cost(n), 0..=1),
            false => rows.add_column(g.cost(n), 0..=1),
        }));
    }
    let mut is_root = vec![false; g.num_classes()];
    for &r in g.roots() {
        is_root[r.index()] = true;
    }
    let class_cols: Vec<Col> =
        g.classes().map(|c| rows.add_column(0.0, if is_root[c.index()] { 1.0..=1.0 } else { 0.0..=1.0 })).collect();
    for c in g.classes() {
        // chosen nodes of c - chosen(c) = 0
        let mut terms: Vec<(Col, f64)> =
            g.class_nodes(c).iter().filter_map(|m| node_cols[m.index()].map(|col| (col, 1.0))).collect();
        terms.push((class_cols[c.index()], -1.0));
        rows.add_row(0.0..=0.0, terms);
    }
    if g.nodes().any(|n| g.cost(n) < 0.0) {
        for c in g.classes().filter(|c| !is_root[c.index()]) {
            // chosen(c) <= chosen parent nodes of c
            let mut parents: Vec<NodeIdx> = g.parents(c).to_vec();
            parents.sort_unstable();
            parents.dedup();
            let mut terms = vec![(class_cols[c.index()], 1.0)];
            terms.extend(parents.iter().filter_map(|p| node_cols[p.index()].map(|col| (col, -1.0))));
            rows.add_row(..=0.0, terms);
        }
    }
    // Order columns, only where a cycle can close: one per class of a
    // component with more than one class.
    let mut order_cols = vec![None; g.num_classes()];
    for i in (0..problem.sccs.len()).filter(|_| integral) {
        let members = problem.sccs.members(i);
        if members.len() < 2 {
            continue;
        }
        let top = (members.len() - 1) as f64;
        for &c in members {
            order_cols[c.index()] = Some(rows.add_column(0.0, 0.0..=top));
        }
    }
    let mut kids: Vec<ClassIdx> = Vec::new();
    for n in g.nodes() {
        let Some(col) = node_cols[n.index()] else { continue };
        let c = g.class_of(n);
        kids.clear();
        kids.extend_from_slice(g.children(n));
        kids.sort_unstable();
        kids.dedup();
        for &k in &kids {
            // chosen(n) <= chosen(k)
            rows.add_row(..=0.0, [(col, 1.0), (class_cols[k.index()], -1.0)]);
            // order(c) - order(k) >= 1 when n is chosen, within a component
            if let (Some(parent), Some(child)) = (order_cols[c.index()], order_cols[k.index()]) {
                if same_component(problem, c, k) {
                    let big = problem.sccs.members(problem.sccs.component_of[c.index()] as usize).len() as f64;
                    rows.add_row(1.0 - big.., [(parent, 1.0), (child, -1.0), (col, -big)]);
                }
            }
        }
    }
    (rows, Columns { node_cols })
}

impl Columns {
    /// The objective at `values`: the chosen nodes' costs.
    fn cost_of(&self, g: &EGraph, values: &[f64]) -> f64 {
        g.nodes()
            .filter_map(|n| self.node_cols[n.index()].and_then(|col| values.get(col.index())).map(|v| v * g.cost(n)))
            .sum()
    }

    /// The extraction the column values choose (per class the node at 1),
    /// if it is valid.
    fn extraction(&self, g: &EGraph, columns: &[f64]) -> Option<Extraction> {
        let mut out = Extraction::empty(g.num_classes());
        for n in g.nodes() {
            if self.node_cols[n.index()].is_some_and(|col| columns.get(col.index()).is_some_and(|&v| v > 0.5)) {
                out.choices[g.class_of(n).index()] = Some(n);
            }
        }
        out.is_valid(g).then_some(out)
    }
}

fn same_component(problem: &Reduced, a: ClassIdx, b: ClassIdx) -> bool {
    problem.sccs.component_of[a.index()] == problem.sccs.component_of[b.index()]
}

/// Per node, a lower bound on the DAG cost of any valid extraction that
/// chooses it: its own cost plus the greatest floor among its child
/// classes, where a class's floor is its least node floor. A maximum, not
/// a sum, since children may share subterms. Computed children first over
/// the components, with a few passes inside cyclic ones (every pass from 0
/// upward keeps each value a valid bound). With a negative node cost
/// anywhere no such bound holds, and every floor is minus infinity.
pub fn cost_floors(problem: &Reduced) -> Vec<f64> {
    let g = &problem.graph;
    if g.nodes().any(|n| g.cost(n) < 0.0) {
        return vec![f64::NEG_INFINITY; g.num_nodes()];
    }
    let mut node_floor = vec![0.0f64; g.num_nodes()];
    let mut class_floor = vec![0.0f64; g.num_classes()];
    for i in (0..problem.sccs.len()).rev() {
        let members = problem.sccs.members(i);
        let passes = if members.len() > 1 { 3 } else { 1 };
        for _ in 0..passes {
            for &c in members {
                let mut least = f64::INFINITY;
                for &n in g.class_nodes(c) {
                    let below = g.children(n).iter().map(|k| class_floor[k.index()]).fold(0.0, f64::max);
                    node_floor[n.index()] = g.cost(n) + below;
                    least = least.min(node_floor[n.index()]);
                }
                class_floor[c.index()] = if least.is_finite() { least } else { 0.0 };
            }
        }
    }
    node_floor
}

/// A lower bound every extraction meets, from the node floors: the greatest
/// root-class floor, or with negative costs (no floors) the sum over
/// classes of their least negative node cost.
fn trivial_bound(problem: &Reduced, floors: &[f64]) -> f64 {
    let g = &problem.graph;
    if floors.iter().any(|f| f.is_infinite()) {
        return g.classes().map(|c| g.class_nodes(c).iter().map(|&n| g.cost(n)).fold(0.0, f64::min)).sum();
    }
    g.roots()
        .iter()
        .map(|&r| g.class_nodes(r).iter().map(|n| floors[n.index()]).fold(f64::INFINITY, f64::min))
        .fold(0.0, f64::max)
}
