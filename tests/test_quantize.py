"""Lesson 6: quantize/dequantize bounds, kernel vs reference paths, and modes on the real model."""
import pytest
import torch

from inference.config import Settings
from inference.errors import EmptyPromptError, InferenceInputError, SettingOutOfRangeError
from inference.experiments.quality import (
    Reference,
    agreement_and_kl,
    decided_agreement,
    perplexity,
    teacher_forced_logprobs,
)
from inference.experiments.roofline import greedy_run
from inference.experiments.shared_results import SharedResults
from inference.loading import bytes_read_per_token
from inference.loading import weight_bytes as model_weight_bytes
from inference.quantize import (
    MODES,
    SIMULATED,
    WeightOnlyInt4Linear,
    build_mode,
    dequantize_int4_groupwise,
    dequantize_int8_per_channel,
    get_mode,
    iter_swap_linears,
    kernel_available,
    pack_int4,
    quantize_int4_groupwise,
    quantize_int8_per_channel,
    quantized_linear,
    unpack_int4,
)


@pytest.fixture(scope="module")
def shared():
    return SharedResults()


@pytest.fixture(scope="module")
def reference(lm, chat_ids):
    greedy = greedy_run(lm.model, chat_ids, 64, lm.device)
    logprobs = teacher_forced_logprobs(lm.model, chat_ids, list(greedy.token_ids), lm.device)
    return Reference(tuple(chat_ids), greedy, logprobs)


# ------------------------------------------------------------- pure functions
def test_int8_round_trip_within_half_a_step():
    w = torch.randn(64, 96) * torch.logspace(-2, 1, 64)[:, None]  # rows of very different size
    q, scales = quantize_int8_per_channel(w)
    assert q.dtype == torch.int8 and q.shape == (64, 96) and scales.shape == (64,)
    err = (dequantize_int8_per_channel(q, scales) - w).abs()
    assert (err <= scales[:, None] / 2 * (1 + 1e-5)).all()
    assert (q.abs().amax(dim=1) == 127).all()  # every row uses the full range


