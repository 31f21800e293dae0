"""How the server holds its rows' KV cache: in pages (the default) or in one padded tensor.

The server's loop (`server.py`) is the same for both; only these few operations differ.
Only the paged layout prefills in chunks (`chunks = True`): a padded row must be whole before
it can join the tensor, so `PaddedRows` always prefills whole prompts.

- `PagedRows` (PagedAttention, vLLM's design): one pool of fixed-size blocks for every request
  (`paged_batch.py`). A request is admitted when the blocks its prompt needs NOW are free
  (cached prefix blocks are mapped, not recomputed); a block is taken when its last one fills;
  when none is left the newest row is preempted and goes back to the queue.
- `PaddedRows` (how servers worked before vLLM): one left-padded tensor per layer sized by the
  longest row (`row_batch.py`), copied whenever a row joins or leaves, and admission by a
  worst-case reservation (prompt + max new tokens for every row). Kept selectable
  (`Settings.server_kv = "padded"`, env LLM_LAB_SERVER_KV) so the bench compares the two.
"""
from __future__ import annotations

import torch

from .block_pool import blocks_for
from .errors import RequestTooLargeError
from .kv_cache import cache_tensor_bytes, kv_cache_bytes
from .paged_batch import PagedBatch, PoolStats
from .row_batch import RowBatch


def _tokens_of(req) -> list[int]:
    """What a request's cache must hold: its prompt and any tokens it generated before a
    preemption (all fed again when it resumes)."""
    return list(req.prompt_ids) + list(req.generated)


