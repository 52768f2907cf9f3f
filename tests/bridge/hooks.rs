use crate::{leaf, values};
use remat::{saved_tensors_hooks, SavedTensorsHooks};
use remat_reference::testing::{assert_bitwise, counter};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tch::{Kind, Tensor};

#[test]
// docs/semantics.md, rule T2.
fn pack_sees_what_sin_saves_and_unpack_runs_in_backward() {
    let x = leaf(&[0.25, 1.5]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let unpacked = counter();
    let y = {
        let (seen, unpacked) = (seen.clone(), unpacked.clone());
        let _hooks = saved_tensors_hooks(
            move |t: Tensor| {
                seen.lock().unwrap().push(values(&t));
                t
            },
            move |t: &Tensor| {
                unpacked.fetch_add(1, Ordering::SeqCst);
                t.shallow_clone()
            },
        );
        x.sin()
    };
    assert_eq!(
        *seen.lock().unwrap(),
        vec![vec![0.25, 1.5]],
        "sin saves its input"
    );
    assert_eq!(unpacked.load(Ordering::SeqCst), 0);
    y.sum(Kind::Float).backward();
    assert_eq!(unpacked.load(Ordering::SeqCst), 1);
    assert_bitwise(
        &x.grad(),
        &tch::no_grad(|| x.cos()),
        "the gradient of sin through the pair",
    );
}

#[test]
fn a_store_that_drops_the_tensor_gives_the_right_gradient() {
    let store: Arc<Mutex<HashMap<usize, Vec<f32>>>> = Arc::default();
    let next = counter();
    let x = leaf(&[0.1, 0.7, -2.0]);
    let loss = {
        let (s1, s2) = (store.clone(), store.clone());
        let _hooks = saved_tensors_hooks(
            move |t: Tensor| {
                // Keep only the values, in a Rust-side store; the tensor goes.
                let id = next.fetch_add(1, Ordering::SeqCst);
                s1.lock().unwrap().insert(id, values(&t));
                (id, t.size())
            },
            move |(id, size): &(usize, Vec<i64>)| {
                let data = s2.lock().unwrap().remove(id).expect("unpacked once");
                Tensor::from_slice(&data).view(size.as_slice())
            },
        );
        (x.sin() * x.exp()).sum(Kind::Float)
    };
    assert!(!store.lock().unwrap().is_empty());
    loss.backward();
    let expected = tch::no_grad(|| x.cos() * x.exp() + x.sin() * x.exp());
    assert_bitwise(
        &x.grad(),
        &expected,
        "the gradient through the stored saves",
    );
    assert!(store.lock().unwrap().is_empty());
}

#[test]
// docs/semantics.md, rule T1.
fn nested_hooks_shadow_and_pop() {
    let (outer, inner) = (counter(), counter());
    let x = leaf(&[1.0]);
    let count = |c: &Arc<AtomicUsize>| {
        let c = c.clone();
        move |t: Tensor| {
            c.fetch_add(1, Ordering::SeqCst);
            t
        }
    };
    let _outer = saved_tensors_hooks(count(&outer), |t: &Tensor| t.shallow_clone());
    let _a = x.sin();
    assert_eq!(
        (outer.load(Ordering::SeqCst), inner.load(Ordering::SeqCst)),
        (1, 0)
    );
    {
        let _inner = saved_tensors_hooks(count(&inner), |t: &Tensor| t.shallow_clone());
        let _b = x.sin();
        assert_eq!(
            (outer.load(Ordering::SeqCst), inner.load(Ordering::SeqCst)),
            (1, 1)
        );
        {
            let _none = SavedTensorsHooks::disabled();
            let _c = x.sin();
            assert_eq!(
                (outer.load(Ordering::SeqCst), inner.load(Ordering::SeqCst)),
                (1, 1)
            );
        }
        let _d = x.sin();
        assert_eq!(inner.load(Ordering::SeqCst), 2);
    }
    let _e = x.sin();
    assert_eq!(
        (outer.load(Ordering::SeqCst), inner.load(Ordering::SeqCst)),
        (2, 2)
    );
}

#[test]
// docs/semantics.md, rule T8.
fn unpack_goes_through_the_pair_that_packed() {
    let x = leaf(&[0.5]);
    let y = {
        let _a = saved_tensors_hooks(|t: Tensor| t * 0.0 + 2.0, |t: &Tensor| t.shallow_clone());
        x.sin()
    };
    // Another pair is active at backward time; it must not be asked.
    let _b = saved_tensors_hooks(
        |t: Tensor| t,
        |_: &Tensor| -> Tensor { panic!("wrong pair") },
    );
    y.backward();
    assert_bitwise(
        &x.grad(),
        &tch::no_grad(|| Tensor::from_slice(&[2.0f32]).cos()),
        "the gradient through the pair that packed",
    );
}

#[test]
// docs/semantics.md, rule T1.
fn identity_hooks_change_nothing_and_a_popped_pair_is_gone() {
    let run = |x: &Tensor| {
        let _ = x.grad().f_zero_();
        (x.sin() * x.tanh()).sum(Kind::Float).backward();
        x.grad().copy()
    };
    let x = leaf(&[0.3, -0.2]);
    let plain = run(&x);
    let packed = counter();
    let c = packed.clone();
    let hooks = saved_tensors_hooks(
        move |t: Tensor| {
            c.fetch_add(1, Ordering::SeqCst);
            t
        },
        |t: &Tensor| t.shallow_clone(),
    );
    // Through the pair: sin, tanh and mul save four tensors.
    assert_bitwise(&run(&x), &plain, "through identity hooks");
    assert_eq!(packed.load(Ordering::SeqCst), 4);
    drop(hooks);
    assert_bitwise(&run(&x), &plain, "after the pair is popped");
    assert_eq!(
        packed.load(Ordering::SeqCst),
        4,
        "the popped pair saw nothing"
    );
}

#[test]
// docs/semantics.md, rule T1.
fn hooks_are_per_thread() {
    let packed = counter();
    let c = packed.clone();
    let _h = saved_tensors_hooks(
        move |t: Tensor| {
            c.fetch_add(1, Ordering::SeqCst);
            t
        },
        |t: &Tensor| t.shallow_clone(),
    );
    std::thread::spawn(|| {
        let x = leaf(&[1.0]);
        x.sin().backward();
    })
    .join()
    .unwrap();
    assert_eq!(packed.load(Ordering::SeqCst), 0);
    let x = leaf(&[1.0]);
    let _y = x.sin();
    assert_eq!(packed.load(Ordering::SeqCst), 1);
}

#[test]
// docs/semantics.md, rule T8 (E23).
fn a_panicking_pack_fails_the_op_not_the_process() {
    let x = leaf(&[1.0]);
    let err = {
        let _h = saved_tensors_hooks(
            |_: Tensor| -> Tensor { panic!("no room") },
            |t: &Tensor| t.shallow_clone(),
        );
        x.f_sin().unwrap_err().to_string()
    };
    assert!(err.contains("pack hook panicked: no room"), "{err}");
    x.sin().backward();
}

#[test]
// docs/semantics.md, rule T8 (E23).
fn a_panicking_unpack_fails_the_backward() {
    let x = leaf(&[1.0]);
    let y = {
        let _h = saved_tensors_hooks(|t: Tensor| t, |_: &Tensor| -> Tensor { panic!("lost it") });
        x.sin()
    };
    let err = y.f_backward().unwrap_err().to_string();
    assert!(err.contains("unpack hook panicked: lost it"), "{err}");
}
