"""The dtype the app runs in: LLM_LAB_DTYPE picks it, and the model-level tests follow it.

`make test-dtypes` runs the model-level tests again with LLM_LAB_DTYPE=float16 and then
bfloat16 on a CPU, so what only shows in half precision on a GPU (an int8 path that overflowed
float16) shows here first. These tests check the switch itself.
"""
import pytest
import torch

from inference.loading import DTYPE_ENV, default_dtype, dtype_from_env
from inference.tokens import prompt_ids


def test_env_names_a_dtype(monkeypatch):
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    assert dtype_from_env() is None
    for name, dtype in (("float32", torch.float32), ("float16", torch.float16),
                        (" BFloat16 ", torch.bfloat16)):
        monkeypatch.setenv(DTYPE_ENV, name)
        assert dtype_from_env() == dtype
    monkeypatch.setenv(DTYPE_ENV, "float8")
    with pytest.raises(ValueError, match="float32, float16, bfloat16"):
        dtype_from_env()


def test_the_shared_model_is_in_the_apps_dtype(lm):
    expected = dtype_from_env() or default_dtype(lm.device)
    assert lm.dtype == expected
    assert lm.bytes_per_value == torch.empty((), dtype=expected).element_size()
    assert all(p.dtype == expected and p.device == lm.device for p in lm.model.parameters())
    assert lm.info.dtype == str(expected).removeprefix("torch.")


def test_greedy_tokens_are_the_models_own_in_this_dtype(lm):
    """Our prefill + decode loop and `generate()` in the same dtype give the same tokens."""
    from inference.generation import stream

    ids = prompt_ids(lm.tokenizer, "Name three planets.")
    ours = [e.token_id for e in stream(lm, ids, max_new_tokens=16)]
    with torch.inference_mode():
        ref = lm.model.generate(torch.tensor([ids], device=lm.device), max_new_tokens=len(ours),
                                do_sample=False)[0, len(ids):].tolist()
    assert ours == ref
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids], device=lm.device)).logits
    assert logits.dtype == lm.dtype and torch.isfinite(logits).all()
