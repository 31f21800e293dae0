"""Lesson 6: the precision modes, named explicitly, and building each one from the loaded model.

A mode is chosen by its key from `MODES`, never guessed from a file name. Building one converts
a private copy of the shared model (checked to share no storage with it), so the model every
other lesson uses is never touched; built modes are kept once per process in `SharedResults`.
The tied embedding / output head is treated per kind: `HEAD_TREATMENT`.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from .errors import InferenceInputError
from .quantize import Int8Embedding, iter_swap_linears, kernel_available, quantize_int8_per_channel
from .weights import bytes_read_per_token, unique_tensors, weight_bytes


@dataclass(frozen=True)
class QuantMode:
    key: str
    label: str
    kind: str  # "float", "int8" or "int4"
    dtype: torch.dtype | None = None  # float modes only
    group_size: int | None = None  # int4 only


MODES: dict[str, QuantMode] = {
    "fp32": QuantMode("fp32", "float32", "float", torch.float32),
    "fp16": QuantMode("fp16", "float16", "float", torch.float16),
    "bf16": QuantMode("bf16", "bfloat16", "float", torch.bfloat16),
    "int8": QuantMode("int8", "int8 weight-only (per-channel scales)", "int8"),
    "int4-g32": QuantMode("int4-g32", "int4 weight-only (groups of 32)", "int4", group_size=32),
    "int4-g64": QuantMode("int4-g64", "int4 weight-only (groups of 64)", "int4", group_size=64),
}
DEFAULT_MODES = ("fp32", "fp16", "bf16", "int8", "int4-g32")

HEAD_TREATMENT = {
    "float": "Tied embedding/output head: one matrix, cast to this dtype.",
    "int8": "Tied and quantized: the output head is an int8 Linear (one scale per vocabulary "
            "row) and the embedding lookup reads the same int8 rows and scales: one copy.",
    "int4": "Output head quantized to int4 like every Linear; the embedding lookup keeps its "
            "own int8 table (the int4 kernel's packed layout cannot be read by row), stored "
            "but read only one row per token.",
}


@dataclass(frozen=True)
class BuiltMode:
    """A ready-to-run copy of the model in one mode, with its sizes measured from its tensors."""

    mode: QuantMode
    model: nn.Module
    weight_bytes: int  # every stored weight tensor, shared ones once
    bytes_per_token: int  # bytes a decode step reads: all weights but one embedding row
    fp32_bytes: int  # the float32 model's weight_bytes, for the ratio
    kernel: str
    head_treatment: str
    build_seconds: float

    @property
    def ratio_to_fp32(self) -> float:
        return self.weight_bytes / self.fp32_bytes


@dataclass(frozen=True)
class BuildProgress:
    done: int
    total: int
    message: str
    built: BuiltMode | None = None  # set on the last item only


def get_mode(key: str) -> QuantMode:
    if key not in MODES:
        raise InferenceInputError(
            f"Unknown precision mode {key!r}. Choose one of: {', '.join(MODES)}.")
    return MODES[key]


def _private_copy(model: nn.Module, mode: QuantMode) -> nn.Module:
    """A copy of `model` for `mode` that shares no tensor with it once converted, without first
    copying the float weights the conversion replaces (`_convert` swaps those modules)."""
    if mode.kind == "float":
        memo = {id(p): nn.Parameter(p.detach().to(mode.dtype, copy=True),
                                    requires_grad=p.requires_grad) for p in model.parameters()}
    else:
        replaced = [m for m in model.modules() if isinstance(m, nn.Linear)]
        replaced.append(model.get_input_embeddings())
        memo = {id(p): p for m in replaced for p in m.parameters(recurse=False)}
    return copy.deepcopy(model, memo)


def _shares_storage(model: nn.Module, other: nn.Module) -> bool:
    """True when any tensor of `model` lives in a storage of `other`."""
    theirs = {t.untyped_storage().data_ptr() for t in [*other.parameters(), *other.buffers()]}
    return any(t.untyped_storage().data_ptr() in theirs
               for t in [*model.parameters(), *model.buffers()])


def _convert(model: nn.Module, mode: QuantMode, use_kernel: bool) -> Iterator[tuple[int, int, str]]:
    """Convert `model` (a private copy) in place to `mode`, yielding progress."""
    if mode.kind == "float":
        model.to(mode.dtype)  # .to(), not .half(): the GGUF-loaded model is flagged as quantized
        yield 1, 1, f"cast to {mode.dtype}"
        return
    emb = model.get_input_embeddings()
    dtype = emb.weight.dtype
    if mode.kind == "int4":  # own int8 lookup table, built before the tied head is replaced
        q, scales = quantize_int8_per_channel(emb.weight.data)
        model.set_input_embeddings(Int8Embedding(q, scales, dtype))
    yield from iter_swap_linears(model, mode.kind, mode.group_size or 32, use_kernel)
    if mode.kind == "int8":  # reuse the int8 head's rows and scales: the tie is kept
        head = model.get_output_embeddings()
        model.set_input_embeddings(Int8Embedding(head.weight, head.scales, dtype))


def build_steps(lm, key: str, shared, simulated: bool = False) -> Iterator[BuildProgress]:
    """Build mode `key` from `lm.model` (or take it from `shared`), yielding progress; the last
    item carries `built`. fp32 is the shared model itself where that is float32.
    `simulated=True` skips the fast kernels (the path a device without them takes)."""
    mode = get_mode(key)
    cache_key = ("quant-model", key, str(lm.device)) + (("simulated",) if simulated else ())
    cached = shared.get(cache_key)
    if cached is not None:
        yield BuildProgress(1, 1, f"{mode.label}: already built in this process", cached)
        return
    # The build time counts only this generator's own work: the clock stops at each yield (a
    # lesson's job ends there, and the server may take a step before the next one).
    spent, start = 0.0, time.perf_counter()
    fp32_bytes = 4 * sum(t.numel() for t in unique_tensors(lm.model).values())
    if key == "fp32" and next(lm.model.parameters()).dtype == torch.float32:
        model = lm.model  # the shared model itself: no copy
    else:
        spent += time.perf_counter() - start
        yield BuildProgress(
            0, 1, f"{mode.label}: copying the float32 model ({fp32_bytes / 1e6:.0f} MB)")
        start = time.perf_counter()
        model = _private_copy(lm.model, mode)
        fast = not simulated and mode.kind != "float" and kernel_available(mode.kind, lm.device)
        with torch.no_grad():
            for done, total, name in _convert(model, mode, use_kernel=fast):
                spent += time.perf_counter() - start
                yield BuildProgress(done, total, f"{mode.label}: {name}")
                start = time.perf_counter()
        if _shares_storage(model, lm.model):  # a conversion that kept a weight it should replace
            raise RuntimeError(f"{mode.label}: the built copy still shares weights with the "
                               "loaded model")
    kernel = (model.get_output_embeddings().kernel if mode.kind != "float"  # every Linear's
              else f"dense matmul ({str(mode.dtype).replace('torch.', '')})")
    built = BuiltMode(mode=mode, model=model.eval(), weight_bytes=weight_bytes(model),
                      bytes_per_token=bytes_read_per_token(model), fp32_bytes=fp32_bytes,
                      kernel=kernel, head_treatment=HEAD_TREATMENT[mode.kind],
                      build_seconds=spent + time.perf_counter() - start)
    built = shared.get_or_compute(cache_key, lambda: built, until_idle=True)  # a model copy
    yield BuildProgress(1, 1, f"{mode.label}: built in {built.build_seconds:.1f} s", built)


def build_mode(lm, key: str, shared, simulated: bool = False) -> BuiltMode:
    """Build (or fetch) mode `key` without progress reporting."""
    *_, last = build_steps(lm, key, shared, simulated)
    return last.built
