"""Lesson 6: weight-only quantization, in four layers (as in gpt-fast's `quantize.py`).

1. Pure functions: a float weight matrix to small integers plus scales, and back. int8 per
   output channel (symmetric): w ≈ q · scale, q in [-127, 127]. int4 per group of `group_size`
   (asymmetric): w ≈ (q - 8) · scale + zero, q in [0, 15]. Rounding: at most scale / 2 off.
2. Linear modules that do the product through PyTorch's fast kernel where a probe on this
   device matches the reference (bf16 activations), else by dequantizing on the fly
   ("simulated": same numbers and bytes stored, no speed-up).
3. `iter_swap_linears` replaces every `nn.Linear` of a model with its quantized twin.
4. The precision modes (`MODES`, chosen by key, never guessed from a file name): each is built
   from a private copy of the shared model (checked to share no storage with it), so the model
   every other lesson uses is never touched, and kept once per process in `SharedResults`.

Left out: activation quantization (int8 × int8 matmuls), GPTQ/AWQ-style calibration.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .errors import InferenceInputError
from .loading import bytes_read_per_token, unique_tensors, weight_bytes

INT8_KERNEL = "fast kernel (aten._weight_int8pack_mm, bf16 activations)"
INT4_KERNEL = "fast kernel (aten._weight_int4pack_mm_for_cpu, bf16 activations)"
INT4_CUDA_KERNEL = "fast kernel (aten._weight_int4pack_mm, CUDA, bf16 activations)"
CUDA_INNER_K_TILES = 2  # the CUDA packer's tiling: in_features must be a multiple of 16 × this
SIMULATED = "simulated (dequantize on the fly)"


# ---------------------------------------------------------------- 1. pure functions
def quantize_int8_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] float -> (q int8 [N, K], scales float32 [N]) with w ≈ q * scales[:, None].

    Example: a row [0.5, -1.0, 0.25] gets scale 1/127 and q = [64, -127, 32]."""
    w = w.float()
    scales = (w.abs().amax(dim=1) / 127).clamp(min=1e-8)  # [N]
    q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)  # [N, K]
    return q, scales


