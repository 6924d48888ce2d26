//! A reader for combinational AIGER, ASCII (`aag`) and binary (`aig`), as
//! ABC's `write_aiger` writes it: and-inverter graphs become a [`Circuit`]
//! of two-input covers, so `saturate` treats them as it treats BLIF.
//!
//! Names come from the symbol table (`i0 a`, `o0 sum`); an input or output
//! without one is `i<k>` or `o<k>`, and an AND gate drives `_n<variable>`.
//! Latches and the AIGER 1.9 sections (bad states, constraints, justice,
//! fairness) are refused: the circuit must be combinational.

use super::blif::{Circuit, Gate};
use anyhow::{bail, Context, Result};

/// The signal a constant operand reads, a gate with no cube (always 0).
const FALSE: &str = "_false";

/// Parses AIGER bytes (`aag` or `aig`). Errors name what is wrong and, in
/// the ASCII parts, the line.
pub fn parse(bytes: &[u8]) -> Result<Circuit> {
    let mut reader = Reader { bytes, pos: 0, line: 0 };
    let header = reader.line_text()?;
    let words: Vec<&str> = header.split_whitespace().collect();
    let binary = match words.first() {
        Some(&"aag") => false,
        Some(&"aig") => true,
        _ => bail!("line 1: not an AIGER header (expected \"aag\" or \"aig\")"),
    };
    let numbers: Vec<usize> = words[1..]
        .iter()
        .map(|w| w.parse().with_context(|| format!("line 1: {w:?} is not a count")))
        .collect::<Result<_>>()?;
    if numbers.len() < 5 {
        bail!("line 1: the header needs M I L O A");
    }
    let (max_var, n_inputs, n_latches, n_outputs, n_ands) =
        (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4]);
    if n_latches > 0 {
        bail!("line 1: {n_latches} latch(es); only combinational circuits can be saturated");
    }
    if numbers[5..].iter().any(|&n| n > 0) {
        bail!("line 1: bad-state, constraint, justice or fairness sections are not supported");
    }
    let mut names: Vec<Option<String>> = vec![None; max_var + 1];
    let mut inputs = Vec::with_capacity(n_inputs);
    for k in 0..n_inputs {
        let var = if binary { k + 1 } else { reader.literal(max_var)? / 2 };
        inputs.push(var);
        names[var] = Some(format!("i{k}"));
    }
    let outputs: Vec<usize> = (0..n_outputs).map(|_| reader.literal(max_var)).collect::<Result<_>>()?;
    let mut ands = Vec::with_capacity(n_ands);
    for k in 0..n_ands {
        ands.push(if binary {
            let lhs = 2 * (n_inputs + k + 1);
            let rhs0 = lhs.checked_sub(reader.delta()?).context("a binary AND's first delta is too large")?;
            let rhs1 = rhs0.checked_sub(reader.delta()?).context("a binary AND's second delta is too large")?;
            [lhs, rhs0, rhs1]
        } else {
            let line = reader.line_text()?;
            let lits: Vec<usize> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
            if lits.len() != 3 || lits.iter().any(|&l| l / 2 > max_var) || lits[0] % 2 == 1 {
                bail!("line {}: expected an AND \"lhs rhs0 rhs1\" within M = {max_var}", reader.line);
            }
            [lits[0], lits[1], lits[2]]
        });
    }
    let mut output_names: Vec<String> = (0..n_outputs).map(|k| format!("o{k}")).collect();
    while let Ok(line) = reader.line_text() {
        if line.starts_with('c') {
            break;
        }
        let Some((kind, name)) = line.split_once(' ') else { continue };
        let index = kind.get(1..).and_then(|k| k.parse::<usize>().ok());
        match (kind.get(..1), index) {
            (Some("i"), Some(k)) if k < n_inputs => names[inputs[k]] = Some(name.trim().to_string()),
            (Some("o"), Some(k)) if k < n_outputs => output_names[k] = name.trim().to_string(),
            _ => {}
        }
    }
    Ok(circuit(&names, &inputs, &ands, &outputs, output_names))
}

/// The circuit of the parsed sections: one two-input cover per AND, one
/// buffer or inverter per output.
fn circuit(
    names: &[Option<String>],
    inputs: &[usize],
    ands: &[[usize; 3]],
    outputs: &[usize],
    output_names: Vec<String>,
) -> Circuit {
    let signal = |lit: usize| -> String {
        match lit / 2 {
            0 => FALSE.to_string(),
            v => names[v].clone().unwrap_or_else(|| format!("_n{v}")),
        }
    };
    let polarity = |lit: usize| if lit % 2 == 1 { '0' } else { '1' };
    let mut gates = Vec::new();
    let mut uses_false = false;
    for &[lhs, rhs0, rhs1] in ands {
        uses_false |= rhs0 / 2 == 0 || rhs1 / 2 == 0;
        let cube = format!("{}{}", polarity(rhs0), polarity(rhs1));
        gates.push(Gate {
            inputs: vec![signal(rhs0), signal(rhs1)],
            output: signal(lhs),
            cubes: vec![cube],
            on_set: true,
            line: 0,
        });
    }
    for (&lit, name) in outputs.iter().zip(&output_names) {
        uses_false |= lit / 2 == 0;
        gates.push(Gate {
            inputs: vec![signal(lit)],
            output: name.clone(),
            cubes: vec![polarity(lit).to_string()],
            on_set: true,
            line: 0,
        });
    }
    if uses_false {
        gates.push(Gate { inputs: Vec::new(), output: FALSE.into(), cubes: Vec::new(), on_set: true, line: 0 });
    }
    Circuit {
        name: String::new(),
        inputs: inputs.iter().map(|&v| signal(2 * v)).collect(),
        outputs: output_names,
        gates,
    }
}

/// A cursor over the file: ASCII lines and binary deltas.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
}

impl Reader<'_> {
    /// The next line, without its newline.
    fn line_text(&mut self) -> Result<String> {
        if self.pos >= self.bytes.len() {
            bail!("line {}: the file ends early", self.line + 1);
        }
        let end = self.bytes[self.pos..].iter().position(|&b| b == b'\n').map_or(self.bytes.len(), |i| self.pos + i);
        let text = String::from_utf8_lossy(&self.bytes[self.pos..end]).trim_end_matches('\r').to_string();
        self.pos = end + 1;
        self.line += 1;
        Ok(text)
    }

    /// A line holding one literal no greater than `2 * max_var + 1`.
    fn literal(&mut self, max_var: usize) -> Result<usize> {
        let text = self.line_text()?;
        match text.split_whitespace().next().and_then(|w| w.parse::<usize>().ok()) {
            Some(lit) if lit / 2 <= max_var => Ok(lit),
            _ => bail!("line {}: expected a literal within M = {max_var}, got {text:?}", self.line),
        }
    }

    /// One binary delta: 7 bits per byte, low bits first, the high bit set
    /// on every byte but the last.
    fn delta(&mut self) -> Result<usize> {
        let mut value = 0usize;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.bytes.get(self.pos) else { bail!("the binary AND section ends early") };
            self.pos += 1;
            value |= ((byte & 0x7f) as usize) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        bail!("a binary delta is longer than 64 bits")
    }
}
