"""What the lessons say must stay true: each test fails if a wrong statement comes
back. Model facts come from the loaded model's info, not from the markdown; claims about
the tokenizer are checked against the real tokenizer."""
import os
import re
from dataclasses import replace

import pytest

from inference.loading import GGUF_SOURCE, ModelInfo
from lessons.common.lesson_text import ASSETS, FROM_INFO, lesson_text
from lessons.common.lesson_text import fill_placeholders as fill
from visualizations.quant_charts import weights_origin_md

CPU_FP32 = ModelInfo(
    name="SmolLM2-135M-Instruct", source=GGUF_SOURCE, device="cpu", dtype="float32", threads=2,
    parameters=134_515_008, weight_bytes=538_060_032, layers=30, heads=9, kv_heads=3,
    head_dim=64, hidden_size=576, vocab_size=49_152, context_window=8192, load_seconds=1.0)
GPU_FP16 = replace(CPU_FP32, device="cuda:0 (NVIDIA H200)", dtype="float16",
                   weight_bytes=269_030_016)
OTHER = replace(CPU_FP32, name="SmolLM2-360M-Instruct", source="Hugging Face Hub",
                parameters=361_821_120, weight_bytes=1_447_284_480, layers=32, hidden_size=960)
LESSONS = sorted(n for n in os.listdir(ASSETS) if n.endswith(".md"))
PLACEHOLDER = re.compile(r"\$(" + "|".join(FROM_INFO) + r"|weights_origin)(?!\w)")


def test_fill_replaces_only_known_names_and_keeps_other_dollars_and_braces():
    text = "Costs $0.50 {per} $million; all $layers layers (here $weight_mb) in $dtype."
    assert fill(text, GPU_FP16) == ("Costs $0.50 {per} $million; all 30 layers (here 269 MB) "
                                    "in float16.")
    # without an info a figure is never guessed: its parenthesis, or else its line, goes
    assert fill("Read the weights (here $weight_mb) once.\n", None) == "Read the weights once.\n"
    assert fill("a\n$weights_origin\nb\n", None) == "a\nb\n"


@pytest.mark.parametrize("name", LESSONS)
def test_every_lesson_renders_with_and_without_model_info(name):
    for info in (None, CPU_FP32, GPU_FP16):
        md = lesson_text(name, info, {"weights_origin": "- note"})
        assert not PLACEHOLDER.search(md), (name, info and info.dtype)
    bare = lesson_text(name)
    assert not PLACEHOLDER.search(bare)
    for fixed in ("538 MB", "30 layers", "49,152", "(as loaded)"):  # item 3: never written in
        assert fixed not in bare, (name, fixed)


@pytest.mark.parametrize("name", ["lesson2_prefill.md", "lesson6_quantization.md"])
def test_model_figures_are_the_loaded_models(name):
    """Item 3: a float16 run says float16 and its own size, another model its own layers."""
    md = lesson_text(name, GPU_FP16, {"weights_origin": ""})
    assert "float16" in md and "269 MB" in md and "538 MB" not in md
    assert "1,447 MB" in lesson_text(name, OTHER, {"weights_origin": ""})
    if name == "lesson2_prefill.md":
        assert "(32 here)" in lesson_text(name, OTHER) and "(30 here)" in md


def test_lesson_6_embedding_share_and_shape_come_from_the_info():
    md = lesson_text("lesson6_quantization.md", CPU_FP32, {"weights_origin": ""})
    assert "49,152 × 576" in md and "21% of all weights" in md
    assert "49,152 × 960" in lesson_text("lesson6_quantization.md", OTHER, {"weights_origin": ""})


def test_fp32_mode_is_not_called_the_loaded_precision():
    """Item 3: on a GPU the loaded model is float16, so fp32 is not 'as loaded'."""
    from inference.quantize import MODES
    assert "as loaded" not in MODES["fp32"].label


def test_lesson_6_names_gguf_quantization_only_for_the_gguf():
    """Item 2: Q4_1 linears and a Q8_0 head for the bundled file; nothing of it for the Hub."""
    def rendered(info):
        origin = weights_origin_md(info.source, info.dtype)
        return lesson_text("lesson6_quantization.md", info, {"weights_origin": origin})

    gguf = rendered(CPU_FP32)
    assert "**Q4_1**" in gguf and "**Q8_0**" in gguf and "already 4-bit" not in gguf
    hub = rendered(OTHER)
    assert "Q4_1" not in hub and "Q8_0" not in hub and "not quantized before" in hub


def test_loading_docstring_names_both_gguf_formats():
    import inference.loading as loading
    assert "4-bit GGUF file" not in loading.__doc__
    assert "Q8_0" in loading.__doc__ and "Q8_0" in loading.GGUF_SOURCE
    assert "Q8_0" in loading.GGUF_CACHE_SOURCE and "→ float32" not in loading.GGUF_SOURCE


def test_perplexity_is_described_per_token():
    """Item 5: perplexity is computed over tokens, not words."""
    md = lesson_text("lesson6_quantization.md", CPU_FP32, {"weights_origin": ""})
    assert "next word" not in md and "each next *token*" in md


def test_native_bf16_is_read_from_the_cpu_flags():
    """Item 4: 'no native bfloat16' only where the flags were read and lack it."""
    from inference.experiments.quiet_reference import device_bf16, native_bf16
    plain = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f\n"
    assert native_bf16(plain) is False
    assert native_bf16(plain.replace("avx512f", "avx512f avx512_bf16")) is True
    assert native_bf16(plain.replace("avx512f", "amx_bf16 amx_tile")) is True
    assert native_bf16("") is None  # nothing read: nothing claimed
    assert native_bf16("Features\t: fp asimd bf16\n") is None  # not x86 flags
    assert device_bf16("cuda:0") is None  # on a GPU the CPU's flags say nothing


def test_lesson_1_emoji_and_cjk_token_counts_are_the_tokenizers(tok):
    """Item 1: the counts lesson 1 claims, checked against the real tokenizer."""
    from inference.tokens import tokenize
    md = lesson_text("lesson1_tokens.md")
    claim = re.search(r"the emoji ((?:\S+ )+)take (\d+) tokens each", md)
    assert claim, "lesson 1 should say how many tokens its emoji take"
    emoji, count = claim.group(1).split(), int(claim.group(2))
    assert emoji == ["🍕", "🚀", "🤖", "🌱"]
    for e in emoji:
        assert len(tokenize(tok, e).tokens) == count, e
    low, high = map(int, re.search(r"character takes (\d+) to (\d+)", md).groups())
    counts = {c: len(tokenize(tok, c).tokens) for c in "猫日本語こんにちは中文"}
    assert min(counts.values()) == low and max(counts.values()) == high, counts
    assert len(tokenize(tok, "本").tokens) == 1  # the example the text gives
