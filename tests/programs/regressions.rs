//! Shrunk failures of the random programs, kept as ordinary tests.

use crate::program::{check, normalise, Node, Op, Program};
use remat::Policy;

fn case(body: Vec<Node>, seed: u64) {
    tch::set_num_threads(1);
    let mut next = 0;
    let p = Program {
        body: normalise(body, false, &mut next),
        seed,
    };
    if let Err(e) = check(&p) {
        panic!("{e}\n{p:#?}");
    }
}

fn save(body: Vec<Node>) -> Node {
    Node::Region {
        id: 0,
        policy: Policy::Save,
        tuple: false,
        body,
    }
}

#[test]
// docs/semantics.md, rules C15 and K2.
fn a_save_output_read_by_a_nested_checkpoint() {
    case(
        vec![
            save(vec![Node::Op(Op::Tanh)]),
            Node::Checkpoint {
                id: 0,
                view_input: true,
                body: vec![Node::Op(Op::MulW)],
            },
        ],
        1,
    );
}
