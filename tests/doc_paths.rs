//! The docs cannot drift from the tree: every repository path named in a
//! Markdown file or in a module header (`//!`) exists, and no file names a
//! tracker's issue by number (a reader of the repository has no tracker:
//! a test or a comment says what it is about, and the history is in git).
//!
//! A path is a word starting with one of the repository's top folders
//! (`docs/semantics.md`, `remat_runtime/src/io.rs`, `tests/runtime/`); in
//! a layout table of docs/architecture.md it may also be relative to the
//! folder its section heading names. A `*` right after a path makes it a
//! prefix that some file must start with. CHANGELOG.md is history: it names
//! files that are gone, on purpose.

use std::path::{Path, PathBuf};

/// The folders at the top of the repository that a path may start with.
const TOPS: &[&str] = &[
    ".ci/",
    "bench/",
    "benches/",
    "docs/",
    "examples/",
    "reference/",
    "remat_derive/",
    "remat_distributed/",
    "remat_runtime/",
    "src/",
    "tests/",
    "ui-tests/",
    "xtask/",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.md` and `.rs` file of the repository with its text, by path
/// from the root.
fn source_texts() -> Vec<(String, String)> {
    let root = root();
    let mut files = Vec::new();
    sources(&root, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// Every `.md` and `.rs` file below `dir` (build outputs and hidden folders
/// left out).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') && name != ".ci" || name == "target" {
            continue;
        }
        if path.is_dir() {
            sources(&path, out);
        } else if name.ends_with(".md") || name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')
}

/// The paths named in `text`, each with whether a `*` follows it.
fn named_paths(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let starts_word = i == 0 || !is_path_char(chars[i - 1].1);
        if starts_word && TOPS.iter().any(|t| text[at..].starts_with(t)) {
            let mut j = i;
            while j < chars.len() && is_path_char(chars[j].1) {
                j += 1;
            }
            let end = chars.get(j).map_or(text.len(), |(e, _)| *e);
            let glob = chars.get(j).is_some_and(|(_, c)| *c == '*');
            let path = text[at..end].trim_end_matches(['.', ',', ':', ';']);
            out.push((path.to_string(), glob));
            i = j;
        } else {
            let _ = c;
            i += 1;
        }
    }
    out
}

/// Whether `path` (or, for a glob, some file starting with it) exists under
/// `base`.
fn exists(base: &Path, path: &str, glob: bool) -> bool {
    if !glob {
        return base.join(path.trim_end_matches('/')).exists();
    }
    let (dir, prefix) = path.rsplit_once('/').unwrap_or(("", path));
    std::fs::read_dir(base.join(dir)).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    })
}

/// The folder a `### `folder`` heading of docs/architecture.md names.
fn section_folder(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("### `")?;
    rest.strip_suffix('`')
}

#[test]
fn every_path_the_docs_and_module_headers_name_exists() {
    let root = root();
    let mut missing = Vec::new();
    for (rel, text) in source_texts() {
        if rel == "CHANGELOG.md" {
            continue;
        }
        let markdown = rel.ends_with(".md");
        let mut section: Option<String> = None;
        for (n, line) in text.lines().enumerate() {
            if markdown {
                if let Some(folder) = section_folder(line) {
                    section = Some(folder.to_string());
                }
            } else if !line.trim_start().starts_with("//!") {
                continue;
            }
            for (path, glob) in named_paths(line) {
                let in_section = section
                    .as_ref()
                    .is_some_and(|s| exists(&root.join(s), &path, glob));
                if !exists(&root, &path, glob) && !in_section {
                    missing.push(format!("{rel}:{}: `{path}`", n + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_file_names_a_tracker_issue_by_number() {
    let mut found = Vec::new();
    for (rel, text) in source_texts() {
        for (n, line) in text.to_ascii_lowercase().lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("issue ") {
                let after = &rest[at + "issue ".len()..];
                if after.starts_with(|c: char| c.is_ascii_digit()) {
                    found.push(format!("{rel}:{}", n + 1));
                    break;
                }
                rest = after;
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what the code or test is about instead of naming an issue:\n{}",
        found.join("\n")
    );
}
