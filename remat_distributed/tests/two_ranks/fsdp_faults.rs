//! A sharded model's faults: a peer that leaves or stalls mid-gather or
//! mid-reduce-scatter is an error on the survivor within the timeout,
//! never a hang; a parameter changed behind a unit's back and a wrong
//! construction are errors that name what to fix (docs/semantics.md,
//! rules F6, W8).

use crate::launch::{launch, out_dir};
use remat_distributed::{
    Error, FsdpOptions, FullyShardedDataParallel, InitOptions, ProcessGroup, Unit,
};
use std::time::{Duration, Instant};
use tch::{nn, nn::Module, Device, Kind, Tensor};

/// A two-layer model, each layer a unit.
struct Net {
    vs: nn::VarStore,
    a: nn::Linear,
    b: nn::Linear,
}

/// The same values every time, whatever other tests draw from the global
/// generator meanwhile (they run on other threads of this binary).
fn net() -> Net {
    let vs = nn::VarStore::new(Device::Cpu);
    let a = nn::linear(vs.root() / "a", 8, 8, Default::default());
    let b = nn::linear(vs.root() / "b", 8, 1, Default::default());
    tch::no_grad(|| {
        for (i, (_, mut v)) in sorted_vars(&vs).into_iter().enumerate() {
            let n = v.numel() as i64;
            let values = (Tensor::arange(n, (Kind::Float, Device::Cpu)) * 0.37 + i as f64).sin();
            v.copy_(&values.view(v.size().as_slice()));
        }
    });
    Net { vs, a, b }
}

/// A store's variables in name order.
fn sorted_vars(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|x, y| x.0.cmp(&y.0));
    named
}

/// `net` sharded on `group`, each layer a unit.
fn sharded(group: &ProcessGroup, net: &Net, options: FsdpOptions) -> FullyShardedDataParallel {
    FullyShardedDataParallel::from_var_store(group, &net.vs, &["a", "b"], options).unwrap()
}

fn step(net: &Net, fsdp: &FullyShardedDataParallel) -> remat_distributed::Result<()> {
    let x = Tensor::ones([4, 8], (Kind::Float, Device::Cpu));
    let h = fsdp.unit("a", || net.a.forward(&x).tanh())?;
    let y = fsdp.unit("b", || net.b.forward(&h))?;
    fsdp.backward(&y.sum(Kind::Float))
}

/// The child side's last line: how the survivor's step ended, after `key`.
fn report(key: &str, started: Instant, result: remat_distributed::Result<()>) {
    match result {
        Ok(()) => println!("{key}: ok"),
        Err(e @ Error::Collective(_)) => {
            println!("{key}: collective after {:?}: {e}", started.elapsed())
        }
        Err(e) => println!("{key}: other: {e}"),
    }
}

