//! The shape of the source tree: no cycle among the library's files, no
//! file over 450 lines and no function over 100 lines.
//!
//! An edge from file A to file B is a `use` of, or a path to, an item of
//! B in A's code (comments and `#[cfg(test)]` modules left out); `mod`
//! lines do not count. Paths are resolved from `crate::`, `super::` and
//! `self::` to the longest module prefix that is a file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 450;
const MAX_FUNCTION_LINES: usize = 100;

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library's module path of a file under `src/` (`lib.rs` and
/// `mod.rs` name their folder's module); `None` for the binary's files.
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    Some(parts)
}

/// The text with comments, string and char literals blanked, so that
/// neither paths nor braces are read from them.
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|&c| c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = 2 + hashes;
            let end = rest[start..].find(&close).map_or(rest.len(), |e| start + e + close.len());
            out.push_str("\"\"");
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && rest.as_bytes()[j] != b'"' {
                j += if rest.as_bytes()[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            out.push_str("\"\"");
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if let Some(len) = char_literal(rest) {
            out.push_str("' '");
            i += len;
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a char literal at the start of `s` (not a lifetime).
fn char_literal(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.first() != Some(&b'\'') {
        return None;
    }
    if b.get(1) == Some(&b'\\') {
        return s[2..].find('\'').map(|e| e + 3);
    }
    let c = s[1..].chars().next()?;
    (s[1 + c.len_utf8()..].starts_with('\'')).then_some(2 + c.len_utf8())
}

/// The code before the first `#[cfg(test)]` (test modules sit at the end
/// of a file here).
fn without_tests(code: &str) -> &str {
    code.find("#[cfg(test)]").map_or(code, |i| &code[..i])
}

/// Every path a `use` item names, its groups expanded.
fn use_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("use ") {
        if i > 0 && code.as_bytes()[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let Some(end) = code[i..].find(';') else { continue };
        let item: String = code[i + 4..i + end].chars().filter(|c| !c.is_whitespace()).collect();
        expand(&item, &mut out);
    }
    out
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e` (`self` as `a`).
fn expand(item: &str, out: &mut Vec<String>) {
    let Some(open) = item.find('{') else {
        let path = item.split("as").next().unwrap_or(item);
        out.push(path.trim_end_matches("::self").to_string());
        return;
    };
    let prefix = item[..open].trim_end_matches("::");
    let inner = &item[open + 1..item.rfind('}').unwrap_or(item.len())];
    let (mut depth, mut start) = (0, 0);
    let mut parts = Vec::new();
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        if part == "self" {
            out.push(prefix.to_string());
        } else {
            expand(&format!("{prefix}::{part}"), out);
        }
    }
}

/// Paths written inline: `crate::a::b`, `super::c`.
fn inline_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && (code.as_bytes()[i - 1].is_ascii_alphanumeric() || code.as_bytes()[i - 1] == b':') {
                continue;
            }
            let path: String =
                code[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
            out.push(path);
        }
    }
    out
}

/// The file (module path) a path from module `from` leads to.
fn resolve(from: &[String], path: &str, files: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = match segments.first() {
        Some(&"crate") => Vec::new(),
        Some(&"super") | Some(&"self") => from.to_vec(),
        _ => return None,
    };
    let mut rest = &segments[..];
    if rest[0] == "crate" || rest[0] == "self" {
        rest = &rest[1..];
    }
    while rest.first() == Some(&"super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().map(|s| s.to_string()));
    (0..=base.len()).rev().map(|k| base[..k].to_vec()).find(|m| files.contains(m))
}

/// A cycle in `edges`, as the modules along it, if there is one.
fn find_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    // 0: unvisited, 1: on the stack, 2: done.
    fn visit(
        m: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        state.insert(m.clone(), 1);
        stack.push(m.clone());
        for next in edges.get(m).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == next).unwrap();
                    let mut cycle: Vec<String> = stack[at..].iter().map(|m| m.join("::")).collect();
                    cycle.push(next.join("::"));
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Each function in `code` with its first line and length in lines.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("fn ") else { continue };
        let before = line[..at].trim();
        let words_ok = before
            .split_whitespace()
            .all(|w| matches!(w, "pub" | "const" | "async" | "unsafe" | "extern" | "default") || w.starts_with("pub("));
        if !words_ok || (at > 0 && !line.as_bytes()[at - 1].is_ascii_whitespace()) {
            continue;
        }
        let name: String = line[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let (mut depth, mut opened) = (0i32, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened && depth == 0 => break,
                    _ => {}
                }
            }
            if !opened && l.contains(';') && depth == 0 {
                break;
            }
            if opened && depth == 0 {
                out.push((name.clone(), i + 1, j - i + 1));
                break;
            }
        }
    }
    out
}

fn src_files() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    (src, files)
}

#[test]
fn no_cycle_among_the_library_files() {
    let (src, files) = src_files();
    let modules: BTreeMap<Vec<String>, PathBuf> =
        files.iter().filter_map(|f| module_of(&src, f).map(|m| (m, f.clone()))).collect();
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    assert!(known.contains(&vec!["learn".to_string(), "model".to_string(), "network".to_string()]));
    let mut edges = BTreeMap::new();
    for (module, file) in &modules {
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        let code = without_tests(&code);
        let targets: BTreeSet<Vec<String>> = use_paths(code)
            .iter()
            .chain(&inline_paths(code))
            .filter_map(|p| resolve(module, p, &known))
            .filter(|t| t != module)
            .collect();
        edges.insert(module.clone(), targets);
    }
    let edge_count: usize = edges.values().map(BTreeSet::len).sum();
    assert!(edge_count > 100, "the parser found only {edge_count} edges");
    if let Some(cycle) = find_cycle(&edges) {
        panic!("the library's files import each other in a cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_the_parser_reads_groups() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let mut edges = BTreeMap::new();
    edges.insert(m("a"), BTreeSet::from([m("b")]));
    edges.insert(m("b"), BTreeSet::from([m("c")]));
    edges.insert(m("c"), BTreeSet::new());
    assert_eq!(find_cycle(&edges), None);
    edges.get_mut(&m("c")).unwrap().insert(m("a"));
    assert_eq!(find_cycle(&edges).unwrap(), vec!["a", "b", "c", "a"]);
    let code = code_only("use crate::x::{y::{self, Z}, w as v};\n// use crate::hidden;\nlet s = \"crate::no\";");
    assert_eq!(use_paths(&code), vec!["crate::x::y", "crate::x::y::Z", "crate::x::w"]);
    assert!(inline_paths(&code).iter().all(|p| !p.contains("hidden") && !p.contains("no")));
    let files = BTreeSet::from([m("x"), m("x::y")]);
    assert_eq!(resolve(&m("x::y"), "super::y::Z", &files), Some(m("x::y")));
    assert_eq!(resolve(&[], "crate::x::w", &files), Some(m("x")));
}

#[test]
fn no_file_or_function_is_too_long() {
    let (_, files) = src_files();
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.display().to_string();
        if text.lines().count() > MAX_FILE_LINES {
            long.push(format!("{name}: {} lines (most {MAX_FILE_LINES})", text.lines().count()));
        }
        for (f, line, len) in functions(&code_only(&text)) {
            if len > MAX_FUNCTION_LINES {
                long.push(format!("{name}:{line}: fn {f} has {len} lines (most {MAX_FUNCTION_LINES})"));
            }
        }
    }
    assert!(long.is_empty(), "too long:\n{}", long.join("\n"));
}

#[test]
fn the_function_counter_counts_bodies_not_signatures() {
    let code = "pub fn a(x: u8) -> u8 {\n    x\n}\ntrait T {\n    fn b(&self);\n}\nfn c() {\n    if true {\n    }\n}\n";
    let found = functions(code);
    assert_eq!(found, vec![("a".to_string(), 1, 3), ("c".to_string(), 7, 4)]);
}
