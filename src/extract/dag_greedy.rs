//! Greedy extraction by DAG cost, as extraction-gym's faster-greedy-dag.

use super::bottom_up::complete_acyclic;
use super::Extractor;
use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::Extraction;
use crate::preprocess::Reduced;
use anyhow::Result;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Per class, the node whose *set* of needed classes (itself plus the union
/// of its children's sets) has the least total cost, so shared subterms
/// are counted once.
///
/// The sets take memory in proportion to classes times the size of a
/// typical sub-DAG, which is quadratic on deep circuits, and the fixed
/// point of extraction-gym's faster-greedy-dag revisits nodes without
/// bound. So an e-graph whose sets all fit in [`MEMBER_BUDGET`] members
/// (up to about 11,500 classes) gets that fixed point; a larger one gets
/// [`dag_greedy_with_limit`], each class settled once, with the budget
/// spread evenly over the classes (at least [`MIN_SET`] a class).
pub struct DagGreedy;

/// Members (four bytes each) all classes' sets may hold together: 512 MiB.
pub const MEMBER_BUDGET: usize = 1 << 27;

/// Members a class's set may hold however many classes there are.
pub const MIN_SET: usize = 256;

/// The classes a choice needs, as the node chosen for each (its class and
/// cost are the graph's: four bytes a member); `None` where the set was
/// over its size limit and only its total is kept.
struct CostSet {
    members: Option<Vec<NodeIdx>>,
    total: f64,
    choice: NodeIdx,
}

impl Extractor for DagGreedy {
    fn name(&self) -> &'static str {
        "dag-greedy"
    }

    fn extract(&self, problem: &Reduced) -> Result<Extraction> {
        let nc = problem.graph.num_classes();
        let share = MEMBER_BUDGET / nc.max(1);
        Ok(if share > nc { fixpoint(problem) } else { dag_greedy_with_limit(problem, share.max(MIN_SET)) })
    }
}

/// The fixed point of extraction-gym's faster-greedy-dag, every set kept
/// whole: nodes are revisited from a queue ordered by their own cost until
/// no class improves, and a node whose children's sets contain its own
/// class is refused (it would close a cycle).
fn fixpoint(problem: &Reduced) -> Extraction {
    let g = &problem.graph;
    let nc = g.num_classes();
    let mut sets: Vec<Option<CostSet>> = (0..nc).map(|_| None).collect();
    let mut queued = vec![false; g.num_nodes()];
    // Min-heap on (own cost, node).
    let mut queue: BinaryHeap<Reverse<(OrdF64, NodeIdx)>> = BinaryHeap::new();
    for n in g.nodes() {
        if g.children(n).is_empty() {
            queue.push(Reverse((OrdF64(g.cost(n)), n)));
            queued[n.index()] = true;
        }
    }
    let mut unions = Unions { stamp: vec![0; nc], epoch: 0 };
    let mut kids: Vec<ClassIdx> = Vec::new();
    let nonnegative = g.nodes().all(|n| g.cost(n) >= 0.0);
    while let Some(Reverse((_, n))) = queue.pop() {
        queued[n.index()] = false;
        let c = g.class_of(n);
        let best = sets[c.index()].as_ref().map_or(f64::INFINITY, |s| s.total);
        distinct_children(g, n, &mut kids);
        if kids.contains(&c) {
            continue;
        }
        let candidate = if kids.is_empty() {
            CostSet { members: Some(vec![n]), total: g.cost(n), choice: n }
        } else {
            if kids.len() == 1 && g.cost(n) + sets[kids[0].index()].as_ref().expect("ready").total > best {
                continue;
            }
            let biggest = *kids.iter().max_by_key(|&&k| members_of(&sets, k).len()).expect("non-empty");
            let Some(total) = unions.total(g, &sets, &kids, Some(biggest), best, nonnegative) else {
                continue; // no better
            };
            if unions.stamp[c.index()] == unions.epoch {
                continue; // the children already need this class: a cycle
            }
            let total = total + g.cost(n);
            if total >= best {
                continue;
            }
            let mut members = unions.members(g, &sets, &kids, Some(biggest));
            members.push(n);
            CostSet { members: Some(members), total, choice: n }
        };
        if candidate.total < best {
            sets[c.index()] = Some(candidate);
            for &p in g.parents(c) {
                if !queued[p.index()] && g.children(p).iter().all(|&k| sets[k.index()].is_some()) {
                    queued[p.index()] = true;
                    queue.push(Reverse((OrdF64(g.cost(p)), p)));
                }
            }
        }
    }
    // The fixed point's choices can still disagree along shared paths;
    // completing them bottom-up keeps them when valid and repairs
    // anything cyclic.
    let preferred: Vec<Option<NodeIdx>> = sets.iter().map(|s| s.as_ref().map(|s| s.choice)).collect();
    complete_acyclic(g, &preferred, |n| -g.cost(n))
}

