//! The whole-model report. A test binary of its own with one test: it reads
//! every live checkpoint of the process, so its cases run one after another.

use remat::{
    checkpoint, diagnostics::human_bytes, diagnostics::saved_tensors_report,
    diagnostics::saved_tensors_report_from, diagnostics::track_saved_tensors,
    diagnostics::SavedTensorsReport, region, storage::storage_nbytes, Policy,
};
use remat_reference::model::{batch, Model, ModelPolicy, SMALL};
use tch::{Device, Kind, Tensor};

/// The parts of a report add up to its totals.
fn assert_totals_add_up(report: &SavedTensorsReport) {
    let text = report.to_string();
    let regions: i64 = report
        .checkpoints
        .iter()
        .flat_map(|c| &c.regions)
        .flat_map(|r| r.storages())
        .map(|s| s.bytes)
        .sum();
    assert_eq!(report.checkpoint_bytes(), regions, "{text}");
    let outside = report.outside_bytes().unwrap_or(0);
    if let Some(nodes) = report.outside_by_node() {
        assert_eq!(
            nodes.iter().map(|(_, b, _)| b).sum::<i64>(),
            outside,
            "{text}"
        );
    }
    let total = report.checkpoint_bytes() + report.input_bytes() + outside;
    // The format itself is pinned by the snapshots and `human_bytes`'s own
    // example; this checks the total.
    let header = format!("saved for backward: {} -- ", human_bytes(total));
    assert!(text.starts_with(&header), "{header}\n{text}");
}

#[test]
// docs/semantics.md, rule D4.
fn the_whole_model_report() {
    tch::set_num_threads(1);
    reference_model_under_each_policy();
    outside_saves_are_labelled_by_their_autograd_node();
    checkpoint_inputs_are_billed_on_their_own_line();
    views_of_parameters_are_parameters();
}

// docs/semantics.md, rules D4 and M5.
fn reference_model_under_each_policy() {
    let model = Model::new(SMALL, 2);
    let (tokens, targets) = batch(SMALL, 3);
    let block_input = SMALL.b * SMALL.t * SMALL.d * 4;
    for (policy, name) in [
        (ModelPolicy::Full, "full"),
        (ModelPolicy::Selective, "selective"),
        (ModelPolicy::SaveMlp, "save_mlp"),
    ] {
        let (loss, outside) = track_saved_tensors(|| model.loss_api(&tokens, &targets, policy));
        let report = saved_tensors_report_from(Some(&outside), &[&loss]);
        let text = report.to_string();
        assert_totals_add_up(&report);
        assert_eq!(report.checkpoints.len(), 2, "{text}");
        // Each block keeps its input (the residual stream) for replay.
        assert_eq!(report.input_bytes(), 2 * block_input, "{text}");
        let groups = report.groups();
        assert_eq!(groups.len(), 1, "identical blocks group: {text}");
        assert_eq!(groups[0].0, "layers.0-1");
        assert!(text.contains("x2  layers.0-1"), "{text}");
        if policy == ModelPolicy::Selective {
            assert!(
                text.contains(
                    "attention: 7 storage(s) each, 1 rebuilt, 0 packed by hooks, 2 parameter(s) \
                     not counted"
                ),
                "{text}"
            );
            // The Python reference's 177 KiB per block less the two weights.
            assert_eq!(report.checkpoint_bytes(), 2 * 113 * 1024, "{text}");
        }
        let nodes = report.outside_by_node().unwrap();
        assert!(
            nodes.iter().any(|(n, _, _)| n == "LogSoftmaxBackward0"),
            "{text}"
        );
        insta::assert_snapshot!(format!("saved_tensors_report_{name}"), text);

        // Untracked, the outside part says so.
        assert!(saved_tensors_report(None)
            .to_string()
            .contains("outside checkpoints not tracked"));

        loss.backward();
        let after = saved_tensors_report(Some(&outside));
        assert!(after.checkpoints.is_empty(), "replayed and freed: {after}");
        assert_eq!(after.outside_bytes(), Some(0), "{after}");
    }
}

