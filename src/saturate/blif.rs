//! A reader for combinational BLIF: `.model`, `.inputs`, `.outputs` and
//! single-output `.names` covers, as ABC writes them after `strash` and as
//! `smoothe export` writes them.

use anyhow::{bail, Context, Result};

/// One `.names` gate: its operands, its output, and its cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// Operand signals, in the order of the cover's columns.
    pub inputs: Vec<String>,
    /// The signal it drives.
    pub output: String,
    /// The cover's cubes, one character per operand (`1`, `0`, `-`).
    pub cubes: Vec<String>,
    /// Whether the cubes list where the output is 1 (an on-set) rather
    /// than 0 (an off-set). A gate with no cube is constant 0.
    pub on_set: bool,
    /// The line of its `.names`, for errors.
    pub line: usize,
}

/// A combinational circuit read from BLIF.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Circuit {
    /// The model's name (empty without `.model`).
    pub name: String,
    /// Primary inputs, in order.
    pub inputs: Vec<String>,
    /// Primary outputs, in order.
    pub outputs: Vec<String>,
    /// The gates, in file order.
    pub gates: Vec<Gate>,
}

/// Parses BLIF text. Errors give the line and say what is not supported
/// (latches, subcircuits, library gates).
pub fn parse(text: &str) -> Result<Circuit> {
    let mut circuit = Circuit::default();
    let mut current: Option<Gate> = None;
    for (line_no, line) in logical_lines(text) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(&first) = words.first() else { continue };
        if first.starts_with('.') {
            circuit.gates.extend(current.take());
        }
        match first {
            ".model" => circuit.name = words[1..].join(" "),
            ".inputs" => circuit.inputs.extend(words[1..].iter().map(|w| w.to_string())),
            ".outputs" => circuit.outputs.extend(words[1..].iter().map(|w| w.to_string())),
            ".names" => {
                let Some((output, inputs)) = words[1..].split_last() else {
                    bail!("line {line_no}: .names without a signal");
                };
                let inputs = inputs.iter().map(|w| w.to_string()).collect();
                current =
                    Some(Gate { inputs, output: output.to_string(), cubes: Vec::new(), on_set: true, line: line_no });
            }
            ".end" => break,
            ".latch" | ".subckt" | ".gate" | ".mlatch" => {
                bail!("line {line_no}: {first} is not supported; give a combinational netlist of .names covers")
            }
            d if d.starts_with('.') => bail!("line {line_no}: unknown directive {d}"),
            _ => {
                let gate = current.as_mut().with_context(|| format!("line {line_no}: a cover line outside .names"))?;
                add_cube(gate, &words, line_no)?;
            }
        }
    }
    circuit.gates.extend(current.take());
    if circuit.outputs.is_empty() {
        bail!("the circuit has no .outputs");
    }
    Ok(circuit)
}

/// Adds one cover line (`cube bit`, or `bit` alone for a gate with no
/// operand) to `gate`.
fn add_cube(gate: &mut Gate, words: &[&str], line_no: usize) -> Result<()> {
    let (cube, bit) = match (gate.inputs.is_empty(), words) {
        (true, [bit]) => ("", *bit),
        (false, [cube, bit]) => (*cube, *bit),
        _ => bail!("line {line_no}: a cover line of {} operand(s) needs a cube and an output bit", gate.inputs.len()),
    };
    if cube.len() != gate.inputs.len() || !cube.chars().all(|c| matches!(c, '0' | '1' | '-')) {
        bail!("line {line_no}: cube {cube:?} does not fit {} operand(s)", gate.inputs.len());
    }
    let on = match bit {
        "1" => true,
        "0" => false,
        _ => bail!("line {line_no}: output bit {bit:?} is not 0 or 1"),
    };
    if !gate.cubes.is_empty() && on != gate.on_set {
        bail!("line {line_no}: a cover mixes on-set and off-set cubes");
    }
    gate.on_set = on;
    gate.cubes.push(cube.to_string());
    Ok(())
}

/// The file's lines with comments removed and `\` continuations joined,
/// each with its first line number.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let (body, continued) = match line.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        let entry = pending.get_or_insert_with(|| (i + 1, String::new()));
        entry.1.push(' ');
        entry.1.push_str(body);
        if !continued {
            out.extend(pending.take());
        }
    }
    out.extend(pending);
    out
}

impl Circuit {
    /// The values of the outputs for the given input values (in input
    /// order). Errors name a signal that nothing drives or a loop.
    pub fn evaluate(&self, values: &[bool]) -> Result<Vec<bool>> {
        let mut known: std::collections::HashMap<&str, bool> =
            self.inputs.iter().map(String::as_str).zip(values.iter().copied()).collect();
        let by_output: std::collections::HashMap<&str, &Gate> =
            self.gates.iter().map(|g| (g.output.as_str(), g)).collect();
        self.outputs.iter().map(|o| value_of(o, &by_output, &mut known, 0)).collect()
    }
}

fn value_of<'a>(
    signal: &'a str,
    gates: &std::collections::HashMap<&'a str, &'a Gate>,
    known: &mut std::collections::HashMap<&'a str, bool>,
    depth: usize,
) -> Result<bool> {
    if let Some(&v) = known.get(signal) {
        return Ok(v);
    }
    if depth > gates.len() {
        bail!("signal {signal:?} depends on itself (a combinational loop)");
    }
    let gate = gates.get(signal).with_context(|| format!("signal {signal:?} is neither an input nor driven"))?;
    let mut operands = Vec::with_capacity(gate.inputs.len());
    for i in &gate.inputs {
        operands.push(value_of(i, gates, known, depth + 1)?);
    }
    let hit = gate.cubes.iter().any(|cube| {
        cube.chars().zip(&operands).all(|(c, &v)| match c {
            '1' => v,
            '0' => !v,
            _ => true,
        })
    });
    let v = hit == gate.on_set;
    known.insert(signal, v);
    Ok(v)
}