/// Greedy extraction by DAG cost in one pass, with sets of at most
/// `max_set` members each: a class whose set would be larger keeps its
/// total alone, and a parent adds that total in full, counting what it
/// shares with its siblings twice (as tree cost does). With `max_set`
/// above the number of classes every set is kept whole. Its answers can
/// differ from the fixed point's, cheaper or dearer; it is what
/// [`DagGreedy`] runs at scale.
pub fn dag_greedy_with_limit(problem: &Reduced, max_set: usize) -> Extraction {
    let g = &problem.graph;
    let mut search = Search::new(g, max_set);
    for n in g.nodes() {
        if search.waiting[n.index()] == 0 {
            search.offer(n);
        }
    }
    while let Some(Reverse((OrdF64(total), n))) = search.queue.pop() {
        let c = g.class_of(n);
        if search.sets[c.index()].is_none() {
            search.settle(n, total);
            for &p in g.parents(c) {
                search.waiting[p.index()] -= 1;
                if search.waiting[p.index()] == 0 && search.sets[g.class_of(p).index()].is_none() {
                    search.offer(p);
                }
            }
        }
    }
    // Classes settle after all their chosen node's children, so the
    // choices are acyclic; completing them only fills what was never
    // settled (nothing, on a preprocessed graph).
    let preferred: Vec<Option<NodeIdx>> = search.sets.iter().map(|s| s.as_ref().map(|s| s.choice)).collect();
    complete_acyclic(g, &preferred, |n| -g.cost(n))
}

/// The state of one [`dag_greedy_with_limit`] run: classes settle in
/// increasing total, as in Knuth's generalisation of Dijkstra's algorithm.
/// A node is offered once every class among its children has settled, at
/// the total of its set; a class settles at the least total offered. With
/// non-negative costs a node's total is at least each child's, so no node
/// offered later could have beaten a settled class: each class settles
/// once, and each node is offered once.
struct Search<'g> {
    g: &'g EGraph,
    max_set: usize,
    /// Per settled class, its set.
    sets: Vec<Option<CostSet>>,
    /// Per node, the distinct classes among its children not yet settled.
    waiting: Vec<u32>,
    /// Per class, the least total offered so far.
    offered: Vec<f64>,
    /// Min-heap of offers on (total, node).
    queue: BinaryHeap<Reverse<(OrdF64, NodeIdx)>>,
    unions: Unions,
    nonnegative: bool,
    /// Scratch: a node's distinct child classes, and those with whole sets.
    kids: Vec<ClassIdx>,
    whole: Vec<ClassIdx>,
}