class PagedRows:
    """The server's rows in a block pool sized from `server_cache_mb`."""

    kind = "paged"
    chunks = True  # can prefill a prompt in chunks, a chunk per step

    def __init__(self, lm, settings) -> None:
        per_block = kv_cache_bytes(lm.info.layers, lm.info.kv_heads, lm.info.head_dim,
                                   lm.bytes_per_value, tokens=settings.block_tokens)
        blocks = (settings.server_pool_blocks
                  or max(1, settings.server_cache_mb * 2**20 // per_block))
        self.batch = PagedBatch(lm, blocks, settings.block_tokens)
        self.cache_mb = blocks * per_block / 2**20

    def check_fits(self, prompt_tokens: int, max_new_tokens: int) -> None:
        """Raise RequestTooLargeError for a request the pool could never hold."""
        total = prompt_tokens + max_new_tokens
        if not self.batch.fits_ever(total):
            bt, have = self.batch.block_tokens, self.batch.pool.num_blocks
            raise RequestTooLargeError(
                f"This request could need {blocks_for(total, bt):,} blocks of {bt} tokens "
                f"(a {prompt_tokens:,}-token prompt plus up to {max_new_tokens} new tokens), but "
                f"the server's KV cache pool holds only {have:,} blocks ({have * bt:,} tokens, "
                f"{self.cache_mb:,.1f} MB): shorten the prompt or lower Max new tokens.")

    def waits_for_shared(self, req) -> bool:
        """Its prompt's next block is being computed by another row: wait and map it."""
        return self.batch.computing_now(_tokens_of(req))

    def admit(self, req, running: list, newcomers: list) -> bool:
        return self.batch.admit(req.rid, _tokens_of(req))

    def prefill(self, reqs: list) -> tuple[torch.Tensor, list[int]]:
        """-> (logits [len(reqs), V], tokens each request's prefill computed)."""
        rows = [self.batch.rows[r.rid] for r in reqs]
        fed = [len(row.tokens) - row.cached for row in rows]
        return self.batch.prefill([r.rid for r in reqs]), fed

    def pending(self, rid: int) -> int:
        """Tokens of `rid` still to prefill (its prompt's rest)."""
        return self.batch.pending(rid)

    def prefill_chunks(self, chunks: dict[int, int]) -> torch.Tensor:
        """The next n tokens of each row {rid: n} -> logits [len(chunks), V]."""
        return self.batch.prefill_chunks(chunks)

    def forward_seconds(self) -> float:
        """Synced seconds spent in the model since start (cache work is the rest)."""
        return self.batch.forward_s

    def make_room(self) -> list[int]:
        return self.batch.make_room()

    def decode(self) -> tuple[list[int], torch.Tensor]:
        """Every row not mid-prefill -> (their ids, logits [B, V])."""
        return self.batch.decoding(), self.batch.decode()

    def set_token(self, rid: int, token: int) -> None:
        self.batch.append(rid, token)

    def drop(self, rids: list[int]) -> None:
        for rid in rids:
            self.batch.release(rid)

    def cache_tokens(self, rid: int) -> int:
        return self.batch.rows[rid].cached

    def row_bytes(self, rid: int) -> int:
        return len(self.batch.pool.tables[rid]) * self.batch.kv.block_bytes()

    def cache_bytes(self) -> int:
        """Bytes of the blocks running requests hold (shared blocks once)."""
        return self.batch.pool.counts().used * self.batch.kv.block_bytes()

    def pool_stats(self) -> PoolStats | None:
        return self.batch.stats()

    def clear(self) -> None:
        for rid in list(self.batch.rows):
            self.batch.release(rid)


class PaddedRows:
    """The server's rows in one left-padded tensor per layer (`RowBatch`)."""

    kind = "padded"
    chunks = False  # a row joins the padded tensor whole: no chunked prefill

    def waits_for_shared(self, req) -> bool:
        return False  # no prefix caching: nothing to wait for

    def __init__(self, lm, settings) -> None:
        self.lm, self.settings = lm, settings
        self.batch: RowBatch | None = None
        self._real: dict[int, int] | None = None  # real positions per row, this step
        self.per_token = kv_cache_bytes(lm.info.layers, lm.info.kv_heads, lm.info.head_dim,
                                        lm.bytes_per_value, tokens=1)

    def check_fits(self, prompt_tokens: int, max_new_tokens: int) -> None:
        """Any single request is admitted alone (the cap only limits who joins a batch)."""

    def admit(self, req, running: list, newcomers: list) -> bool:
        """A row while the worst case (every row at prompt + max new tokens) fits the cap."""
        group = running + newcomers + [req]
        width = max(len(r.prompt_ids) + r.max_new_tokens for r in group)
        return not (running or newcomers) or (
            len(group) * width * self.per_token <= self.settings.server_cache_mb * 2**20)

    def prefill(self, reqs: list) -> tuple[torch.Tensor, list[int]]:
        prompts = [_tokens_of(r) for r in reqs]
        new, logits = RowBatch.prefill_logits(self.lm, [r.rid for r in reqs], prompts)
        self.batch = new if self.batch is None else self.batch.join(new)
        self._real = None
        return logits, [len(p) for p in prompts]

    def forward_seconds(self) -> None:
        """Not split: a padded pass's cache copies count as its forward pass."""
        return None

    def make_room(self) -> list[int]:
        return []  # the worst case was reserved at admission

    def decode(self) -> tuple[list[int], torch.Tensor]:
        self._real = None
        return list(self.batch.rows), self.batch.decode_logits(self.lm)  # [B, V]

    def set_token(self, rid: int, token: int) -> None:
        self.batch.next_token[self.batch.rows.index(rid)] = token

    def drop(self, rids: list[int]) -> None:
        if self.batch is None or not rids:
            return
        gone = set(rids)
        keep = [i for i, rid in enumerate(self.batch.rows) if rid not in gone]
        self.batch = self.batch.keep(keep) if keep else None
        self._real = None

    def cache_tokens(self, rid: int) -> int:
        if self._real is None:  # one op for every row, once per step
            self._real = dict(zip(self.batch.rows, self.batch.mask.sum(-1).tolist()))
        return int(self._real[rid])

    def row_bytes(self, rid: int) -> int:
        return self.cache_bytes() // max(self.batch.size, 1) if self.batch else 0

    def cache_bytes(self) -> int:
        return cache_tensor_bytes(self.batch.cache) if self.batch else 0

    def pool_stats(self) -> PoolStats | None:
        return None

    def clear(self) -> None:
        self.batch, self._real = None, None


def make_rows(lm, settings) -> PagedRows | PaddedRows:
    """The layout `settings.server_kv` names ("paged" or "padded")."""
    return PaddedRows(lm, settings) if settings.server_kv == "padded" else PagedRows(lm, settings)
