"""Lesson 6: what a precision mode costs in quality and buys in speed, measured against fp32.

Quality: agreement with fp32 reading the same text (prompt + fp32's answer, "teacher forcing"),
top-1 and KL, also where fp32 is not near a tie; and perplexity. Speed: the mode and float32
decode the same prompt taking turns step by step, so another program slows both alike; the
mode's tokens/s is held to bandwidth ÷ its bytes per token (float32 runs too close to it).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from transformers import DynamicCache

from ..generation import decode_step, forward, prefill
from ..thread_choice import fastest_threads, num_threads
from ..timing import stopwatch
from . import WARM_UP_PASSES, WARM_UP_TOKENS, noise, roofline
from .noise import Robust, paired_ratio, running_median
from .roofline import ceiling_tokens_per_s, measure_read_bandwidth

NEAR_TIE = 0.05  # fp32 top-1 minus top-2 probability below this: a near-tie
TEXT_PATH = Path(__file__).resolve().parents[2] / "assets" / "perplexity_text.txt"


@dataclass(frozen=True)
class Reference:  # fp32's answers that every mode is compared with
    prompt_ids: tuple[int, ...]
    greedy: roofline.GreedyRun
    logprobs: torch.Tensor  # [n, V] teacher-forced next-token log-probabilities


@dataclass(frozen=True)
class ModeReport:
    key: str
    label: str
    kernel: str
    head_treatment: str
    weight_bytes: int
    bytes_per_token: int
    ratio_to_fp32: float
    prompt_tokens: int
    prefill_seconds: float  # the prompt
    decode_tokens_per_s: float
    text_tokens: int
    text_prefill_seconds: float  # the perplexity text, one forward pass
    token_ids: tuple[int, ...]
    pieces: tuple[str, ...]
    top1_agreement: float  # 0..1, all positions
    top1_decided: float  # 0..1, positions where fp32 was not near a tie
    decided_positions: int
    kl_mean: float  # nats, KL(fp32 || mode), averaged over positions
    perplexity: float


def load_perplexity_text() -> str:
    return TEXT_PATH.read_text(encoding="utf-8").strip()


@torch.inference_mode()
def teacher_forced_logprobs(model, prompt_ids: list[int], continuation: list[int],
                            device: torch.device) -> torch.Tensor:
    """Log-probs [n, V] of the next token at each position of `continuation`, read whole."""
    n = len(continuation)
    x = torch.tensor([list(prompt_ids) + list(continuation[:-1])], device=device)  # [1, P+n-1]
    logits = model(input_ids=x, use_cache=False, logits_to_keep=n).logits[0]  # [n, V]
    return torch.log_softmax(logits.float(), dim=-1)


def agreement_and_kl(ref_logprobs: torch.Tensor, logprobs: torch.Tensor) -> tuple[float, float]:
    """(share of positions with the same top-1 token, mean KL(ref || mode) in nats)."""
    top1 = (ref_logprobs.argmax(-1) == logprobs.argmax(-1)).float().mean().item()
    kl = (ref_logprobs.exp() * (ref_logprobs - logprobs)).sum(-1).clamp(min=0).mean().item()
    return top1, kl


def decided_agreement(ref_logprobs: torch.Tensor, logprobs: torch.Tensor,
                      near_tie: float = NEAR_TIE) -> tuple[float, int]:
    """(top-1 agreement where fp32's top-1 leads its top-2 by >= near_tie, how many such)."""
    top2 = ref_logprobs.exp().topk(2, dim=-1).values  # [n, 2]
    decided = (top2[:, 0] - top2[:, 1]) >= near_tie  # [n]
    same = ref_logprobs.argmax(-1) == logprobs.argmax(-1)
    count = int(decided.sum())
    return (float(same[decided].float().mean()) if count else 1.0), count


@torch.inference_mode()
def perplexity(model, text_ids: list[int], device: torch.device) -> tuple[float, float]:
    """(perplexity, seconds of the one forward pass) over `text_ids`: a prefill of T tokens."""
    x = torch.tensor([list(text_ids)], device=device)  # [1, T]
    with stopwatch(device) as t:
        logits = model(input_ids=x, use_cache=False).logits[0, :-1]  # [T-1, V]
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, x[0, 1:, None]).mean()
    return float(torch.exp(nll)), t[0]


@dataclass(frozen=True)
class CompareProgress:
    done: int  # decode steps timed so far
    total: int  # decode steps to time
    report: ModeReport | None = None
    reference: Reference | None = None  # float32's last item: the run it measured


def compare_steps(built, tokenizer, prompt_ids: list[int], n: int, text_ids: list[int],
                  device: torch.device, reference: Reference | None = None
                  ) -> Iterator[CompareProgress]:
    """Measure one `BuiltMode` (a warm-up, then a timed greedy run, yielding after each step);
    the last item has the report. Without a `reference` (float32), it carries this run as one."""
    prompt = list(prompt_ids)
    roofline.greedy_run(built.model, prompt, 2, device)  # untimed warm-up: first calls allocate
    yield CompareProgress(0, n - 1)
    for own in roofline.greedy_steps(built.model, prompt, n, device):
        yield CompareProgress(len(own.step_seconds), n - 1)
    targets = reference.greedy.token_ids if reference else own.token_ids
    logprobs = teacher_forced_logprobs(built.model, prompt, list(targets), device)
    made = None if reference else Reference(tuple(prompt), own, logprobs)
    ref = reference or made
    top1, kl = agreement_and_kl(ref.logprobs, logprobs)
    decided, n_decided = decided_agreement(ref.logprobs, logprobs)
    ppl, text_seconds = perplexity(built.model, text_ids, device)
    report = ModeReport(
        key=built.mode.key, label=built.mode.label, kernel=built.kernel,
        head_treatment=built.head_treatment, weight_bytes=built.weight_bytes,
        bytes_per_token=built.bytes_per_token, ratio_to_fp32=built.ratio_to_fp32,
        prompt_tokens=len(prompt), prefill_seconds=own.prefill_seconds,
        decode_tokens_per_s=own.decode_tokens_per_s, text_tokens=len(text_ids),
        text_prefill_seconds=text_seconds, token_ids=own.token_ids,
        pieces=tuple(tokenizer.decode([i]) for i in own.token_ids),
        top1_agreement=top1, top1_decided=decided, decided_positions=n_decided, kl_mean=kl,
        perplexity=ppl)
    yield CompareProgress(n - 1, n - 1, report, made)


