//! The known names closest to a name that matched nothing, for messages.
//!
//! Invariant: suggestions come only from names the model really has (met
//! in a forward or listed by `regions`), nearest first, ties in the
//! model's order.

/// Up to three of `known` closest to `wanted` by edit distance, skipping
/// those that share little with it (more edits than a quarter of its
/// length, or than 2 for short names).
pub(crate) fn nearest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = wanted.chars().count().div_ceil(4).max(2);
    let mut scored: Vec<(usize, usize, &str)> = known
        .into_iter()
        .enumerate()
        .map(|(i, k)| (distance(wanted, k), i, k))
        .filter(|&(d, _, _)| d <= limit)
        .collect();
    scored.sort_unstable();
    let mut out: Vec<&str> = Vec::new();
    for (_, _, k) in scored {
        if !out.contains(&k) && out.len() < 3 {
            out.push(k);
        }
    }
    out
}

/// `"; nearest: `a`, `b`"`, or nothing.
pub(crate) fn nearest_note<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let near = nearest(wanted, known);
    if near.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
        format!(" (nearest: {})", quoted.join(", "))
    }
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != cb)).min(row[j] + 1).min(up + 1);
            diag = up;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names_first_unrelated_ones_left_out() {
        let known = [
            "layers.0::attention",
            "layers.0::mlp",
            "layers.1::attention",
        ];
        assert_eq!(
            nearest("layers.0::atention", known),
            ["layers.0::attention", "layers.1::attention"]
        );
        assert_eq!(nearest("zzzzzzzz", known), Vec::<&str>::new());
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(
            nearest_note("layers.0::mpl", known),
            " (nearest: `layers.0::mlp`)"
        );
    }
}
