"""Lesson 4 on the real model: the formula against the tensors, the race, prefix reuse,
the attention view, and the panel's handlers."""
import copy

import pytest
import torch

from chart_reading import caption_text
from inference.config import Settings
from inference.errors import EmptyPromptError, PromptTooLongError, SettingOutOfRangeError
from inference.experiments.attention_view import newest_attention, watch_growth
from inference.experiments.kv_projection import (
    PUBLISHED,
    as_mha,
    cache_bytes,
    crossover_tokens,
    project_context,
    this_model,
)
from inference.experiments.kv_race import (
    full_prompt_ids,
    prefill_prefix,
    prefix_runs,
    race,
    shared_prefix_ids,
    summarize,
)
from inference.generation import prefill, stream
from inference.kv_cache import (
    cache_length,
    cache_tensor_bytes,
    kv_cache_bytes,
    snapshot,
)
from inference.paged_batch import RowBatch
from inference.tokens import prompt_ids

# Same scores up to rounding in the loaded dtype (logits reach ~20; ulps grow with fewer bits).
LOGIT_GAP = {torch.float32: 1e-2, torch.float16: 0.1, torch.bfloat16: 0.75}
SYSTEM = "You are a museum guide. The museum closes at 17:00. Tickets cost 12 euros."


def _formula(lm, tokens, batch):
    i = lm.info
    return kv_cache_bytes(i.layers, i.kv_heads, i.head_dim, lm.bytes_per_value, tokens, batch)


@pytest.mark.parametrize("length,batch", [(1, 1), (9, 1), (23, 2), (5, 3)])
def test_formula_equals_tensor_bytes_after_prefill(lm, chat_ids, length, batch):
    ids = torch.tensor([chat_ids[:length]] * batch, device=lm.device)  # [B, S]
    snap = snapshot(prefill(lm.model, ids).cache)
    assert snap.shapes[0] == (batch, 3, length, 64) and len(snap.shapes) == 30
    assert snap.tensor_bytes == snap.formula_bytes == _formula(lm, length, batch)
    assert snap.bytes_per_token == 2 * 30 * 3 * 64 * lm.bytes_per_value  # 46,080 in float32


def test_formula_equals_tensor_bytes_while_batch_decodes(lm, tok):
    prompts = [prompt_ids(tok, "Hi"), prompt_ids(tok, "Name three colours of the rainbow.")]
    batch, _ = RowBatch.prefill(lm, [0, 1], prompts)
    for step in range(3):
        assert batch.width == len(prompts[1]) + step
        assert cache_tensor_bytes(batch.cache) == _formula(lm, batch.width, 2)
        batch.decode(lm)


def test_growth_adds_one_column_per_token(lm, chat_ids):
    steps = list(watch_growth(lm, chat_ids, max_new_tokens=3))
    assert [s.cache.tokens for s in steps] == [len(chat_ids) + i for i in range(3)]
    for s in steps:
        assert s.cache.tensor_bytes == s.cache.formula_bytes
        assert len(s.cache.key_norms) == 30 and len(s.cache.key_norms[0]) == s.cache.tokens
        assert all(x > 0 for x in s.cache.key_norms[5])
    assert steps[-1].text == "".join(s.piece for s in steps)


def test_a_deep_copied_cache_is_independent(lm, chat_ids):
    cache = prefill(lm.model, torch.tensor([chat_ids[:10]], device=lm.device)).cache
    clone = copy.deepcopy(cache)  # what prefix reuse extends per question
    clone.crop(-4)
    assert cache_length(cache) == 10 and cache_length(clone) == 6
    assert cache_tensor_bytes(cache) == _formula(lm, 10, 1)


def test_race_lanes_agree_and_do_different_work(lm, chat_ids):
    steps = list(race(lm, chat_ids, new_tokens=4))
    cached = [s for s in steps if s.lane == "cached"]
    plain = [s for s in steps if s.lane == "recompute"]
    n = len(chat_ids)
    assert [s.forward_tokens for s in cached] == [n, 1, 1, 1]
    assert [s.forward_tokens for s in plain] == [n, n + 1, n + 2, n + 3]
    summary = summarize(steps, n)
    assert summary.same_tokens and summary.new_tokens == 4
    assert summary.max_logit_gap < LOGIT_GAP[lm.dtype]  # same scores, up to float rounding
    reference = [e.token_id for e in stream(lm, chat_ids, max_new_tokens=4)]
    assert [s.token_id for s in cached] == reference
    assert summary.cached_forward_tokens == n + 3
    assert summary.recompute_forward_tokens == 4 * n + 6


