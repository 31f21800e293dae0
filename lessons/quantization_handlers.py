"""Lesson 6 handlers: each precision mode built (cached) and compared with float32 on one
prompt; the smallest is raced against float32 step by step, so both share the noise."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

from inference.config import LIMITS, Settings
from inference.experiments import noise, quality, quiet_reference
from inference.experiments.noise import Noise
from inference.experiments.quality import ModeReport, SpeedRace
from inference.experiments.quiet_reference import QuietFigure
from inference.experiments.roofline import machine_bandwidth
from inference.quantize import DEFAULT_MODES, MODES, build_steps, get_mode

from .common.latest import LAST_MODES, keep_latest
from .common.predictions import guess_md
from .common.prompt_input import encode_prompt

DEFAULT_PROMPT = LIMITS.default_prompt  # its float32 reference is shared by every visitor
GUESS_KEY = "int8"  # the presenter screen whose question the comparison answers
MAX_PROMPT_TOKENS = 512  # every mode prefills the prompt: keep the whole comparison short
BUILD_UPDATE_S = 0.5  # at most two progress lines a second while a mode is built


class QuantFrame(NamedTuple):
    """A progress line, and the reports so far when they changed."""

    message: str
    reports: tuple[ModeReport, ...] | None = None
    bandwidth_gbs: float | None = None  # measured read bandwidth, for the roofline
    noise: Noise | None = None  # the last frame: was the machine busy while measuring
    race: SpeedRace | None = None  # the last frame: the smallest mode raced against float32
    reference: QuietFigure | None = None  # this machine's quiet figure for that race


def default_modes(native_bf16: bool | None) -> list[str]:
    """The modes ticked at first: all on a GPU (`native_bf16` None); on a CPU float32, int8 and
    int4, plus bfloat16 where native (elsewhere converting every weight read makes it slowest)."""
    if native_bf16 is None:
        return list(DEFAULT_MODES)
    half = {"fp16", "bf16"} - ({"bf16"} if native_bf16 else set())
    return [k for k in DEFAULT_MODES if k not in half]


def chosen_modes(modes: list[str] | None) -> list[str]:
    """Validated mode keys in registry order, fp32 first (it is the baseline)."""
    picked = set(modes or []) | {"fp32"}
    for key in picked:
        get_mode(key)  # raises a clear error for anything unknown
    return [k for k in MODES if k in picked]


def compare_frames(lm, settings: Settings, shared, prompt: str, modes: list[str] | None,
                   new_tokens: int) -> Iterator[QuantFrame]:
    """Build and measure each chosen mode against float32; a frame after every step."""
    settings.quant_new_tokens.check("New tokens", new_tokens)
    n = int(new_tokens)
    keys = chosen_modes(modes)
    ids = encode_prompt(lm, settings, prompt, max_tokens=MAX_PROMPT_TOKENS)
    device = lm.device
    bandwidth = machine_bandwidth(shared, device)
    text_ids = lm.tokenizer(quality.load_perplexity_text(), add_special_tokens=False)["input_ids"]
    reports: list[ModeReport] = []
    # the default prompt's float32 reference is kept for every visitor
    ref_key = ("quant-reference", str(device), tuple(ids), n) if prompt == DEFAULT_PROMPT else None
    ref = shared.get(ref_key) if ref_key is not None else None

    yield QuantFrame(f"⏳ float32 reference: greedy answer of {n} tokens"
                     + (" (kept from an earlier run)…" if ref else ", measured as float32…"))
    built_modes = {}
    for i, key in enumerate(keys, start=1):  # float32 first: it is the reference
        built, shown = None, 0.0
        for step in build_steps(lm, key, shared):
            built = step.built
            if built is None and time.perf_counter() - shown > BUILD_UPDATE_S:
                shown = time.perf_counter()
                yield QuantFrame(f"⏳ [{i}/{len(keys)}] building {step.message} "
                                 f"({step.done}/{step.total})")
        built_modes[key] = built
        yield QuantFrame(f"⏳ [{i}/{len(keys)}] measuring {built.mode.label}…")
        for step in quality.compare_steps(built, lm.tokenizer, ids, n, text_ids, device, ref):
            if step.reference is not None:  # float32's own run: the others' reference
                ref = step.reference
                if ref_key is not None:
                    shared.put(ref_key, ref)
            if step.report is not None:
                reports.append(step.report)
            else:  # a frame per timed step: the server's steps run between, never inside
                yield QuantFrame(f"⏳ [{i}/{len(keys)}] measuring {built.mode.label}: decode "
                                 f"step {step.done} of {step.total}…")
        yield QuantFrame(f"⏳ measured {len(reports)} of {len(keys)} modes", tuple(reports),
                         bandwidth)
    race = None
    others = [k for k in built_modes if k != "fp32"]
    if others:  # the smallest mode raced against float32, step by step
        key = min(others, key=lambda k: built_modes[k].weight_bytes)  # never a timing
        base, mode = built_modes["fp32"], built_modes[key]
        for item in quality.checked_speed_race(key, base.model, mode.model, ids, n, device,
                                               (base.bytes_per_token, mode.bytes_per_token),
                                               bandwidth):
            if isinstance(item, SpeedRace):
                race = item
            else:
                yield QuantFrame(f"⏳ {mode.mode.label} against float32, step by step (both "
                                 f"share the machine's noise): step {item} of {n}…")
    reports = raced_speeds(reports, race)
    keep_latest(lm, shared, LAST_MODES, reports)
    judged = noise.reading(race.mode_seconds[1:] if race else (), settings=settings)
    reference = None  # this machine's quiet figure for such a race, from a quiet, possible run
    if race is not None and race.robust is not None:
        reference = quiet_reference.keep_if_quiet(
            f"quant_speed {race.key}÷fp32 {len(race.mode_seconds)} steps after {len(ids)} "
            f"{lm.info.dtype}", race.speedup, race.robust.label(),
            None if race.impossible else judged)
    yield QuantFrame(f"✅ measured {len(reports)} modes at {time.strftime('%H:%M:%S')} "
                     f"({len(ids)}-token prompt, {n} greedy tokens, {len(text_ids)}-token "
                     "perplexity text)", tuple(reports), bandwidth, judged, race, reference)


def raced_speeds(reports: list[ModeReport], race: SpeedRace | None) -> list[ModeReport]:
    """The reports with float32's and the raced mode's speeds from the race's paired lanes, so
    every view shows one speed per mode (an impossible race leaves their own runs' speeds)."""
    if race is None or race.robust is None or race.impossible:
        return reports
    speed = dict(zip(("fp32", race.key), race.tokens_per_s, strict=True))
    return [replace(r, decode_tokens_per_s=speed[r.key]) if r.key in speed else r
            for r in reports]


def compared(reports, guess: float | None, judged: Noise | None = None,
             race: SpeedRace | None = None, reference: QuietFigure | None = None) -> str:
    """The guess beside int8's speed against float32; on a busy run, against the quiet
    `reference` when int8 was the mode raced, else beside the number with no verdict."""
    by_key = {r.key: r for r in reports}
    if "int8" not in by_key or "fp32" not in by_key:
        return ""
    same = reference if race is not None and race.key == GUESS_KEY else None
    return guess_md(GUESS_KEY, guess, by_key["int8"].decode_tokens_per_s
                    / by_key["fp32"].decode_tokens_per_s,
                    noisy=judged is not None and judged.busy, reference=same)
