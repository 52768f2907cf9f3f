//! A fast hasher for the runtime's per-region maps (region names, storage
//! keys): their keys come from the program, not from an adversary, so the
//! standard library's DoS-resistant SipHash buys nothing and costs a
//! measurable part of a region's overhead.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash of rustc (`FxHasher`).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        // Byte by byte: region names are short, and a `copy_from_slice`
        // into a buffer calls `memcpy` for every key hashed.
        let tail = rest
            .iter()
            .enumerate()
            .fold(0u64, |w, (i, b)| w | (u64::from(*b) << (8 * i)));
        self.add(tail ^ rest.len() as u64);
    }

    fn write_u8(&mut self, i: u8) {
        self.add(i.into());
    }

    fn write_u32(&mut self, i: u32) {
        self.add(i.into());
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_spread() {
        let names: FastSet<String> = (0..1000).map(|i| format!("r{i}")).collect();
        assert_eq!(names.len(), 1000);
        let mut a = FastHasher::default();
        a.write(b"r1");
        let mut b = FastHasher::default();
        b.write(b"r2");
        assert_ne!(a.finish(), b.finish());
    }
}