/// Each node saves a tensor of its own size, so bytes tell which node a
/// save was billed to.
// docs/semantics.md, rule D4.
fn outside_saves_are_labelled_by_their_autograd_node() {
    let w = Tensor::randn([16, 8], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let x0 = Tensor::randn([3, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let (loss, outside) = track_saved_tensors(|| {
        let x = &x0 * 2; // MulBackward0 by a scalar saves nothing
        let h = x.matmul(&w); // MmBackward0 saves x (192 B) and w (a parameter)
        let s = h.sin(); // SinBackward0 saves h (96 B)
        let e = s.exp(); // ExpBackward0 saves its result (96 B)
        let t = e.narrow(0, 0, 1).tanh(); // TanhBackward0 saves its result (32 B)
        t.sum(Kind::Float)
    });
    let report = saved_tensors_report_from(Some(&outside), &[&loss]);
    assert_totals_add_up(&report);
    let nodes: Vec<(String, i64, usize)> = report.outside_by_node().unwrap().to_vec();
    let expected = [
        ("MmBackward0", 192, 1),
        ("SinBackward0", 96, 1),
        ("ExpBackward0", 96, 1),
        ("TanhBackward0", 32, 1),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(n, b, k)| (n.to_string(), *b, *k))
        .collect();
    assert_eq!(nodes, expected, "{report}");
    // Without roots the saves are counted but not labelled.
    let plain = saved_tensors_report(Some(&outside));
    assert_eq!(plain.outside_bytes(), Some(192 + 96 + 96 + 32));
    assert!(plain.outside_by_node().is_none());
    insta::assert_snapshot!("saved_tensors_report_outside_by_node", report.to_string());
    loss.backward();
}

/// A parameter made as a slice of a buffer that needs no gradient (as a
/// flat buffer's views are) keeps no bytes of its own when saved through a
/// view of it: `linear` saves `w.t()`, whose base is the buffer, not the
/// parameter.
// docs/semantics.md, rule D4.
fn views_of_parameters_are_parameters() {
    let buffer = Tensor::randn([2, 64, 32], (Kind::Float, Device::Cpu));
    let w = buffer.select(0, 1).set_requires_grad(true);
    assert!(w.is_leaf());
    let x = Tensor::randn([5, 32], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let (loss, outside) =
        track_saved_tensors(|| (&x * 2).linear::<Tensor>(&w, None).sum(Kind::Float));
    let report = saved_tensors_report(Some(&outside));
    // Only `x * 2` (5 x 32 floats): not the 8 KiB parameter nor its buffer.
    assert_eq!(report.outside_bytes(), Some(5 * 32 * 4), "{report}");
    loss.backward();
    assert_eq!(w.grad().size(), [64, 32]);
}

// docs/semantics.md, rules D4 and C1.
fn checkpoint_inputs_are_billed_on_their_own_line() {
    let x0 = Tensor::randn([4, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let (loss, outside) = track_saved_tensors(|| {
        let x = x0.exp(); // ExpBackward0 saves x: also the checkpoint's input
        let y = checkpoint("c").call(&x, |x| {
            region("sin", Policy::Recompute).call(&x, |x| x.sin())
        });
        y.sum(Kind::Float)
    });
    let report = saved_tensors_report_from(Some(&outside), &[&loss]);
    assert_totals_add_up(&report);
    let x_bytes = 64;
    // The input's storage is billed once, to the checkpoint, not outside.
    assert_eq!(report.input_bytes(), x_bytes, "{report}");
    assert_eq!(report.outside_bytes(), Some(0), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("checkpoint inputs kept for replay: 64 B in 1 storage(s)"),
        "{text}"
    );
    loss.backward();
    let _ = storage_nbytes(&x0);
}
