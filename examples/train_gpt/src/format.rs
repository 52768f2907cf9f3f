//! Byte and time amounts as people read them.
//!
//! Invariant: binary units (KiB = 1024 B), three significant figures.

pub fn human_bytes(bytes: i64) -> String {
    let b = bytes as f64;
    let (value, unit) = if b.abs() >= 1024.0 * 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0 * 1024.0), "GiB")
    } else if b.abs() >= 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0), "MiB")
    } else if b.abs() >= 1024.0 {
        (b / 1024.0, "KiB")
    } else {
        return format!("{bytes} B");
    };
    if value.abs() >= 100.0 {
        format!("{value:.0} {unit}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

pub fn human_ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}
