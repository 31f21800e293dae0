"""The engine: loading, tokens, prefill and decode steps, sampling, the KV cache, batching,
quantization. It knows nothing of the UI. The public API, as in the README:

    from inference import load_model, prompt_ids, stream, SamplingSettings
    lm = load_model()
    for step in stream(lm, prompt_ids(lm.tokenizer, "Why is the sky blue?"), max_new_tokens=32):
        print(step.index, step.piece, step.seconds)

The rest is imported from its own module; per-lesson measurements live in `inference.experiments`.
"""
from .config import LIMITS, Settings
from .errors import InferenceInputError
from .events import StepEvent
from .generation import stream
from .loading import LoadedModel, load_model
from .sampling import SamplingSettings
from .tokens import prompt_ids

__all__ = ["LIMITS", "Settings", "InferenceInputError", "StepEvent", "stream", "LoadedModel",
           "load_model", "SamplingSettings", "prompt_ids"]
