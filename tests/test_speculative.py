"""Speculative decoding on the real model, held against plain greedy decoding and generate()."""
import pytest
import torch
from transformers import DynamicCache

from inference.experiments.shared_results import SharedResults
from inference.experiments.speculative_race import SPEC_PROMPTS
from inference.generation import decode_step, forward, stream
from inference.kv_cache import cache_layers
from inference.sampling import SamplingSettings
from inference.speculative import Proposal, make_draft, speculate
from inference.tokens import prompt_ids

NEW = 16  # short runs: the tests check behaviour, the bench checks speed
# One verification pass of k + 1 tokens against k + 1 single steps: the same sums in another
# order, so keys/values agree to rounding of the dtype, grown through 30 layers (float16: one
# value of 8,448 was 0.022 apart in the deepest layers, measured here).
CACHE_ATOL = {torch.float32: 1e-4, torch.float16: 5e-2, torch.bfloat16: 2.5e-1}
PROMPTS = (SPEC_PROMPTS["edit"], SPEC_PROMPTS["open question"], "Write a haiku about rain.")


@pytest.fixture(scope="module")
def shared():
    return SharedResults()  # keeps the int4 draft model built once for the module


@pytest.fixture(scope="module")
def references(lm):
    """Per prompt: (prompt ids, generate(do_sample=False)'s first NEW tokens)."""
    out = []
    for text in PROMPTS:
        ids = prompt_ids(lm.tokenizer, text)
        with torch.inference_mode():
            ref = lm.model.generate(torch.tensor([ids], device=lm.device), max_new_tokens=NEW,
                                    do_sample=False)[0, len(ids):].tolist()
        out.append((ids, ref))
    return out


def spec_tokens(passes) -> list[int]:
    """The output tokens of these speculative passes, in order."""
    return [t for p in passes for t in p.new_ids]


class Scripted:
    """A test draft: proposes whatever `guesses(ids, k)` returns (it may ignore k)."""

    key, label = "scripted", "a scripted test draft"

    def __init__(self, guesses):
        self.guesses, self.asked = guesses, []

    def reset(self):
        self.asked = []

    def propose(self, ids, k, sampling, generator):
        self.asked.append(k)
        return Proposal(tuple(self.guesses(ids, k)))


@pytest.mark.parametrize("key", ["prompt_lookup", "int4"])
@pytest.mark.parametrize("k", [1, 4])
def test_speculative_greedy_equals_generate(lm, references, shared, key, k):
    draft = make_draft(lm, key, shared)
    kept = 0
    for ids, ref in references:
        passes = list(speculate(lm, ids, draft, k, max_new_tokens=NEW))
        assert spec_tokens(passes) == ref[:len(spec_tokens(passes))]
        assert len(spec_tokens(passes)) == len(ref)  # same length: same stop
        assert all(1 <= p.gained <= k + 1 for p in passes)
        assert passes[-1].tokens_so_far == len(ref)
        kept += sum(p.accepted for p in passes)
    assert kept > 0  # the draft's guesses were really used, not only plain steps


def test_speculative_cache_after_rejection_equals_plain_decode(lm, references):
    ids, ref = references[1]
    # guess the right next token, then a wrong one: every pass keeps 1 and rejects 2
    wrong = Scripted(lambda seq, k: [ref[len(seq) - len(ids)], 0, 0][:k])
    cache = DynamicCache()
    runs = speculate(lm, ids, wrong, 3, max_new_tokens=8, cache=cache)
    next(runs)  # the prefill
    p = next(runs)  # one pass with a rejection
    assert (p.accepted, len(p.proposed), p.new_ids) == (1, 3, tuple(ref[1:3]))
    assert p.cache_tokens == len(ids) + 2 == cache.get_seq_length()

    plain = DynamicCache()
    forward(lm.model, torch.tensor([ids], device=lm.device), plain)
    decode_step(lm.model, torch.tensor([ref[0]], device=lm.device), plain)
    decode_step(lm.model, torch.tensor([ref[1]], device=lm.device), plain)
    atol = CACHE_ATOL[lm.dtype]
    for (k1, v1), (k2, v2) in zip(cache_layers(cache), cache_layers(plain), strict=True):
        assert k1.shape == k2.shape == (1, lm.info.kv_heads, len(ids) + 2, lm.info.head_dim)
        torch.testing.assert_close(k1, k2, atol=atol, rtol=1e-3)
        torch.testing.assert_close(v1, v2, atol=atol, rtol=1e-3)
    rest = [t for q in runs for t in q.new_ids]  # decoding on from the cropped cache
    assert list(p.new_ids) + rest == ref[1:8]


