// A save output of a type of the user's (`#[derive(RegionOutput)]`, docs/dsl.md
// Y10) is a `Saved<..>` until marked: each way to reach a field's data
// without `needs` is a type error (field access, patterns, the field view,
// `Deref`, `Clone`, and the impls the derive adds, whose conversions take
// the runtime's token).
use remat::io::{CheckpointOutputItem, RegionInput, RegionOutput, SavedFields, Token};
use remat::{checkpoint, remat, Tensor};

#[derive(RegionOutput)]
pub struct Attention {
    pub out: Tensor,
    pub lse: Tensor,
}

fn attend(h: &Tensor) -> Attention {
    Attention { out: h.tanh(), lse: h.sin() }
}

#[checkpoint]
fn field(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    x * a.out
}

#[checkpoint]
fn pattern(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let Attention { out, lse } = a;
    x * out + lse
}

#[checkpoint]
fn view_as_tensor(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let out: &Tensor = a.fields().out;
    x * out
}

#[checkpoint]
fn view_method(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    x * a.fields().lse.exp()
}

#[checkpoint]
fn deref(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let plain: &Attention = &*a;
    x * &plain.out
}

#[checkpoint]
fn cloned(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let copy = a.clone();
    x * copy.out
}

#[checkpoint]
fn fields_of_the_value(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let view = SavedFields::fields(&a);
    x * view.out
}

#[checkpoint]
fn visit(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let mut sum = x.zeros_like();
    RegionInput::visit(&a, &mut |t| sum += t);
    sum
}

#[checkpoint]
fn token(x: &Tensor) -> Tensor {
    remat! { let a = save attention: attend(x); }
    let plain = CheckpointOutputItem::into_item(a, Token(()));
    x * plain.out
}

fn main() {}
