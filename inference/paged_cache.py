"""Lesson 4-5 (engine side): attention that reads each request's keys and values through its
block table.

Per layer the pool holds keys and values `[num_blocks + 1, block_tokens, H_kv, D]` (the last
block is scratch: padding writes there, nothing reads it). `PagedStep` is the cache for ONE
forward pass: each layer's `update` writes the new positions (one `index_copy_` into the pool
seen as slots) and returns every row's keys and values, gathered through its block table
(one `index_select` of whole blocks) and masked, so each row computes what it would alone.
"""
from __future__ import annotations

import ctypes
import functools
import mmap
import os
import sys
from dataclasses import dataclass

import torch

from .cascade_attention import CascadePlan


@dataclass
class PagedKV:
    """The pool's tensors: one key and one value tensor per layer."""

    keys: list[torch.Tensor]  # per layer: [num_blocks + 1, block_tokens, H_kv, D]
    values: list[torch.Tensor]  # per layer: [num_blocks + 1, block_tokens, H_kv, D]
    block_tokens: int

    @staticmethod
    def allocate(layers: int, kv_heads: int, head_dim: int, num_blocks: int, block_tokens: int,
                 dtype: torch.dtype, device: torch.device) -> PagedKV:
        """Uninitialised (zeroed as blocks are first handed out), the scratch block zeroed now."""
        shape = (num_blocks + 1, block_tokens, kv_heads, head_dim)
        kv = PagedKV([torch.empty(shape, dtype=dtype, device=device) for _ in range(layers)],
                     [torch.empty(shape, dtype=dtype, device=device) for _ in range(layers)],
                     block_tokens)
        kv.zero_blocks([num_blocks])
        return kv

    @torch.inference_mode()
    def zero_blocks(self, blocks: list[int]) -> None:
        """Zero these blocks in every layer: attention reads a partly filled block whole (the
        mask hides the empty slots), and masked garbage could still be NaN."""
        if not blocks:
            return
        index = torch.tensor(blocks, dtype=torch.long, device=self.keys[0].device)
        for t in self.keys + self.values:
            t.index_fill_(0, index, 0)

    @property
    def scratch_block(self) -> int:
        return self.keys[0].shape[0] - 1

    @torch.inference_mode()
    def release_free(self, blocks: list[int]) -> int:
        """Give these free blocks' whole pages back (`madvise(MADV_DONTNEED)`; they read as
        zeros after) -> bytes; 0 off Linux and on a GPU, whose caching allocator owns it."""
        t0 = self.keys[0]  # a contiguous CPU tensor in private memory on Linux reads zeros after
        if not (blocks and sys.platform == "linux" and hasattr(mmap, "MADV_DONTNEED")
                and t0.device.type == "cpu" and t0.is_contiguous() and not t0.is_shared()):
            return 0
        row = t0[0].numel() * t0.element_size()  # bytes of one block in one layer's tensor
        runs: list[list[int]] = []  # [first, end) runs of consecutive blocks
        for b in sorted(blocks):
            if runs and runs[-1][1] == b:
                runs[-1][1] = b + 1
            else:
                runs.append([b, b + 1])
        page, released = mmap.PAGESIZE, 0
        for t in self.keys + self.values:
            base = t.data_ptr()
            for first, end in runs:
                start = -(-(base + first * row) // page) * page  # rounded up to a page
                stop = (base + end * row) // page * page  # rounded down
                if stop > start:
                    _dontneed(start, stop - start)
                    released += stop - start
        return released

    def block_bytes(self) -> int:
        """Bytes one block holds across all layers, keys and values."""
        k = self.keys[0]
        return 2 * len(self.keys) * k[0].numel() * k.element_size()


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)  # the C library the process already runs
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return libc


def _dontneed(address: int, length: int) -> None:
    if _libc().madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), mmap.MADV_DONTNEED):
        err = ctypes.get_errno()
        raise OSError(err, f"madvise(MADV_DONTNEED): {os.strerror(err)}")


class PagedStep:
    """The cache for one forward pass: where the new positions go, what each row reads, the mask."""

    def __init__(self, kv: PagedKV, positions: torch.Tensor, tables: torch.Tensor,
                 reads_in_attention: bool = False) -> None:
        """positions [B, Q] (left padding: -1), tables [B, NB] (padded with the scratch
        block). Row b's query at position p reads row b's keys 0..p."""
        bt = kv.block_tokens
        real = positions >= 0  # [B, Q]
        pos = positions.clamp(min=0)  # [B, Q]
        block = torch.where(real, torch.gather(tables, 1, pos // bt), kv.scratch_block)  # [B, Q]
        keys = torch.arange(tables.shape[1] * bt, device=tables.device)  # [S]
        self.kv = kv
        self.reads_in_attention = reads_in_attention  # cascade: attention reads the pool
        self.write_slots = (block * bt + pos % bt).reshape(-1)  # [B*Q] in input order
        self.read_blocks = tables.reshape(-1)  # [B*NB] each row's blocks in position order
        # [B, 1, Q, S] query (b, q) sees key j when j <= its position (padding: key 0 only)
        self.mask = (keys[None, None, :] <= pos[:, :, None])[:, None]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v: [B, H_kv, Q, D] -> every row's keys and values so far: [B, H_kv, S, D]
        (with the cascade on, k and v back as they came: its attention reads the pool)."""
        out = []
        for pool, new in ((self.kv.keys[layer_idx], key_states),
                          (self.kv.values[layer_idx], value_states)):
            b, h, q, d = new.shape
            n, bt = pool.shape[0], pool.shape[1]
            pool.view(n * bt, h, d).index_copy_(  # pool as slots: [N*bt, H, D]
                0, self.write_slots, new.transpose(1, 2).reshape(b * q, h, d).to(pool.dtype))
            if self.reads_in_attention:
                out.append(new)
                continue
            rows = pool.view(n, -1).index_select(0, self.read_blocks)  # [B*NB, bt*H*D]
            out.append(rows.view(b, -1, h, d).transpose(1, 2))  # [B, H, NB*bt, D]
        return out[0], out[1]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return int(self.mask.shape[-1])


@torch.inference_mode()
def paged_forward(model, kv: PagedKV, input_ids: torch.Tensor, positions: torch.Tensor,
                  tables: torch.Tensor, cascade: CascadePlan | None = None) -> torch.Tensor:
    """One forward pass through the pool. input_ids, positions: [B, Q] (left padding: -1);
    tables: [B, NB] -> logits [B, V] of each row's last position. With a `cascade` plan,
    attention reads shared prefixes once per group (`cascade_attention.py`)."""
    step = PagedStep(kv, positions, tables, reads_in_attention=cascade is not None)
    extra = {} if cascade is None else {"cascade": cascade}
    out = model(input_ids=input_ids, cache=step, attention_mask=step.mask,
                position_ids=positions.clamp(min=0), use_cache=True, logits_to_keep=1, **extra)
    return out.logits[:, -1, :]
