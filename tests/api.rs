//! The public API as a listing: every public name of `remat`, module by
//! module, and of the crate it re-exports, `remat_runtime`, from its own
//! root, read from the sources with `syn`, must equal the listings in
//! docs/api.md, so that a change to the public surface shows up in review
//! as a change to that file. The root stays small (fewer than 40 names).
//!
//! To update docs/api.md after an intended change, run
//! `REMAT_API_OVERWRITE=1 cargo test --test api` and read the diff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use syn::{Item, UseTree, Visibility};

/// The public names of one module file and its public submodules.
#[derive(Default)]
struct Listing {
    /// `path::Name` for every public item and re-export.
    names: BTreeSet<String>,
    /// Public modules and the file that holds each (for re-exports by name).
    modules: Vec<(String, PathBuf)>,
}

fn is_hidden(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("doc")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().contains("hidden"))
    })
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

/// The names a `pub use` tree brings in: the last segment (or its rename),
/// `*` for a glob (written with the path it comes from).
fn use_names(tree: &UseTree, prefix: &str, out: &mut Vec<(String, String)>) {
    match tree {
        UseTree::Path(p) => use_names(&p.tree, &format!("{prefix}{}::", p.ident), out),
        UseTree::Name(n) => out.push((n.ident.to_string(), format!("{prefix}{}", n.ident))),
        UseTree::Rename(r) => out.push((r.rename.to_string(), format!("{prefix}{}", r.ident))),
        UseTree::Glob(_) => out.push(("*".into(), format!("{prefix}*"))),
        UseTree::Group(g) => g.items.iter().for_each(|t| use_names(t, prefix, out)),
    }
}

/// The file of module `name` declared in `file` (`name.rs` beside a
/// `lib.rs`/`mod.rs`, else in the folder named for `file`; `#[path]` wins).
fn module_file(file: &Path, name: &str, attrs: &[syn::Attribute]) -> PathBuf {
    let dir = match file.file_stem().and_then(|s| s.to_str()) {
        Some("lib" | "mod" | "main") => file.parent().unwrap().to_path_buf(),
        Some(stem) => file.parent().unwrap().join(stem),
        None => panic!("{}: no file name", file.display()),
    };
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("path") {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    return file.parent().unwrap().join(s.value());
                }
            }
        }
    }
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

fn list(file: &Path, path: &str, out: &mut Listing) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    list_items(file, &syntax.items, path, out);
}

