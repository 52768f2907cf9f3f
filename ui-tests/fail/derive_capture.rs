// `#[derive(Capture)]` needs every field to be capturable, and no unions.
use remat::Capture;
use tch::Tensor;

struct Opaque;

#[derive(Capture)]
struct Block {
    weight: Tensor,
    extra: Opaque,
}

#[derive(Capture)]
union Bits {
    f: f32,
    u: u32,
}

fn main() {}
