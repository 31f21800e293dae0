"""Lesson 5 (engine side): decode batches whose rows join and leave between steps.

`RowBatch` (the scheduler experiment's) LEFT-pads prompts to one length: every row's newest
token sits in the last column, the mask keeps padding out of attention, though padding still
costs work (`padding_waste`). The server's `PagedBatch` keeps its rows' keys and values in one
pool of blocks (PagedAttention; `block_pool.py` the books, `paged_cache.py` the tensors): a
request joins with the blocks its prompt needs NOW, its cached prefix mapped, and `make_room`
preempts the NEWEST row when the pool runs dry. Each row keeps ONE count of progress,
`computed`; joining and leaving move block ids, never a cache tensor.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from transformers import DynamicCache

from . import compute_thread
from .block_pool import BlockPool, PoolCounts, blocks_for
from .cascade_attention import CascadePlan, use_cascade
from .config import LIMITS, Settings
from .errors import PoolFullError
from .generation import decode_step, prefill
from .kv_cache import bytes_per_token, cache_layers, cache_length, kv_cache_bytes
from .paged_cache import PagedKV, paged_forward
from .timing import stopwatch


@dataclass(frozen=True)
class RequestBlocks:
    """One request in the pool."""

    rid: int
    tokens: int  # positions whose keys/values are in the pool
    block_table: tuple[int, ...]  # pool block ids, in order of position
    shared_blocks: int  # blocks of its table that another request holds too
    prefix_hit_tokens: int  # prompt tokens mapped from cached blocks when it was admitted


@dataclass(frozen=True)
class PoolStats(PoolCounts):
    """The block pool at one moment, with the byte figures of the batch now."""

    block_tokens: int  # positions per block
    block_bytes: int  # bytes per block (keys + values, all layers)
    requests: tuple[RequestBlocks, ...]  # oldest admitted first
    idle_blocks: tuple[int, ...]  # ids of the cached-idle blocks, least recently used first
    real_bytes: int  # bytes of the positions the rows hold, each row's own (no sharing)
    filled_bytes: int  # bytes of the positions filled in the rows' blocks (shared ones once)
    padded_bytes: int  # bytes a left-padded tensor would hold: rows × longest row
    paged_bytes: int  # bytes of the blocks the rows hold (shared blocks once)
    prefix_hit_tokens: int  # prompt tokens mapped from the cache, since start
    prefill_tokens: int  # prompt tokens computed by prefill, since start
    preemptions: int  # rows preempted for room, since start
    evictions: int  # idle cached blocks evicted for room, since start

    @staticmethod
    def _waste(real: int, held: int) -> float:
        return 100.0 * (held - real) / held if held else 0.0

    @property
    def waste_padded_pct(self) -> float:
        return self._waste(self.real_bytes, self.padded_bytes)

    @property
    def waste_paged_pct(self) -> float:
        return self._waste(self.filled_bytes, self.paged_bytes)

    @property
    def prefill_skipped_pct(self) -> float:
        """Share of the prompt tokens admitted that prefix caching spared the model."""
        done = self.prefix_hit_tokens + self.prefill_tokens
        return 100.0 * self.prefix_hit_tokens / done if done else 0.0


def length_groups(lengths: dict[int, int], slack: float = 0.25) -> list[list[int]]:
    """Ids grouped for padded passes, longest first: a group grows while its padded size
    (rows × longest) stays within (1 + slack) × its real tokens.

    >>> length_groups({0: 40, 1: 1000, 2: 41, 3: 990})
    [[1, 3], [2, 0]]
    """
    groups: list[list[int]] = []
    total = 0
    for rid in sorted(lengths, key=lambda r: -lengths[r]):
        g = groups[-1] if groups else None
        if g and (len(g) + 1) * lengths[g[0]] <= (1 + slack) * (total + lengths[rid]):
            g.append(rid)
            total += lengths[rid]
        else:
            groups.append([rid])
            total = lengths[rid]
    return groups


@dataclass
class PagedRow:
    rid: int
    tokens: list[int]  # prompt (+ tokens generated before a preemption) + tokens generated
    computed: int  # positions whose keys/values are in the pool (the one progress count)
    prefix_hit_tokens: int  # of them, mapped from cached blocks at admission
    admitted_tokens: int  # len(tokens) at admission: its prefill is done once computed

    @property
    def decoding(self) -> bool:
        """Its admitted tokens are all in the pool: it takes one token per step."""
        return self.computed >= self.admitted_tokens

    @property
    def pending(self) -> int:
        """Tokens not yet in the pool (its prompt's rest; 1 for a decoding row)."""
        return len(self.tokens) - self.computed


class PagedBatch:
    """Rows decoding together through one block pool. `rows` keeps admission order."""

    @staticmethod
    def for_server(lm, s: Settings) -> PagedBatch:
        """`server_pool_blocks` blocks, or (0) as many as `server_cache_mb` holds."""
        info = lm.info
        per_block = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim,
                                   lm.bytes_per_value, tokens=s.block_tokens)
        blocks = s.server_pool_blocks or max(1, s.server_cache_mb * 2**20 // per_block)
        batch = PagedBatch(lm, blocks, s.block_tokens, s.prefix_cache_blocks, s.cascade_attention)
        compute_thread.idle.also(batch.give_back_free)
        return batch

    def __init__(self, lm, num_blocks: int, block_tokens: int, idle_blocks: int | None = None,
                 cascade: bool = LIMITS.cascade_attention) -> None:
        info = lm.info
        self.lm = lm
        self.pool = BlockPool(num_blocks, block_tokens, max_idle=idle_blocks)
        self.block_tokens = block_tokens  # positions per block
        self.kv = PagedKV.allocate(info.layers, info.kv_heads, info.head_dim, num_blocks,
                                   block_tokens, lm.dtype, lm.device)
        self.token_bytes = bytes_per_token(info.layers, info.kv_heads, info.head_dim,
                                           lm.bytes_per_value)
        self.rows: dict[int, PagedRow] = {}
        self._touched: set[int] = set()  # blocks zeroed once (their memory is real now)
        self.prefix_hit_tokens = self.prefill_tokens = self.preemptions = 0
        self.forward_s = 0.0  # synced seconds in the model since start (callers read deltas)
        self.cascade = cascade  # decode passes read a shared prefix once, not once per row

    def fits_ever(self, tokens: int) -> bool:
        """Could a request of `tokens` positions (prompt + max new tokens) ever run here?"""
        return blocks_for(tokens, self.block_tokens) <= self.pool.num_blocks

    def computing_now(self, tokens: list[int]) -> bool:
        """Is another row computing the first uncached full block of `tokens` now (wait, map it)?"""
        bt, hits = self.block_tokens, self.pool.cached_prefix(tokens)
        end = (len(hits) + 1) * bt  # the end of the first block not cached yet
        if end > len(tokens) - 1:  # no full block left to share (as cached_prefix)
            return False
        # equal keys mean equal tokens from position 0 (chained hashes): compare the tokens
        return any(not row.decoding and row.computed < end <= len(row.tokens)
                   and row.tokens[:end] == tokens[:end] for row in self.rows.values())

    def admit(self, rid: int, tokens: list[int]) -> bool:
        """Map the cached prefix, take the blocks the rest needs now; False when no room."""
        hits = self.pool.cached_prefix(tokens)
        if not self.pool.can_allocate(len(tokens), hits):
            return False
        self.pool.allocate(rid, tokens, hits)
        hit_tokens = len(hits) * self.block_tokens
        self.rows[rid] = PagedRow(rid, list(tokens), hit_tokens, hit_tokens, len(tokens))
        self.prefix_hit_tokens += hit_tokens
        return True

    def feed(self, chunks: dict[int, int]) -> torch.Tensor:
        """The next `n` uncached tokens of each row {rid: n} (a prompt's chunk, or a decoding
        row's 1) -> logits [len(chunks), V] of each chunk's last position; rows of similar
        chunk length share a left-padded pass."""
        self.prefill_tokens += sum(n for r, n in chunks.items() if not self.rows[r].decoding)
        out: dict[int, torch.Tensor] = {}
        for group in length_groups(chunks):
            out.update(zip(group, self._pass([self.rows[r] for r in group],
                                             [chunks[r] for r in group])))
        return torch.stack([out[r] for r in chunks])

    def _pass(self, rows: list[PagedRow], counts: list[int]) -> torch.Tensor:
        """Each row's next `counts[b]` tokens in one left-padded pass (blocks keyed) -> [B, V]."""
        new = [row.tokens[row.computed:row.computed + n] for row, n in zip(rows, counts)]
        q = max(len(n) for n in new)
        ids = torch.tensor([[0] * (q - len(n)) + n for n in new])  # [B, Q] left-padded
        pos = torch.tensor([[-1] * (q - len(n)) + list(range(row.computed, row.computed + len(n)))
                            for row, n in zip(rows, new)])  # [B, Q] padding: -1
        logits = self._forward(rows, ids, pos)  # [B, V]
        bt = self.block_tokens
        for row, n in zip(rows, new):
            row.computed += len(n)
            if row.computed // bt > (row.computed - len(n)) // bt:  # a block filled up
                self.pool.commit_full(row.rid, row.tokens[:row.computed])
        return logits

    def append(self, rid: int, token: int) -> None:
        self.rows[rid].tokens.append(token)  # fed, its keys/values stored, at the next step

    def make_room(self) -> list[int]:
        """A block for every row whose next position starts one; preempt the newest rows
        while the pool cannot give one. -> the preempted request ids, newest first."""
        preempted: list[int] = []
        for rid in list(self.rows):
            while rid in self.rows:
                try:
                    self.pool.grow(rid, self.rows[rid].computed + 1)
                    break
                except PoolFullError:
                    victim = next(reversed(self.rows))  # the newest row (maybe this one)
                    self.release(victim)
                    self.preemptions += 1
                    preempted.append(victim)
        return preempted

    def release(self, rid: int) -> None:
        """Finished, stopped or preempted: every block goes back to the pool."""
        self.rows.pop(rid, None)
        self.pool.release(rid)

    def give_back_free(self) -> int:
        """The free blocks' memory back to the system -> bytes (they read as zeros after)."""
        return self.kv.release_free(list(self.pool.free))

    def _forward(self, rows: list[PagedRow], ids: torch.Tensor, pos: torch.Tensor
                 ) -> torch.Tensor:
        fresh = sorted(set(self.pool.taken) - self._touched)  # blocks never used before
        self.pool.taken.clear()
        self._touched.update(fresh)
        self.kv.zero_blocks(fresh)
        tables = pad_sequence([torch.tensor(self.pool.tables[row.rid]) for row in rows],
                              batch_first=True, padding_value=self.kv.scratch_block)  # [B, NB]
        dev = self.lm.device
        plan = None  # decode passes whose rows share a long prefix read it once (cascade)
        if self.cascade and ids.shape[1] == 1 and use_cascade(self.lm.model):
            plan = CascadePlan.build(self.kv, pos, tables)
            plan = plan if 2 * plan.read_positions <= plan.gathered_positions else None
        with stopwatch(dev) as t:
            logits = paged_forward(self.lm.model, self.kv, ids.to(dev), pos.to(dev),
                                   tables.to(dev), plan)
        self.forward_s += t[0]
        return logits

    def stats(self) -> PoolStats:
        pool = self.pool
        reqs, filled = [], {}
        for row in self.rows.values():
            table = pool.tables[row.rid]
            for i, b in enumerate(table):  # positions filled in each distinct block
                filled[b] = max(filled.get(b, 0), min(max(row.computed - i * self.block_tokens,
                                                          0), self.block_tokens))
            reqs.append(RequestBlocks(row.rid, row.computed, tuple(table),
                                      sum(1 for b in table if pool.ref[b] > 1),
                                      row.prefix_hit_tokens))
        longest = max((row.computed for row in self.rows.values()), default=0)
        return PoolStats(
            **vars(pool.counts()), block_tokens=self.block_tokens,
            block_bytes=self.kv.block_bytes(), requests=tuple(reqs), idle_blocks=tuple(pool.idle),
            real_bytes=sum(row.computed for row in self.rows.values()) * self.token_bytes,
            filled_bytes=sum(filled.values()) * self.token_bytes,
            padded_bytes=len(self.rows) * longest * self.token_bytes,
            paged_bytes=len(filled) * self.kv.block_bytes(),
            prefix_hit_tokens=self.prefix_hit_tokens, prefill_tokens=self.prefill_tokens,
            preemptions=self.preemptions, evictions=pool.evictions)


def left_pad(prompts: list[list[int]], pad_id: int, device: torch.device | str = "cpu"
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (input_ids [B, S], attention_mask [B, S]), padding on the left."""
    rows = [torch.tensor(p, dtype=torch.long) for p in prompts]
    ids = pad_sequence(rows, batch_first=True, padding_value=pad_id, padding_side="left")
    mask = pad_sequence([torch.ones_like(r) for r in rows], batch_first=True, padding_side="left")
    return ids.to(device), mask.to(device)


def padding_waste(prompts: list[list[int]]) -> tuple[int, int]:
    """(padded positions, total positions) when these prompts share one prefill."""
    width = max(len(p) for p in prompts)
    total = width * len(prompts)
    return total - sum(len(p) for p in prompts), total


@dataclass
class RowBatch:
    """Rows decoding together. `rows[i]` names the request in row i (a request id)."""

    rows: list[int]
    cache: DynamicCache  # keys/values: [B, H_kv, S, D], left-padded
    mask: torch.Tensor  # [B, S] 1 = real position, 0 = padding
    next_token: torch.Tensor  # [B] the token each row feeds at its next decode step

    @property
    def width(self) -> int:
        """Positions held per row, padding included (the cache's sequence axis)."""
        return cache_length(self.cache)

    @staticmethod
    def prefill(lm, rows: list[int], prompts: list[list[int]]) -> tuple[RowBatch, float]:
        """Prompts -> (a batch of their caches and greedy first tokens, seconds): one pass."""
        pad = lm.tokenizer.pad_token_id
        pad = lm.tokenizer.eos_token_id if pad is None else pad
        with stopwatch(lm.device) as t:
            ids, mask = left_pad(prompts, pad, lm.device)  # [B, S], [B, S]
            first = prefill(lm.model, ids, mask)
            batch = RowBatch(list(rows), first.cache, mask, first.logits.argmax(-1))
        return batch, t[0]

    def decode(self, lm) -> tuple[list[int], float]:
        """One greedy step for every row -> (each row's new token, synced seconds)."""
        with stopwatch(lm.device) as t:
            self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
            logits = decode_step(lm.model, self.next_token, self.cache, self.mask)  # [B, V]
            self.next_token = logits.argmax(-1)  # [B]
        return self.next_token.tolist(), t[0]

    @torch.inference_mode()
    def join(self, other: RowBatch) -> RowBatch:
        """Both batches' rows in one: the shorter cache padded on the left, rows stacked."""
        width = max(self.width, other.width)
        layers = []
        for (ka, va), (kb, vb) in zip(cache_layers(self.cache), cache_layers(other.cache)):
            layers.append((torch.cat([_pad_left(ka, width, -2), _pad_left(kb, width, -2)]),
                           torch.cat([_pad_left(va, width, -2), _pad_left(vb, width, -2)])))
        mask = torch.cat([_pad_left(self.mask, width, -1), _pad_left(other.mask, width, -1)])
        token = torch.cat([self.next_token, other.next_token])
        return RowBatch(self.rows + other.rows, DynamicCache(ddp_cache_data=layers), mask, token)

    @torch.inference_mode()
    def keep(self, keep_rows: list[int]) -> RowBatch:
        """Only the rows at these indices, and without columns that are padding in all of them."""
        index = torch.tensor(keep_rows, dtype=torch.long, device=self.mask.device)
        mask = self.mask.index_select(0, index)  # [B', S]
        real_cols = mask.any(dim=0).nonzero()
        start = int(real_cols[0]) if len(real_cols) else mask.shape[1]
        layers = [(k.index_select(0, index)[:, :, start:, :],
                   v.index_select(0, index)[:, :, start:, :]) for k, v in cache_layers(self.cache)]
        return RowBatch([self.rows[i] for i in keep_rows], DynamicCache(ddp_cache_data=layers),
                        mask[:, start:], self.next_token.index_select(0, index))


def _pad_left(x: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """Zeros on the left of axis `dim` (-2: keys/values [B, H, S, D]; -1: a mask [B, S])."""
    return F.pad(x, (0, 0) * (-1 - dim) + (width - x.shape[dim], 0))
