"""Lesson 4-5 (engine side): the server's KV memory as a pool of fixed-size blocks.

PagedAttention (vLLM): each request's keys and values sit in BLOCKS of `block_tokens` positions
from one shared pool; its BLOCK TABLE puts position p in block `table[p // block_tokens]`, so
at most one partly filled block per request is wasted. Prefix caching: a FULL block is keyed by
its tokens' hash chained with the previous block's key, so a prompt starting with cached blocks
maps them (refcount + 1) instead of computing them; a cached block nobody holds stays ("cached,
idle") until evicted least-recently-used. Bookkeeping only (`paged_cache.py` holds the tensors),
after vLLM's v1 block manager (vllm/v1/core/block_pool.py).
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import PoolFullError


def block_hash(parent: bytes | None, tokens: Sequence[int]) -> bytes:
    """The key of a full block: sha256 of the previous block's key and this block's tokens.

    >>> block_hash(None, [1, 2]) == block_hash(None, [1, 2]) != block_hash(b"x", [1, 2])
    True
    """
    h = hashlib.sha256(parent or b"")
    h.update(b",".join(str(t).encode() for t in tokens))
    return h.digest()


def blocks_for(tokens: int, block_tokens: int) -> int:
    """Blocks needed to hold `tokens` positions (ceil division)."""
    return -(-tokens // block_tokens)


@dataclass(frozen=True)
class PoolCounts:
    """The pool at one moment (blocks, not bytes)."""

    blocks_total: int
    blocks_used: int  # reference count > 0: held by a running request
    blocks_cached_idle: int  # refcount 0 but keyed: kept for its prefix, evicted LRU
    blocks_free: int  # refcount 0, holding nothing
    blocks_shared: int  # held by two or more requests (a shared prefix)


class BlockPool:
    """`num_blocks` blocks of `block_tokens` positions, block tables per request id."""

    def __init__(self, num_blocks: int, block_tokens: int, max_idle: int | None = None) -> None:
        if num_blocks < 1 or block_tokens < 1:
            raise ValueError("a pool needs at least one block of at least one token")
        self.num_blocks, self.block_tokens = num_blocks, block_tokens
        self.ref = [0] * num_blocks  # reference count per block
        self.key: list[bytes | None] = [None] * num_blocks  # prefix key of a full cached block
        self.by_key: dict[bytes, int] = {}  # key -> block id (in use or idle)
        # refcount 0, holding nothing: taken from the right, the most recently freed first
        self.free: deque[int] = deque(range(num_blocks - 1, -1, -1))
        self.max_idle = max_idle  # idle cached blocks kept at most (None: until room is needed)
        self.idle: OrderedDict[int, None] = OrderedDict()  # refcount 0, keyed; oldest first
        self.tables: dict[int, list[int]] = {}  # request id -> block table
        self.keys_of: dict[int, list[bytes]] = {}  # request id -> keys of its full blocks
        self.evictions = 0
        self.taken: list[int] = []  # blocks handed out since the tensor side last looked

    # ---- reading ------------------------------------------------------------------------
    def available(self) -> int:
        """Blocks a request could take now: free ones plus idle cached ones (evictable)."""
        return len(self.free) + len(self.idle)

    def counts(self) -> PoolCounts:
        return PoolCounts(self.num_blocks, sum(r > 0 for r in self.ref), len(self.idle),
                          len(self.free), sum(r > 1 for r in self.ref))

    def cached_prefix(self, tokens: Sequence[int]) -> list[int]:
        """Block ids of the longest run of cached full blocks that starts `tokens`, at most
        `len(tokens) - 1` tokens: the last one must go through the model for the next's scores."""
        bt, out, parent = self.block_tokens, [], None
        for i in range((len(tokens) - 1) // bt):
            parent = block_hash(parent, tokens[i * bt:(i + 1) * bt])
            block = self.by_key.get(parent)
            if block is None:
                break
            out.append(block)
        return out

    def can_allocate(self, tokens: int, hit_blocks: Sequence[int] = ()) -> bool:
        """Room for `tokens` positions, the cached `hit_blocks` mapped (idle ones then in use)?"""
        idle_hits = sum(1 for b in hit_blocks if self.ref[b] == 0)
        needed = blocks_for(tokens, self.block_tokens) - len(hit_blocks)
        return needed <= self.available() - idle_hits

    # ---- changing -----------------------------------------------------------------------
    def allocate(self, rid: int, tokens: Sequence[int], hit_blocks: Sequence[int] = ()
                 ) -> list[int]:
        """A table for `rid`: the cached `hit_blocks`, then new ones (PoolFullError: no room)."""
        if rid in self.tables:
            raise ValueError(f"request {rid} already holds blocks")
        if not self.can_allocate(len(tokens), hit_blocks):
            raise PoolFullError("The KV cache pool has no room for this request now.")
        for b in hit_blocks:  # mapped: refcount + 1, and no longer idle (evictable)
            self.idle.pop(b, None)
            self.ref[b] += 1
        new = blocks_for(len(tokens), self.block_tokens) - len(hit_blocks)
        table = list(hit_blocks) + [self._take() for _ in range(new)]
        self.tables[rid] = table
        self.keys_of[rid] = [self.key[b] for b in hit_blocks]  # type: ignore[misc]
        return list(table)

    def grow(self, rid: int, tokens: int) -> int | None:
        """Room for `tokens` positions in `rid`'s table: a block more when the last is full.
        -> the new block id, or None when none was needed. Raises PoolFullError."""
        table = self.tables[rid]
        if blocks_for(tokens, self.block_tokens) <= len(table):
            return None
        table.append(self._take())  # PoolFullError when no block is free or idle
        return table[-1]

    def commit_full(self, rid: int, tokens: Sequence[int]) -> None:
        """Key every block of `rid` that `tokens` (those with KV written) now fills."""
        keys, table, bt = self.keys_of[rid], self.tables[rid], self.block_tokens
        while len(keys) < len(tokens) // bt:
            i = len(keys)
            k = block_hash(keys[-1] if keys else None, tokens[i * bt:(i + 1) * bt])
            keys.append(k)
            b = table[i]
            if k not in self.by_key and self.key[b] is None:
                self.key[b], self.by_key[k] = k, b

    def release(self, rid: int) -> None:
        """Give back `rid`'s blocks: keyed ones nobody holds become cached-idle, the rest free."""
        table = self.tables.pop(rid, [])
        self.keys_of.pop(rid, None)
        for b in reversed(table):  # the tail first: a prefix's head stays cached longest
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if self.key[b] is None:
                    self.free.append(b)
                else:
                    self.idle[b] = None
        while self.max_idle is not None and len(self.idle) > self.max_idle:
            self.free.append(self._evict_oldest_idle())

    def _take(self) -> int:
        """A free block, else the least recently used idle cached block."""
        if self.free:
            b = self.free.pop()
        elif self.idle:
            b = self._evict_oldest_idle()
        else:
            raise PoolFullError("The KV cache pool is full.")
        self.ref[b] = 1
        self.taken.append(b)
        return b

    def _evict_oldest_idle(self) -> int:
        """The least recently used idle cached block, its key dropped."""
        b, _ = self.idle.popitem(last=False)
        del self.by_key[self.key[b]]  # type: ignore[index]
        self.key[b] = None
        self.evictions += 1
        return b
