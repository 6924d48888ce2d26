//! `smoothe saturate`: from a combinational circuit to an e-graph of its
//! rewritings, as E-Syn and BoolE build theirs. The circuit's covers become
//! AND (`*`), OR (`+`) and NOT (`!`) terms over its inputs; egg saturates
//! them with Boolean rewrites ([`rules`]) within node, iteration and time
//! limits, which also introduce 2-input XOR (`^`) and 3-input majority
//! (`maj`) where the AND/OR forms of those functions appear; the e-graph is
//! written as egraph-serialize JSON in the esyn operator set and costs (`*`
//! 2, `+` 4, `!` 1, inputs and constants 1), with `^` at 6 and `maj` at 8,
//! its outputs joined by `&` nodes (cost 1) in output order, as the esyn
//! e-graphs are, so `smoothe export` writes them back in that order.

pub mod aiger;
pub mod blif;

use crate::progress::Observer;
use anyhow::{bail, Result};
use blif::{Circuit, Gate};
use egg::{define_language, rewrite as rw, Id, Language, RecExpr, Rewrite, Runner, StopReason, Symbol};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::Duration;

define_language! {
    /// Boolean terms in the esyn operator set: `*` (and), `+` (or), `!`
    /// (not), `&` (two outputs side by side, the esyn e-graphs' output
    /// list); an input or a constant (`0`, `1`) is a symbol; and `^`
    /// (2-input xor) and `maj` (3-input majority), which `export` writes as
    /// gates of their own. (The macro takes no comment on a variant.)
    #[allow(missing_docs)]
    pub enum Bool {
        "*" = And([Id; 2]),
        "+" = Or([Id; 2]),
        "!" = Not(Id),
        "^" = Xor([Id; 2]),
        "maj" = Maj([Id; 3]),
        "&" = Outputs([Id; 2]),
        Symbol(Symbol),
    }
}

/// The Boolean rewrites: commutativity and associativity of `*` and `+`,
/// distributivity both ways, De Morgan both ways, double negation,
/// idempotence, absorption, complements and the constants' identities; for
/// `^`: its sum-of-products definition both ways, commutativity,
/// associativity, negation moved through it, self-cancellation and the
/// constants; for `maj`: its definition ab + c(a + b) both ways, the
/// permutations of its operands, and the identities maj(a, a, b) = a and
/// maj(a, !a, b) = b.
pub fn rules() -> Vec<Rewrite<Bool, ()>> {
    let mut rules = vec![
        rw!("and-comm"; "(* ?a ?b)" => "(* ?b ?a)"),
        rw!("or-comm"; "(+ ?a ?b)" => "(+ ?b ?a)"),
        rw!("and-idem"; "(* ?a ?a)" => "?a"),
        rw!("or-idem"; "(+ ?a ?a)" => "?a"),
        rw!("not-not"; "(! (! ?a))" => "?a"),
        rw!("and-absorb"; "(* ?a (+ ?a ?b))" => "?a"),
        rw!("or-absorb"; "(+ ?a (* ?a ?b))" => "?a"),
        rw!("and-complement"; "(* ?a (! ?a))" => "0"),
        rw!("or-complement"; "(+ ?a (! ?a))" => "1"),
        rw!("and-0"; "(* ?a 0)" => "0"),
        rw!("and-1"; "(* ?a 1)" => "?a"),
        rw!("or-0"; "(+ ?a 0)" => "?a"),
        rw!("or-1"; "(+ ?a 1)" => "1"),
        rw!("not-0"; "(! 0)" => "1"),
        rw!("not-1"; "(! 1)" => "0"),
        rw!("xor-comm"; "(^ ?a ?b)" => "(^ ?b ?a)"),
        rw!("xor-self"; "(^ ?a ?a)" => "0"),
        rw!("xor-0"; "(^ ?a 0)" => "?a"),
        rw!("xor-1"; "(^ ?a 1)" => "(! ?a)"),
        rw!("maj-swap"; "(maj ?a ?b ?c)" => "(maj ?b ?a ?c)"),
        rw!("maj-rotate"; "(maj ?a ?b ?c)" => "(maj ?b ?c ?a)"),
        rw!("maj-twice"; "(maj ?a ?a ?b)" => "?a"),
        rw!("maj-complement"; "(maj ?a (! ?a) ?b)" => "?b"),
    ];
    rules.extend(rw!("and-assoc"; "(* ?a (* ?b ?c))" <=> "(* (* ?a ?b) ?c)"));
    rules.extend(rw!("or-assoc"; "(+ ?a (+ ?b ?c))" <=> "(+ (+ ?a ?b) ?c)"));
    rules.extend(rw!("and-over-or"; "(* ?a (+ ?b ?c))" <=> "(+ (* ?a ?b) (* ?a ?c))"));
    rules.extend(rw!("or-over-and"; "(+ ?a (* ?b ?c))" <=> "(* (+ ?a ?b) (+ ?a ?c))"));
    rules.extend(rw!("de-morgan-and"; "(! (* ?a ?b))" <=> "(+ (! ?a) (! ?b))"));
    rules.extend(rw!("de-morgan-or"; "(! (+ ?a ?b))" <=> "(* (! ?a) (! ?b))"));
    rules.extend(rw!("xor-def"; "(^ ?a ?b)" <=> "(+ (* ?a (! ?b)) (* (! ?a) ?b))"));
    rules.extend(rw!("xor-assoc"; "(^ ?a (^ ?b ?c))" <=> "(^ (^ ?a ?b) ?c)"));
    rules.extend(rw!("xor-not"; "(! (^ ?a ?b))" <=> "(^ (! ?a) ?b)"));
    rules.extend(rw!("maj-def"; "(maj ?a ?b ?c)" <=> "(+ (* ?a ?b) (* ?c (+ ?a ?b)))"));
    rules
}