@pytest.mark.parametrize("key", ["prompt_lookup", "int4"])
def test_speculative_seeded_sampling_repeats(lm, references, shared, key):
    ids, _ = references[1]
    draft = make_draft(lm, key, shared)
    runs = [spec_tokens(list(speculate(lm, ids, draft, 4, SamplingSettings(0.9, seed=s),
                                       max_new_tokens=NEW))) for s in (5, 5, 6, 7)]
    assert runs[0] == runs[1]
    assert runs[2] != runs[0] or runs[3] != runs[0]  # the seed matters


def test_speculative_end_of_turn_inside_accepted_run(lm):
    ids = prompt_ids(lm.tokenizer, "Say just the word yes.")
    ref = [e.token_id for e in stream(lm, ids, max_new_tokens=12)]
    assert ref[-1] in lm.stop_ids and len(ref) < 12
    # guess the rest of the answer, its end-of-turn, and two tokens past it
    draft = Scripted(lambda seq, k: (ref[len(seq) - len(ids):] + [11, 12])[:k])
    passes = list(speculate(lm, ids, draft, 8, max_new_tokens=12))
    last = passes[-1]
    assert spec_tokens(passes) == ref
    assert last.finished == "end of turn" and last.new_ids[-1] in lm.stop_ids
    assert last.model_token is None and last.accepted == len(last.new_ids)
    assert len(last.proposed) - last.accepted == 2  # the guesses past the end were thrown away


def test_speculative_draft_longer_than_tokens_left_is_cut(lm, references):
    ids, ref = references[0]
    too_many = Scripted(lambda seq, k: (ref + [0] * 8)[len(seq) - len(ids):][:8])  # ignores k
    passes = list(speculate(lm, ids, too_many, 8, max_new_tokens=5))
    assert spec_tokens(passes) == ref[:5]
    assert passes[-1].finished == "max tokens"
    assert too_many.asked == [3]  # 4 tokens left after the first: at most 3 guesses + 1
    assert [len(p.proposed) for p in passes] == [0, 3]


def test_speculative_empty_draft_is_plain_decode(lm, references):
    ids, ref = references[2]
    passes = list(speculate(lm, ids, Scripted(lambda seq, k: []), 4, max_new_tokens=NEW))
    assert spec_tokens(passes) == ref
    assert all(p.forward_tokens == 1 and p.gained == 1 for p in passes[1:])
    assert [p.cache_tokens for p in passes] == list(range(len(ids), len(ids) + len(ref)))


def test_speculative_bad_input_is_refused_clearly(lm, references):
    from inference.errors import EmptyPromptError, PromptTooLongError, SettingOutOfRangeError

    ids, _ = references[0]
    lookup_draft = make_draft(lm, "prompt_lookup")
    with pytest.raises(EmptyPromptError):
        next(speculate(lm, [], lookup_draft))
    for k in (0, 9, 2.5):
        with pytest.raises(SettingOutOfRangeError, match="Draft length k"):
            next(speculate(lm, ids, lookup_draft, k))
    with pytest.raises(SettingOutOfRangeError, match="New tokens"):
        next(speculate(lm, ids, lookup_draft, 4, max_new_tokens=10_000))
    with pytest.raises(PromptTooLongError, match="context window"):
        next(speculate(lm, [1] * lm.info.context_window, lookup_draft, 4, max_new_tokens=8))
    with pytest.raises(SettingOutOfRangeError, match="Unknown draft"):
        make_draft(lm, "bigger_model")
    with pytest.raises(SettingOutOfRangeError, match="early-exit draft keeps 1 to"):
        make_draft(lm, f"early_exit_{lm.info.layers}")
