//! Configuration files: TOML with one table per command, every field
//! optional (missing fields keep their defaults).

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads table `section` of the TOML file at `path` into `T`; a missing
/// table gives `T::default()`. Unknown fields are errors, so typos do not
/// pass silently.
pub fn load_section<T: DeserializeOwned + Default>(path: &Path, section: &str) -> Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_section(&text, section).with_context(|| format!("{}", path.display()))
}

/// Parses table `section` of TOML `text` (see [`load_section`]).
pub fn parse_section<T: DeserializeOwned + Default>(text: &str, section: &str) -> Result<T> {
    let table: toml::Table = toml::from_str(text).context("invalid TOML")?;
    match table.get(section) {
        None => Ok(T::default()),
        Some(value) => value.clone().try_into().with_context(|| format!("in table [{section}]")),
    }
}
