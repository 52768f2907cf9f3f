//! Two ranks on one machine, Gloo over loopback: each test starts the
//! ranks as child processes of this test binary (the `rank_entry` test
//! with a scenario in the environment), under a time limit, on a free
//! port, and reads back what each rank wrote.

mod faults;
mod fsdp_cuda;
mod fsdp_faults;
mod fsdp_memory;
mod fsdp_overlap;
mod fsdp_training;
mod launch;
mod nccl;
mod overlap;
mod sharded_model;
mod training;

/// The child side: runs the scenario its parent named, as one rank. In an
/// ordinary run (no scenario set) it does nothing.
#[test]
fn rank_entry() {
    let Ok(scenario) = std::env::var(launch::SCENARIO) else {
        return;
    };
    tch::set_num_threads(1);
    match scenario.as_str() {
        "train" => training::rank_main(),
        "peer_leaves" => faults::peer_leaves_rank_main(),
        "peer_leaves_in_backward" => faults::peer_leaves_in_backward_rank_main(),
        "unused" => training::unused_rank_main(),
        "overlap" => overlap::rank_main(),
        "fsdp_train" => fsdp_training::rank_main(),
        "fsdp_memory" => fsdp_memory::rank_main(),
        "fsdp_leaves" => fsdp_faults::leaves_rank_main(),
        "fsdp_stalls" => fsdp_faults::stalls_rank_main(),
        "fsdp_overlap" => fsdp_overlap::rank_main(),
        other => panic!("unknown scenario {other:?}"),
    }
}
