#![allow(dead_code)]
//! Shared by the integration tests.

pub mod model;

use tch::{Kind, Tensor};

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
