//! The whole-model report. A test binary of its own with one test: it reads
//! every live checkpoint of the process.

mod common;

use remat::{saved_tensors_report, saved_tensors_report_from, track_saved_tensors};
use remat_reference::model::{batch, Model, ModelPolicy, SMALL};

#[test]
fn the_whole_model_report_groups_identical_blocks_and_bills_each_storage_once() {
    let model = Model::new(SMALL, 2);
    let (tokens, targets) = batch(SMALL, 3);
    let (loss, outside) =
        track_saved_tensors(|| model.loss(&tokens, &targets, ModelPolicy::Selective));
    let report = saved_tensors_report_from(Some(&outside), &[&loss]);
    let text = report.to_string();
    println!("{text}");
    assert_eq!(report.checkpoints.len(), 2, "{text}");
    let groups = report.groups();
    assert_eq!(groups.len(), 1, "{text}");
    assert_eq!(groups[0].0, "layers.0-1");
    assert!(text.contains("x2  layers.0-1"), "{text}");
    assert!(
        text.contains(
            "attention: 7 storage(s) each, 1 rebuilt, 0 offloaded, 2 parameter(s) not counted"
        ),
        "{text}"
    );
    // The Python reference's 177 KiB per block less the two weights (64 KiB).
    assert_eq!(report.checkpoint_bytes(), 2 * 113 * 1024, "{text}");
    assert!(report.outside_bytes().unwrap() > 0, "{text}");

    // Untracked, the outside part says so.
    assert!(saved_tensors_report(None)
        .to_string()
        .contains("outside checkpoints not tracked"));

    loss.backward();
    let after = saved_tensors_report(Some(&outside));
    assert!(after.checkpoints.is_empty(), "replayed and freed: {after}");
    assert_eq!(after.outside_bytes(), Some(0), "{after}");
}
