use crate::common::assert_bitwise;
use remat_reference::model::{Model, ModelPolicy, SMALL};
use tch::Tensor;

fn grads(model: &Model) -> Vec<Tensor> {
    let (tokens, targets) = batch_fixed();
    model
        .loss_api(&tokens, &targets, ModelPolicy::Selective)
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
    tch::set_num_threads(1);
    // Copies of one model: the global RNG is shared with tests running alongside.
    let model = Model::new(SMALL, 3);
    let (a, b) = (model.deep_copy(), model.deep_copy());
    let serial = grads(&model);
    let repeat = |m: Model| {
        move || {
            let mut last = Vec::new();
            for _ in 0..3 {
                m.zero_grad();
                last = grads(&m);
            }
            last
        }
    };
    let (ta, tb) = (std::thread::spawn(repeat(a)), std::thread::spawn(repeat(b)));
    for result in [ta.join().unwrap(), tb.join().unwrap()] {
        for (g, s) in result.iter().zip(&serial) {
            assert_bitwise(g, s, "gradient");
        }
    }
}
