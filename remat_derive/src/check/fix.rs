//! The fix an unmarked read's message suggests, tried before it is
//! suggested: the analysis runs again on the body with the suggested
//! `needs` in it, and only a `needs` that makes the read safe is offered
//! (docs/dsl.md, rule X4: where a mark counts is subtle enough that the
//! check, not the user, should find the place).

use crate::check::dataflow::{analyze, Finding};
use crate::check::ir::{Body, Node, Operand, Proj, ReadId, SiteId};

/// Where the suggested `needs` goes.
pub(crate) enum Fix {
    /// Right before the read, naming the place read (cut before its first
    /// run-time index: `needs parts;` for a read of `parts[i]`).
    BeforeRead,
    /// Right after the statement of each of these regions (the read may
    /// see any of their outputs), with the element path read.
    AfterRegions(Vec<(SiteId, Vec<Proj>)>),
    /// No single `needs` satisfies the check.
    None,
}

/// The first fix that makes `finding`'s read safe.
pub(crate) fn choose(body: &Body, finding: &Finding) -> Fix {
    let read = &finding.read;
    if !read.replay_only {
        if let Operand::Place(local, projs) = &read.operand {
            let cut = projs
                .iter()
                .position(|p| *p == Proj::Index(None))
                .unwrap_or(projs.len());
            let mark = Node::Needs(Operand::Place(*local, projs[..cut].to_vec()));
            let nodes = inserted(&body.nodes, &|n| is_read(n, read.id), mark, false);
            if safe(body, nodes, read.id) {
                return Fix::BeforeRead;
            }
        }
    }
    // Each site the read may see, marked right after its region runs,
    // until the read is safe.
    let mut sites: Vec<(SiteId, Vec<Proj>)> = Vec::new();
    let mut nodes = body.nodes.clone();
    let (mut site, mut elems) = (finding.site, finding.elems.clone());
    for _ in 0..8 {
        if sites.iter().any(|(s, e)| *s == site && *e == elems) {
            break;
        }
        let mut value = Operand::Fresh(site);
        for proj in elems
            .iter()
            .take_while(|p| !matches!(p, Proj::Index(None) | Proj::Split))
        {
            value = Operand::Proj(Box::new(value), proj.clone());
        }
        nodes = inserted(&nodes, &|n| is_def(n, site), Node::Needs(value), true);
        sites.push((site, elems.clone()));
        match still_found(body, nodes.clone(), read.id) {
            None => return Fix::AfterRegions(sites),
            Some(next) => (site, elems) = next,
        }
    }
    Fix::None
}

fn is_read(node: &Node, id: ReadId) -> bool {
    matches!(node, Node::Read(r) if r.id == id)
}

fn is_def(node: &Node, site: SiteId) -> bool {
    matches!(node, Node::Def(s) if *s == site)
}

/// Whether the read `id` is safe in `nodes`.
fn safe(body: &Body, nodes: Vec<Node>, id: ReadId) -> bool {
    still_found(body, nodes, id).is_none()
}

/// The value the read `id` still sees unmarked in `nodes`, if any.
fn still_found(body: &Body, nodes: Vec<Node>, id: ReadId) -> Option<(SiteId, Vec<Proj>)> {
    let trial = Body {
        nodes,
        sites: body.sites.clone(),
    };
    analyze(&trial)
        .findings
        .into_iter()
        .find(|f| f.read.id == id)
        .map(|f| (f.site, f.elems))
}

/// `nodes` with `mark` before (or after) every node `at` picks, at any
/// depth. A mark after a node in a recomputation-only arm is not added:
/// the lowering leaves such `needs` out, as they do nothing.
fn inserted(nodes: &[Node], at: &dyn Fn(&Node) -> bool, mark: Node, after: bool) -> Vec<Node> {
    let mut out = Vec::with_capacity(nodes.len() + 1);
    for node in nodes {
        let node = match node {
            Node::Branch(arms) => Node::Branch(
                arms.iter()
                    .map(|arm| inserted(arm, at, mark.clone(), after))
                    .collect(),
            ),
            Node::Phased { forward, replay } => Node::Phased {
                forward: inserted(forward, at, mark.clone(), after),
                replay: replay.clone(),
            },
            Node::Loop { label, body } => Node::Loop {
                label: label.clone(),
                body: inserted(body, at, mark.clone(), after),
            },
            Node::Block { label, body } => Node::Block {
                label: label.clone(),
                body: inserted(body, at, mark.clone(), after),
            },
            other => other.clone(),
        };
        let hit = at(&node);
        if hit && !after {
            out.push(mark.clone());
        }
        out.push(node);
        if hit && after {
            out.push(mark.clone());
        }
    }
    out
}
