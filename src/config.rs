//! Configuration files: TOML with one table per command, every field
//! optional (missing fields keep their defaults).

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

/// A setting chosen by name from a fixed set (kebab-case or lowercase, as
/// the TOML files spell it), so a command line can offer and check the
/// same names without the library knowing about command lines.
///
/// ```
/// use smoothe::config::Choice;
/// use smoothe::relax::Combine;
/// assert_eq!(Combine::parse("hybrid"), Ok(Combine::Hybrid));
/// assert!(Combine::parse("average").unwrap_err().contains("independent, correlated"));
/// ```
pub trait Choice: DeserializeOwned + Clone + Send + Sync + 'static {
    /// Every accepted name.
    const NAMES: &'static [&'static str];

    /// The setting called `name`; the error lists the accepted names.
    fn parse(name: &str) -> std::result::Result<Self, String> {
        Self::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(name))
            .map_err(|_| format!("unknown value {name:?}; expected one of {}", Self::NAMES.join(", ")))
    }
}

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