/// Runs `scenario` on two ranks; what rank 0 reported after `key`.
fn survivor_line(scenario: &str, key: &str) -> String {
    let dir = out_dir(scenario);
    let runs = launch(scenario, 2, |_| true, &dir, Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(runs[0].success, "rank 0 failed:\n{}", runs[0].output);
    let marker = format!("{key}: ");
    runs[0]
        .output
        .lines()
        .find_map(|l| {
            l.split_once(marker.as_str())
                .map(|(_, rest)| rest.to_string())
        })
        .unwrap_or_else(|| panic!("rank 0 printed nothing:\n{}", runs[0].output))
}

fn group(timeout: Duration) -> ProcessGroup {
    let opts = InitOptions::from_env().unwrap().timeout(timeout);
    ProcessGroup::init(&opts).unwrap()
}

/// The child side of `a_peer_that_leaves_fails_the_next_gather`: a step on
/// both ranks, then rank 1 leaves and rank 0 starts another.
pub fn leaves_rank_main() {
    let group = group(Duration::from_secs(5));
    let net = net();
    let fsdp = sharded(&group, &net, FsdpOptions::default());
    step(&net, &fsdp).unwrap();
    group.barrier().unwrap();
    if group.rank() == 1 {
        std::process::exit(0);
    }
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    report("LEFT_IN_GATHER", started, step(&net, &fsdp));
}

/// docs/semantics.md, rules F6 and W8: the survivor's next gather fails as
/// an `Error::Collective` naming the unit, the rank, the world and the
/// timeout.
#[test]
fn a_peer_that_leaves_fails_the_next_gather() {
    let line = survivor_line("fsdp_leaves", "LEFT_IN_GATHER");
    assert!(
        line.starts_with("collective after")
            && line.contains("the gather of unit `a` on rank 0 of 2 failed")
            && line.contains("5s"),
        "{line}"
    );
}

/// The child side of `a_peer_that_stalls_fails_the_reduce_scatter`: with
/// parameters kept from forward to backward, a backward's first collective
/// is its reduce-scatter; rank 1 stalls before its backward, past the
/// timeout.
pub fn stalls_rank_main() {
    let group = group(Duration::from_secs(3));
    let net = net();
    let options = FsdpOptions {
        reshard_after_forward: false,
        prefetch: false,
        ..FsdpOptions::default()
    };
    let fsdp = sharded(&group, &net, options);
    step(&net, &fsdp).unwrap();
    group.barrier().unwrap();
    let x = Tensor::ones([4, 8], (Kind::Float, Device::Cpu));
    let h = fsdp.unit("a", || net.a.forward(&x).tanh()).unwrap();
    let y = fsdp.unit("b", || net.b.forward(&h)).unwrap();
    if group.rank() == 1 {
        std::thread::sleep(Duration::from_secs(8));
        std::process::exit(0);
    }
    let started = Instant::now();
    report(
        "STALLED_IN_REDUCE",
        started,
        fsdp.backward(&y.sum(Kind::Float)),
    );
}

/// docs/semantics.md, rule W8 for sharded units: a peer that stops
/// answering mid-backward fails the survivor's reduce-scatter within the
/// timeout, as an `Error::Collective`, not a hang.
#[test]
fn a_peer_that_stalls_fails_the_reduce_scatter_within_the_timeout() {
    let line = survivor_line("fsdp_stalls", "STALLED_IN_REDUCE");
    assert!(
        line.starts_with("collective after")
            && line.contains("a gather or reduce-scatter in backward on rank 0 of 2 failed")
            && line.contains("3s"),
        "{line}"
    );
    // Within the timeout (3 s) and well before the peer wakes (8 s).
    let secs: f64 = line
        .trim_start_matches("collective after ")
        .split('s')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::MAX);
    assert!(secs < 7.5, "the survivor waited {secs} s: {line}");
}

fn world_of_one() -> ProcessGroup {
    let port = crate::launch::free_port();
    ProcessGroup::init(&InitOptions::new(0, 1, "127.0.0.1", port)).unwrap()
}

/// docs/semantics.md, rule F6: a parameter replaced after sharding is an
/// error naming its unit and itself, not a wrong step.
#[test]
fn a_parameter_changed_after_sharding_is_an_error_naming_it() {
    let group = world_of_one();
    let net = net();
    let fsdp = sharded(&group, &net, FsdpOptions::default());
    step(&net, &fsdp).unwrap();
    let mut w = net.a.ws.shallow_clone();
    tch::no_grad(|| w.set_data(&Tensor::zeros([8, 3], (Kind::Float, Device::Cpu))));
    let err = step(&net, &fsdp).unwrap_err().to_string();
    assert!(
        err.contains("sharded unit `a`: parameter `a.weight` was replaced or reshaped")
            && err.contains("[8, 3]")
            && err.contains("[8, 8]")
            && err.contains("rule F6"),
        "{err}"
    );
}