def test_race_rejects_bad_counts(lm, chat_ids):
    with pytest.raises(SettingOutOfRangeError):
        next(race(lm, chat_ids, new_tokens=0))
    with pytest.raises(EmptyPromptError):
        next(race(lm, [], new_tokens=3))


def test_prefix_reuse_gives_the_same_tokens_as_full_prefill(lm, tok):
    prefix_ids = shared_prefix_ids(tok, SYSTEM)
    prefix = prefill_prefix(lm, prefix_ids)
    questions = ["When does it close?"]
    runs = list(prefix_runs(lm, prefix, SYSTEM, questions, new_tokens=4))
    for q, run in zip(questions, runs):
        full = full_prompt_ids(tok, SYSTEM, q)
        assert full[:len(prefix_ids)] == prefix_ids  # the prefix really is shared
        assert run.reused_tokens == len(prefix_ids)
        assert run.prompt_tokens == len(full)
        assert run.same
        reference = [e.token_id for e in stream(lm, full, max_new_tokens=4)]
        assert list(run.tokens_reuse) == reference[:len(run.tokens_reuse)]
        assert run.ttft_full > 0 and run.ttft_reuse > 0
    assert cache_length(prefix.cache) == len(prefix_ids)  # the stored prefix was never extended


def test_prefix_reuse_rejects_empty_input(lm, tok):
    with pytest.raises(EmptyPromptError):
        shared_prefix_ids(tok, "   ")
    prefix = prefill_prefix(lm, shared_prefix_ids(tok, SYSTEM))
    with pytest.raises(EmptyPromptError):
        list(prefix_runs(lm, prefix, SYSTEM, [" "], new_tokens=2))


def test_projection_matches_this_models_tensors(lm, chat_ids):
    mine = this_model(lm.info)
    cache = prefill(lm.model, torch.tensor([chat_ids[:12]] * 2, device=lm.device)).cache
    assert cache_bytes(mine, 12, batch=2, bytes_per_value=lm.bytes_per_value) \
        == cache_tensor_bytes(cache)
    assert as_mha(mine).bytes_per_token(4) == 3 * mine.bytes_per_token(4)
    llama2, mistral, llama3, llama70 = PUBLISHED
    assert llama3.bytes_per_token(2) == 131_072  # 2 × 32 × 8 × 128 × 2
    assert llama2.bytes_per_token(2) == 4 * llama3.bytes_per_token(2)  # MHA vs GQA
    assert llama70.bytes_per_token(2) == 327_680
    for s in (mine, llama3):
        t = crossover_tokens(s, 2, batch=4)
        assert cache_bytes(s, t, 4) >= s.weight_bytes(2) > cache_bytes(s, t - 1, 4)
    proj = project_context([mine, llama3], [256, 512], batch=2, bytes_per_value=2)
    assert proj.series[1][1] == (131_072 * 512, 131_072 * 1024)


def test_newest_attention_reproduces_the_layer_output(lm, chat_ids):
    """The weights, applied to the cached values, give back what the real layer computed."""
    ids = chat_ids[:16]
    view = newest_attention(lm, ids)
    assert view.layers == 30 and len(view.weights[0]) == 9 and len(view.weights[0][0]) == 16
    for head in view.weights[7]:
        assert abs(sum(head) - 1) < 1e-3
    from transformers import DynamicCache
    model, layer = lm.model, 7
    cache = DynamicCache()
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], device=lm.device), cache=cache,
                    output_hidden_states=True)
        v = cache.layers[layer].values[0].repeat_interleave(3, dim=0)  # [H_q, S, D]
        w = torch.tensor(view.weights[layer], dtype=v.dtype, device=v.device)  # [H_q, S]
        mixed = torch.einsum("hs,hsd->hd", w, v).reshape(1, -1)  # [1, H_q * D]
        block = model.model.layers[layer]
        h = out.hidden_states[layer][:, -1, :]
        mid = h + block.self_attn.o_proj(mixed)
        after = mid + block.mlp(block.post_attention_layernorm(mid))
    atol = {torch.float32: 2e-3, torch.float16: 2e-2, torch.bfloat16: 0.1}[lm.dtype]
    torch.testing.assert_close(after, out.hidden_states[layer + 1][:, -1, :], atol=atol,
                               rtol=1e-3 if lm.dtype == torch.float32 else 2e-2)


# ---- the panel's handlers, called as the UI calls them ----

