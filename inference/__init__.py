"""The engine: loading, tokens, prefill and decode steps, sampling, the KV cache, batching,
quantization. It knows nothing of the UI. The public API, as in the README:

    from inference import load_model, prompt_ids, stream, SamplingSettings
    lm = load_model()
    for step in stream(lm, prompt_ids(lm.tokenizer, "Why is the sky blue?"), max_new_tokens=32):
        print(step.index, step.piece, step.seconds)

Per-lesson measurements built on it live in `inference.experiments` (not imported here).
"""
from .config import LIMITS, Range, Settings
from .errors import (
                     EmptyPromptError,
                     GenerationFinishedError,
                     InferenceInputError,
                     NotReadyError,
                     PromptTooLongError,
                     SettingOutOfRangeError,
)
from .events import Candidate, StepEvent
from .generation import (
                     Generation,
                     continue_branch,
                     decode_step,
                     forward,
                     next_token,
                     prefill,
                     start,
                     stream,
)
from .kv_cache import cache_tensor_bytes, kv_cache_bytes, snapshot
from .loading import LoadedModel, ModelInfo, load_model
from .sampling import SamplingSettings
from .tokens import prompt_ids

__all__ = [
    "LIMITS", "Range", "Settings", "decode_step", "forward", "prefill", "EmptyPromptError",
    "GenerationFinishedError", "InferenceInputError", "NotReadyError", "PromptTooLongError",
    "SettingOutOfRangeError", "Candidate", "StepEvent", "Generation",
    "continue_branch", "next_token", "start", "stream", "cache_tensor_bytes", "kv_cache_bytes",
    "snapshot", "LoadedModel", "ModelInfo", "load_model", "SamplingSettings", "prompt_ids",
]
