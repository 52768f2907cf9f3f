//! docs/architecture.md stays true to the tree: every source file of the
//! runtime, its C++ bridge, the macros, the reference crate and the root
//! appears in the layout table of its folder, and every file a table
//! lists exists.

use std::path::{Path, PathBuf};

/// The folders the layout covers, each with its section's heading and the
/// subfolder of unit tests it leaves out.
const FOLDERS: &[(&str, Option<&str>)] = &[
    ("remat_runtime/src", None),
    ("remat_runtime/csrc", None),
    ("remat_derive/src", Some("tests")),
    ("reference/src", None),
    ("src", None),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, base: &Path, skip: Option<&str>, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if Some(rel.as_str()) != skip {
                files(&path, base, skip, out);
            }
        } else if ["rs", "cpp", "h"]
            .iter()
            .any(|e| path.extension().is_some_and(|x| x == *e))
        {
            out.push(rel);
        }
    }
}

/// The paths in backticks of the first column of the section's table.
fn listed(doc: &str, folder: &str) -> Vec<String> {
    let heading = format!("### `{folder}`");
    let section = doc
        .split_once(&heading)
        .unwrap_or_else(|| panic!("docs/architecture.md has no section {heading}"))
        .1;
    let section = section.split("\n### ").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(path, _)| path.to_string())
        .collect()
}

#[test]
fn every_source_file_is_in_the_layout_and_every_listed_file_exists() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut problems = Vec::new();
    for (folder, skip) in FOLDERS {
        let base = root().join(folder);
        let mut present = Vec::new();
        files(&base, &base, *skip, &mut present);
        let listed = listed(&doc, folder);
        for f in &present {
            if !listed.contains(f) {
                problems.push(format!("{folder}/{f} is not in docs/architecture.md"));
            }
        }
        for f in &listed {
            if !present.contains(f) {
                problems.push(format!("docs/architecture.md lists {folder}/{f}, which is gone"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