def quant_tokens(prompt: int, new: int, modes: int, text: int) -> int:
    """Tokens `compare_steps` feeds for `modes` modes (float32 among them): per mode a warm-up
    run of 2, its greedy run of `new`, its teacher-forced pass and the `text` tokens; with
    more than float32, the headline's race against float32 (`speed_race_tokens`)."""
    race = speed_race_tokens(prompt, new) if modes > 1 else 0
    return modes * (3 * prompt + 2 * new - 1 + text) + race


@dataclass(frozen=True)
class SpeedRace:
    key: str  # the mode raced against float32 ("int4")
    base_seconds: tuple[float, ...]  # float32's decode steps, in order (the first is warm-up)
    mode_seconds: tuple[float, ...]  # the mode's, each timed right after float32's
    robust: Robust | None  # the mode's tokens/s ÷ float32's, paired (None: under 2 steps)
    ceilings: tuple[float, float] = (0.0, 0.0)  # tokens/s bandwidth allows: fp32, mode (0: none)
    impossible: str | None = None  # why the figure cannot be right (None: it can)
    attempt: int = 0  # 1: the race run again after an impossible first one
    threads: int = 0  # CPU threads both lanes ran at

    @property
    def speedup(self) -> float:
        """The mode's decode speed in times float32's (the robust paired estimate)."""
        return self.robust.estimate if self.robust is not None else 0.0

    @property
    def tokens_per_s(self) -> tuple[float, float]:
        """(float32's, the mode's) tokens/s, smoothed as `paired_ratio` does (they divide to it)."""
        return tuple(len(s) / sum(running_median(s)) if s else 0.0
                     for s in (self.base_seconds[1:], self.mode_seconds[1:]))


def judged(key: str, base: list[float], mode: list[float], ceilings: tuple[float, float],
           attempt: int = 0, threads: int = 0) -> SpeedRace:
    """The race's record from its step times, the mode's speed held to `ceilings[1]`."""
    paired = paired_ratio(base[1:], mode[1:]) if min(len(base), len(mode)) > 1 else None
    race = SpeedRace(key, tuple(base), tuple(mode), paired, ceilings, None, attempt, threads)
    return replace(race, impossible=noise.bandwidth(race.tokens_per_s[1], ceilings[1])
                   if paired else None)


@torch.inference_mode()
def speed_race(key: str, base_model, mode_model, prompt_ids: list[int], n: int, device,
               ceilings: tuple[float, float] = (0.0, 0.0), attempt: int = 0
               ) -> Iterator[int | SpeedRace]:
    """`n` timed decode steps each, float32's then the mode's; the steps done after each pair
    (the server may step there), then the race."""
    warm = torch.tensor([list(prompt_ids[:WARM_UP_TOKENS])], device=device)
    forward(mode_model, warm, DynamicCache())  # the mode's warm-up, untimed
    threads = fastest_threads(lambda: forward(base_model, warm, DynamicCache()), device,
                              runs=WARM_UP_PASSES)  # float32's warm-ups pick the thread count
    x = torch.tensor([list(prompt_ids)], device=device)  # [1, P]
    lanes = []
    for model in (base_model, mode_model):
        with num_threads(threads):
            pre = prefill(model, x)
        lanes.append([model, pre.cache, pre.logits.argmax(-1), []])  # token: [1]
    for i in range(n):
        for lane in lanes:
            model, cache, token, times = lane
            with num_threads(threads), stopwatch(device) as t:
                lane[2] = decode_step(model, token, cache).argmax(-1)  # [1]
            times.append(t[0])
        yield i + 1
    yield judged(key, lanes[0][3], lanes[1][3], ceilings, attempt, threads)


def checked_speed_race(key: str, base_model, mode_model, prompt_ids: list[int], n: int, device,
                       bytes_per_token: tuple[int, int] = (0, 0), bandwidth_gbs: float = 0.0
                       ) -> Iterator[int | SpeedRace]:
    """`speed_race` with each lane's ceiling (`bandwidth_gbs` ÷ its `bytes_per_token`), run once
    more when impossible, the bandwidth measured again first (the higher counts)."""
    for attempt in (0, 1):
        if attempt and bandwidth_gbs:
            bandwidth_gbs = max(bandwidth_gbs, measure_read_bandwidth(device))
        ceilings = tuple(ceiling_tokens_per_s(bandwidth_gbs, b) for b in bytes_per_token)
        for item in speed_race(key, base_model, mode_model, prompt_ids, n, device, ceilings,
                               attempt):
            yield item
        if item.impossible is None:
            return


def speed_race_tokens(prompt: int, new: int) -> int:
    """Tokens `speed_race` feeds: warm-ups of at most 8 (float32's `WARM_UP_PASSES`, the mode's
    one), then per model the prompt's prefill and `new` decode steps."""
    return (WARM_UP_PASSES + 1) * min(prompt, WARM_UP_TOKENS) + 2 * (prompt + new)
