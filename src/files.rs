//! Result files written so that a kill never leaves half of one in place:
//! through a temporary file beside the target, then a rename.

use anyhow::{Context, Result};
use std::path::Path;

/// Writes `text` to `path` through a temporary file and a rename, creating
/// the directory if needed.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("result");
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `value` as pretty JSON (see [`write_text`]).
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    write_text(path, &(serde_json::to_string_pretty(value)? + "\n"))
}