/// Reads a circuit from a file's bytes: AIGER when they start with an
/// `aag` or `aig` header, BLIF otherwise. Errors say where.
pub fn read_circuit(bytes: &[u8]) -> Result<Circuit> {
    if bytes.starts_with(b"aag ") || bytes.starts_with(b"aig ") {
        return aiger::parse(bytes);
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("not BLIF text (byte {}) nor AIGER", e.valid_up_to()))?;
    blif::parse(text)
}

/// Limits of saturation; it stops at the first reached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Most e-nodes (as egg counts them).
    pub nodes: usize,
    /// Most iterations of applying every rule.
    pub iterations: usize,
    /// Most seconds.
    pub seconds: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { nodes: 100_000, iterations: 30, seconds: 60.0 }
    }
}

/// What saturation did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SaturateReport {
    /// E-classes of the result.
    pub classes: usize,
    /// E-nodes of the result.
    pub nodes: usize,
    /// Iterations run.
    pub iterations: usize,
    /// Why it stopped: `saturated`, `node-limit`, `iteration-limit`,
    /// `time-limit`.
    pub stop: String,
    /// Seconds spent.
    pub seconds: f64,
}

/// The e-graph of `circuit`'s rewritings as egraph-serialize JSON (with
/// its `inputs` and `outputs` names recorded), and what saturation did.
pub fn saturate(circuit: &Circuit, limits: Limits, progress: Observer) -> Result<(Value, SaturateReport)> {
    let (expr, root) = circuit_term(circuit)?;
    let started = std::time::Instant::now();
    progress.begin("iterations", limits.iterations as u64);
    let hook_progress = progress.clone();
    let runner = Runner::default()
        .with_node_limit(limits.nodes)
        .with_iter_limit(limits.iterations)
        .with_time_limit(Duration::from_secs_f64(limits.seconds.max(0.0)))
        .with_expr(&expr)
        .with_hook(move |runner| {
            let status = format!("{} e-nodes", runner.egraph.total_size());
            hook_progress.advance(runner.iterations.len() as u64, &status);
            Ok(())
        })
        .run(&rules());
    progress.end();
    let stop = match &runner.stop_reason {
        Some(StopReason::Saturated) => "saturated",
        Some(StopReason::NodeLimit(_)) => "node-limit",
        Some(StopReason::IterationLimit(_)) => "iteration-limit",
        Some(StopReason::TimeLimit(_)) => "time-limit",
        Some(StopReason::Other(why)) => bail!("saturation stopped: {why}"),
        None => "unknown",
    };
    let egraph = &runner.egraph;
    let root = egraph.find(runner.roots.first().copied().unwrap_or(root));
    let input_nodes = term_nodes(egraph, &expr);
    let mut nodes = Map::new();
    for class in egraph.classes() {
        // The input circuit's own node first (see `CIRCUIT_CHOICES`).
        let own = input_nodes.get(&class.id).copied();
        let order = own.into_iter().chain((0..class.nodes.len()).filter(|&j| Some(j) != own));
        for (i, node) in order.map(|j| &class.nodes[j]).enumerate() {
            let children: Vec<String> = node.children().iter().map(|&c| node_id(egraph.find(c), 0)).collect();
            let op = node.to_string();
            let cost = match node {
                Bool::And(_) => 2.0,
                Bool::Or(_) => 4.0,
                Bool::Xor(_) => 6.0,
                Bool::Maj(_) => 8.0,
                _ => 1.0,
            };
            let entry = json!({"op": op, "children": children, "eclass": class.id.to_string(), "cost": cost});
            nodes.insert(node_id(class.id, i), entry);
        }
    }
    let circuit_choices: Map<String, Value> =
        input_nodes.keys().map(|&class| (class.to_string(), Value::String(node_id(class, 0)))).collect();
    let report = SaturateReport {
        classes: egraph.number_of_classes(),
        nodes: egraph.total_number_of_nodes(),
        iterations: runner.iterations.len(),
        stop: stop.to_string(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let json = json!({
        "nodes": nodes,
        "root_eclasses": [root.to_string()],
        "inputs": circuit.inputs,
        "outputs": circuit.outputs,
        CIRCUIT_CHOICES: circuit_choices,
    });
    Ok((json, report))
}

/// The field of a saturated e-graph's JSON that spells the input circuit
/// as an extraction: class id -> node id, as a result file's `"choices"`.
/// The input's node is the first of its class in the file (`<class>.0`),
/// so that where preprocessing keeps one of a set of twins (the same
/// operator over the same classes in another order, see
/// [`crate::preprocess`]), it keeps the input's, and the learned loop
/// labels the input circuit with its own operand order.
pub const CIRCUIT_CHOICES: &str = "circuit_choices";

/// The input circuit's own e-nodes as an extraction of the saturated
/// e-graph: per class, the position in it of the first node of `expr` that
/// lies in it. Egg keeps every node it was given, so each is found. The
/// choice is acyclic: every chosen node's children are classes of earlier
/// nodes of `expr`, whose chosen nodes come earlier still.
fn term_nodes(egraph: &egg::EGraph<Bool, ()>, expr: &RecExpr<Bool>) -> HashMap<Id, usize> {
    let mut class_of: Vec<Id> = Vec::with_capacity(expr.as_ref().len());
    let mut chosen = HashMap::new();
    for node in expr.as_ref() {
        let mut node = node.clone().map_children(|c| class_of[usize::from(c)]);
        let class = egraph.lookup(&mut node).expect("egg keeps every node it was given");
        class_of.push(class);
        chosen.entry(class).or_insert_with(|| {
            egraph[class].nodes.iter().position(|n| *n == node).expect("a looked-up node is in its class")
        });
    }
    chosen
}

/// The JSON id of the node at `position` in `class`.
fn node_id(class: Id, position: usize) -> String {
    format!("{class}.{position}")
}

/// The input circuit a saturated e-graph file records (see
/// [`CIRCUIT_CHOICES`]), as an extraction of `g` (the graph loaded from the
/// same file); `None` for an e-graph that records none. Errors when the
/// record names a class or node `g` lacks, or does not spell a valid
/// extraction.
pub fn recorded_circuit(
    g: &crate::egraph::EGraph,
    recorded: &crate::load::Recorded,
) -> Result<Option<crate::extraction::OriginalExtraction>> {
    let Some(choices) = &recorded.circuit_choices else { return Ok(None) };
    let extraction = crate::extraction::OriginalExtraction::from_json(g, &Value::Object(choices.clone()))
        .map_err(|e| anyhow::anyhow!("{CIRCUIT_CHOICES}: {e}"))?;
    if let Err(defect) = extraction.check(g) {
        bail!("{CIRCUIT_CHOICES} is not a valid extraction: {defect}");
    }
    Ok(Some(extraction))
}

/// The circuit as one term: each output's cover as a sum of products over
/// the inputs, the outputs joined by `&` in order (right-nested).
fn circuit_term(circuit: &Circuit) -> Result<(RecExpr<Bool>, Id)> {
    for name in &circuit.inputs {
        if matches!(name.as_str(), "0" | "1") {
            bail!("input {name:?} has a constant's name");
        }
    }
    let mut expr = RecExpr::default();
    let by_output: HashMap<&str, &Gate> = circuit.gates.iter().map(|g| (g.output.as_str(), g)).collect();
    let mut built: HashMap<String, Id> = HashMap::new();
    for input in &circuit.inputs {
        built.insert(input.clone(), expr.add(Bool::Symbol(input.as_str().into())));
    }
    let mut outputs = Vec::new();
    for o in &circuit.outputs {
        outputs.push(signal(o, &by_output, &mut built, &mut expr, &mut Vec::new())?);
    }
    let mut root = *outputs.last().expect("parse requires an output");
    for &o in outputs.iter().rev().skip(1) {
        root = expr.add(Bool::Outputs([o, root]));
    }
    Ok((expr, root))
}

/// The term of `name`, built once; `stack` catches combinational loops.
fn signal(
    name: &str,
    gates: &HashMap<&str, &Gate>,
    built: &mut HashMap<String, Id>,
    expr: &mut RecExpr<Bool>,
    stack: &mut Vec<String>,
) -> Result<Id> {
    if let Some(&id) = built.get(name) {
        return Ok(id);
    }
    let Some(gate) = gates.get(name) else {
        bail!("signal {name:?} is neither an input nor driven by a .names");
    };
    if stack.iter().any(|s| s == name) {
        bail!("line {}: signal {name:?} depends on itself (a combinational loop)", gate.line);
    }
    stack.push(name.to_string());
    let mut operands = Vec::new();
    for i in &gate.inputs {
        operands.push(signal(i, gates, built, expr, stack)?);
    }
    stack.pop();
    let constant = |expr: &mut RecExpr<Bool>, v: bool| expr.add(Bool::Symbol(if v { "1" } else { "0" }.into()));
    let mut sum: Option<Id> = None;
    for cube in &gate.cubes {
        let mut product: Option<Id> = None;
        for (c, &operand) in cube.chars().zip(&operands) {
            let literal = match c {
                '1' => operand,
                '0' => expr.add(Bool::Not(operand)),
                _ => continue,
            };
            product = Some(match product {
                Some(p) => expr.add(Bool::And([p, literal])),
                None => literal,
            });
        }
        let product = product.unwrap_or_else(|| constant(expr, true));
        sum = Some(match sum {
            Some(s) => expr.add(Bool::Or([s, product])),
            None => product,
        });
    }
    let on = sum.unwrap_or_else(|| constant(expr, false));
    let id = if gate.on_set { on } else { expr.add(Bool::Not(on)) };
    built.insert(name.to_string(), id);
    Ok(id)
}
