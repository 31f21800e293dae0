"""The one rule for what bounds a step: CPU-like, GPU-like (launch-bound) and
compute-bound records each get their own verdict and sentence; intensity alone never decides."""
from __future__ import annotations

import pytest

from inference.experiments.noise import judge
from inference.experiments.roofline import ComputeRoof, WorkPoint, decide_bound, step_shares
from visualizations.roofline_charts import compute_roof_md, contrast_sentence


def test_cpu_like_decode_reaching_the_bandwidth_roof_is_memory_bound():
    v = decide_bound(memory_share=0.69, compute_share=0.02, overhead_share=0.3, device="cpu")
    assert v.kind == "memory" and v.label == "memory"
    assert "69% of the measured bandwidth" in v.sentence


def test_gpu_like_launch_bound_step_is_launches_not_memory():
    # H200: the step read at ~2% of its bandwidth, the GPU idle 77% of the step
    v = decide_bound(memory_share=0.02, compute_share=0.001, overhead_share=0.77, device="cuda")
    assert v.kind == "launches" and "kernel launches" in v.sentence
    assert "memory" not in v.label


def test_cpu_dispatch_bound_step_names_dispatch():
    v = decide_bound(0.2, 0.01, overhead_share=0.6, device="cpu")
    assert v.kind == "dispatch" and "small operations" in v.sentence


def test_compute_bound_prefill():
    v = decide_bound(memory_share=0.01, compute_share=0.8)
    assert v.kind == "compute" and v.label == "arithmetic" and "80%" in v.sentence


def test_neither_roof_claims_no_unmeasured_cause():
    v = decide_bound(0.3, 0.05)
    assert v.kind == "neither" and "not measured here" in v.sentence
    assert "Bound by" not in v.sentence


def test_intensity_alone_does_not_decide():
    # far left of the ridge (0.5 FLOPs per byte against a ridge of 10) but only 2% of bandwidth
    slow = WorkPoint("decode, batch 1", flops=2e8, bytes_read=4e8, seconds=1.0)
    roof = ComputeRoof(peak_gflops=200.0, bandwidth_gbs=20.0, points=(slow,))
    assert slow.intensity < roof.ridge
    assert roof.verdict(slow).kind == "neither"
    quiet = judge(others_cpu=0.02)  # the noise rule's quiet reading: the verdict is drawn
    assert "| neither roof |" in compute_roof_md(roof, "float16", quiet)


def test_shares_from_figures():
    memory, compute = step_shares(flops=1e9, bytes_read=2e9, seconds=0.1, peak_gflops=100,
                                  bandwidth_gbs=40)
    assert memory == pytest.approx(0.5) and compute == pytest.approx(0.1)
    assert step_shares(1, 1, 0, 1, 1) == (0.0, 0.0)


def test_contrast_only_when_measured():
    assert "measured here" in contrast_sentence("memory", "compute")
    assert "measured here" not in contrast_sentence("launches", "compute")


def test_step_split_verdict_cpu_like_and_gpu_like():
    """The step split's sentence comes from the rule: a CPU step near the bandwidth floor is
    memory-bound; a GPU step idle most of the time between launches is launch-bound."""
    from inference.experiments.roofline import StepBound
    from inference.profile_step import StepProfile
    from visualizations.step_charts import step_bound_md

    def profile(**kw):
        base = dict(device="cpu", steps=4, step_seconds=0.030, ops_per_step=5870,
                    matmul_seconds=0.020, overhead_share=0.33, matmul_ops_per_step=211,
                    other_ops_seconds=0.006)
        return StepProfile(**(base | kw))

    cpu = StepBound(profile(), 0.8e-6, None)
    v = cpu.verdict(floor_seconds=0.024)  # 80% of the bandwidth roof
    assert v.kind == "memory"
    assert v.sentence in step_bound_md(cpu, 0.024, 540_000_000, 22.5)
    gpu = StepBound(profile(device="cuda:0", step_seconds=0.0188, kernels_per_step=2447.0,
                            device_busy_share=0.23), 5e-6, None)
    v = gpu.verdict(floor_seconds=0.0188 / 260)  # the H200's step: ~260x its floor
    assert v.kind == "launches" and "kernel launches" in v.sentence
