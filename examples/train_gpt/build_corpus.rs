// The training corpus, written at build time into OUT_DIR/corpus.txt: the
// repository's own text (README, LICENSE, docs and every Rust and C++
// source), so that it is ours to use (BSD-3-Clause), needs no download and
// is a few hundred KB of mixed prose and code. Included by build.rs.
//
// Invariant: the same files give the same bytes (paths sorted, each file
// preceded by a header line naming it).

use std::path::{Path, PathBuf};

/// Folders of the repository whose text goes in, walked recursively
/// (not `examples/`: the corpus does not change with this crate's code).
const FOLDERS: &[&str] = &[
    "docs",
    "src",
    "remat_runtime",
    "remat_derive",
    "reference",
    "tests",
    "benches",
    "xtask",
];

/// Single files at the repository root.
const FILES: &[&str] = &["README.md", "LICENSE"];

const EXTENSIONS: &[&str] = &["md", "rs", "cpp", "h"];

pub fn write() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("..").join("..");
    let mut paths: Vec<PathBuf> = FILES.iter().map(|f| root.join(f)).collect();
    for folder in FOLDERS {
        let dir = root.join(folder);
        println!("cargo:rerun-if-changed={}", dir.display());
        walk(&dir, &mut paths);
    }
    for f in FILES {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    paths.sort();
    let mut corpus = Vec::new();
    for path in &paths {
        let Ok(text) = std::fs::read(path) else {
            continue;
        };
        let shown = path.strip_prefix(&root).unwrap_or(path);
        corpus.extend_from_slice(format!("==> {} <==\n", shown.display()).as_bytes());
        corpus.extend_from_slice(&text);
        corpus.push(b'\n');
    }
    assert!(
        corpus.len() > 100_000,
        "the training corpus is only {} bytes: build train_gpt inside the remat repository",
        corpus.len()
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("corpus.txt");
    std::fs::write(&out, corpus).expect("OUT_DIR is writable");
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            // Build outputs and hidden folders are not text of ours.
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                walk(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|e| EXTENSIONS.iter().any(|x| e == *x))
        {
            out.push(path);
        }
    }
}