def test_panel_handlers_on_the_real_model(lm):
    from lessons import kv_cache_handlers as run
    settings = Settings()
    frames = run.growth_frames(lm, settings, "Hi there", 3)
    first = next(frames)
    per_token = 2 * 30 * 3 * 64 * lm.bytes_per_value  # 46,080 in float32
    assert "✓ equal" in first.formula and f"{per_token:,} bytes per token" in first.formula
    assert len(first.grid.data[0].z) == 30 and "Step 0" in first.text
    assert list(first.size.data[1].y) == [per_token * 32]  # the 32-token prompt, cached
    assert "32 prompt + 0 generated" in first.text
    assert len(list(frames)) == 2

    race_frames = list(run.race_frames(lm, settings, "Hi there", 4))
    last = race_frames[-1]
    assert len(race_frames) == 8 and "Step 4 of 4" in last.progress  # a frame per lane step
    between = race_frames[::2]  # after each cached step: progress only (the server may step)
    assert all(f.plot is None and "cached lane done" in f.progress for f in between)
    assert "Measured over 4 new tokens" in last.summary and "same greedy tokens" in last.summary
    assert "35 vs 134 tokens" in last.summary  # 32-token prompt: 32+1+1+1 vs 32+33+34+35
    assert len(last.plot.data) == 4

    view = run.projection_view(lm, settings, 2, 4096, 2)
    assert "Llama-3-70B" in view.table and list(view.gqa.data[0].y) == [23_040, 69_120]
    assert "| 2 sequence(s) |" in view.table.replace(" tokens ×", "|")
    assert list(view.by_context.data[0].x)[0] == settings.projection_context.low
    # this model's line is solid up to its 8,192-token window, then dotted and labelled
    assert list(view.by_context.data[0].x)[-1] == lm.info.context_window == 8192
    beyond = view.by_context.data[1]
    names = [t.name.replace("<br>", " ") for t in view.by_context.data]  # legend may wrap
    assert names[1].endswith("beyond its context window (8,192 tokens)")
    assert list(beyond.x)[-1] == settings.projection_context.high
    assert "Llama-2-7B: beyond its context window (4,096 tokens)" in names
    assert "4,096-token sliding window" in view.table
    assert list(view.by_batch.data[0].x) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    with pytest.raises(SettingOutOfRangeError):
        run.projection_view(lm, settings, 0, 4096, 2)
    with pytest.raises(SettingOutOfRangeError):
        run.projection_view(lm, settings, 2, settings.projection_context.high + 1, 2)
    with pytest.raises(SettingOutOfRangeError):
        run.projection_view(lm, settings, 2, 4096, 3)

    shown = list(run.prefix_frames(lm, settings, SYSTEM, "When does it close?", 3))
    assert len(shown) == 2 and "✓ same" in shown[-1].text and "Shared prefix" in shown[0].text
    assert len(shown[-1].plot.data) == 2

    view = run.attention_run(lm, settings, "Hi", 2)
    fig = run.attention_redraw(lm, view, 99, 3)  # out-of-range layer is clamped
    assert len(fig.data[0].y) == len(view.pieces)
    assert "layer 29, query head 3" in caption_text(fig)
    both = run.show_attention(lm, settings, "Hi", 2, 5, 4)
    assert "layer 5, query head 4 (KV head 1)" in caption_text(both.plot)
    assert both.view.pieces == view.pieces  # greedy: the same tokens both times


def test_panel_limits_come_from_settings(lm):
    """A tighter Settings tightens the panel's checks: no limit is written in the panel."""
    from dataclasses import replace

    from inference.config import Range
    from lessons import kv_cache_handlers as run
    tight = replace(Settings(), growth_new_tokens=Range(1, 2, 1), race_new_tokens=Range(4, 5, 4),
                    race_max_prompt_tokens=8, attention_new_tokens=Range(1, 1, 1),
                    prefix_new_tokens=Range(1, 2, 1), projection_batch=Range(1, 4, 1))
    with pytest.raises(SettingOutOfRangeError, match="New tokens must be between 1 and 2"):
        next(run.growth_frames(lm, tight, "Hi", 3))
    with pytest.raises(SettingOutOfRangeError, match="between 4 and 5"):
        next(run.race_frames(lm, replace(tight, race_max_prompt_tokens=256), "Hi", 6))
    with pytest.raises(PromptTooLongError, match="keep it under 8"):
        next(run.race_frames(lm, tight, "Hi", 4))
    with pytest.raises(SettingOutOfRangeError, match="New tokens first"):
        run.attention_run(lm, tight, "Hi", 2)
    with pytest.raises(SettingOutOfRangeError, match="Answer tokens"):
        next(run.prefix_frames(lm, tight, SYSTEM, "When?", 3))
    with pytest.raises(SettingOutOfRangeError, match="Batch size"):
        run.projection_view(lm, tight, 5, 4096, 2)
    assert list(run.projection_view(lm, tight, 4, 4096, 2).by_batch.data[0].x) == [1, 2, 4]


