use crate::common::assert_bitwise;
use crate::common::model::{batch, Model, ModelPolicy, SMALL};
use tch::Tensor;

fn grads(model: &Model) -> Vec<Tensor> {
    let (tokens, targets) = batch_fixed();
    model
        .loss(&tokens, &targets, ModelPolicy::Selective)
        .backward();
    model
        .named_parameters()
        .into_iter()
        .map(|(_, p)| p.grad().copy())
        .collect()
}

fn batch_fixed() -> (Tensor, Tensor) {
    let data = Tensor::arange(SMALL.b * (SMALL.t + 1), tch::kind::INT64_CPU)
        .remainder(251)
        .view([SMALL.b, SMALL.t + 1]);
    (
        data.narrow(1, 0, SMALL.t).contiguous(),
        data.narrow(1, 1, SMALL.t).contiguous(),
    )
}

#[test]
fn two_threads_checkpointing_at_once_match_a_serial_run() {
    let _ = batch;
    tch::set_num_threads(1);
    // Copies of one model: the global RNG is shared with tests running alongside.
    let model = Model::new(SMALL, 3);
    let (a, b) = (model.deep_copy(), model.deep_copy());
    let serial = grads(&model);
    let ta = std::thread::spawn(move || {
        (0..3)
            .map(|_| {
                a.zero_grad();
                grads(&a)
            })
            .last()
            .unwrap()
    });
    let tb = std::thread::spawn(move || {
        (0..3)
            .map(|_| {
                b.zero_grad();
                grads(&b)
            })
            .last()
            .unwrap()
    });
    for result in [ta.join().unwrap(), tb.join().unwrap()] {
        for (g, s) in result.iter().zip(&serial) {
            assert_bitwise(g, s, "gradient");
        }
    }
}
