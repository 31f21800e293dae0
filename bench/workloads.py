"""What the bench and the GPU check run, written once: prompts, precision modes and the
model-level test lists (`tests/model_level.txt`, `tests/half_precision_deselect.txt`, which
the Makefile reads too). Plain data: no torch, no UI.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."
KV_PROMPT = "Tell me a long story about a brave little robot."  # 41 tokens with the template
QUALITY_PROMPT = "Explain why the sky is blue, in detail, for a curious student."
QUANT_MODES = ("fp32", "fp16", "bf16", "int8", "int4-g32")
QUANT_NEW_TOKENS = 32  # greedy tokens each mode is compared on
KV_RACE_TOKENS = 64  # the KV race's length (README's race figure)
MAX_BATCH = 64  # the batch sweep's largest batch: 1, 2, 4, ... 64
BATCH_STEPS = 8  # timed decode steps per batch size


def listed(name: str) -> tuple[str, ...]:
    """The entries of a list file under tests/ (one per line, '#' comments and blanks left out)."""
    lines = (ROOT / "tests" / name).read_text(encoding="utf-8").splitlines()
    return tuple(filter(None, (line.split("#", 1)[0].strip() for line in lines)))


MODEL_TESTS = listed("model_level.txt")
HALF_PRECISION_DESELECT = listed("half_precision_deselect.txt")
