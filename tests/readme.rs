//! The README's command lines: each is one line that runs from the
//! repository root on files the repository holds, and the quick ones
//! (no oracle) run and succeed, in order.

mod common;

use std::path::Path;

/// Splits a command line into words, honouring single and double quotes.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut in_word) = (Vec::new(), String::new(), None, false);
    for ch in line.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(ch);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The smoothe arguments of every indented or fenced README line that
/// starts with `smoothe` or `cargo run`.
fn readme_commands() -> Vec<(String, Vec<String>)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(Path::new(root).join("README.md")).unwrap();
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !(fenced || line.starts_with("    ")) {
            continue;
        }
        let line = line.trim();
        let args = if let Some(rest) = line.strip_prefix("cargo run --release -- ") {
            words(rest)
        } else if let Some(rest) = line.strip_prefix("smoothe ") {
            words(rest)
        } else {
            continue;
        };
        out.push((line.to_string(), args));
    }
    out
}

#[test]
fn readme_commands_are_one_line_on_repository_files_and_the_quick_ones_run() {
    let root = env!("CARGO_MANIFEST_DIR");
    let commands = readme_commands();
    assert!(commands.len() >= 8, "only {} README commands found", commands.len());
    let mut ran = 0;
    let mut made: Vec<String> = Vec::new();
    for (line, args) in &commands {
        assert!(!line.ends_with('\\'), "{line}: a command must fit on one line");
        for a in args.iter().filter(|a| a.ends_with(".json") || a.ends_with(".sh") || a.ends_with(".py")) {
            let written = a.starts_with("runs/");
            assert!(written || Path::new(root).join(a).is_file(), "{line}: {a} is not a file of the repository");
        }
        // Outputs of commands that ran; an input under runs/ made by a
        // command that did not run (an oracle's) skips the command.
        let output = args.iter().position(|a| a == "-o" || a == "--output").map(|i| args[i + 1].clone());
        let inputs_made =
            args.iter().filter(|a| a.starts_with("runs/") && Some(*a) != output.as_ref()).all(|a| made.contains(a));
        if !["extract", "check", "info", "export"].contains(&args[0].as_str()) || !inputs_made {
            continue;
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_smoothe"))
            .args(args)
            .current_dir(root)
            .output()
            .expect("binary runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{line}: {err}");
        if line.contains("delay<=20") {
            assert!(
                err.contains("delay<=20: ") && err.contains("(met, margin"),
                "not the line the README quotes: {err}"
            );
        }
        made.extend(output);
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} quick README commands ran");
}
