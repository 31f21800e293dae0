"""Lesson 5 (engine side): cascade attention, a shared prefix read once per step, not per row.

The paged pass (`paged_cache.py`) gathers each row's blocks: thirty rows on one handout read
the SAME blocks thirty times per layer per step. Cascade attention (FlashInfer's shared-prefix
batch decoding) splits each row's keys in two: the PREFIX its group shares, read once for the
group (its queries stacked as extra heads), and the row's OWN blocks after it. Each part gives
a partial softmax with its log-sum-exp `lse = log Σ e^{s_j}`, and the two merge exactly:
`o = (e^{lse_a} o_a + e^{lse_b} o_b) / (e^{lse_a} + e^{lse_b})` (`merge_states`).
Worked example, one query, keys 0, 1, 2 with values 10, 20, 30, split after the second key:

>>> import torch
>>> q = torch.tensor([[[[1.0]]]])  # [B=1, H=1, Q=1, D=1]
>>> k = torch.tensor([[[[0.0], [1.0], [2.0]]]])  # [B, H_kv=1, S=3, D]
>>> v = torch.tensor([[[[10.0], [20.0], [30.0]]]])  # [B, H_kv, S, D]
>>> whole, _ = partial_attention(q, k, v, None, 1.0)
>>> a = partial_attention(q, k[:, :, :2], v[:, :, :2], None, 1.0)  # (1·10 + e·20) / (1 + e)
>>> b = partial_attention(q, k[:, :, 2:], v[:, :, 2:], None, 1.0)  # 30 alone
>>> round(a[0].item(), 3), round(a[1].item(), 3), b[0].item(), b[1].item()
(17.311, 1.313, 30.0, 2.0)
>>> merged, _ = merge_states(*a, *b)
>>> round(merged.item(), 3), round(whole.item(), 3)
(25.752, 25.752)

A group's prefix (`plan_groups`) stops before its rows' first query, so it needs no causal
mask. The batch takes the cascade for decode passes where it at least halves the key positions
read. The model reaches this file through transformers' `AttentionInterface` ("paged_cascade").
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

NAME = "paged_cascade"


def partial_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      mask: torch.Tensor | None, scale: float
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention over some keys, with its log-sum-exp. q [B, H, Q, D]; k, v
    [B, H_kv, S, D] (H a multiple of H_kv: GQA); mask [B, 1, Q, S] (True = visible) or None
    -> o [B, H, Q, D] float32, lse [B, H, Q] float32 (-inf where a query sees no key)."""
    b, h, nq, d = q.shape
    h_kv = k.shape[1]
    qg = (q * scale).reshape(b, h_kv, h // h_kv * nq, d)  # [B, H_kv, rep*Q, D]
    s = torch.matmul(qg, k.transpose(-1, -2)).float()  # [B, H_kv, rep*Q, S]
    if mask is not None:
        s = s.view(b, h_kv, h // h_kv, nq, -1)  # [B, H_kv, rep, Q, S]
        s = s.masked_fill(~mask[:, :, None], float("-inf")).view(b, h_kv, h // h_kv * nq, -1)
    m = s.amax(-1, keepdim=True)  # [B, H_kv, rep*Q, 1]
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # a query that sees nothing
    p = torch.exp(s - m)  # [B, H_kv, rep*Q, S]
    total = p.sum(-1, keepdim=True)  # [B, H_kv, rep*Q, 1]
    o = torch.matmul(p.to(v.dtype), v).float() / total.clamp_min(1e-30)  # [B, H_kv, rep*Q, D]
    lse = (m + total.log()).squeeze(-1)  # [B, H_kv, rep*Q]
    return o.view(b, h, nq, d), lse.view(b, h, nq)


def merge_states(o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor,
                 lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two partial attentions over disjoint keys (o [B, H, Q, D], lse [B, H, Q]) -> over all."""
    m = torch.maximum(lse_a, lse_b)  # [B, H, Q]
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)  # [B, H, Q] each
    total = w_a + w_b  # [B, H, Q]
    o = (o_a * w_a[..., None] + o_b * w_b[..., None]) / total.clamp_min(1e-30)[..., None]
    return o, m + total.log()


def plan_groups(tables: list[list[int]], first_block: list[int]) -> list[tuple[list[int], int]]:
    """Rows that share their first k blocks (k >= 1, two rows or more) -> [(rows, k)].
    tables: each row's block table; first_block: the block of each row's first query (a
    prefix stops before it). A row is in one group at most, the one sharing it most blocks.

    >>> plan_groups([[7, 8, 1], [7, 8, 2], [7, 3], [9, 4]], [2, 2, 1, 1])
    [([0, 1], 2)]
    >>> plan_groups([[7, 8, 1], [7, 8, 2], [7, 3]], [2, 1, 1])
    [([0, 1, 2], 1)]
    """
    heads = [t[:f] for t, f in zip(tables, first_block)]  # the blocks a prefix may take
    order = sorted(range(len(heads)), key=lambda r: heads[r])
    share = [0] * len(heads)
    for a, b in zip(order, order[1:]):  # the longest shared run is with a sorted neighbour
        n = 0
        while n < min(len(heads[a]), len(heads[b])) and heads[a][n] == heads[b][n]:
            n += 1
        share[a], share[b] = max(share[a], n), max(share[b], n)
    groups: dict[tuple[int, ...], list[int]] = {}
    for r in range(len(heads)):
        if share[r]:
            groups.setdefault(tuple(heads[r][:share[r]]), []).append(r)
    return [(rows, len(key)) for key, rows in groups.items() if len(rows) > 1]


@dataclass
class CascadePlan:
    """One pass's reads: per group the prefix blocks, per row its own blocks and their mask."""

    kv: object  # paged_cache.PagedKV: the pool the blocks point into
    own_blocks: torch.Tensor  # [B*NO] each row's blocks after its prefix (padded: scratch)
    own_mask: torch.Tensor  # [B, 1, Q, NO*bt] True = this query may read this own key
    groups: list[tuple[torch.Tensor, torch.Tensor]]  # (rows [G], prefix blocks [k]) each
    read_positions: int  # key positions read a layer: each prefix once, every row's own
    gathered_positions: int  # what the gathered path reads: rows × the longest table

    @staticmethod
    def build(kv, positions: torch.Tensor, tables: torch.Tensor) -> CascadePlan:
        """positions [B, Q] (-1: left padding), tables [B, NB] (scratch-padded), on the CPU."""
        bt, scratch, dev = kv.block_tokens, kv.scratch_block, kv.keys[0].device
        rows = [[b for b in t if b != scratch] for t in tables.tolist()]
        real = torch.where(positions >= 0, positions, positions.max() + 1)  # [B, Q]
        first = (real.amin(1) // bt).tolist()  # [B] block of each row's first query
        groups = plan_groups(rows, first)
        start = [0] * len(rows)  # prefix blocks of each row
        for members, k in groups:
            for r in members:
                start[r] = k
        own = [t[s:] for t, s in zip(rows, start)]
        width = max(len(o) for o in own)
        own_blocks = torch.tensor([o + [scratch] * (width - len(o)) for o in own])  # [B, NO]
        keys = torch.tensor(start)[:, None, None] * bt + torch.arange(width * bt)  # [B, 1, S]
        own_mask = (keys <= positions.clamp(min=0)[:, :, None])[:, None]  # [B, 1, Q, S]
        prefixes = [(torch.tensor(m, device=dev), torch.tensor(rows[m[0]][:k], device=dev))
                    for m, k in groups]
        return CascadePlan(kv, own_blocks.reshape(-1).to(dev), own_mask.to(dev), prefixes,
                           (sum(k for _, k in groups) + len(rows) * width) * bt,
                           tables.numel() * bt)

    def attend(self, query: torch.Tensor, layer: int, scale: float) -> torch.Tensor:
        """query [B, H, Q, D] -> attention output [B, H, Q, D] float32, from the pool."""
        keys, values = self.kv.keys[layer], self.kv.values[layer]  # [N, bt, H_kv, D]
        n, bt, h_kv, d = keys.shape
        b, h, nq, _ = query.shape
        own = [pool.view(n, -1).index_select(0, self.own_blocks)  # [B*NO, bt*H_kv*D]
               .view(b, -1, h_kv, d).transpose(1, 2) for pool in (keys, values)]  # [B,H_kv,S,D]
        out, lse = partial_attention(query, own[0], own[1], self.own_mask, scale)
        if not self.groups:
            return out
        pre_out = torch.zeros_like(out)  # [B, H, Q, D]
        pre_lse = torch.full_like(lse, float("-inf"))  # [B, H, Q]: no prefix, no weight
        for members, blocks in self.groups:
            pre = [pool.view(n, -1).index_select(0, blocks)  # [k, bt*H_kv*D], ONCE a group
                   .view(1, -1, h_kv, d).transpose(1, 2) for pool in (keys, values)]  # [1,H_kv,P,D]
            g = len(members)
            q = query.index_select(0, members).view(g, h_kv, h // h_kv, nq, d)  # [G,H_kv,rep,Q,D]
            q = q.transpose(0, 1).reshape(1, h_kv * g * (h // h_kv), nq, d)  # the group's rows
            o, s = partial_attention(q, pre[0], pre[1], None, scale)  # rows as heads
            o = o.view(h_kv, g, h // h_kv, nq, d).transpose(0, 1).reshape(g, h, nq, d)
            s = s.view(h_kv, g, h // h_kv, nq).transpose(0, 1).reshape(g, h, nq)
            pre_out.index_copy_(0, members, o)
            pre_lse.index_copy_(0, members, s)
        return merge_states(out, lse, pre_out, pre_lse)[0]


def cascade_attention_forward(module, query: torch.Tensor, key: torch.Tensor,
                              value: torch.Tensor, attention_mask: torch.Tensor | None,
                              scaling: float | None = None, cascade: CascadePlan | None = None,
                              **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: with a plan, query [B, H, Q, D] attends through the
    pool (holding key and value already) -> [B, Q, H, D]; without one, "sdpa"."""
    if cascade is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      scaling=scaling, **kwargs)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    out = cascade.attend(query, module.layer_idx, scale)  # [B, H, Q, D]
    return out.to(query.dtype).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, cascade_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)


def use_cascade(model) -> bool:
    """Switch `model` to "paged_cascade" if it runs "sdpa" (the same without a plan). -> False
    while it runs anything else (a lesson measuring "eager"): take the gathered path."""
    if model.config._attn_implementation == "sdpa":
        model.set_attn_implementation(NAME)
    return model.config._attn_implementation == NAME
