//! The published crates' manifests say what crates.io and docs.rs need,
//! and ship what a build from the registry needs (`cargo xtask package`
//! builds what they describe).

use std::path::{Path, PathBuf};
use toml::Table;

/// The published crates: (folder, name).
const PUBLISHED: &[(&str, &str)] = &[
    ("", "remat"),
    ("remat_runtime", "remat_runtime"),
    ("remat_derive", "remat_derive"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn manifest(dir: &str) -> Table {
    let path = root().join(dir).join("Cargo.toml");
    std::fs::read_to_string(&path).unwrap().parse().unwrap()
}

fn workspace_package() -> Table {
    manifest("")["workspace"]["package"]
        .as_table()
        .unwrap()
        .clone()
}

/// A `package` field, resolved through `field.workspace = true`.
fn field(package: &Table, name: &str) -> Option<toml::Value> {
    let value = package.get(name)?;
    if value.get("workspace").and_then(|w| w.as_bool()) == Some(true) {
        return workspace_package().get(name).cloned();
    }
    Some(value.clone())
}

fn package(dir: &str) -> Table {
    manifest(dir)["package"].as_table().unwrap().clone()
}

#[test]
fn published_crates_have_the_metadata_crates_io_shows() {
    for (dir, name) in PUBLISHED {
        let p = package(dir);
        assert_eq!(p["name"].as_str(), Some(*name));
        for key in [
            "description",
            "repository",
            "license",
            "readme",
            "rust-version",
            "version",
        ] {
            let value = field(&p, key).unwrap_or_else(|| panic!("{name} has no {key}"));
            assert!(!value.as_str().unwrap().is_empty(), "{name}: empty {key}");
        }
        assert_eq!(
            field(&p, "documentation").and_then(|v| v.as_str().map(String::from)),
            Some(format!("https://docs.rs/{name}")),
            "{name}"
        );
        let readme = field(&p, "readme").unwrap();
        assert!(
            root().join(dir).join(readme.as_str().unwrap()).is_file(),
            "{name}: its readme is missing"
        );
        // crates.io's limits: at most five keywords of at most 20 ASCII
        // characters, and at least one category.
        let keywords = field(&p, "keywords").unwrap();
        let keywords = keywords.as_array().unwrap();
        assert!(!keywords.is_empty() && keywords.len() <= 5, "{name}");
        for k in keywords {
            let k = k.as_str().unwrap();
            assert!(
                k.len() <= 20
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{name}: keyword {k:?}"
            );
        }
        assert!(
            !field(&p, "categories")
                .unwrap()
                .as_array()
                .unwrap()
                .is_empty(),
            "{name}"
        );
    }
}

#[test]
fn every_published_crate_ships_the_license_text() {
    let license = std::fs::read_to_string(root().join("LICENSE")).unwrap();
    for (dir, name) in PUBLISHED {
        let copy = std::fs::read_to_string(root().join(dir).join("LICENSE"))
            .unwrap_or_else(|e| panic!("{name} has no LICENSE: {e}"));
        assert!(copy == license, "{name}/LICENSE differs from the root's");
    }
}

/// A dependency on another crate of the workspace must carry a version
/// (crates.io refuses path-only ones), and it is the workspace's own,
/// exactly: the three crates are released together (CHANGELOG.md).
#[test]
fn path_dependencies_name_the_workspace_version_exactly() {
    let version = workspace_package()["version"].as_str().unwrap().to_string();
    let shared = manifest("")["workspace"]["dependencies"]
        .as_table()
        .unwrap()
        .clone();
    for (dir, name) in PUBLISHED {
        let m = manifest(dir);
        for section in ["dependencies", "build-dependencies"] {
            let Some(deps) = m.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for (dep, spec) in deps {
                let spec = match spec.get("workspace").and_then(|w| w.as_bool()) {
                    Some(true) => shared[dep].clone(),
                    _ => spec.clone(),
                };
                if spec.get("path").is_some() {
                    assert_eq!(
                        spec.get("version").and_then(|v| v.as_str()),
                        Some(format!("={version}").as_str()),
                        "{name}: {section}.{dep}"
                    );
                }
            }
        }
    }
}

/// docs.rs builds with `doc-only`, which must reach torch-sys (or it looks
/// for libtorch) and remat_runtime's build script (or it compiles the
/// bridge).
#[test]
fn docs_rs_builds_with_doc_only_down_to_torch_sys() {
    for (dir, name) in PUBLISHED {
        let m = manifest(dir);
        let Some(meta) = m["package"].get("metadata").and_then(|t| t.get("docs")) else {
            assert_eq!(*name, "remat_derive", "{name} has no docs.rs metadata");
            continue;
        };
        let features = meta["rs"]["features"].as_array().unwrap();
        for f in features {
            let f = f.as_str().unwrap();
            assert!(
                m["features"].get(f).is_some(),
                "{name}: docs.rs feature {f} is not a feature"
            );
        }
        assert!(features.iter().any(|f| f.as_str() == Some("doc-only")));
    }
    let features = |dir: &str, feature: &str| -> Vec<String> {
        manifest(dir)["features"][feature]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(features("", "doc-only"), ["remat_runtime/doc-only"]);
    let runtime = features("remat_runtime", "doc-only");
    assert!(runtime.contains(&"tch/doc-only".to_string()), "{runtime:?}");
    assert!(
        runtime.contains(&"torch-sys/doc-only".to_string()),
        "{runtime:?}"
    );
    let build = std::fs::read_to_string(root().join("remat_runtime/build.rs")).unwrap();
    assert!(build.contains("CARGO_FEATURE_DOC_ONLY"));
}

/// The packages must hold what their build reads: the runtime its C++
/// bridge and build-script module, the root its build script.
#[test]
fn includes_cover_what_the_builds_read() {
    let runtime = package("remat_runtime");
    let include: Vec<&str> = runtime["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for needed in ["/csrc/*.cpp", "/csrc/*.h", "/build.rs", "/build/*.rs"] {
        assert!(include.contains(&needed), "remat_runtime: {needed}");
    }
    let root_include: Vec<String> = package("")["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for needed in ["/build.rs", "/CHANGELOG.md", "/LICENSE", "/README.md"] {
        assert!(root_include.iter().any(|i| i == needed), "remat: {needed}");
        assert!(Path::new(&root().join(&needed[1..])).is_file());
    }
}

#[test]
fn the_changelog_has_a_section_for_the_current_version() {
    let version = workspace_package()["version"].as_str().unwrap().to_string();
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).unwrap();
    assert!(
        changelog.contains(&format!("\n## [{version}]")),
        "## [{version}]"
    );
    assert!(changelog.contains(&format!("\n[{version}]: https://")));
    assert!(changelog.contains("## [Unreleased]"));
    for topic in ["Macro syntax", "Runtime API", "Plan files"] {
        assert!(changelog.contains(topic), "the semver policy on {topic}");
    }
}

/// The oldest compiler `rust-version` claims is the one `cargo xtask
/// package` checks with; it must be no newer than the pinned toolchain.
#[test]
fn rust_version_is_no_newer_than_the_pinned_toolchain() {
    let claimed = workspace_package()["rust-version"]
        .as_str()
        .unwrap()
        .to_string();
    let toolchain: Table = std::fs::read_to_string(root().join("rust-toolchain.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let pinned = toolchain["toolchain"]["channel"].as_str().unwrap();
    let parse = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap()).collect() };
    assert!(
        parse(&claimed)[..2] <= parse(pinned)[..2],
        "rust-version {claimed} is newer than {pinned}"
    );
}

/// tch and torch-sys are asked for as a range that admits every release of
/// the supported set (tch 0.24 for libtorch 2.11, 0.26 for 2.13;
/// docs/architecture.md, "Getting libtorch"), in the workspace and in the
/// training example, which is built as a user's crate is.
#[test]
fn tch_is_asked_for_as_the_range_of_the_supported_releases() {
    const RANGE: &str = ">=0.24, <0.27";
    let deps = manifest("")["workspace"]["dependencies"].clone();
    for name in ["tch", "torch-sys"] {
        assert_eq!(deps[name].as_str(), Some(RANGE), "workspace {name}");
    }
    let train = manifest("examples/train_gpt")["dependencies"]["tch"].clone();
    assert_eq!(train.as_str(), Some(RANGE), "examples/train_gpt");
    // The crates take the workspace's requirement, not one of their own.
    for dir in ["", "remat_runtime"] {
        let deps = manifest(dir)["dependencies"].clone();
        assert_eq!(deps["tch"]["workspace"].as_bool(), Some(true), "{dir}");
    }
}