/// Construction errors name the unit, the parameter and the fix.
#[test]
fn wrong_units_are_refused_by_name() {
    let group = world_of_one();
    let net = net();
    let err = |units: Vec<Unit>| match FullyShardedDataParallel::new(
        &group,
        units,
        FsdpOptions::default(),
    ) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let named = |n: &str| {
        net.vs
            .variables()
            .into_iter()
            .filter(|(k, _)| k.starts_with(n))
            .collect::<Vec<_>>()
    };
    let mut twice = named("a.");
    twice.extend(named("a.w"));
    let msg = err(vec![Unit::new("a", twice)]);
    assert!(msg.contains("is also in unit `a`"), "{msg}");
    let msg = err(vec![
        Unit::new("a", named("a.")),
        Unit::new("a", named("b.")),
    ]);
    assert!(msg.contains("two units are named `a`"), "{msg}");
    let msg = err(vec![Unit::new("empty", vec![])]);
    assert!(msg.contains("unit `empty` has no parameters"), "{msg}");
    let frozen = Tensor::ones([2], (Kind::Float, Device::Cpu));
    let msg = err(vec![Unit::new("frozen", vec![("frozen.w".into(), frozen)])]);
    assert!(
        msg.contains("parameter `frozen.w` is not a trainable leaf"),
        "{msg}"
    );
    let fsdp = sharded(&group, &net, FsdpOptions::default());
    let msg = fsdp.unit("c", Tensor::new).unwrap_err().to_string();
    assert!(
        msg.contains("no unit is named `c`") && msg.contains("\"a\""),
        "{msg}"
    );
    let msg = fsdp.shard("c").unwrap_err().to_string();
    assert!(msg.contains("no unit is named `c`"), "{msg}");
    let ints = FsdpOptions {
        param_dtype: Some(Kind::Int64),
        ..FsdpOptions::default()
    };
    let other = self::net();
    let msg = FullyShardedDataParallel::from_var_store(&group, &other.vs, &["a"], ints)
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("FsdpOptions::param_dtype: Int64 is no floating dtype"),
        "{msg}"
    );
    assert_eq!(other.a.ws.size(), [8, 8], "a refused model was sharded");
    let msg =
        FullyShardedDataParallel::from_var_store(&group, &net.vs, &["z"], FsdpOptions::default())
            .err()
            .unwrap()
            .to_string();
    assert!(
        msg.contains("no trainable variable is named `z.…`"),
        "{msg}"
    );
}

/// A backward that fails for a reason of the model's (here a replay that
/// panics) is `Error::Backward`; the next step's forward forgets what it
/// had half done, and that step's gradients are those of a fresh model's.
#[test]
fn a_failed_backward_leaves_the_next_step_exact() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let group = world_of_one();
    let run = |fail_first: bool| {
        let net = net();
        let fsdp = sharded(&group, &net, FsdpOptions::default());
        let fail = Arc::new(AtomicBool::new(fail_first));
        let x = Tensor::ones([4, 8], (Kind::Float, Device::Cpu));
        let step = || {
            let unit = fsdp.handle("a").unwrap();
            let (layer, flag) = (net.a.ws.shallow_clone(), Arc::clone(&fail));
            let bias = net.a.bs.as_ref().unwrap().shallow_clone();
            let h = remat::checkpoint("a").call(&x, move |x| {
                if remat::is_recomputing() && flag.load(Ordering::SeqCst) {
                    panic!("the replay fails");
                }
                unit.forward(|| x.linear(&layer, Some(&bias)).tanh())
                    .unwrap()
            });
            let y = fsdp.unit("b", || net.b.forward(&h)).unwrap();
            fsdp.backward(&y.sum(Kind::Float))
        };
        if fail_first {
            let err = step().unwrap_err();
            assert!(
                matches!(err, Error::Backward(_)) && err.to_string().contains("the replay fails"),
                "{err}"
            );
            fail.store(false, Ordering::SeqCst);
        }
        step().unwrap();
        assert_eq!(fsdp.gathered_bytes().unwrap(), 0);
        fsdp.units()
            .iter()
            .map(|u| Vec::<f32>::try_from(fsdp.shard(u).unwrap().grad()).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(true), run(false));
}
