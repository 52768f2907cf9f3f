//! The resident memory of this process, as the kernel counts it: what the
//! tests, the benchmarks and the training example read to see whether
//! memory stays flat and how high it went.
//!
//! Invariant: read from /proc/self/status, never estimated; `None` where
//! there is no /proc (not Linux) or the field is missing.

/// `VmRSS` of /proc/self/status in bytes: what this process has resident
/// now.
///
/// ```
/// use remat_reference::measure::resident_bytes;
/// if let Some(now) = resident_bytes() {
///     assert!(now > 0);
/// }
/// ```
pub fn resident_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// `VmHWM` of /proc/self/status in bytes: the most this process ever had
/// resident.
///
/// ```
/// use remat_reference::measure::peak_resident_bytes;
/// if let Some(peak) = peak_resident_bytes() {
///     assert!(peak > 0);
/// }
/// ```
pub fn peak_resident_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// A line such as `VmRSS:     123456 kB`, in bytes.
fn status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(key))?;
    let kib: u64 = value.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}
