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
// docs/semantics.md, rule M1.
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

/// A barrier that gives up (panics) after a while instead of hanging the
/// test suite when another thread failed.
struct TimedBarrier {
    n: usize,
    state: std::sync::Mutex<(usize, u64)>,
    cv: std::sync::Condvar,
}

impl TimedBarrier {
    fn new(n: usize) -> Self {
        TimedBarrier {
            n,
            state: std::sync::Mutex::new((0, 0)),
            cv: std::sync::Condvar::new(),
        }
    }

    fn wait(&self) {
        let mut s = self.state.lock().unwrap();
        let generation = s.1;
        s.0 += 1;
        if s.0 == self.n {
            *s = (0, generation + 1);
            self.cv.notify_all();
            return;
        }
        while s.1 == generation {
            let (next, timeout) = self
                .cv
                .wait_timeout(s, std::time::Duration::from_secs(60))
                .unwrap();
            s = next;
            assert!(!timeout.timed_out(), "a thread never reached the barrier");
        }
    }
}

/// A state hook whose snapshots meet at a barrier: every checkpoint entry,
/// `Save` region exit and replay start waits for the other threads, so
/// their forwards and replays really run at the same time.
struct Rendezvous(std::sync::Arc<TimedBarrier>);

impl remat::RecomputeStateHook for Rendezvous {
    fn snapshot(&self) -> Box<dyn std::any::Any + Send> {
        self.0.wait();
        Box::new(())
    }
    fn restore(&self, _: &(dyn std::any::Any + Send)) {}
}

/// `steps` SGD steps of the small model under `selective`, each block a
/// checkpoint meeting the others at `barrier`; the parameters after.
fn train(model: Model, barrier: std::sync::Arc<TimedBarrier>, steps: usize) -> Vec<Tensor> {
    use remat::{checkpoint, RecomputeStateHook};
    use remat_reference::model::block_body;
    use std::sync::Arc;
    use tch::nn::OptimizerConfig;
    let hook: Arc<dyn RecomputeStateHook> = Arc::new(Rendezvous(barrier));
    let mut opt = tch::nn::Sgd::default().build(&model.vs, 0.05).unwrap();
    let (tokens, targets) = batch_fixed();
    for _ in 0..steps {
        let loss = model.loss_through(&tokens, &targets, |mut x| {
            for b in &model.blocks {
                let p = b.shallow();
                x = checkpoint(format!("layers.{}", b.index))
                    .state_hook_arc(hook.clone())
                    .call(&x, move |x| block_body(&p, &x, ModelPolicy::Selective));
            }
            x
        });
        opt.zero_grad();
        loss.backward();
        opt.step();
    }
    model
        .named_parameters()
        .into_iter()
        .map(|(_, p)| p.detach().copy())
        .collect()
}

#[test]
// docs/semantics.md, rules M1 and M2.
fn four_threads_training_with_overlapping_forwards_and_replays_match_one() {
    tch::set_num_threads(1);
    const STEPS: usize = 100;
    let model = Model::new(SMALL, 9);
    let copies: Vec<Model> = (0..4).map(|_| model.deep_copy()).collect();
    let serial = train(model, std::sync::Arc::new(TimedBarrier::new(1)), STEPS);
    let barrier = std::sync::Arc::new(TimedBarrier::new(4));
    let threads: Vec<_> = copies
        .into_iter()
        .map(|m| {
            let barrier = barrier.clone();
            std::thread::spawn(move || train(m, barrier, STEPS))
        })
        .collect();
    for t in threads {
        let params = t.join().expect("a training thread failed");
        for (p, s) in params.iter().zip(&serial) {
            assert_bitwise(p, s, "parameter after 100 steps");
        }
    }
}

#[test]
// docs/semantics.md, rule M2.
fn a_backward_on_another_thread_replays_there() {
    use remat::{checkpoint, is_recomputing, recompute_needs_tensor, region, Policy};
    use std::sync::{Arc, Mutex};
    tch::set_num_threads(1);
    let replayed_on = Arc::new(Mutex::new(Vec::new()));
    let forward = |seen: Arc<Mutex<Vec<std::thread::ThreadId>>>| {
        let x = crate::common::input();
        let y = checkpoint("c").call(&x, move |x| {
            if is_recomputing() {
                seen.lock().unwrap().push(std::thread::current().id());
            }
            let h = region("s", Policy::Save).call(&x, |x| x.exp());
            recompute_needs_tensor(&h);
            h.sin().sum(tch::Kind::Float)
        });
        (x, y)
    };
    let (x, y) = forward(replayed_on.clone());
    let worker = std::thread::spawn(move || {
        y.backward();
        std::thread::current().id()
    });
    let worker_id = worker.join().unwrap();
    assert_eq!(*replayed_on.lock().unwrap(), [worker_id]);
    let (x2, y2) = forward(Arc::new(Mutex::new(Vec::new())));
    y2.backward();
    assert_bitwise(&x.grad(), &x2.grad(), "gradient");
}
