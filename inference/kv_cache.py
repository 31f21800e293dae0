"""Lesson 4: the KV cache, the keys and values stored for every token already processed.

Each layer keeps keys and values of shape [batch, kv_heads, seq, head_dim]; every new token
adds one column to each. Its size follows a simple formula:

    bytes = 2 (K and V) × layers × kv_heads × head_dim × bytes_per_value × tokens × batch

For SmolLM2-135M in float32: 2 × 30 × 3 × 64 × 4 = 46,080 bytes per token.
"""
from __future__ import annotations

import torch


def cache_layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer, each [batch, kv_heads, seq, head_dim]; [] for no cache."""
    if cache is None:
        return []
    return [(layer.keys, layer.values) for layer in cache.layers
            if getattr(layer, "keys", None) is not None and layer.keys.numel() > 0]


def cache_tensor_bytes(cache) -> int:
    """Bytes actually held by the cache's key and value tensors."""
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size()
               for k, v in cache_layers(cache))


def cache_length(cache) -> int:
    """Positions held (the sequence axis of the key tensors)."""
    layers = cache_layers(cache)
    return int(layers[0][0].shape[-2]) if layers else 0


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_value: int,
                   tokens: int, batch: int = 1) -> int:
    """The formula: 2 × layers × kv_heads × head_dim × bytes_per_value × tokens × batch."""
    return 2 * layers * kv_heads * head_dim * bytes_per_value * tokens * batch