fn list_items(file: &Path, items: &[Item], path: &str, out: &mut Listing) {
    let add = |out: &mut Listing, name: String| {
        out.names.insert(format!("{path}::{name}"));
    };
    for item in items {
        let (vis, attrs, name): (&Visibility, &[syn::Attribute], Option<String>) = match item {
            Item::Fn(i) => (&i.vis, &i.attrs, Some(i.sig.ident.to_string())),
            Item::Struct(i) => (&i.vis, &i.attrs, Some(i.ident.to_string())),
            Item::Enum(i) => (&i.vis, &i.attrs, Some(i.ident.to_string())),
            Item::Trait(i) => (&i.vis, &i.attrs, Some(i.ident.to_string())),
            Item::Type(i) => (&i.vis, &i.attrs, Some(i.ident.to_string())),
            Item::Const(i) => (&i.vis, &i.attrs, Some(i.ident.to_string())),
            Item::Static(i) => (&i.vis, &i.attrs, Some(i.ident.to_string())),
            Item::Mod(m) => {
                if !is_pub(&m.vis) || is_hidden(&m.attrs) {
                    continue;
                }
                let sub = format!("{path}::{}", m.ident);
                add(out, format!("{} (module)", m.ident));
                match &m.content {
                    Some((_, inner)) => list_items(file, inner, &sub, out),
                    None => {
                        let f = module_file(file, &m.ident.to_string(), &m.attrs);
                        out.modules.push((m.ident.to_string(), f.clone()));
                        list(&f, &sub, out);
                    }
                }
                continue;
            }
            Item::Use(u) => {
                if !is_pub(&u.vis) || is_hidden(&u.attrs) {
                    continue;
                }
                let mut names = Vec::new();
                use_names(&u.tree, "", &mut names);
                for (name, source) in names {
                    if name == "*" {
                        add(
                            out,
                            format!("* (everything of {})", source.trim_end_matches("::*")),
                        );
                    } else {
                        add(out, name);
                    }
                }
                continue;
            }
            _ => continue,
        };
        if is_pub(vis) && !is_hidden(attrs) {
            add(out, name.unwrap());
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The listing of `remat`: its root file, with modules re-exported from
/// `remat_runtime` listed from the runtime's files.
fn remat_listing() -> BTreeSet<String> {
    let mut runtime = Listing::default();
    list(
        &root().join("remat_runtime/src/lib.rs"),
        "remat",
        &mut runtime,
    );
    let mut remat = Listing::default();
    list(&root().join("src/lib.rs"), "remat", &mut remat);
    let mut names = remat.names;
    // A module re-exported by name (`pub use remat_runtime::nn;`) lists as
    // the runtime lists it.
    for (module, _) in &runtime.modules {
        if names.remove(&format!("remat::{module}")) {
            let prefix = format!("remat::{module}");
            names.extend(
                runtime
                    .names
                    .iter()
                    .filter(|n| {
                        n.starts_with(&format!("{prefix}::")) || **n == format!("{prefix} (module)")
                    })
                    .cloned(),
            );
            names.insert(format!("{prefix} (module)"));
        }
    }
    names
}

/// The listing of `remat_runtime`, the crate `remat` re-exports, as its
/// own root shows it (some of its names sit elsewhere in `remat`).
fn runtime_listing() -> BTreeSet<String> {
    let mut runtime = Listing::default();
    list(
        &root().join("remat_runtime/src/lib.rs"),
        "remat_runtime",
        &mut runtime,
    );
    runtime.names
}

/// Compares `listing` with the block of docs/api.md between `begin` and
/// `end`, or writes it there under `REMAT_API_OVERWRITE`.
fn check_block(listing: BTreeSet<String>, begin: &str, end: &str) {
    let listing: Vec<String> = listing.into_iter().collect();
    let doc_path = root().join("docs/api.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/api.md");
    let (head, rest) = doc
        .split_once(begin)
        .unwrap_or_else(|| panic!("docs/api.md has no {begin} marker"));
    let (block, tail) = rest
        .split_once(end)
        .unwrap_or_else(|| panic!("docs/api.md has no {end} marker"));
    let expected = format!("\n```text\n{}\n```\n", listing.join("\n"));
    if std::env::var_os("REMAT_API_OVERWRITE").is_some() {
        std::fs::write(&doc_path, format!("{head}{begin}{expected}{end}{tail}")).unwrap();
        return;
    }
    let listed: Vec<&str> = block
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("```"))
        .collect();
    let added: Vec<&String> = listing
        .iter()
        .filter(|n| !listed.contains(&n.as_str()))
        .collect();
    let removed: Vec<&&str> = listed
        .iter()
        .filter(|n| !listing.contains(&n.to_string()))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API differs from docs/api.md ({begin})\n  new: {added:?}\n  gone: {removed:?}\n\
         if intended, run `REMAT_API_OVERWRITE=1 cargo test --test api` and review the diff"
    );
}

#[test]
fn the_public_api_is_the_one_docs_api_md_lists() {
    check_block(remat_listing(), "<!-- api:begin -->", "<!-- api:end -->");
}

#[test]
fn the_runtime_crates_root_is_the_one_docs_api_md_lists() {
    check_block(
        runtime_listing(),
        "<!-- api-runtime:begin -->",
        "<!-- api-runtime:end -->",
    );
}

#[test]
fn the_root_has_fewer_than_40_names() {
    let listing = remat_listing();
    let root_names: Vec<&String> = listing
        .iter()
        .filter(|n| n.matches("::").count() == 1)
        .collect();
    assert!(
        root_names.len() < 40,
        "remat's root has {} names; move what model code does not use into a module: {root_names:?}",
        root_names.len()
    );
}
