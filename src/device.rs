//! Devices and process-level performance settings.

use anyhow::{bail, Result};
use candle_core::Device;

/// Parses `cpu` or `cuda` / `cuda:N` into a Candle device. `cuda` needs a
/// build with the `cuda` cargo feature and a visible GPU.
pub fn parse(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        s if s == "cuda" || s.starts_with("cuda:") => {
            let ordinal: usize = match s.strip_prefix("cuda:") {
                Some(n) => n.parse().map_err(|_| anyhow::anyhow!("bad device {s:?}: expected cuda:N"))?,
                None => 0,
            };
            if !cfg!(feature = "cuda") {
                bail!(
                    "this smoothe was built without CUDA support; rebuild with `cargo build --release --features cuda`"
                );
            }
            Ok(Device::new_cuda(ordinal)?)
        }
        other => bail!("unknown device {other:?}; expected cpu or cuda[:N]"),
    }
}

/// Keeps large buffers in the heap instead of returning them to the OS
/// after every step (glibc otherwise maps and unmaps each big tensor; the
/// notes measured 2-5x on Candle CPU code). No effect elsewhere.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator thresholds; called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
