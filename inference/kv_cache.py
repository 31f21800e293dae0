"""Lesson 4: the KV cache, the keys and values stored for every token already processed.

Each layer keeps keys and values of shape [batch, kv_heads, seq, head_dim]; every new token
adds one column to each. Its size follows a simple formula:

    bytes = 2 (K and V) × layers × kv_heads × head_dim × bytes_per_value × tokens × batch

For SmolLM2-135M in float32: 2 × 30 × 3 × 64 × 4 = 46,080 bytes per token.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def cache_layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer, each [batch, kv_heads, seq, head_dim]; [] for no cache."""
    return [(layer.keys, layer.values) for layer in getattr(cache, "layers", ())
            if getattr(layer, "keys", None) is not None and layer.keys.numel() > 0]


def cache_tensor_bytes(cache) -> int:
    """Bytes actually held by the cache's key and value tensors."""
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size()
               for k, v in cache_layers(cache))


def cache_length(cache) -> int:
    """Positions held (the sequence axis of the key tensors)."""
    layers = cache_layers(cache)
    return int(layers[0][0].shape[-2]) if layers else 0


def crop_to(cache, length: int) -> None:
    """Keep the first `length` positions of every layer (e.g. drop rejected guesses)."""
    extra = cache_length(cache) - length
    if extra > 0:
        cache.crop(-extra)  # a negative count: drop that many newest positions


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_value: int,
                   tokens: int, batch: int = 1) -> int:
    """The formula: 2 × layers × kv_heads × head_dim × bytes_per_value × tokens × batch."""
    return 2 * layers * kv_heads * head_dim * bytes_per_value * tokens * batch


def bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: int) -> int:
    """Cache bytes one token adds for one sequence: the formula with tokens = batch = 1."""
    return kv_cache_bytes(layers, kv_heads, head_dim, bytes_per_value, tokens=1)


@dataclass(frozen=True)
class CacheSnapshot:
    """The real cache at one moment, read from its tensors (nothing here is predicted)."""

    layers: int
    batch: int
    kv_heads: int
    tokens: int  # the sequence axis of every key/value tensor
    head_dim: int
    dtype: str
    bytes_per_value: int
    tensor_bytes: int  # bytes the key and value tensors hold, all layers
    shapes: tuple[tuple[int, int, int, int], ...]  # per layer, keys: [B, H_kv, S, D]
    key_norms: tuple[tuple[float, ...], ...]  # [layers][tokens] key length, mean over heads, row 0

    @property
    def formula_bytes(self) -> int:
        return kv_cache_bytes(self.layers, self.kv_heads, self.head_dim, self.bytes_per_value,
                              self.tokens, self.batch)

    @property
    def bytes_per_token(self) -> int:
        return bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.bytes_per_value)


@torch.inference_mode()
def snapshot(cache) -> CacheSnapshot:
    """Read shapes, bytes and per-position key lengths from the cache's real tensors."""
    layers = cache_layers(cache)
    if not layers:
        return CacheSnapshot(0, 0, 0, 0, 0, "", 0, 0, (), ())
    k0 = layers[0][0]  # [B, H_kv, S, D]
    b, h, s, d = (int(x) for x in k0.shape)
    norms = torch.stack([k[0].float().norm(dim=-1).mean(dim=0) for k, _ in layers])  # [L, S]
    return CacheSnapshot(
        layers=len(layers), batch=b, kv_heads=h, tokens=s, head_dim=d,
        dtype=str(k0.dtype).replace("torch.", ""), bytes_per_value=k0.element_size(),
        tensor_bytes=cache_tensor_bytes(cache),
        shapes=tuple(tuple(int(x) for x in k.shape) for k, _ in layers),  # type: ignore[misc]
        key_norms=tuple(tuple(round(float(x), 3) for x in row) for row in norms.tolist()))
