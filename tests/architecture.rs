//! docs/architecture.md stays true to the tree: every source file of the
//! runtime, its C++ bridge and build script, the macros, the reference
//! crate, the root and the xtask appears in the layout table of its folder, and every file a table
//! lists exists.

use std::path::{Path, PathBuf};

/// The folders the layout covers, each with its section's heading and the
/// subfolder of unit tests it leaves out.
const FOLDERS: &[(&str, Option<&str>)] = &[
    ("remat_runtime/src", None),
    ("remat_runtime/csrc", None),
    ("remat_runtime/build", None),
    ("remat_derive/src", Some("tests")),
    ("remat_distributed/src", None),
    ("remat_distributed/csrc", None),
    ("reference/src", None),
    ("src", None),
    ("xtask/src", None),
    ("xtask/fresh", None),
    ("xtask/gpu-kit", None),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, base: &Path, skip: Option<&str>, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path
            .strip_prefix(base)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            if Some(rel.as_str()) != skip {
                files(&path, base, skip, out);
            }
        } else if ["rs", "cpp", "h", "sh"]
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
                problems.push(format!(
                    "docs/architecture.md lists {folder}/{f}, which is gone"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The source crates whose files must not import each other in a circle.
const CRATES: &[&str] = &[
    "remat_runtime/src",
    "remat_derive/src",
    "remat_distributed/src",
    "reference/src",
];

/// Module path -> file, for every `.rs` file under `src` (a `mod.rs`,
/// `lib.rs` or `main.rs` names its folder).
fn module_files(src: &Path) -> Vec<(Vec<String>, String)> {
    let mut all = Vec::new();
    files(src, src, None, &mut all);
    all.into_iter()
        .filter(|f| f.ends_with(".rs"))
        .map(|f| {
            let mut parts: Vec<String> = f
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            (parts, f)
        })
        .collect()
}

/// A source file's code: its unit-test module and comments left out.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a crate root or `mod.rs` only declares modules and re-exports
/// (a facade), rather than defining items of its own.
fn is_facade(src: &Path, file: &str) -> bool {
    let named = file.ends_with("mod.rs") || file.ends_with("lib.rs") || file.ends_with("main.rs");
    named
        && !code_of(&src.join(file)).lines().any(|line| {
            let mut words = line.split_whitespace().peekable();
            while words
                .peek()
                .is_some_and(|w| w.starts_with("pub") || matches!(*w, "unsafe" | "async"))
            {
                words.next();
            }
            words.next().is_some_and(|w| {
                matches!(
                    w,
                    "fn" | "struct"
                        | "enum"
                        | "impl"
                        | "trait"
                        | "const"
                        | "static"
                        | "type"
                        | "union"
                        | "macro_rules!"
                ) || w.starts_with("impl<")
            })
        })
}

/// The paths a `use` tree (or a plain path) names, from the text after its
/// head (`crate::`, `super::`, `self::`): `a::{b, c::{d, e}}` names `a::b`,
/// `a::c::d` and `a::c::e`; `self` inside a group names the group's path,
/// and `as` renames are dropped.
fn use_paths(text: &str) -> Vec<Vec<String>> {
    fn tree(
        chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
        prefix: &[String],
    ) -> Vec<Vec<String>> {
        let mut path = prefix.to_vec();
        let mut word = String::new();
        let mut out = Vec::new();
        let push_word = |path: &mut Vec<String>, word: &mut String| {
            if !word.is_empty() && word != "self" {
                path.push(std::mem::take(word));
            }
            word.clear();
        };
        while let Some(&c) = chars.peek() {
            if c.is_alphanumeric() || c == '_' {
                word.push(c);
                chars.next();
            } else if c == ':' {
                chars.next();
                push_word(&mut path, &mut word);
            } else if c == '{' {
                chars.next();
                push_word(&mut path, &mut word);
                loop {
                    out.extend(tree(chars, &path));
                    match chars.next() {
                        Some(',') => continue,
                        _ => break,
                    }
                }
                return out;
            } else if c.is_whitespace() {
                chars.next();
                // `x as y`: the rename names nothing new.
                let rest: String = chars.clone().take(3).collect();
                if word.is_empty() || rest.starts_with("as ") {
                    if rest.starts_with("as ") {
                        chars.nth(2);
                        while chars.peek().is_some_and(|c| c.is_whitespace()) {
                            chars.next();
                        }
                        while chars
                            .peek()
                            .is_some_and(|c| c.is_alphanumeric() || *c == '_')
                        {
                            chars.next();
                        }
                    }
                    continue;
                }
                break;
            } else {
                break;
            }
        }
        push_word(&mut path, &mut word);
        out.push(path);
        out
    }
    tree(&mut text.chars().peekable(), &[])
}

/// What the facades (a crate root, a `mod.rs` that only declares modules)
/// re-export: the facade's module path and the name it exports, and the
/// full path it names.
fn reexports(src: &Path, modules: &[(Vec<String>, String)]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    for (me, file) in modules {
        if !is_facade(src, file) {
            continue;
        }
        let code = code_of(&src.join(file));
        for statement in code.split(';') {
            let statement = statement.trim();
            let Some(at) = statement.find("use ") else {
                continue;
            };
            if !statement[..at].trim_start().starts_with("pub") {
                continue;
            }
            let body = statement[at + 4..].trim();
            let (base, body) = match body.split_once("::") {
                Some(("crate", rest)) => (Vec::new(), rest),
                Some(("super", rest)) => (me[..me.len().saturating_sub(1)].to_vec(), rest),
                Some(("self", rest)) => (me.clone(), rest),
                _ => (me.clone(), body),
            };
            for path in use_paths(body) {
                if let Some(name) = path.last() {
                    let mut exported = me.clone();
                    exported.push(name.clone());
                    let mut target = base.clone();
                    target.extend(path);
                    out.push((exported, target));
                }
            }
        }
    }
    out
}

/// The file a full path names, through re-exports: the longest module
/// prefix that is a file of its own; a name a facade re-exports is
/// followed to where it comes from.
fn resolve<'a>(
    full: &[String],
    me: &[String],
    modules: &'a [(Vec<String>, String)],
    reexported: &[(Vec<String>, Vec<String>)],
    is_facade: &dyn Fn(&str) -> bool,
    depth: usize,
) -> Option<&'a str> {
    for k in (1..=full.len()).rev() {
        if let Some((exported, target)) = reexported.iter().find(|(e, _)| e[..] == full[..k]) {
            if depth < 8 && exported != target {
                let mut next = target.clone();
                next.extend_from_slice(&full[k..]);
                return resolve(&next, me, modules, reexported, is_facade, depth + 1);
            }
        }
        if let Some((m, f)) = modules.iter().find(|(m, _)| m[..] == full[..k]) {
            if m == me || is_facade(f) {
                return None;
            }
            return Some(f);
        }
    }
    // A path through the crate root's re-exports (`crate::Saved`).
    if let Some((_, target)) = reexported
        .iter()
        .find(|(e, _)| e.len() == 1 && full.first() == e.first())
    {
        if depth < 8 && target[..] != full[..1] {
            let mut next = target.clone();
            next.extend_from_slice(&full[1..]);
            return resolve(&next, me, modules, reexported, is_facade, depth + 1);
        }
    }
    None
}

