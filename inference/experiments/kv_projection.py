"""Lesson 4: how big the KV cache gets, projected from the formula (theoretical), checked
against this model's tensors; grown with context AND batch, past some tokens × sequences the
cache outweighs the model. `size_rows` sets this model beside its larger siblings.

    bytes = 2 × layers × kv_heads × head_dim × bytes_per_value × tokens × batch
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import LIMITS
from ..errors import check_range
from ..kv_cache import bytes_per_token
from .roofline import ceiling_tokens_per_s


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    query_heads: int
    kv_heads: int
    head_dim: int
    parameters: int
    source: str  # "this model (measured)" or "published config (theoretical)"
    context_window: int | None = None  # positions the model was trained for (None: unknown)
    sliding_window: int | None = None  # tokens each layer attends over, if smaller

    def supports(self, tokens: int) -> bool:
        """Whether a sequence of `tokens` lies within the context window (True if unknown)."""
        return self.context_window is None or tokens <= self.context_window

    @property
    def window_label(self) -> str:
        """'4,096 tokens', or with a sliding window: '8,192 tokens, 4,096-token sliding window'."""
        if self.context_window is None:
            return "unknown"
        slide = f", {self.sliding_window:,}-token sliding window" if self.sliding_window else ""
        return f"{self.context_window:,} tokens{slide}"

    @property
    def attention(self) -> str:
        if self.kv_heads == self.query_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    def bytes_per_token(self, bytes_per_value: int) -> int:
        return bytes_per_token(self.layers, self.kv_heads, self.head_dim, bytes_per_value)

    def weight_bytes(self, bytes_per_value: int) -> int:
        return self.parameters * bytes_per_value


_PUB = "published config (theoretical)"
PUBLISHED = (
    ModelSpec("Llama-2-7B", 32, 32, 32, 128, 6_738_000_000, _PUB, 4_096),
    ModelSpec("Mistral-7B", 32, 32, 8, 128, 7_242_000_000, _PUB, 8_192, sliding_window=4_096),
    ModelSpec("Llama-3-8B", 32, 32, 8, 128, 8_030_000_000, _PUB, 8_192),
    ModelSpec("Llama-3-70B", 80, 64, 8, 128, 70_554_000_000, _PUB, 8_192),
)


def this_model(info) -> ModelSpec:
    return ModelSpec(info.name, info.layers, info.heads, info.kv_heads, info.head_dim,
                      info.parameters, "this model (formula checked against its tensors)",
                      info.context_window)


def as_mha(shape: ModelSpec) -> ModelSpec:
    """The same model with one KV head per query head (full multi-head attention)."""
    return replace(shape, name=f"{shape.name} if MHA", kv_heads=shape.query_heads,
                   source="hypothetical (theoretical)")


def cache_bytes(shape: ModelSpec, tokens: int, batch: int = 1, bytes_per_value: int = 2) -> int:
    return shape.bytes_per_token(bytes_per_value) * tokens * batch


def crossover_tokens(shape: ModelSpec, bytes_per_value: int = 2, batch: int = 1) -> int:
    """Tokens per sequence at which the cache for `batch` sequences equals the weights."""
    per_token = shape.bytes_per_token(bytes_per_value) * batch
    return -(-shape.weight_bytes(bytes_per_value) // per_token)  # ceiling division


@dataclass(frozen=True)
class Projection:
    """Cache bytes for each model at each x value (context length or batch size)."""

    x_name: str  # "context length (tokens)" or "batch size (sequences)"
    xs: tuple[int, ...]
    series: tuple[tuple[str, tuple[int, ...]], ...]  # (model name, bytes per x)
    weights: tuple[tuple[str, int], ...]  # (model name, weight bytes) for reference lines
    bytes_per_value: int
    fixed: str  # what is held fixed, e.g. "batch 1"
    within: tuple[tuple[bool, ...], ...] = ()  # per model, per x: inside its context window?
    windows: tuple[str, ...] = ()  # per model: its context window, e.g. "4,096 tokens"


def project_context(shapes: list[ModelSpec], contexts: list[int], batch: int = 1,
                    bytes_per_value: int = 2) -> Projection:
    """Cache bytes per model as the context grows, `batch` sequences held."""
    check_range("Batch size", batch, 1, LIMITS.projection_batch.high)
    return _projection(shapes, "context length (tokens)", contexts, bytes_per_value,
                       f"batch {batch}", [(t, batch) for t in contexts])


def project_batch(shapes: list[ModelSpec], batches: list[int], tokens: int = 4096,
                  bytes_per_value: int = 2) -> Projection:
    """Cache bytes per model as the batch grows, each sequence `tokens` long."""
    check_range("Context length", tokens, 1, LIMITS.projection_context.high)
    return _projection(shapes, "batch size (sequences)", batches, bytes_per_value,
                       f"{tokens:,} tokens per sequence", [(tokens, b) for b in batches])


def _projection(shapes: list[ModelSpec], x_name: str, xs: list[int], bytes_per_value: int,
                fixed: str, sizes: list[tuple[int, int]]) -> Projection:
    """`sizes`: (tokens, batch) at each x."""
    return Projection(
        x_name=x_name, xs=tuple(xs),
        series=tuple((s.name, tuple(cache_bytes(s, t, b, bytes_per_value) for t, b in sizes))
                     for s in shapes),
        weights=tuple((s.name, s.weight_bytes(bytes_per_value)) for s in shapes),
        bytes_per_value=bytes_per_value, fixed=fixed,
        within=tuple(tuple(s.supports(t) for t, _ in sizes) for s in shapes),
        windows=tuple(s.window_label for s in shapes))


def doubling_range(start: int, stop: int) -> list[int]:
    """start, 2·start, 4·start, ... up to stop (inclusive if it lands on it)."""
    return [start << i for i in range((stop // start).bit_length())]


def published_llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int,
                    intermediate: int, vocab: int = 49_152) -> ModelSpec:
    """A Llama-style published config as a `ModelSpec`, its parameters counted:

    vocab × hidden + hidden + layers × (2 × hidden² + 2 × hidden × kv_heads × head_dim
                                       + 3 × hidden × intermediate + 2 × hidden)
    """
    head_dim = hidden // heads
    per_layer = (2 * hidden**2 + 2 * hidden * kv_heads * head_dim + 3 * hidden * intermediate
                 + 2 * hidden)
    return ModelSpec(name, layers, heads, kv_heads, head_dim,
                     vocab * hidden + layers * per_layer + hidden, _PUB)


# Published configs (huggingface.co/HuggingFaceTB/SmolLM2-*-Instruct, config.json):
# name, layers, hidden, heads, kv_heads, intermediate.
SMOLLM2 = (
    published_llama("SmolLM2-135M", 30, 576, 9, 3, 1536),
    published_llama("SmolLM2-360M", 32, 960, 15, 5, 2560),
    published_llama("SmolLM2-1.7B", 24, 2048, 32, 32, 8192),
)


@dataclass(frozen=True)
class SizeRow:
    shape: ModelSpec
    weight_bytes: int  # at the loaded dtype
    int8_bytes: int  # one byte per weight (scales left out)
    kv_bytes_per_token: int
    ceiling_tokens_per_s: float  # batch 1, this machine's bandwidth, weights only
    fits: bool  # weights in the memory free now


def size_rows(bandwidth_gbs: float, bytes_per_value: int, free_bytes: int,
              shapes=SMOLLM2) -> list[SizeRow]:
    """One theoretical row per model for a machine with this bandwidth and free memory."""
    rows = []
    for s in shapes:
        weights = s.weight_bytes(bytes_per_value)
        rows.append(SizeRow(s, weights, s.weight_bytes(1), s.bytes_per_token(bytes_per_value),
                            ceiling_tokens_per_s(bandwidth_gbs, weights), weights < free_bytes))
    return rows
