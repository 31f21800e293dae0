"""Speculative decoding's acceptance rule: which of a draft's guesses the model keeps.

A draft proposes k tokens d1..dk; one forward pass of the model gives its own distribution
p_i for every position (the row before each guess, plus one more after the last). Then:

- **greedy**: keep guesses while they equal the model's own argmax; at the first mismatch the
  model's argmax replaces it. The output is exactly what plain greedy decoding makes.
- **sampled** (Leviathan et al. 2023, Chen et al. 2023): keep d_i with probability
  min(1, p_i(d_i) / q_i(d_i)), where q_i is the draft's distribution; at the first rejection draw
  from the leftover mass, normalised max(0, p_i - q_i). Each output token is then distributed
  exactly as p_i, whatever the draft: a bad draft only costs speed, never quality.
  A deterministic draft (prompt lookup) is a one-hot q: keep d_i with probability p_i(d_i), else
  draw from p_i with d_i removed.
If every guess is kept, the model's distribution after the last one gives one more token free.

Pure functions on hand-made or real tensors; the loop in `speculative.py` calls them.

>>> accept_greedy(picks=[5, 7, 9], draft_ids=[5, 8])  # kept 5; 8 rejected, the model says 7
(1, 7)
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def accept_greedy(picks: Sequence[int], draft_ids: Sequence[int]) -> tuple[int, int]:
    """picks: the model's argmax at each of the k + 1 positions; draft_ids: the k guesses.
    -> (guesses kept, the model's own token after them)."""
    kept = 0
    while kept < len(draft_ids) and int(picks[kept]) == int(draft_ids[kept]):
        kept += 1
    return kept, int(picks[kept])


def residual(p: torch.Tensor, q: torch.Tensor | None, guess: int) -> torch.Tensor:
    """The distribution to draw from after rejecting `guess`: normalised max(0, p - q) [V].
    q None means a one-hot draft on `guess`. Where nothing is left (p <= q everywhere, possible
    only by rounding), fall back to p itself."""
    if q is None:
        rest = p.clone()
        rest[guess] = 0.0
    else:
        rest = (p - q).clamp(min=0.0)
    total = rest.sum()
    return rest / total if float(total) > 0 else p


def accept_sampled(p: torch.Tensor, draft_ids: Sequence[int], q: torch.Tensor | None,
                   generator: torch.Generator | None) -> tuple[int, int]:
    """p [k + 1, V] the model's (shaped) probabilities, q [k, V] the draft's, or None for a
    deterministic draft. -> (guesses kept, the model's token after them).

    One uniform draw per guess examined, and one draw of a token, all from `generator`, so a
    seeded run repeats exactly."""
    device = p.device
    for i, guess in enumerate(int(d) for d in draft_ids):
        q_guess = 1.0 if q is None else float(q[i, guess])
        u = float(torch.rand((), generator=generator, device=device))
        if q_guess > 0 and u * q_guess < float(p[i, guess]):  # u < p / q, i.e. min(1, p / q)
            continue
        rest = residual(p[i], None if q is None else q[i], guess)
        return i, int(torch.multinomial(rest, 1, generator=generator))
    k = len(draft_ids)
    return k, int(torch.multinomial(p[k], 1, generator=generator))
