#![allow(dead_code)]
//! Shared by the integration tests.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use tch::{Kind, Tensor};

/// A small float input that requires grad.
pub fn input() -> Tensor {
    Tensor::from_slice(&[0.3f32, -1.2, 0.7, 2.0])
        .view([2, 2])
        .set_requires_grad(true)
}

/// A shared counter for closures.
pub fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// `x`'s gradient of `loss` (zeroing any earlier one).
pub fn grad_of(x: &Tensor, loss: &Tensor) -> Tensor {
    let _ = x.grad().f_zero_();
    loss.backward();
    x.grad().copy()
}

pub fn bits(t: &Tensor) -> Vec<u32> {
    Vec::<f32>::try_from(t.to_kind(Kind::Float).flatten(0, -1))
        .unwrap()
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

pub fn assert_bitwise(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.size(), b.size(), "{what}: shapes differ");
    assert!(bits(a) == bits(b), "{what}: values differ");
}

/// The message of a panic or error, as text.
pub fn message<T>(r: std::thread::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected a failure"),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}
