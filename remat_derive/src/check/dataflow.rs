//! The analysis: which places may hold an instance of a `save` output that
//! no `needs` has marked, on any path.
//!
//! It runs the IR's nodes over `state`'s abstract state: branches join
//! (union of holdings, intersection of marks), loops iterate to a
//! fixpoint, and `break`/`continue` carry their state to the loop (or
//! labelled block) they leave or restart, joined with the state there: no
//! path is dropped. A read by bare code of a value not marked (itself or
//! a prefix of its element path) is reported once, at the read.

use std::collections::BTreeMap;

use crate::check::ir::{Body, Node, Proj, Read, ReadId, SiteId};
use crate::check::state::{join, phase_join, State, Val};

/// Loop iterations before the analysis gives up (never reached in
/// practice: the lattice is finite and small).
const MAX_ITERATIONS: usize = 200;

/// A read found to see an unmarked save output: the value it sees.
pub(crate) struct Finding {
    pub read: Read,
    pub site: SiteId,
    pub elems: Vec<Proj>,
}

pub(crate) struct Outcome {
    pub findings: Vec<Finding>,
    /// A loop did not reach a fixpoint (a bug, reported as such).
    pub gave_up: bool,
}

struct Frame {
    label: Option<String>,
    /// A loop, which an unlabelled `break` or `continue` targets; else a
    /// labelled block, which only `break 'label` leaves.
    is_loop: bool,
    breaks: Option<State>,
    continues: Option<State>,
}

struct Analysis {
    findings: BTreeMap<ReadId, Finding>,
    /// Marks by place count: no arm of an `is_recomputing()` branch writes
    /// a place. After such a write a place may hold one tensor on the
    /// forward (where `needs` marks) and another on recomputation (where
    /// it is read), which marks by value tell apart and marks by place
    /// cannot.
    by_place: bool,
    frames: Vec<Frame>,
    gave_up: bool,
}

/// Runs the analysis over a lowered body.
pub(crate) fn analyze(body: &Body) -> Outcome {
    let mut analysis = Analysis {
        findings: BTreeMap::new(),
        by_place: !body.nodes.iter().any(phased_write),
        frames: Vec::new(),
        gave_up: false,
    };
    analysis.run(&body.nodes, Some(State::default()));
    Outcome {
        findings: analysis.findings.into_values().collect(),
        gave_up: analysis.gave_up,
    }
}

impl Analysis {
    fn run(&mut self, nodes: &[Node], mut state: Option<State>) -> Option<State> {
        for node in nodes {
            let st = state.as_mut()?;
            match node {
                Node::Def(site) => st.def(*site),
                Node::Assign {
                    local,
                    projs,
                    value,
                    weak,
                } => {
                    let tree = st.eval(value);
                    st.assign(*local, projs, tree, *weak);
                }
                Node::Smear {
                    local,
                    projs,
                    value,
                } => {
                    let tree = st.eval(value);
                    st.smear(*local, projs, tree);
                }
                Node::Read(read) => self.read(st, read),
                Node::Needs(op) => st.needs(op, self.by_place),
                Node::Branch(arms) => {
                    let start = state.take();
                    let mut out = None;
                    if arms.is_empty() {
                        out = start.clone();
                    }
                    for arm in arms {
                        let end = self.run(arm, start.clone());
                        out = join(out, end);
                    }
                    state = out;
                }
                Node::Phased { forward, replay } => {
                    let start = state.take();
                    let fwd = self.run(forward, start.clone());
                    let rep = self.run(replay, start.clone());
                    state = phase_join(start.as_ref(), fwd, rep);
                }
                Node::Loop { label, body } => {
                    let entry = state.take();
                    state = self.run_loop(label.clone(), body, entry);
                }
                Node::Block { label, body } => {
                    self.frames.push(Frame {
                        label: Some(label.clone()),
                        is_loop: false,
                        breaks: None,
                        continues: None,
                    });
                    let end = self.run(body, state.take());
                    let frame = self.frames.pop().expect("pushed above");
                    state = join(end, frame.breaks);
                }
                Node::Break(label) | Node::Continue(label) => {
                    let exit = state.take();
                    let is_break = matches!(node, Node::Break(_));
                    let frame = match label {
                        Some(l) => self
                            .frames
                            .iter_mut()
                            .rev()
                            .find(|f| f.label.as_deref() == Some(l.as_str())),
                        None => self.frames.iter_mut().rev().find(|f| f.is_loop),
                    };
                    if let Some(frame) = frame {
                        let slot = if is_break {
                            &mut frame.breaks
                        } else {
                            &mut frame.continues
                        };
                        *slot = join(slot.take(), exit);
                    }
                }
                Node::Return => state = None,
            }
        }
        state
    }

    fn run_loop(
        &mut self,
        label: Option<String>,
        body: &[Node],
        entry: Option<State>,
    ) -> Option<State> {
        let mut head = entry.clone();
        for _ in 0..MAX_ITERATIONS {
            self.frames.push(Frame {
                label: label.clone(),
                is_loop: true,
                breaks: None,
                continues: None,
            });
            let end = self.run(body, head.clone());
            let frame = self.frames.pop().expect("pushed above");
            let next = join(join(entry.clone(), end), frame.continues);
            if next == head {
                return join(head, frame.breaks);
            }
            head = next;
        }
        self.gave_up = true;
        head
    }

    fn read(&mut self, state: &State, read: &Read) {
        if self.findings.contains_key(&read.id) {
            return;
        }
        if let crate::check::ir::Operand::Place(local, projs) = &read.operand {
            if state.is_held(*local, projs) {
                return;
            }
        }
        let tree = state.eval(&read.operand);
        let found = tree
            .values()
            .flatten()
            .find(|v| !state.is_marked(v))
            .cloned();
        if let Some(Val::Saved { site, elems, .. }) = found {
            self.findings.insert(
                read.id,
                Finding {
                    read: read.clone(),
                    site,
                    elems,
                },
            );
        }
    }
}

/// Whether `node` holds an `is_recomputing()` arm that writes a place.
fn phased_write(node: &Node) -> bool {
    fn writes(nodes: &[Node]) -> bool {
        nodes.iter().any(|n| match n {
            Node::Assign { .. } | Node::Smear { .. } => true,
            other => phased_write(other) || children(other).iter().any(|c| writes(c)),
        })
    }
    match node {
        Node::Phased { forward, replay } => writes(forward) || writes(replay),
        other => children(other).iter().any(|c| c.iter().any(phased_write)),
    }
}

fn children(node: &Node) -> Vec<&[Node]> {
    match node {
        Node::Branch(arms) => arms.iter().map(Vec::as_slice).collect(),
        Node::Phased { forward, replay } => vec![forward, replay],
        Node::Loop { body, .. } | Node::Block { body, .. } => vec![body],
        _ => Vec::new(),
    }
}
