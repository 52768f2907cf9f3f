//! Numbers and names as the reports print them.

/// Bytes as remat's reports print them: binary units (1 KiB = 1024 B) with
/// two decimals, whole bytes below 1 KiB. Public so that a report of your
/// own, printed next to remat's, reads alike.
///
/// ```
/// use remat_runtime::diagnostics::human_bytes;
/// assert_eq!(human_bytes(512), "512 B");
/// assert_eq!(human_bytes(1536), "1.50 KiB");
/// assert_eq!(human_bytes(3 << 20), "3.00 MiB");
/// assert_eq!(human_bytes(-2048), "-2.00 KiB");
/// ```
pub fn human_bytes(n: i64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n.unsigned_abs() < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value.abs() >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// `layer.0, layer.1, layer.2, layer.5` → `layer.0-2, layer.5`.
pub(crate) fn compact_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(String, i64, i64)> = None;
    let flush = |run: &mut Option<(String, i64, i64)>, parts: &mut Vec<String>| {
        if let Some((p, a, b)) = run.take() {
            parts.push(if a == b {
                format!("{p}{a}")
            } else {
                format!("{p}{a}-{b}")
            });
        }
    };
    for name in names {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, number) = name.split_at(name.len() - digits);
        match (number.parse::<i64>(), &mut run) {
            (Ok(n), Some((p, _, b))) if p == prefix && *b + 1 == n => *b = n,
            (Ok(n), _) => {
                flush(&mut run, &mut parts);
                run = Some((prefix.to_string(), n, n));
            }
            (Err(_), _) => {
                flush(&mut run, &mut parts);
                parts.push(name.to_string());
            }
        }
    }
    flush(&mut run, &mut parts);
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::compact_names;

    #[test]
    fn names_with_consecutive_numbers_become_ranges() {
        let names = [
            "layers.0", "layers.1", "layers.2", "layers.5", "head", "layers.6",
        ];
        assert_eq!(
            compact_names(names.into_iter()),
            "layers.0-2, layers.5, head, layers.6"
        );
        assert_eq!(compact_names(["a"].into_iter()), "a");
    }
}
