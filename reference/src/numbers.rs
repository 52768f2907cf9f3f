//! Numbers as the tests, benchmarks and examples read and print them:
//! sizes given on a command line, bytes in MiB for columns and plots, and
//! the median of repeated measurements. Helpers of this repository's own
//! programs, kept out of remat's public surface; remat's reports print
//! bytes with `remat::diagnostics::human_bytes`.
//!
//! Invariant: the median is one of the values given (the upper middle one
//! for an even count), never an average of two, so it reads the same for
//! nanoseconds, durations and seconds.

use std::cmp::Ordering;

/// Bytes from a size such as `60MiB`, `1.5 GiB`, `512KiB`, `1000000` or
/// `2MB` (powers of 1024 for `KiB`/`MiB`/`GiB`, of 1000 for `KB`/`MB`/`GB`);
/// the error says what to write.
///
/// ```
/// use remat_reference::numbers::parse_bytes;
/// assert_eq!(parse_bytes("60MiB").unwrap(), 60 << 20);
/// assert_eq!(parse_bytes("1.5 KiB").unwrap(), 1536);
/// assert!(parse_bytes("lots").unwrap_err().contains("not a size"));
/// ```
pub fn parse_bytes(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        _ => f64::NAN,
    };
    match number.parse::<f64>() {
        Ok(n) if scale.is_finite() => Ok((n * scale).round() as i64),
        _ => Err(format!(
            "`{text}` is not a size; write e.g. `60MiB`, `1.5GiB` or a number of bytes"
        )),
    }
}

/// Bytes in MiB with two decimals, whatever the size: for columns that
/// compare sizes, where `human_bytes` would change units between rows.
///
/// ```
/// use remat_reference::numbers::mib;
/// assert_eq!(mib(3 << 19), "1.50 MiB");
/// assert_eq!(mib(1 << 10), "0.00 MiB");
/// ```
pub fn mib(bytes: i64) -> String {
    format!("{:.2} MiB", in_mib(bytes))
}

/// Bytes as a number of MiB, for plots and arithmetic ([`mib`] prints it).
///
/// ```
/// use remat_reference::numbers::in_mib;
/// assert_eq!(in_mib(3 << 19), 1.5);
/// ```
pub fn in_mib(bytes: i64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// The median of `values`: the middle one in order, for an even count the
/// upper of the two middle ones. Values not comparable with themselves
/// (NaN) are left out; `None` when nothing is left.
///
/// ```
/// use remat_reference::numbers::median;
/// use std::time::Duration;
/// assert_eq!(median([3u64, 1, 2]), Some(2));
/// assert_eq!(median([4, 1, 3, 2]), Some(3));
/// assert_eq!(median([1.5, f64::NAN, 0.5, 2.5]), Some(1.5));
/// assert_eq!(median(Vec::<Duration>::new()), None);
/// ```
pub fn median<T: PartialOrd>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut v: Vec<T> = values
        .into_iter()
        .filter(|x| x.partial_cmp(x).is_some())
        .collect();
    if v.is_empty() {
        return None;
    }
    let middle = v.len() / 2;
    // Total once the incomparable values are gone.
    v.select_nth_unstable_by(middle, |a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    Some(v.swap_remove(middle))
}

/// How a small benchmark binary was started: `benching` when `cargo bench`
/// ran it (it appends `--bench`), else a smoke test of one round (`cargo
/// test --all-targets` runs benches without it); `rounds` is the first
/// number on the command line, else `default` when benching.
///
/// ```
/// let (benching, rounds) = remat_reference::numbers::bench_rounds(31);
/// assert_eq!(rounds, if benching { 31 } else { 1 });
/// ```
pub fn bench_rounds(default: usize) -> (bool, usize) {
    let benching = std::env::args().any(|a| a == "--bench");
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(if benching { default } else { 1 });
    (benching, rounds)
}
