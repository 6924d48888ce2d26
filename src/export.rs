//! Writing an extraction of a boolean e-graph as a BLIF netlist, so logic
//! synthesis tools (ABC, yosys) can measure it.
//!
//! Two operator languages are understood:
//! - esyn: `*` AND, `+` OR, `!` NOT, `&` pairs of outputs (nested; flattened
//!   into primary outputs, left to right), constants `0`/`1`, any other leaf
//!   is a named input;
//! - boole: `and`, `or`, `not`, `xor3`, `maj`, `fa` (a full adder whose sum
//!   and carry are read with `fst`/`snd`), an `out` root listing the outputs,
//!   constants `true`/`false`/`0`/`1`, any other leaf is a named input.
//!
//! Every gate has at most two inputs except MAJ3 (`xor3` becomes two chained
//! XOR2, the first two operands first). Operands are written in the order
//! the chosen e-node lists them, so a netlist is the extraction as chosen:
//! the input circuit that `smoothe saturate` records exports with the
//! input's own operand order, and maps to the input's own area wherever
//! saturation merged none of its signals (ABC's mapped area changes with
//! operand order alone, so two extractions that differ only in the order
//! of a symmetric gate's operands are two netlists).

use crate::egraph::{ClassIdx, EGraph, NodeIdx};
use crate::extraction::OriginalExtraction;
use anyhow::{bail, Result};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

/// What a class's chosen node stands for in the netlist.
#[derive(Debug, Clone)]
enum Signal {
    /// One wire.
    Wire(String),
    /// A full adder: (sum, carry).
    Pair(String, String),
    /// Outputs to flatten (esyn `&`, boole `out`).
    Outputs(Vec<String>),
}

/// Keeps letters, digits and `_`; anything else becomes `_`.
fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

/// The names of a circuit's inputs and outputs, in order, as `smoothe
/// saturate` records them in the e-graph file (`"inputs"`, `"outputs"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitNames {
    /// Primary inputs, in order.
    pub inputs: Vec<String>,
    /// Primary outputs, in order.
    pub outputs: Vec<String>,
}

impl CircuitNames {
    /// The names an e-graph file records (`"inputs"` and `"outputs"`), if
    /// it has both.
    pub fn of_record(recorded: &crate::load::Recorded) -> Option<CircuitNames> {
        match (&recorded.inputs, &recorded.outputs) {
            (Some(inputs), Some(outputs)) => Some(CircuitNames { inputs: inputs.clone(), outputs: outputs.clone() }),
            _ => None,
        }
    }
}

/// Writes `extraction` of `g` as BLIF (model name `model`): inputs are the
/// leaves' names made safe, sorted; outputs are `po0`, `po1`, ... Errors
/// name the node whose operator is not understood or whose operands do not
/// fit.
pub fn to_blif(g: &EGraph, extraction: &OriginalExtraction, model: &str) -> Result<String> {
    write_blif(g, extraction, model, None)
}

/// Writes `extraction` of `g` as BLIF with the circuit's own input and
/// output names, in their order (every input, used or not), so that an
/// equivalence checker can compare it with the circuit. Errors when the
/// extraction reads an input the names do not list or has another number
/// of outputs.
pub fn to_blif_named(g: &EGraph, extraction: &OriginalExtraction, model: &str, names: &CircuitNames) -> Result<String> {
    write_blif(g, extraction, model, Some(names))
}

fn write_blif(
    g: &EGraph,
    extraction: &OriginalExtraction,
    model: &str,
    names: Option<&CircuitNames>,
) -> Result<String> {
    let order = extraction.check(g)?;
    let mut signal: HashMap<ClassIdx, Signal> = HashMap::new();
    let mut inputs: BTreeSet<String> = BTreeSet::new();
    let mut gates = String::new();
    let mut outputs: Vec<String> = Vec::new();
    // Wires start with `_n` so they never collide with input names.
    let wire = |c: ClassIdx| format!("_n{}", sanitize(g.class_name(c)));
    for &c in &order {
        let n: NodeIdx = extraction.choices()[c.index()].expect("checked");
        let kids: Vec<Signal> = g.children(n).iter().map(|k| signal[k].clone()).collect();
        let sig = node_signal(g, n, wire(c), &kids, &mut gates, &mut inputs, names.is_some())?;
        signal.insert(c, sig);
    }
    for &r in g.roots() {
        match &signal[&r] {
            Signal::Wire(w) => outputs.push(w.clone()),
            Signal::Outputs(o) => outputs.extend(o.iter().cloned()),
            Signal::Pair(s, c) => outputs.extend([s.clone(), c.clone()]),
        }
    }
    let (inputs, po): (Vec<String>, Vec<String>) = match names {
        Some(names) => {
            if let Some(unknown) = inputs.iter().find(|i| !names.inputs.contains(i)) {
                bail!("the extraction reads input {unknown:?}, which the circuit's input names do not list");
            }
            if names.outputs.len() != outputs.len() {
                bail!("the extraction has {} outputs, the circuit names {}", outputs.len(), names.outputs.len());
            }
            (names.inputs.clone(), names.outputs.clone())
        }
        None => (inputs.into_iter().collect(), (0..outputs.len()).map(|i| format!("po{i}")).collect()),
    };
    let mut out = String::new();
    let _ = writeln!(out, ".model {}", sanitize(model));
    let _ = writeln!(out, ".inputs {}", inputs.join(" "));
    let _ = writeln!(out, ".outputs {}", po.join(" "));
    out.push_str(&gates);
    for (p, w) in po.iter().zip(&outputs) {
        // An output named as the input it reads needs no buffer.
        if p != w {
            gate(&mut out, std::slice::from_ref(w), p, &["1"]);
        }
    }
    out.push_str(".end\n");
    Ok(out)
}

