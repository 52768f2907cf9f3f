// Malformed `save` / `recompute` statements; each is reported at its span
// and the others still expand.
use remat::remat;
use tch::Tensor;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

fn block(x: &Tensor) {
    remat! {
        let a = save attention;
        let b = save attention x.relu();
        let c = save x + 1;
        let d = recompute "": attention(x);
        save self_attention: attention(x)
        let e = recompute mlp: attention(x);
    }
}

fn main() {}