def test_int4_round_trip_within_half_a_step_per_group():
    torch.manual_seed(0)
    w = torch.randn(32, 128) + torch.linspace(-3, 3, 128)  # groups with offsets: asymmetric
    for g in (32, 64):
        q, scales, zeros = quantize_int4_groupwise(w, g)
        assert q.min() >= 0 and q.max() <= 15 and scales.shape == (32, 128 // g)
        err = (dequantize_int4_groupwise(q, scales, zeros, g) - w).abs().reshape(32, -1, g)
        assert (err <= scales[..., None] / 2 * (1 + 1e-4) + 1e-6).all()
    with pytest.raises(ValueError):
        quantize_int4_groupwise(torch.randn(4, 48), 32)


def test_int4_nibble_packing_round_trips():
    q = torch.randint(0, 16, (6, 10), dtype=torch.uint8)
    packed = pack_int4(q)
    assert packed.shape == (6, 5) and packed.dtype == torch.uint8
    assert torch.equal(unpack_int4(packed), q)


# ------------------------------------------------------------- kernel vs reference
@pytest.mark.skipif(not kernel_available("int8", "cpu"), reason="no int8 CPU kernel")
def test_int8_kernel_matches_reference_path():
    torch.manual_seed(1)
    linear = torch.nn.Linear(576, 192, bias=False)
    x = torch.randn(2, 5, 576)
    fast, ref = (quantized_linear(linear, "int8", use_kernel=k) for k in (True, False))
    assert fast.kernel != SIMULATED and ref.kernel == SIMULATED
    assert torch.equal(fast.weight, ref.weight)
    y_fast, y_ref = fast(x), ref(x)
    assert y_fast.shape == (2, 5, 192) and y_fast.dtype == torch.float32
    assert torch.allclose(y_fast, y_ref, atol=0.03, rtol=0.02)  # bf16 activations in the kernel
    assert torch.allclose(y_ref, linear(x), atol=0.03)


@pytest.mark.skipif(not kernel_available("int4", "cpu"), reason="no int4 CPU kernel")
@pytest.mark.parametrize("group", [32, 64])
def test_int4_kernel_matches_reference_path(group):
    torch.manual_seed(2)
    linear = torch.nn.Linear(576, 192, bias=False)
    x = torch.randn(3, 576)
    fast, ref = (quantized_linear(linear, "int4", group, k) for k in (True, False))
    assert fast.kernel != SIMULATED and ref.kernel == SIMULATED
    y_fast, y_ref = fast(x), ref(x)
    assert y_fast.shape == (3, 192)
    assert torch.allclose(y_fast, y_ref, atol=0.03, rtol=0.02)
    w = dequantize_int4_groupwise(*quantize_int4_groupwise(linear.weight.data, group), group)
    assert torch.allclose(y_ref, x @ w.t(), atol=1e-4)


def test_swap_linears_replaces_every_linear():
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    seen = [(d, t) for d, t, _ in iter_swap_linears(net, "int8")]
    assert seen == [(1, 2), (2, 2)]
    assert not any(isinstance(m, torch.nn.Linear) for m in net.modules())
    with pytest.raises(ValueError):
        list(iter_swap_linears(net, "int3"))


# ------------------------------------------------------------- the real model
def test_unknown_mode_is_a_clear_error(lm, shared):
    with pytest.raises(InferenceInputError, match="Unknown precision mode"):
        build_mode(lm, "fp8", shared)
    assert get_mode("int4-g64").group_size == 64


def test_int8_model_close_to_fp32(lm, shared, chat_ids, reference):
    fp32_before = model_weight_bytes(lm.model)
    built = build_mode(lm, "int8", shared)
    assert built.model is not lm.model and model_weight_bytes(lm.model) == fp32_before  # untouched
    assert build_mode(lm, "int8", shared) is built  # cached per process
    answer = list(reference.greedy.token_ids)
    logp = teacher_forced_logprobs(built.model, chat_ids, answer, lm.device)
    top1, kl = agreement_and_kl(reference.logprobs, logp)
    decided, n_decided = decided_agreement(reference.logprobs, logp)
    # int8 flips a greedy pick only at near-ties (fp32's top two a few points apart), about one
    # token in ten: 0.85 leaves room, the decided positions must agree.
    assert top1 >= 0.85 and kl < 0.01
    assert n_decided >= 32 and decided >= 0.95
    x = torch.tensor([chat_ids], device=lm.device)
    with torch.inference_mode():
        a = lm.model(input_ids=x, logits_to_keep=1).logits[0, -1]
        b = built.model(input_ids=x, logits_to_keep=1).logits[0, -1]
    # bfloat16 keeps 8 significant bits (float16 11): the int8 path's rounding differs more
    # (6% of the largest logit on an AVX-512 Xeon, under 5% on an AVX2 EPYC).
    bound = 0.08 if lm.model.dtype == torch.bfloat16 else 0.05
    assert (a - b).abs().max() < bound * a.abs().max()
    assert a.argmax() == b.argmax()
    # the tie is kept: the embedding looks up the head's own int8 rows
    assert built.model.get_input_embeddings().weight is built.model.get_output_embeddings().weight


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_simulated_int8_does_not_overflow(dtype):
    """Large activations (this model's reach hundreds) times int8 levels up to 127 overflowed
    float16 when the scale was applied after the matmul: inf, then NaN logits on CUDA."""
    torch.manual_seed(3)
    linear = torch.nn.Linear(1536, 64, bias=False)
    with torch.no_grad():
        linear.weight.mul_(0.05 / linear.weight.abs().max())  # weights ~0.05, as in the model
    x = torch.randn(2, 1536) * 300
    ref = linear(x)  # float32
    q8 = quantized_linear(linear, "int8", use_kernel=False)
    y = q8(x.to(dtype))
    assert y.dtype == dtype and torch.isfinite(y).all()
    assert (y.float() - ref).abs().max() < 0.02 * ref.abs().max()
    assert (x.to(dtype) @ q8.weight.to(dtype).t()).float().abs().max() > 65_504  # the old way


@pytest.mark.parametrize("simulated", [True, False])
def test_int8_in_the_app_dtype_is_finite_and_agrees(lm, shared, chat_ids, reference, simulated):
    """Both int8 paths, built from the model in the app's dtype (LLM_LAB_DTYPE): no NaN, and
    the reference's greedy choice kept wherever it was not a near-tie. On CUDA the simulated
    path is the one that runs; `make test-dtypes` runs this in float16 and bfloat16."""
    if not simulated and not kernel_available("int8", lm.device):
        pytest.skip("no int8 kernel on this device")
    built = build_mode(lm, "int8", shared, simulated=simulated)
    assert (built.kernel == SIMULATED) == simulated
    answer = list(reference.greedy.token_ids)
    logp = teacher_forced_logprobs(built.model, chat_ids, answer, lm.device)
    assert torch.isfinite(logp).all()
    decided, n_decided = decided_agreement(reference.logprobs, logp)
    assert n_decided >= 32 and decided >= 0.95


def test_reported_bytes_are_the_tensors_bytes(lm, shared):
    for key in ("fp32", "int8", "int4-g32"):
        built = build_mode(lm, key, shared)
        storages = {}
        for t in list(built.model.parameters()) + list(built.model.buffers()):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        rotary = sum(b.untyped_storage().nbytes() for n, b in built.model.named_buffers()
                     if "rotary" in n)  # non-persistent, not weights
        assert built.weight_bytes == sum(storages.values()) - rotary
        assert built.bytes_per_token == bytes_read_per_token(built.model)
    assert build_mode(lm, "fp32", shared).weight_bytes == 4 * lm.info.parameters
    int8 = build_mode(lm, "int8", shared)
    assert int8.weight_bytes < 0.26 * int8.fp32_bytes  # one byte per weight plus scales


def test_int4_model_runs_and_agrees(lm, shared, chat_ids, reference):
    built = build_mode(lm, "int4-g32", shared)
    head = built.model.get_output_embeddings()
    assert isinstance(head, WeightOnlyInt4Linear) and built.kernel == head.kernel
    assert built.bytes_per_token < built.weight_bytes < 0.25 * built.fp32_bytes
    run = greedy_run(built.model, chat_ids, 8, lm.device)
    assert len(run.token_ids) == 8 and run.decode_tokens_per_s > 0
    answer = list(reference.greedy.token_ids)
    logp = teacher_forced_logprobs(built.model, chat_ids, answer, lm.device)
    top1, _ = agreement_and_kl(reference.logprobs, logp)
    assert top1 >= 0.8  # re-quantizing the Q4_1 groups of 32 lands near the original levels
    text = lm.tokenizer("The river kept flowing past the old mill.",
                        add_special_tokens=False)["input_ids"]
    ppl_fp32, _ = perplexity(lm.model, text, lm.device)
    ppl_int4, seconds = perplexity(built.model, text, lm.device)
    # int4 in groups of 32 lands near the GGUF's own Q4_1, so its perplexity stays within a few
    # per cent of fp32's.
    assert 1 < ppl_fp32 < 1000 and seconds > 0 and abs(ppl_int4 / ppl_fp32 - 1) < 0.05


def test_agreement_and_kl_on_hand_made_distributions():
    ref = torch.log_softmax(torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0]]), -1)
    assert agreement_and_kl(ref, ref) == (1.0, 0.0)
    other = torch.log_softmax(torch.tensor([[3.0, 1.0, 0.0], [2.0, 0.0, 1.0]]), -1)
    top1, kl = agreement_and_kl(ref, other)
    assert top1 == 0.5 and kl > 0
    tie = torch.log(torch.tensor([[0.50, 0.48, 0.02], [0.9, 0.05, 0.05]]))
    flipped = torch.log(torch.tensor([[0.48, 0.50, 0.02], [0.9, 0.05, 0.05]]))
    assert agreement_and_kl(tie, flipped)[0] == 0.5
    assert decided_agreement(tie, flipped) == (1.0, 1)  # the flip was a near-tie
    decided_flip = torch.log(torch.tensor([[0.48, 0.50, 0.02], [0.05, 0.9, 0.05]]))
    assert decided_agreement(flipped, decided_flip) == (0.0, 1)
    assert set(MODES) >= {"fp32", "fp16", "bf16", "int8", "int4-g32"}


