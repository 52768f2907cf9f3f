//! Peak resident memory of this process, from the kernel's own record.
//!
//! Invariant: read, never estimated; `None` where /proc is not there.

/// `VmHWM` of /proc/self/status in bytes: the most this process ever had
/// resident.
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
