"""The engine against its references, on the real model."""
import pytest
import torch

from inference.errors import EmptyPromptError, PromptTooLongError, SettingOutOfRangeError
from inference.generation import next_token, recompute_logits, start, stream
from inference.paged_batch import left_pad, padding_waste
from inference.sampling import SamplingSettings
from inference.tokens import prompt_ids

# Cached vs recomputed logits differ only by rounding: a few ulps of the largest logits (~20).
LOGIT_ATOL = {torch.float32: 2e-3, torch.float16: 0.1, torch.bfloat16: 0.75}


def test_greedy_matches_generate(lm, chat_ids):
    ours = [e.token_id for e in stream(lm, chat_ids, max_new_tokens=40)]
    assert len(ours) >= 32
    with torch.inference_mode():
        ref = lm.model.generate(torch.tensor([chat_ids], device=lm.device),
                                max_new_tokens=len(ours),
                                do_sample=False)[0, len(chat_ids):].tolist()
    assert ours == ref


def test_cached_decode_matches_recomputation(lm, chat_ids):
    gen = start(lm, chat_ids, max_new_tokens=12)
    for _ in range(12):
        next_token(lm, gen)
        # the cache path's scores for the next position, vs recomputing the whole sequence
        cached = _next_logits(lm, gen)
        full = recompute_logits(lm.model, gen.tokens, lm.device)
        torch.testing.assert_close(cached, full, atol=LOGIT_ATOL[lm.dtype], rtol=1e-3)
        assert cached.argmax() == full.argmax() or _near_tie(full)


def _next_logits(lm, gen):
    import copy

    from inference.generation import forward
    cache = copy.deepcopy(gen.cache)
    pending = gen.tokens[gen.fed:]
    return forward(lm.model, torch.tensor([pending], device=lm.device), cache)[0]


def _near_tie(logits):
    """The top two scores are within rounding of each other (the argmax may then flip)."""
    top2 = logits.float().topk(2).values
    return bool(top2[0] - top2[1] <= 2 * LOGIT_ATOL[logits.dtype])


def test_events_report_timing_and_cache(lm, chat_ids):
    events = list(stream(lm, chat_ids, max_new_tokens=5))
    first, second = events[0], events[1]
    assert first.forward_tokens == len(chat_ids) and second.forward_tokens == 1
    assert first.seconds > 0 and second.seconds > 0
    assert first.cache_tokens == len(chat_ids)
    assert second.cache_tokens == len(chat_ids) + 1
    # 2 (K,V) x 30 layers x 3 kv heads x 64 dims x bytes per value (4 in float32), per token
    assert second.cache_bytes == 2 * 30 * 3 * 64 * lm.bytes_per_value * second.cache_tokens
    assert events[-1].finished == "max tokens"
    assert "".join(e.piece for e in events) == events[-1].text


def test_stops_at_end_of_turn(lm, tok):
    ids = prompt_ids(tok, "Say just the word yes.")
    events = list(stream(lm, ids, max_new_tokens=60))
    assert events[-1].finished == "end of turn"
    assert events[-1].token_id == tok.eos_token_id


def test_left_pad_and_waste():
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert padding_waste([[5, 6, 7], [8]]) == (2, 6)


def test_seed_reproduces_sampling(lm, chat_ids):
    s = SamplingSettings(temperature=1.2, top_k=50, top_p=0.95, seed=7)
    a = [e.token_id for e in stream(lm, chat_ids, s, max_new_tokens=16)]
    b = [e.token_id for e in stream(lm, chat_ids, s, max_new_tokens=16)]
    assert a == b
    others = [[e.token_id for e in stream(lm, chat_ids, SamplingSettings(1.2, 50, 0.95, seed),
                                          max_new_tokens=16)] for seed in (1, 2, 3)]
    assert any(o != a for o in others)


def test_branch_continues_like_a_fresh_run(lm, chat_ids):
    gen = start(lm, chat_ids, max_new_tokens=10)
    for _ in range(6):
        next_token(lm, gen)
    alt = gen.events[3].candidates[1].token_id  # the runner-up at step 3
    gen.branch(3, alt)
    assert gen.cache.get_seq_length() == len(chat_ids) + 2  # cache kept, not rebuilt
    ev = next_token(lm, gen)
    assert ev.token_id == alt and ev.chosen_by == "your pick"
    while not gen.finished:
        next_token(lm, gen)
    fresh = [e.token_id for e in stream(lm, chat_ids + gen.generated[:4], max_new_tokens=6)]
    assert gen.generated[4:] == fresh


def test_bad_input_is_refused_clearly(lm, tok):
    with pytest.raises(EmptyPromptError, match="empty"):
        prompt_ids(tok, "   \n\t ")
    with pytest.raises(EmptyPromptError):
        start(lm, [], max_new_tokens=5)
    with pytest.raises(SettingOutOfRangeError, match="Max new tokens"):
        start(lm, [1, 2, 3], max_new_tokens=0)
    with pytest.raises(SettingOutOfRangeError, match="Max new tokens"):
        start(lm, [1, 2, 3], max_new_tokens=10_000)
    with pytest.raises(PromptTooLongError, match="context window"):
        start(lm, [1] * lm.info.context_window, max_new_tokens=5, max_new_limit=512)
    with pytest.raises(PromptTooLongError, match="characters"):
        prompt_ids(tok, "a" * 100_000)
    with pytest.raises(SettingOutOfRangeError, match="Temperature"):
        SamplingSettings(temperature=-1)
    with pytest.raises(SettingOutOfRangeError, match="Top-p"):
        SamplingSettings(top_p=float("nan"))
