//! The process's peak memory, for results that report what a run needed.

/// The most resident memory this process has held so far, in bytes (the
/// kernel's high-water mark, `VmHWM`); `None` where the platform does not
/// say (not Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