# ------------------------------------------------------------- the lesson's comparison
def test_comparison_refuses_bad_requests_before_any_work(lm, shared):
    from lessons.quantization_handlers import compare_frames
    settings = Settings()
    high = settings.quant_new_tokens.high
    for prompt, modes, n, error in [("hi", ["fp32"], high + 1, SettingOutOfRangeError),
                                    ("hi", ["fp32"], settings.quant_new_tokens.low - 1,
                                     SettingOutOfRangeError),
                                    ("hi", ["fp8"], 8, InferenceInputError),
                                    ("   ", ["fp32"], 8, EmptyPromptError)]:
        with pytest.raises(error):
            next(compare_frames(lm, settings, shared, prompt, modes, n))


def panel_diagram(lm, frame) -> str:
    """The mechanism diagram the quantization panel draws from a comparison frame."""
    from visualizations.mechanism import quant_diagram
    return quant_diagram(frame.reports, lm.info.layers, lm.info.parameters,
                         bandwidth_gbs=frame.bandwidth_gbs, noise=frame.noise)


def test_comparison_frames_fp32_against_itself(lm, shared):
    from lessons.quantization_handlers import chosen_modes, compare_frames
    frames = list(compare_frames(lm, Settings(), shared, "Name a colour.", [], 8))
    assert frames[0].reports is None and "float32 reference" in frames[0].message
    last = frames[-1]
    assert last.message.startswith("✅ measured 1 modes") and last.bandwidth_gbs > 0
    (fp32,) = last.reports
    assert fp32.key == "fp32" and len(fp32.token_ids) == 8
    assert fp32.top1_agreement == 1.0 and fp32.kl_mean == pytest.approx(0.0, abs=1e-6)
    assert fp32.weight_bytes == 4 * lm.info.parameters  # float32, whatever the app's dtype
    # the mechanism: one decode step, every weight read at 4 bytes, the measured step time
    page = panel_diagram(lm, last)
    assert "4.00 B/weight" in page and "data-kind='decode'" in page
    assert (f"float32: 4.00 B per weight, {fp32.bytes_per_token / 1e6:,.0f} MB read per step, "
            f"measured <b>{1000 / fp32.decode_tokens_per_s:,.1f} ms</b>") in page
    from lessons.common.latest import LAST_MODES, latest
    assert latest(lm, shared, LAST_MODES) == last.reports  # kept for lesson 5's cost view
    assert chosen_modes(["int8", "fp16"]) == ["fp32", "fp16", "int8"]  # fp32 first, then registry


