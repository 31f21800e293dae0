"""Long contexts on the real model, at SHORT lengths so the tests stay fast: the
sweeps' cache lengths are the real tensors' lengths, the decode floor uses the loaded model's
bytes and the machine's one bandwidth figure, attention's memory is measured both ways with
the model's own implementation restored, and a prompt beyond the window gets its message."""
from __future__ import annotations

import pytest

from inference.config import LIMITS
from inference.errors import PromptTooLongError
from inference.experiments.context_sweep import (
    CUDA_METHOD,
    HWM_METHOD,
    SAMPLED_METHOD,
    compare_attention_memory,
    decode_lengths,
    decode_lengths_sweep,
    prefill_lengths,
    prefill_lengths_sweep,
    prefill_peak_memory,
)
from inference.experiments.context_theory import decode_theory
from inference.experiments.roofline import machine_bandwidth
from inference.experiments.shared_results import SharedResults
from inference.kv_cache import kv_cache_bytes
from inference.loading import bytes_read_per_token


def test_context_sweep_lengths_follow_the_models_window():
    assert prefill_lengths(LIMITS, 8192) == (256, 512, 1024, 2048, 4096, 8192)
    assert prefill_lengths(LIMITS, 2048) == (256, 512, 1024, 2048)  # the window always last
    assert decode_lengths(LIMITS, 8192) == (0, 100, 1024, 2048, 4096, 8000, 8191)
    assert decode_lengths(LIMITS, 2048) == (0, 100, 1024, 2047)  # room for the step's token


def test_context_sweep_prefill_cache_holds_each_length(lm):
    runs = list(prefill_lengths_sweep(lm, [64, 16, 128]))
    assert [r.done for r in runs] == [1, 2, 3] and {r.total for r in runs} == {3}
    assert [r.next_tokens for r in runs] == [64, 128, None]
    points = runs[-1].points
    assert [p.tokens for p in points] == [16, 64, 128]
    assert [p.cache_tokens for p in points] == [16, 64, 128]  # read from the key tensors
    assert all(p.seconds > 0 for p in points)


def test_context_sweep_decode_steps_read_caches_of_the_named_length(lm):
    info, bpv = lm.info, lm.bytes_per_value
    runs = list(decode_lengths_sweep(lm, (0, 16, 64, 128), batches=(1, 8), repeats=2))
    assert [r.done for r in runs] == list(range(1, 9)) and runs[-1].total == 8
    points = runs[-1].points
    assert [(p.batch, p.cache_tokens) for p in points] == [
        (1, 128), (1, 64), (1, 16), (1, 0), (8, 128), (8, 64), (8, 16), (8, 0)]
    for p in points:  # the real tensors held exactly the formula's bytes at that length
        assert p.cache_bytes == kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, bpv,
                                               p.cache_tokens, p.batch)
        assert 0 < p.seconds_min <= p.seconds <= p.seconds_max


def test_context_sweep_floor_uses_the_models_bytes_and_the_one_bandwidth(lm):
    shared = SharedResults()
    shared.put(("read-bandwidth", str(lm.device)), 12.5)  # this machine's one figure
    theory = decode_theory(lm, shared)
    info = lm.info
    kv = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value, 1)
    assert theory.weight_bytes == bytes_read_per_token(lm.model)
    assert theory.kv_bytes_per_token == kv and theory.bandwidth_gbs == 12.5
    assert theory.seconds(1000, 8) == pytest.approx(
        (bytes_read_per_token(lm.model) + 8 * 1000 * kv) / 12.5e9)
    assert theory.crossover_tokens(8) == round(theory.weight_bytes / (8 * kv))
    fresh = SharedResults()  # measured once, then the same figure for every caller
    assert decode_theory(lm, fresh).bandwidth_gbs == machine_bandwidth(fresh, lm.device) > 0


def test_context_sweep_refuses_a_prompt_beyond_the_window(lm):
    window = lm.info.context_window
    with pytest.raises(PromptTooLongError, match=f"context window of {window:,} tokens"):
        next(prefill_lengths_sweep(lm, [16, window + 1]))
    with pytest.raises(PromptTooLongError, match="beyond this model's context window"):
        next(decode_lengths_sweep(lm, [window]))  # the step's own token would not fit
    with pytest.raises(PromptTooLongError):
        prefill_peak_memory(lm, window + 1, "eager")


def test_long_context_attention_memory_eager_holds_the_scores(lm):
    before = lm.model.config._attn_implementation
    peaks = list(compare_attention_memory(lm, 4096, max_eager_tokens=1024))
    assert lm.model.config._attn_implementation == before  # put back
    assert [p.implementation for p in peaks] == ["sdpa", "eager"]
    assert {p.tokens for p in peaks} == {1024}  # capped
    sdpa, eager = peaks
    assert eager.scores_bytes == lm.info.heads * 1024 ** 2 * lm.bytes_per_value
    assert eager.method in (CUDA_METHOD, HWM_METHOD, SAMPLED_METHOD)
    # the L × L table (and its softmax) written out: at least half a layer's table more
    assert eager.peak_bytes - sdpa.peak_bytes > 0.5 * eager.scores_bytes