impl<'g> Search<'g> {
    fn new(g: &'g EGraph, max_set: usize) -> Search<'g> {
        let nc = g.num_classes();
        let mut kids = Vec::new();
        let waiting = g
            .nodes()
            .map(|n| {
                distinct_children(g, n, &mut kids);
                kids.len() as u32
            })
            .collect();
        Search {
            g,
            max_set,
            sets: (0..nc).map(|_| None).collect(),
            waiting,
            offered: vec![f64::INFINITY; nc],
            queue: BinaryHeap::new(),
            unions: Unions { stamp: vec![0; nc], epoch: 0 },
            nonnegative: g.nodes().all(|n| g.cost(n) >= 0.0),
            kids,
            whole: Vec::new(),
        }
    }

    /// Offers node `n`, whose children's classes have all settled, at its
    /// total, unless an earlier offer for its class is no dearer. The sets
    /// kept whole are merged; a set kept as a total alone counts in full.
    fn offer(&mut self, n: NodeIdx) {
        let g = self.g;
        let c = g.class_of(n);
        self.kids_of(n);
        let counted: f64 = self.kids.iter().filter_map(|&k| totals_only(&self.sets, k)).sum();
        let bound = self.offered[c.index()] - counted - g.cost(n);
        let biggest = self.whole.iter().copied().max_by_key(|&k| members_of(&self.sets, k).len());
        let Some(merged) = self.unions.total(g, &self.sets, &self.whole, biggest, bound, self.nonnegative) else {
            return;
        };
        let total = counted + merged + g.cost(n);
        if total < self.offered[c.index()] {
            self.offered[c.index()] = total;
            self.queue.push(Reverse((OrdF64(total), n)));
        }
    }

    /// Settles `n`'s class on `n`, at `total`: its set is kept whole when
    /// every child's is and it has at most `max_set` members.
    fn settle(&mut self, n: NodeIdx, total: f64) {
        self.kids_of(n);
        let members = (self.whole.len() == self.kids.len())
            .then(|| {
                let biggest = self.whole.iter().copied().max_by_key(|&k| members_of(&self.sets, k).len());
                self.unions.members(self.g, &self.sets, &self.whole, biggest)
            })
            .filter(|m| m.len() < self.max_set)
            .map(|mut m| {
                m.push(n);
                m
            });
        self.sets[self.g.class_of(n).index()] = Some(CostSet { members, total, choice: n });
    }

    /// Fills `kids` with `n`'s distinct child classes and `whole` with
    /// those whose sets are kept whole.
    fn kids_of(&mut self, n: NodeIdx) {
        distinct_children(self.g, n, &mut self.kids);
        self.whole.clear();
        self.whole.extend(self.kids.iter().copied().filter(|&k| totals_only(&self.sets, k).is_none()));
    }
}

/// Fills `kids` with the distinct classes among `n`'s children.
fn distinct_children(g: &EGraph, n: NodeIdx, kids: &mut Vec<ClassIdx>) {
    kids.clear();
    kids.extend_from_slice(g.children(n));
    kids.sort_unstable();
    kids.dedup();
}

/// Scratch membership stamps for unions of the children's sets: a class
/// is in the current union when its stamp is the current epoch.
struct Unions {
    stamp: Vec<u32>,
    epoch: u32,
}

impl Unions {
    /// The total cost of the union of the sets of `kids` (`biggest` the
    /// one with the most members), summed in the order [`Unions::members`]
    /// lists them, so that it is that set's exact total; its members stay
    /// stamped. `None` once a partial sum reaches `best` where every cost
    /// is at least 0 (`nonnegative`: a partial sum then only grows).
    fn total(
        &mut self,
        g: &EGraph,
        sets: &[Option<CostSet>],
        kids: &[ClassIdx],
        biggest: Option<ClassIdx>,
        best: f64,
        nonnegative: bool,
    ) -> Option<f64> {
        self.epoch += 1;
        let mut total = 0.0;
        for &n in biggest.map_or(&[][..], |b| members_of(sets, b)) {
            self.stamp[g.class_of(n).index()] = self.epoch;
            total += g.cost(n);
        }
        if nonnegative && total >= best {
            return None;
        }
        for &k in kids.iter().filter(|&&k| Some(k) != biggest) {
            for &n in members_of(sets, k) {
                let m = g.class_of(n);
                if self.stamp[m.index()] != self.epoch {
                    self.stamp[m.index()] = self.epoch;
                    total += g.cost(n);
                    if nonnegative && total >= best {
                        return None;
                    }
                }
            }
        }
        Some(total)
    }

    /// The union itself: `biggest`'s members, then the other sets' new
    /// ones in the order of `kids`.
    fn members(
        &mut self,
        g: &EGraph,
        sets: &[Option<CostSet>],
        kids: &[ClassIdx],
        biggest: Option<ClassIdx>,
    ) -> Vec<NodeIdx> {
        self.epoch += 1;
        let mut members = biggest.map_or(&[][..], |b| members_of(sets, b)).to_vec();
        for &n in &members {
            self.stamp[g.class_of(n).index()] = self.epoch;
        }
        for &k in kids.iter().filter(|&&k| Some(k) != biggest) {
            for &n in members_of(sets, k) {
                let m = g.class_of(n);
                if self.stamp[m.index()] != self.epoch {
                    self.stamp[m.index()] = self.epoch;
                    members.push(n);
                }
            }
        }
        members
    }
}

/// The members of class `k`'s set, which must be ready and kept whole.
fn members_of(sets: &[Option<CostSet>], k: ClassIdx) -> &[NodeIdx] {
    sets[k.index()].as_ref().expect("ready").members.as_deref().expect("kept whole")
}

/// The total of class `k`'s set (which must be ready) where only that is
/// kept; `None` where its members are.
fn totals_only(sets: &[Option<CostSet>], k: ClassIdx) -> Option<f64> {
    let set = sets[k.index()].as_ref().expect("ready");
    set.members.is_none().then_some(set.total)
}

/// `f64` ordered by `total_cmp`, for heap keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