def test_comparison_diagram_sets_int8_beside_fp32(lm, shared):
    from lessons.quantization_handlers import compare_frames
    last = list(compare_frames(lm, Settings(), shared, "Name a colour.", ["int8"], 8))[-1]
    fp32, int8 = last.reports
    page = panel_diagram(lm, last)
    assert page.count("class='mech-lane'") == 2
    per_weight = int8.weight_bytes / lm.info.parameters
    assert 1.0 < per_weight < 1.5  # int8: one byte a weight, plus scales and what stays float
    assert f"{per_weight:.2f} B/weight" in page and "4.00 B/weight" in page
    assert (f"int8: {int8.bytes_per_token / fp32.bytes_per_token:.2f}× the bytes, "
            f"{fp32.decode_tokens_per_s / int8.decode_tokens_per_s:.2f}× the step time") in page
    assert f"measured <b>{1000 / int8.decode_tokens_per_s:,.1f} ms</b>" in page
    assert f"÷ {last.bandwidth_gbs:,.1f} GB/s measured" in page  # the floor, labelled theoretical


def test_default_modes_keep_a_class_run_short_and_half_precision_where_native():
    from lessons.quantization_handlers import default_modes
    assert default_modes(None) == ["fp32", "fp16", "bf16", "int8", "int4-g32"]  # a GPU: all
    assert default_modes(False) == ["fp32", "int8", "int4-g32"]  # a CPU converting halves
    assert default_modes(True) == ["fp32", "bf16", "int8", "int4-g32"]  # native bfloat16