/// The signal of node `n` (named `name` if it is a gate) from its
/// operands' signals `kids`: its gates appended to `gates`, a primary
/// input recorded in `inputs`. Errors name the node.
fn node_signal(
    g: &EGraph,
    n: NodeIdx,
    name: String,
    kids: &[Signal],
    gates: &mut String,
    inputs: &mut BTreeSet<String>,
    raw_names: bool,
) -> Result<Signal> {
    let op = g.op(n);
    let wires = |what: &str| -> Result<Vec<String>> {
        kids.iter()
            .map(|s| match s {
                Signal::Wire(w) => Ok(w.clone()),
                _ => bail!("node {:?} ({what}): an operand is not a single wire", g.node_name(n)),
            })
            .collect()
    };
    let arity = |k: usize| -> Result<()> {
        if kids.len() != k {
            bail!("node {:?}: operator {op:?} expects {k} operands, has {}", g.node_name(n), kids.len());
        }
        Ok(())
    };
    Ok(match op {
        "*" | "and" => {
            arity(2)?;
            gate(gates, &wires(op)?, &name, &["11"]);
            Signal::Wire(name)
        }
        "+" | "or" => {
            arity(2)?;
            gate(gates, &wires(op)?, &name, &["1-", "-1"]);
            Signal::Wire(name)
        }
        "^" | "xor" => {
            arity(2)?;
            gate(gates, &wires(op)?, &name, &["10", "01"]);
            Signal::Wire(name)
        }
        "!" | "not" => {
            arity(1)?;
            gate(gates, &wires(op)?, &name, &["0"]);
            Signal::Wire(name)
        }
        "xor3" => {
            arity(3)?;
            let w = wires(op)?;
            let mid = format!("{name}_x");
            gate(gates, &w[..2], &mid, &["10", "01"]);
            gate(gates, &[mid, w[2].clone()], &name, &["10", "01"]);
            Signal::Wire(name)
        }
        "maj" => {
            arity(3)?;
            gate(gates, &wires(op)?, &name, &["11-", "1-1", "-11"]);
            Signal::Wire(name)
        }
        "fa" => {
            arity(3)?;
            let w = wires(op)?;
            let (sum, carry) = (format!("{name}_s"), format!("{name}_c"));
            let mid = format!("{name}_x");
            gate(gates, &w[..2], &mid, &["10", "01"]);
            gate(gates, &[mid, w[2].clone()], &sum, &["10", "01"]);
            gate(gates, &w, &carry, &["11-", "1-1", "-11"]);
            Signal::Pair(sum, carry)
        }
        "fst" | "snd" => {
            arity(1)?;
            match &kids[0] {
                Signal::Pair(s, c) => Signal::Wire(if op == "fst" { s.clone() } else { c.clone() }),
                _ => bail!("node {:?}: {op} of something that is not a full adder", g.node_name(n)),
            }
        }
        "&" | "out" => {
            let mut outs = Vec::new();
            for k in kids {
                match k {
                    Signal::Wire(w) => outs.push(w.clone()),
                    Signal::Outputs(o) => outs.extend(o.iter().cloned()),
                    Signal::Pair(..) => bail!("node {:?}: a full adder used as an output", g.node_name(n)),
                }
            }
            Signal::Outputs(outs)
        }
        "0" | "false" | "1" | "true" if kids.is_empty() => {
            let rows: &[&str] = if op == "1" || op == "true" { &[""] } else { &[] };
            gate(gates, &[], &name, rows);
            Signal::Wire(name)
        }
        _ if kids.is_empty() => {
            let input = if raw_names { op.to_string() } else { sanitize(op) };
            inputs.insert(input.clone());
            Signal::Wire(input)
        }
        _ => bail!("node {:?}: operator {op:?} is not a boolean gate this exporter knows", g.node_name(n)),
    })
}

/// Appends a `.names` block: inputs, output, and the on-set rows.
fn gate(out: &mut String, inputs: &[String], output: &str, rows: &[&str]) {
    let _ = write!(out, ".names");
    for i in inputs {
        let _ = write!(out, " {i}");
    }
    let _ = writeln!(out, " {output}");
    for r in rows {
        if r.is_empty() {
            let _ = writeln!(out, "1");
        } else {
            let _ = writeln!(out, "{r} 1");
        }
    }
}
