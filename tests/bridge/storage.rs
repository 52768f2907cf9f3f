use crate::leaf;
use remat::{
    autograd::apply, autograd::graph_task_id, autograd::graph_task_keeps_graph,
    autograd::BackwardContext, autograd::ForwardContext, autograd::Function, storage::storage_key,
    storage::tensor_version, storage::WeakStorage, Result,
};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

#[test]
fn keys_are_equal_across_views_and_differ_across_tensors() {
    let a = Tensor::zeros([4, 6], tch::kind::FLOAT_CPU);
    let b = Tensor::zeros([4, 6], tch::kind::FLOAT_CPU);
    let key = storage_key(&a).unwrap();
    for view in [
        a.view([24]),
        a.narrow(1, 1, 2),
        a.select(0, 3),
        a.transpose(0, 1),
        a.shallow_clone(),
        a.detach(),
    ] {
        assert_eq!(storage_key(&view), Some(key));
    }
    assert_ne!(storage_key(&b), Some(key));
    assert_ne!(storage_key(&a.copy()), Some(key));
}

#[test]
fn weak_handle_dies_with_the_last_tensor() {
    let a = Tensor::zeros([8], tch::kind::FLOAT_CPU);
    let weak = WeakStorage::new(&a).unwrap();
    assert_eq!(Some(weak.key()), storage_key(&a));
    let view = a.narrow(0, 0, 4);
    drop(a);
    assert!(weak.is_alive(), "a view still holds the storage");
    drop(view);
    assert!(!weak.is_alive());
}

#[test]
fn version_counts_in_place_writes_through_views() {
    let mut a = Tensor::zeros([4], tch::kind::FLOAT_CPU);
    let v0 = tensor_version(&a).unwrap();
    let mut view = a.narrow(0, 0, 2);
    let _ = view.fill_(1.0);
    assert_eq!(tensor_version(&a).unwrap(), v0 + 1);
    let _ = a.g_add_(&Tensor::ones([4], tch::kind::FLOAT_CPU));
    assert_eq!(tensor_version(&view).unwrap(), v0 + 2);
}

/// What a backward saw: its graph task id and whether it keeps the graph.
type Seen = Arc<Mutex<Vec<(Option<i32>, bool)>>>;

/// Records what it sees about the running backward.
struct Probe(Seen);

impl Function for Probe {
    fn forward(&mut self, _: &mut ForwardContext, i: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![i[0] * 1])
    }
    fn backward(&mut self, _: &BackwardContext<'_>, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        self.0
            .lock()
            .unwrap()
            .push((graph_task_id(), graph_task_keeps_graph()));
        Ok(vec![Some(g[0].shallow_clone())])
    }
}

#[test]
fn graph_task_id_and_retain_graph_are_visible_in_backward() {
    assert_eq!(graph_task_id(), None);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let x = leaf(&[1.0]);
    let y = apply(Probe(seen.clone()), &[&x]).remove(0).sum(Kind::Float);
    remat::autograd::backward_with(&y, true).unwrap();
    y.backward();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].0.is_some() && seen[1].0.is_some());
    assert_ne!(seen[0].0, seen[1].0, "each backward is its own graph task");
    assert_eq!((seen[0].1, seen[1].1), (true, false));
}