def test_second_comparison_builds_nothing_and_reuses_the_reference(lm, monkeypatch):
    """A class pressing Compare twice: the second run builds no mode and runs float32's answer
    once (as a mode, not again as a reference), and gets the same greedy tokens and quality
    figures; the bytes shown are the kept copies' real tensor bytes, and no copy shares a
    weight with (or has changed) the loaded model."""
    import inference.quantize as quant_modes
    from inference.experiments import quality
    from inference.experiments.quality import load_perplexity_text, quant_tokens
    from lessons.common.prompt_input import encode_prompt
    from lessons.quantization_handlers import DEFAULT_PROMPT, compare_frames

    settings, shared = Settings(), SharedResults()
    shared.put(("read-bandwidth", str(lm.device)), 12.5)  # measured once per machine: preset
    copies = []
    copy_for = quant_modes._private_copy
    monkeypatch.setattr(quant_modes, "_private_copy",
                        lambda model, mode: copies.append(mode.key) or copy_for(model, mode))
    fed = [0]

    def count(module, args, kwargs):  # a built copy inherits the hook: count the model only
        if module is lm.model:
            fed[0] += int(kwargs.get("input_ids", args[0] if args else None).numel())
    hook = lm.model.register_forward_pre_hook(count, with_kwargs=True)
    head = lm.model.get_output_embeddings().weight.detach().clone()
    runs = []
    try:
        for _ in range(2):
            fed[0] = 0
            frames = list(compare_frames(lm, settings, shared, DEFAULT_PROMPT, ["int8"], 8))
            runs.append((frames, fed[0], list(copies)))
            copies.clear()
    finally:
        hook.remove()
    (first, fed1, built1), (second, fed2, built2) = runs
    # built once, kept; float32 is the loaded model itself only where it was loaded so (the
    # half-precision runs of this file load float16 or bfloat16, and copy float32 once)
    fp32_copy = [] if lm.model.dtype == torch.float32 else ["fp32"]
    assert built1 == [*fp32_copy, "int8"] and built2 == [], (built1, built2)
    assert "measured as float32" in first[0].message
    assert "kept from an earlier run" in second[0].message
    assert not any("building" in f.message for f in second)
    # float32's passes on the loaded model: one warm-up, one greedy answer, one teacher-forced
    # pass, the perplexity text, in both runs (the reference is float32's own measured run),
    # then its lane of the headline race against int8 (its warm-ups, prefill, 8 steps)
    prompt = len(encode_prompt(lm, settings, DEFAULT_PROMPT, max_tokens=512))
    text = len(lm.tokenizer(load_perplexity_text(), add_special_tokens=False)["input_ids"])
    race = quality.WARM_UP_PASSES * min(prompt, quality.WARM_UP_TOKENS) + prompt + 8
    if lm.model.dtype == torch.float32:
        assert fed1 == fed2 == quant_tokens(prompt, 8, 1, text) + race
    race, (fp32_run, int8_run) = first[-1].race, first[-1].reports
    assert race.key == "int8" and race.robust.low <= race.speedup <= race.robust.high
    if race.impossible is None:  # every view shows the race's speeds: their ratio is its figure
        assert int8_run.decode_tokens_per_s / fp32_run.decode_tokens_per_s == pytest.approx(
            race.speedup)
    for a, b in zip(first[-1].reports, second[-1].reports, strict=True):
        assert a.key == b.key and a.token_ids == b.token_ids  # the same greedy answers
        assert a.top1_agreement == b.top1_agreement
        assert a.kl_mean == pytest.approx(b.kl_mean, abs=1e-6)
        assert a.perplexity == pytest.approx(b.perplexity, rel=1e-6)
    fp32, int8 = second[-1].reports
    assert fp32.top1_agreement == 1.0 and fp32.kl_mean == pytest.approx(0.0, abs=1e-6)
    kept = build_mode(lm, "int8", shared)
    assert kept is build_mode(lm, "int8", shared)  # one copy per mode, however many runs
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for n, t in [*kept.model.named_parameters(), *kept.model.named_buffers()]
                if "rotary" not in n}  # rotary: non-persistent, not weights
    assert int8.weight_bytes == kept.weight_bytes == sum(storages.values())
    theirs = {t.untyped_storage().data_ptr() for t in lm.model.parameters()}
    assert not any(t.untyped_storage().data_ptr() in theirs
                   for t in [*kept.model.parameters(), *kept.model.buffers()])
    assert torch.equal(lm.model.get_output_embeddings().weight, head)  # the shared model intact