/// Which files each file imports through `crate::`, `super::` and `self::`
/// paths (comments and `#[cfg(test)]` modules aside), `use` groups
/// expanded and re-exports followed to the file that defines the item.
/// Facades (a `lib.rs` or `mod.rs` that only declares modules and
/// re-exports) and unit-test folders are left out, as a reader would leave
/// them out; a `mod.rs` that defines items is a file like any other.
fn import_graph(src: &Path) -> Vec<(String, Vec<String>)> {
    let modules = module_files(src);
    // Read once: the loops below ask for every import of every file.
    let facades: Vec<&str> = modules
        .iter()
        .map(|(_, f)| f.as_str())
        .filter(|f| is_facade(src, f))
        .collect();
    let is_facade = |f: &str| facades.contains(&f);
    let reexported = reexports(src, &modules);
    let mut graph = Vec::new();
    for (me, file) in &modules {
        if is_facade(file) || me.first().is_some_and(|m| m == "tests") {
            continue;
        }
        let code = code_of(&src.join(file));
        let mut targets = Vec::new();
        for head in ["crate::", "super::", "self::"] {
            for (at, _) in code.match_indices(head) {
                if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let base: Vec<String> = match head {
                    "crate::" => Vec::new(),
                    "super::" => me[..me.len().saturating_sub(1)].to_vec(),
                    _ => me.clone(),
                };
                for path in use_paths(&code[at + head.len()..]) {
                    let mut full = base.clone();
                    full.extend(path);
                    if let Some(f) = resolve(&full, me, &modules, &reexported, &is_facade, 0) {
                        if !targets.iter().any(|t: &String| t == f) {
                            targets.push(f.to_string());
                        }
                    }
                }
            }
        }
        graph.push((file.clone(), targets));
    }
    graph
}

