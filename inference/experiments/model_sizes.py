"""Choosing a suitably sized model: this model beside its larger siblings, from their
published shapes (SmolLM2 model cards / config.json). Every figure here is theoretical: the
parameter count follows from the shape, the weights' bytes from the dtype, and the batch-1
decode ceiling from this machine's measured bandwidth ÷ the bytes one step reads.

    parameters = vocab × hidden                          (tied embedding = output head)
               + layers × (2 × hidden²                   (query and output projections)
                           + 2 × hidden × kv_heads × head_dim   (key and value projections)
                           + 3 × hidden × intermediate   (the MLP's gate, up and down)
                           + 2 × hidden)                 (two norms)
               + hidden                                  (the final norm)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kv_cache import bytes_per_token
from .roofline import ceiling_tokens_per_s


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int = 49_152

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def parameters(self) -> int:
        kv = self.kv_heads * self.head_dim
        per_layer = (2 * self.hidden**2 + 2 * self.hidden * kv
                     + 3 * self.hidden * self.intermediate + 2 * self.hidden)
        return self.vocab * self.hidden + self.layers * per_layer + self.hidden

    def weight_bytes(self, bytes_per_value: float) -> float:
        return self.parameters * bytes_per_value

    def kv_bytes_per_token(self, bytes_per_value: int) -> int:
        return bytes_per_token(self.layers, self.kv_heads, self.head_dim, bytes_per_value)


# Published configs (huggingface.co/HuggingFaceTB/SmolLM2-*-Instruct, config.json).
SMOLLM2 = (
    ModelShape("SmolLM2-135M", layers=30, hidden=576, heads=9, kv_heads=3, intermediate=1536),
    ModelShape("SmolLM2-360M", layers=32, hidden=960, heads=15, kv_heads=5, intermediate=2560),
    ModelShape("SmolLM2-1.7B", layers=24, hidden=2048, heads=32, kv_heads=32,
               intermediate=8192),
)


@dataclass(frozen=True)
class SizeRow:
    shape: ModelShape
    weight_bytes: float  # at the loaded dtype
    int8_bytes: float  # one byte per weight (scales left out)
    kv_bytes_per_token: int
    ceiling_tokens_per_s: float  # batch 1, this machine's bandwidth, weights only
    fits: bool  # weights in the memory free now


def size_rows(bandwidth_gbs: float, bytes_per_value: int, free_bytes: int,
              shapes=SMOLLM2) -> list[SizeRow]:
    """One theoretical row per model for a machine with this bandwidth and free memory."""
    rows = []
    for s in shapes:
        weights = s.weight_bytes(bytes_per_value)
        rows.append(SizeRow(s, weights, s.weight_bytes(1), s.kv_bytes_per_token(bytes_per_value),
                            ceiling_tokens_per_s(bandwidth_gbs, weights), weights < free_bytes))
    return rows