def dequantize_int8_per_channel(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(q int8 [N, K], scales [N]) -> w float32 [N, K]."""
    return q.float() * scales.float()[:, None]


def quantize_int4_groupwise(w: torch.Tensor, group_size: int = 32
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w [N, K] -> (q uint8 [N, K] in 0..15, scales [N, K/G], zeros [N, K/G]), all float32.

    Each group of G weights spans [min, max] in 15 equal steps: scale = (max - min) / 15,
    w ≈ (q - 8) * scale + zero with zero = min + 8 * scale (PyTorch's int4 kernels' layout)."""
    n, k = w.shape
    if k % group_size:
        raise ValueError(f"in_features {k} is not a multiple of group_size {group_size}")
    wg = w.float().reshape(n, k // group_size, group_size)  # [N, K/G, G]
    lo, hi = wg.amin(dim=-1), wg.amax(dim=-1)  # [N, K/G]
    scales = ((hi - lo) / 15).clamp(min=1e-8)
    q = torch.round((wg - lo[..., None]) / scales[..., None]).clamp(0, 15)
    zeros = lo + 8 * scales
    return q.reshape(n, k).to(torch.uint8), scales, zeros


def dequantize_int4_groupwise(q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                              group_size: int = 32) -> torch.Tensor:
    """(q [N, K] in 0..15, scales [N, K/G], zeros [N, K/G]) -> w float32 [N, K]."""
    n, k = q.shape
    qg = q.float().reshape(n, k // group_size, group_size)  # [N, K/G, G]
    return ((qg - 8) * scales.float()[..., None] + zeros.float()[..., None]).reshape(n, k)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """q [N, K] in 0..15 -> uint8 [N, K/2], two weights per byte (low nibble first)."""
    q = q.to(torch.uint8)
    return q[:, 0::2] | (q[:, 1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> q uint8 [N, K] in 0..15 (inverse of `pack_int4`)."""
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1)


# ---------------------------------------------------------------- 2. Linear modules
class WeightOnlyInt8Linear(nn.Module):
    """y = x @ (q * scales)ᵀ with q int8 [N, K] and one scale per output channel [N]."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, use_kernel: bool) -> None:
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.use_kernel = use_kernel
        self.kernel = INT8_KERNEL if use_kernel else SIMULATED
        self.register_buffer("weight", q.contiguous())  # int8 [N, K]
        # The kernel wants scales in the activation dtype (bf16); the reference path keeps fp32.
        self.register_buffer("scales", scales.to(torch.bfloat16 if use_kernel else torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_kernel:  # x [..., K] -> bf16 [M, K] -> kernel -> [..., N]
            x2 = x.reshape(-1, self.in_features).to(torch.bfloat16)
            y = torch.ops.aten._weight_int8pack_mm(x2, self.weight, self.scales)
            return y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        # Dequantize first, then one matmul. Not `F.linear(x, q) * scale`: x @ qᵀ with q up to
        # 127 overflows float16 to inf on a GPU.
        return F.linear(x, dequantize_int8_per_channel(self.weight, self.scales).to(x.dtype))


class WeightOnlyInt4Linear(nn.Module):
    """y = x @ ((q - 8) * scale + zero)ᵀ with 4-bit q, a scale and zero per group of G weights.
    `weight` is the kernel's own packed layout, or on the simulated path our nibble packing
    (`pack_int4`), unpacked and dequantized at every call."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                 group_size: int, use_kernel: bool) -> None:
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.group_size, self.use_kernel = group_size, use_kernel
        self.on_cuda = q.device.type == "cuda"
        self.kernel = (INT4_CUDA_KERNEL if self.on_cuda else INT4_KERNEL) if use_kernel \
            else SIMULATED
        sz = torch.stack([scales.t(), zeros.t()], dim=-1).contiguous()  # [K/G, N, 2]
        if not use_kernel:
            weight = pack_int4(q)  # uint8 [N, K/2]
        elif self.on_cuda:  # int32 tiles; the packer reads the EVEN column in the high nibble
            q8 = q.to(torch.uint8)
            weight = torch.ops.aten._convert_weight_to_int4pack(q8[:, 0::2] << 4 | q8[:, 1::2],
                                                                CUDA_INNER_K_TILES)
        else:  # uint8 [N, K/2], the kernel's layout
            weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 2)
        self.register_buffer("weight", weight)
        self.register_buffer("scales_and_zeros", sz.to(torch.bfloat16 if use_kernel
                                                       else torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_kernel:  # x [..., K] -> bf16 [M, K] -> kernel -> [..., N]
            x2 = x.reshape(-1, self.in_features).to(torch.bfloat16)
            mm = torch.ops.aten._weight_int4pack_mm if self.on_cuda \
                else torch.ops.aten._weight_int4pack_mm_for_cpu
            y = mm(x2, self.weight, self.group_size, self.scales_and_zeros)
            return y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        w = dequantize_int4_groupwise(unpack_int4(self.weight), self.scales_and_zeros[..., 0].t(),
                                      self.scales_and_zeros[..., 1].t(), self.group_size)
        return F.linear(x, w.to(x.dtype))


class Int8Embedding(nn.Module):
    """Embedding lookup from an int8 table with one scale per row: row = q[id] * scale[id].
    Given the int8 output head's own `weight` and `scales`, the tie is kept: one copy."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("weight", q)  # int8 [V, H]
        self.register_buffer("scales", scales)  # [V]
        self.dtype = dtype

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # ids [B, S] -> [B, S, H]
        rows = F.embedding(ids, self.weight).to(self.dtype)  # [..., D] int8 values as floats
        return rows * self.scales[ids][..., None].to(self.dtype)


# ---------------------------------------------------------------- 3. module swap
def quantized_linear(linear: nn.Linear, mode: str, group_size: int = 32,
                     use_kernel: bool = True) -> nn.Module:
    """`linear`'s int8 or int4 twin (int4's kernel only where its packer's tiles fit)."""
    w = linear.weight.data
    if mode == "int8":
        return WeightOnlyInt8Linear(*quantize_int8_per_channel(w), use_kernel)
    q, scales, zeros = quantize_int4_groupwise(w, group_size)
    n, k = q.shape
    if w.device.type == "cuda":  # the CUDA packer's tile sizes
        fits = n % 8 == 0 and k % (16 * CUDA_INNER_K_TILES) == 0
    else:  # the CPU packer's tile sizes
        fits = n % 16 == 0 and k % 32 == 0
    return WeightOnlyInt4Linear(q, scales, zeros, group_size, use_kernel and fits)


def iter_swap_linears(model: nn.Module, mode: str, group_size: int = 32,
                      use_kernel: bool = True) -> Iterator[tuple[int, int, str]]:
    """Replace every nn.Linear in `model` with its int8/int4 twin, yielding (done, total, name)."""
    if mode not in ("int8", "int4"):
        raise ValueError(f"unknown quantization mode {mode!r}; expected 'int8' or 'int4'")
    targets = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    for i, (name, linear) in enumerate(targets):
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child,
                quantized_linear(linear, mode, group_size, use_kernel))
        yield i + 1, len(targets), name


def kernel_available(kind: str, device: torch.device | str) -> bool:
    """True where the fast `kind` ("int8" or "int4") kernel runs on this device (CPU or CUDA)
    and gives the simulated path's numbers on a small random layer (a wrong packing fails)."""
    device = torch.device(device)
    if device.type not in ("cpu", "cuda") or (device.type == "cuda"
                                              and not torch.cuda.is_available()):
        return False
    gen = torch.Generator(device="cpu").manual_seed(0)
    w, x = torch.randn(64, 256, generator=gen), torch.randn(3, 256, generator=gen)
    linear = nn.Linear(256, 64, bias=False)
    with torch.no_grad():
        linear.weight.copy_(w)
        ref = quantized_linear(linear, kind, use_kernel=False)(x)
        try:
            y = quantized_linear(linear.to(device), kind)(x.to(device)).float().cpu()
        except (RuntimeError, AttributeError, NotImplementedError):  # no such op, or not here
            return False
    return bool(torch.allclose(y, ref, atol=0.1 + 0.02 * ref.abs().max().item(), rtol=0.05))


# ---------------------------------------------------------------- 4. precision modes
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


def _convert(model: nn.Module, mode: QuantMode, use_kernel: bool) -> Iterator[tuple[int, int, str]]:
    """Convert `model` (a private copy) in place to `mode`, yielding progress."""
    if mode.kind == "float":
        model.to(mode.dtype)  # .to(), not .half(): the GGUF-loaded model is flagged as quantized
        yield 1, 1, f"cast to {mode.dtype}"
        return
    w = model.get_input_embeddings().weight  # float [V, H], tied to the output head
    if mode.kind == "int4":  # own int8 lookup table, built before the tied head is replaced
        model.set_input_embeddings(Int8Embedding(*quantize_int8_per_channel(w.data), w.dtype))
    yield from iter_swap_linears(model, mode.kind, mode.group_size or 32, use_kernel)
    if mode.kind == "int8":  # reuse the int8 head's rows and scales: the tie is kept
        head = model.get_output_embeddings()
        model.set_input_embeddings(Int8Embedding(head.weight, head.scales, w.dtype))


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
        loaded = [*lm.model.parameters(), *lm.model.buffers()]
        theirs = {t.untyped_storage().data_ptr() for t in loaded}
        if any(t.untyped_storage().data_ptr() in theirs  # a weight it should have replaced
               for t in [*model.parameters(), *model.buffers()]):
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
