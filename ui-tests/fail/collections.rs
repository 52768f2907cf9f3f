// Adversarial round three (ui-tests/README.md): save outputs in arrays, slices, maps (`HashMap`,
// `BTreeMap`) and a `VecDeque`. A collection of save outputs holds
// `Saved<Tensor>`s; one that holds tensors refuses them. Fix: `needs` the
// element read, or the whole collection (ui-tests/pass/fixes_more.rs,
// `collections`).
use remat::{checkpoint, remat};
use std::collections::{BTreeMap, HashMap, VecDeque};
use tch::Tensor;

fn pair(x: &Tensor) -> (Tensor, Tensor) {
    (x.tanh(), x.sin())
}

#[checkpoint]
fn array(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let both = [a, b];
    &both[0] * &both[1]
}

#[checkpoint]
fn slice_to_cat(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let both = vec![a, b];
    Tensor::cat(&both[..], 0)
}

#[checkpoint]
fn hash_map(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let mut by_name = HashMap::new();
    by_name.insert("a", a);
    by_name.insert("b", b);
    by_name["a"].exp() + x
}

#[checkpoint]
fn btree_map_of_tensors(x: &Tensor) -> Tensor {
    remat! { let (a, _b) = save pair: pair(x); }
    let mut by_name: BTreeMap<&str, Tensor> = BTreeMap::new();
    by_name.insert("a", a);
    &by_name["a"] + x
}

#[checkpoint]
fn vec_deque(x: &Tensor) -> Tensor {
    remat! { let (a, b) = save pair: pair(x); }
    let mut queue = VecDeque::new();
    queue.push_back(a);
    queue.push_back(b);
    let first = queue.pop_front().unwrap();
    first.sigmoid() * x
}

fn main() {}
