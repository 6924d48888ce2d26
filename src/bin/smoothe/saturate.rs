//! `smoothe saturate`: a combinational circuit (BLIF or AIGER) to an
//! e-graph of its Boolean rewritings.

use crate::terminal::{bars, write_json};
use anyhow::{Context, Result};
use smoothe::saturate::{read_circuit, saturate, Limits};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SaturateArgs {
    /// The circuit: combinational BLIF of single-output .names covers, or
    /// AIGER (ASCII .aag or binary .aig, told by its header).
    circuit: PathBuf,
    /// Where to write the e-graph (egraph-serialize JSON); stdout without.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Stop once the e-graph has this many e-nodes.
    #[arg(long, default_value_t = Limits::default().nodes)]
    node_limit: usize,
    /// Stop after this many iterations of every rule.
    #[arg(long, default_value_t = Limits::default().iterations)]
    iter_limit: usize,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = Limits::default().seconds)]
    time_limit: f64,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: SaturateArgs) -> Result<ExitCode> {
    let bytes = std::fs::read(&a.circuit).with_context(|| format!("cannot read {}", a.circuit.display()))?;
    let circuit = read_circuit(&bytes).with_context(|| format!("{}", a.circuit.display()))?;
    let limits = Limits { nodes: a.node_limit, iterations: a.iter_limit, seconds: a.time_limit };
    let (egraph, report) =
        saturate(&circuit, limits, bars(!a.quiet)).with_context(|| format!("{}", a.circuit.display()))?;
    write_json(a.output.as_deref(), &egraph)?;
    eprintln!(
        "{} e-classes, {} e-nodes after {} iteration(s) ({}, {:.2} s)",
        report.classes, report.nodes, report.iterations, report.stop, report.seconds
    );
    Ok(ExitCode::SUCCESS)
}
