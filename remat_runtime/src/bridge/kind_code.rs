//! libtorch's `c10::ScalarType` codes for tch's [`Kind`]s, both ways (tch
//! keeps its own mapping private): what crosses the bridge for a dtype.

use tch::Kind;

/// libtorch's `c10::ScalarType` code for `kind` (tch keeps its own private).
pub(super) fn scalar_type(kind: Kind) -> std::os::raw::c_int {
    match kind {
        Kind::Uint8 => 0,
        Kind::Int8 => 1,
        Kind::Int16 => 2,
        Kind::Int => 3,
        Kind::Int64 => 4,
        Kind::Half => 5,
        Kind::Float => 6,
        Kind::Double => 7,
        Kind::ComplexHalf => 8,
        Kind::ComplexFloat => 9,
        Kind::ComplexDouble => 10,
        Kind::Bool => 11,
        Kind::QInt8 => 12,
        Kind::QUInt8 => 13,
        Kind::QInt32 => 14,
        Kind::BFloat16 => 15,
        Kind::Float8e5m2 => 23,
        Kind::Float8e4m3fn => 24,
        Kind::Float8e5m2fnuz => 25,
        Kind::Float8e4m3fnuz => 26,
    }
}

/// The [`Kind`] of a `c10::ScalarType` code (the inverse of `scalar_type`).
pub(crate) fn kind_of_code(code: i32) -> Option<Kind> {
    const KINDS: [Kind; 20] = [
        Kind::Uint8,
        Kind::Int8,
        Kind::Int16,
        Kind::Int,
        Kind::Int64,
        Kind::Half,
        Kind::Float,
        Kind::Double,
        Kind::ComplexHalf,
        Kind::ComplexFloat,
        Kind::ComplexDouble,
        Kind::Bool,
        Kind::QInt8,
        Kind::QUInt8,
        Kind::QInt32,
        Kind::BFloat16,
        Kind::Float8e5m2,
        Kind::Float8e4m3fn,
        Kind::Float8e5m2fnuz,
        Kind::Float8e4m3fnuz,
    ];
    KINDS.into_iter().find(|&k| scalar_type(k) == code)
}