/// Files depend only downwards (docs/architecture.md, "Layout"): no two
/// files of a crate reach each other through their imports.
#[test]
fn no_two_source_files_import_each_other() {
    let mut circles = Vec::new();
    for krate in CRATES {
        let graph = import_graph(&root().join(krate));
        circles.extend(pairs_in_circles(&graph).map(|(a, b)| format!("{krate}: {a} <-> {b}")));
    }
    assert!(
        circles.is_empty(),
        "files that import each other (move the shared part down):\n{}",
        circles.join("\n")
    );
}

/// The pairs `a < b` of a graph that reach each other.
fn pairs_in_circles(graph: &[(String, Vec<String>)]) -> impl Iterator<Item = (&str, &str)> {
    let reaches = move |from: &str, to: &str| {
        let (mut seen, mut todo) = (vec![from.to_string()], vec![from.to_string()]);
        while let Some(u) = todo.pop() {
            for (_, next) in graph.iter().filter(|(g, _)| *g == u) {
                for n in next {
                    if n == to {
                        return true;
                    }
                    if !seen.contains(n) {
                        seen.push(n.clone());
                        todo.push(n.clone());
                    }
                }
            }
        }
        false
    };
    graph.iter().flat_map(move |(a, targets)| {
        targets
            .iter()
            .filter(move |b| a < *b && reaches(b, a))
            .map(move |b| (a.as_str(), b.as_str()))
    })
}

/// Which top-level modules (folders and root files) of a crate each one
/// reaches through `crate::` paths, `pub use` re-exports included (a path
/// names its module by its first segment, whichever file re-exports it).
/// The crate root and unit-test folders are left out.
fn folder_graph(src: &Path) -> Vec<(String, Vec<String>)> {
    let modules = module_files(src);
    let top = |m: &[String]| m.first().cloned().unwrap_or_default();
    let tops: Vec<String> = modules
        .iter()
        .map(|(m, _)| top(m))
        .filter(|t| !t.is_empty())
        .collect();
    let mut graph: Vec<(String, Vec<String>)> = Vec::new();
    for (me, file) in &modules {
        let unit = top(me);
        if unit.is_empty() || unit == "tests" {
            continue;
        }
        let code = code_of(&src.join(file));
        let mut targets = Vec::new();
        for (at, _) in code.match_indices("crate::") {
            if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let first: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if first != unit && tops.contains(&first) && !targets.contains(&first) {
                targets.push(first);
            }
        }
        match graph.iter_mut().find(|(u, _)| *u == unit) {
            Some((_, t)) => {
                for x in targets {
                    if !t.contains(&x) {
                        t.push(x);
                    }
                }
            }
            None => graph.push((unit, targets)),
        }
    }
    graph
}

/// The folders are layers (docs/architecture.md, "Layout"): no two
/// top-level modules of a crate reach each other, so each folder depends
/// only on those below it.
#[test]
fn no_two_folders_import_each_other() {
    let mut circles = Vec::new();
    for krate in CRATES {
        let graph = folder_graph(&root().join(krate));
        circles.extend(pairs_in_circles(&graph).map(|(a, b)| format!("{krate}: {a} <-> {b}")));
    }
    assert!(
        circles.is_empty(),
        "folders that import each other (move the shared part down):\n{}",
        circles.join("\n")
    );
}
