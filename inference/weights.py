"""How many bytes the model's weights hold, and how many one decode step reads.

Decode at batch 1 reads every weight once per token, so these set the ceiling lessons 5 and 6
draw: tokens/s <= bandwidth / bytes read per token. Tied tensors are counted once.
"""
from __future__ import annotations

import torch
from torch import nn


def unique_tensors(module: nn.Module) -> dict[int, torch.Tensor]:
    """Parameters and persistent buffers (quantized values and scales), keyed by address."""
    return {t.data_ptr(): t for t in module.state_dict(keep_vars=True).values()}


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all stored weights (float, int8/int4 values, scales, zeros, norms), shared once."""
    return sum(t.numel() * t.element_size() for t in unique_tensors(model).values())


def parameter_count(model: nn.Module) -> int:
    """Unique parameters (the tied embedding / output head counted once)."""
    return sum(p.numel() for p in {p.data_ptr(): p for p in model.parameters()}.values())


def bytes_read_per_token(model: nn.Module) -> int:
    """Weights a batch-1 decode step reads: everything, except that an embedding table that is
    not also the output head contributes only the one row it looks up."""
    total = weight_bytes(model)
    head = unique_tensors(model.get_output_embeddings())
    for ptr, t in unique_tensors(model.get_input_embeddings()).items():
        if ptr not in head:
            total -= t.numel() * t.element_size() - (t[0].numel() * t.element_size())
    return total
