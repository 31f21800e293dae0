"""What one decode step must read at cache length L, and the time that bandwidth allows.

A decode step at batch B reads every weight once (shared by the B rows) and, for each row,
the keys and values of all L cached positions:

    bytes read = weight bytes + B × L × KV bytes per token
    floor      = bytes read ÷ measured read bandwidth          (theoretical)

The two terms are equal at L* = weight bytes ÷ (B × KV bytes per token): past L*, the cache
costs the step more reading than the whole model does. For SmolLM2-135M in float32, 538 MB of
weights and 46,080 bytes per token, L* is about 11,700 tokens at batch 1 (beyond its
8,192-token window) and about 1,460 at batch 8.

`decode_theory` reads the loaded model's bytes and the machine's one bandwidth figure
(`roofline.machine_bandwidth`, measured once per process and shared by every lesson).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kv_cache import bytes_per_token
from ..weights import bytes_read_per_token
from .roofline import machine_bandwidth


@dataclass(frozen=True)
class DecodeTheory:
    """The bandwidth floor of one decode step, from the loaded model and this machine."""

    weight_bytes: int  # bytes of weights one decode step reads (the tied head counted once)
    kv_bytes_per_token: int  # cache bytes one position holds for one row (K and V, all layers)
    bandwidth_gbs: float  # measured read bandwidth of this machine, GB/s
    dtype: str  # the dtype both counts are in

    def bytes_read(self, tokens: int, batch: int = 1) -> int:
        """Bytes one step reads: weight bytes + batch × tokens × KV bytes per token."""
        return self.weight_bytes + batch * tokens * self.kv_bytes_per_token

    def kv_share(self, tokens: int, batch: int = 1) -> float:
        """The cache's share of the bytes one step reads (0 to 1)."""
        return batch * tokens * self.kv_bytes_per_token / self.bytes_read(tokens, batch)

    def seconds(self, tokens: int, batch: int = 1) -> float:
        """The floor: bytes read ÷ bandwidth, in seconds."""
        return self.bytes_read(tokens, batch) / (self.bandwidth_gbs * 1e9)

    def crossover_tokens(self, batch: int = 1) -> int:
        """L*: the cache length at which the cache reads equal the weight reads."""
        return round(self.weight_bytes / (batch * self.kv_bytes_per_token))


def decode_theory(lm, shared=None) -> DecodeTheory:
    """The floor for `lm` on this machine (bandwidth from `shared`, measured once)."""
    info = lm.info
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    return DecodeTheory(bytes_read_per_token(lm.model), kv,
                        machine_bandwidth(shared, lm.device), str(lm.dtype).replace("torch.", ""))