def test_panel_errors_are_clear(lm):
    from lessons import kv_cache_handlers as run
    settings = Settings()
    with pytest.raises(EmptyPromptError):
        next(run.growth_frames(lm, settings, "  ", 3))
    with pytest.raises(PromptTooLongError):
        next(run.race_frames(lm, settings, "word " * 400, 4))
    with pytest.raises(PromptTooLongError):
        next(run.prefix_frames(lm, settings, "x" * (settings.max_prompt_chars + 1), "Q?", 3))


def test_panel_builds_with_limits_and_named_endpoints(lm):
    import gradio as gr

    from lessons import kv_cache_panel as panel
    from lessons.common.context import AppContext
    from test_settings import limit_name
    settings = Settings()
    with gr.Blocks() as demo:
        panel.build(AppContext(lm, settings, demo=demo))
    sliders = [b for b in demo.blocks.values() if isinstance(b, gr.Slider)]
    tagged = {limit_name(s): s for s in sliders if limit_name(s)}
    assert set(tagged) == {"growth_new_tokens", "race_new_tokens", "projection_batch",
                           "projection_context", "prefix_new_tokens", "attention_new_tokens"}
    for name, s in tagged.items():
        rng = settings.ranges()[name]
        assert (s.minimum, s.maximum, s.value) == (rng.low, rng.high, rng.default)
    untagged = sorted(s.elem_id for s in sliders if not limit_name(s))
    assert untagged == ["kv-attn-head", "kv-attn-layer"]  # bounded by the model's shape
    apis = {d.api_name for d in demo.fns.values()}
    assert {"kv_growth", "kv_race", "kv_prefix", "kv_attention"} <= apis
    ids = {b.elem_id for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert {"kv-growth-stop", "kv-race-stop", "kv-prefix-stop", "kv-projection-table",
            "kv-projection-context", "kv-projection-batch", "kv-projection-gqa"} <= ids
    table = next(b for b in demo.blocks.values() if b.elem_id == "kv-projection-table")
    assert "Llama-3-70B" in table.value  # drawn at build time from the default settings


def test_prefix_reuse_request_over_its_token_budget_refused_in_under_a_second(lm):
    """Eight ~4,000-token questions (64,000 characters) are refused before any
    model run, with a sentence, in well under a second; a one-question request fits."""
    import time

    from lessons import kv_cache_handlers as run
    settings = Settings()
    question = "Tell me about the museum's history. " * 480  # ~3,900 tokens
    questions = "\n".join([question.strip()] * 8)
    start = time.perf_counter()
    with pytest.raises(PromptTooLongError, match="budget of 8,192 tokens per request"):
        next(run.prefix_frames(lm, settings, SYSTEM, questions, 12))
    assert time.perf_counter() - start < 1.0
    from inference.experiments.kv_race import prefix_request_tokens
    one = prefix_request_tokens(lm.tokenizer, SYSTEM, ["When does it close?"], 12,
                                settings.prefix_request_tokens)
    assert 0 < one <= settings.prefix_request_tokens


def test_pileup_attention_views_held_under_the_decode_cache_budget(lm):
    """Lesson 4's attention view is held under the same budget as the decode
    caches: compact (4 bytes a weight), counted, the oldest freed first, and a freed view
    asks for a new run instead of failing."""
    from inference.generation import CacheBudget
    from lessons import kv_cache_handlers as run
    settings = Settings()
    prompt = "The museum opens at nine and closes at five. " * 12
    one = run.show_attention(lm, settings, prompt, 1, 0, 0).view
    size = one.nbytes
    assert size == lm.info.layers * lm.info.heads * len(one.pieces) * 4  # float32 [L, H_q, S]
    budget = CacheBudget(cap_bytes=int(size * 2.5), idle_s=600)
    held = [run.show_attention(lm, settings, prompt, 1, 0, 0, budget).view for _ in range(5)]
    assert budget.held_bytes() <= size * 3  # the cap, plus the one just used
    assert held[-1].view is not None and held[0].view is None  # oldest freed first
    freed = run.attention_redraw(lm, held[0], 0, 0)
    assert "press Show attention again" in freed.layout.annotations[0].text
    fig = run.attention_redraw(lm, held[-1], 3, 2)
    assert len(fig.data[0].y) == len(held[-1].view.pieces)
