"""How the next token is chosen from the model's scores (logits), one per vocabulary entry.

Softmax turns scores into probabilities; then:
- greedy (temperature 0) takes the most likely token: the same text every run;
- temperature T divides the scores by T first: T < 1 sharpens, T > 1 flattens;
- top-k keeps only the k most likely tokens; top-p keeps the smallest set whose
  probabilities add up to p; the survivors are renormalised and one is drawn at random.
A seed fixes the random draws, so a sampled run can be repeated exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import LIMITS


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 means no top-k cut
    top_p: float = 1.0  # 1 means no top-p cut
    seed: int | None = 0

    def __post_init__(self) -> None:
        LIMITS.temperature.check("Temperature", self.temperature)
        LIMITS.top_k.check("Top-k", self.top_k)
        LIMITS.top_p.check("Top-p", self.top_p)
        if self.seed is not None:
            LIMITS.seed.check("Seed", self.seed)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def describe(self) -> str:
        if self.greedy:
            return "greedy"
        parts = [f"T={self.temperature:g}"]
        if self.top_k:
            parts.append(f"top-k={self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top-p={self.top_p:g}")
        return "sampled (" + ", ".join(parts) + ")"


def shaped_probabilities(logits: torch.Tensor, s: SamplingSettings) -> torch.Tensor:
    """logits [..., V] -> probabilities [..., V] after temperature, top-k and top-p (greedy:
    the plain softmax, so the learner still sees the distribution)."""
    logits = logits.float()
    if s.greedy:
        return torch.softmax(logits, dim=-1)
    logits = logits / s.temperature
    if s.top_k and s.top_k < logits.shape[-1]:
        kth = torch.topk(logits, s.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if s.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass strictly above each token
        drop_sorted = before >= s.top_p  # always keeps the top token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def choose(logits: torch.Tensor, s: SamplingSettings, generator: torch.Generator | None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [B, V] -> (token ids [B], shaped probabilities [B, V])."""
    probs = shaped_probabilities(logits, s)
    if s.greedy:
        return torch.argmax(logits, dim=-1), probs
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1), probs


def make_generator(s: SamplingSettings, device: torch.device) -> torch.Generator | None:
    """A seeded random generator for sampling (None for greedy, which draws nothing)."""
    if s.greedy:
        return None
    seed = int(s.seed) if s.seed is not None else torch.seed()
    return torch.Generator(device=device).manual_seed(seed)
