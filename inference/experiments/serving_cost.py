"""What tokens cost. Lesson 1: hosted APIs price input and output tokens per million, and a chat
resends its whole history every turn, so its input bill grows with the square of turns:

    cost = input_tokens × input_price / 1e6 + output_tokens × output_price / 1e6
    input tokens at turn k = template(k) + k × question + (k − 1) × answer

Lesson 5: from measured tokens per second, and from KV memory, to dollars.

    $ per million tokens = price per hour ÷ (tokens/s × 3,600) × 1,000,000
    one conversation     = prompt ÷ prefill rate + output ÷ decode rate   seconds of the machine
    sequences that fit   = (memory − weights) ÷ (KV bytes per token × tokens each one holds)

Input is priced from the prefill rate, much higher than decode's: why APIs charge less for it.
Left out: idle time between requests, activations, the allocator's slack, the provider's margin.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import LIMITS
from ..errors import check_range
from ..kv_cache import bytes_per_token
from ..tokens import encode_text
from .batch_sweep import BatchPoint
from .kv_projection import PUBLISHED, ModelSpec


@dataclass(frozen=True)
class TokenCost:
    input_tokens: int
    output_tokens: int
    input_cost: float
    output_cost: float

    @property
    def total(self) -> float:
        return self.input_cost + self.output_cost


def token_cost(input_tokens: int, output_tokens: int, input_price_per_m: float,
               output_price_per_m: float) -> TokenCost:
    LIMITS.token_price_per_m.check("Input price", input_price_per_m)
    LIMITS.token_price_per_m.check("Output price", output_price_per_m)
    LIMITS.cost_output_tokens.check("Output tokens", output_tokens)
    return TokenCost(input_tokens, output_tokens,
                     input_tokens * input_price_per_m / 1e6,
                     output_tokens * output_price_per_m / 1e6)


@dataclass(frozen=True)
class TurnCost:
    turn: int  # 1-based
    input_tokens: int  # the whole history resent, plus this turn's question
    output_tokens: int
    cost: float  # dollars for this turn's request
    total: float  # dollars for the conversation so far


def templated_conversation_costs(tokenizer, question: str, answer_tokens: int, turns: int,
                                 input_price_per_m: float,
                                 output_price_per_m: float) -> list[TurnCost]:
    """Each turn of a chat asking `question` each time. Its input tokens: the model's chat
    template rendered empty, the texts counted apart (exact up to a merge at an edge)."""
    LIMITS.conversation_turns.check("Turns", turns)
    question_tokens = len(encode_text(tokenizer, question))
    rows, messages, total = [], [], 0.0
    for k in range(1, int(turns) + 1):
        messages = messages + [{"role": "user", "content": ""}]
        markers = tokenizer.apply_chat_template(messages, tokenize=False,
                                                add_generation_prompt=True)
        template = len(tokenizer(markers, add_special_tokens=False)["input_ids"])
        sent = template + k * question_tokens + (k - 1) * int(answer_tokens)
        cost = token_cost(sent, int(answer_tokens), input_price_per_m, output_price_per_m).total
        total += cost
        rows.append(TurnCost(k, sent, int(answer_tokens), cost, total))
        messages = messages + [{"role": "assistant", "content": ""}]
    return rows


@dataclass(frozen=True)
class CostPoint:
    batch: int
    output_tokens_per_s: float  # decode throughput, all requests together, at `context_tokens`
    usd_per_million_output: float
    usd_per_million_input: float
    seconds_per_conversation: float  # machine time one conversation uses, at this batch
    usd_per_conversation: float
    conversations_per_hour: float
    measured_output_tokens_per_s: float = 0.0  # as the sweep measured it (its short context)
    context_tokens: float = 0.0  # mean context the rate above is for (0: the sweep's own)


def usd_per_million(price_per_hour: float, tokens_per_s: float) -> float:
    return price_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else float("inf")


def serving_costs(points: tuple[BatchPoint, ...] | list[BatchPoint], price_per_hour: float,
                  prompt_tokens: int = 200, output_tokens: int = 300,
                  kv_bytes_per_token: int | None = None,
                  bandwidth_gbs: float = 0.0) -> list[CostPoint]:
    """One CostPoint per measured batch. Given `kv_bytes_per_token` and `bandwidth_gbs`, the
    decode rate is carried to the conversation's mean context C (an estimate, and a ceiling:
    the extra cache reads take at least  step at C = step + B × kv × ΔC ÷ bandwidth)."""
    LIMITS.price_per_hour.check("Price per hour ($)", price_per_hour)
    LIMITS.conversation_prompt_tokens.check("Prompt tokens per conversation", prompt_tokens)
    LIMITS.conversation_output_tokens.check("Output tokens per conversation", output_tokens)
    costs = []
    context = prompt_tokens + output_tokens / 2
    carry = bool(kv_bytes_per_token) and bandwidth_gbs > 0
    for p in points:
        out_rate, in_rate = p.tokens_per_s, p.prefill_tokens_per_s
        if carry:
            extra = max(context - p.mean_context, 0.0) * p.batch * kv_bytes_per_token  # bytes
            out_rate = p.batch / (p.step_seconds + extra / (bandwidth_gbs * 1e9))
        seconds = prompt_tokens / in_rate + output_tokens / out_rate
        costs.append(CostPoint(
            batch=p.batch, output_tokens_per_s=out_rate,
            usd_per_million_output=usd_per_million(price_per_hour, out_rate),
            usd_per_million_input=usd_per_million(price_per_hour, in_rate),
            seconds_per_conversation=seconds,
            usd_per_conversation=price_per_hour * seconds / 3600,
            conversations_per_hour=3600 / seconds,
            measured_output_tokens_per_s=p.tokens_per_s,
            context_tokens=context if carry else 0.0))
    return costs


def model_serving_costs(lm, points, price_per_hour: float, prompt_tokens: int,
                        output_tokens: int, bandwidth_gbs: float) -> list[CostPoint]:
    """`serving_costs` for the loaded model: lesson 5 and the presenter show the same figures."""
    info = lm.info
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    return serving_costs(points, price_per_hour, prompt_tokens, output_tokens,
                         kv_bytes_per_token=kv, bandwidth_gbs=bandwidth_gbs)


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int
    bandwidth_gbs: float
    peak_tflops: float  # dense 16-bit matrix arithmetic
    usd_per_hour: float
    source: str


# NVIDIA's H200 (SXM) datasheet, dense BF16/FP16; the hourly price is an assumption.
H200 = Gpu("NVIDIA H200", 141 * 10**9, 4_800.0, 989.0, 4.00,
           "NVIDIA's published spec: 141 GB, 4.8 TB/s, 989 TFLOPS fp16; $4.00/h assumed")
LEVER_MODEL = next(m for m in PUBLISHED if m.name == "Llama-3-8B")
GPU_PROMPT, GPU_OUTPUT = 3_072, 1_024  # a 4,096-token conversation


def sequences_that_fit(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: float,
                       tokens_per_sequence: float) -> int:
    """(memory − weights) ÷ (KV per token × tokens per sequence), rounded down, at least 0."""
    check_range("Tokens per sequence", tokens_per_sequence, 1, 10**9)
    left = memory_bytes - weight_bytes
    return int(left // (kv_bytes_per_token * tokens_per_sequence)) if left > 0 else 0


@dataclass(frozen=True)
class Chain:
    """Memory → sequences → batch → tokens/s → dollars, for one machine and model."""

    label: str  # the machine and model
    kind: str  # "measured" (this machine's sweep) or "theoretical" (roofline, published specs)
    memory_bytes: float  # the budget the caches and weights share
    weight_bytes: float
    kv_bytes_per_token: float  # one sequence
    tokens_held: float  # positions each sequence holds in memory
    fits: int  # sequences that fit
    batch: int  # the batch the rate is for (at most `fits`)
    tokens_per_s: float  # output tokens per second, all sequences together
    usd_per_hour: float
    usd_per_conversation: float
    bound: str = ""  # theoretical: "memory" or "compute"; measured: ""
    largest_measured: int = 0  # measured: the largest batch the sweep ran

    @property
    def left_bytes(self) -> float:
        return max(self.memory_bytes - self.weight_bytes, 0.0)

    @property
    def kv_bytes_per_sequence(self) -> float:
        return self.kv_bytes_per_token * self.tokens_held

    @property
    def usd_per_million(self) -> float:
        return usd_per_million(self.usd_per_hour, self.tokens_per_s)


def measured_chain(costs, budget_bytes: float, weight_bytes: float, kv_bytes_per_token: float,
                   prompt_tokens: int, output_tokens: int, price_per_hour: float,
                   label: str) -> Chain | None:
    """This machine's chain: the largest measured batch that fits the budget, at its rate."""
    if not costs:
        return None
    held = prompt_tokens + output_tokens
    fits = sequences_that_fit(budget_bytes, weight_bytes, kv_bytes_per_token, held)
    c = max((c for c in costs if c.batch <= fits), key=lambda c: c.batch, default=None)
    return Chain(label, "measured", budget_bytes, weight_bytes, kv_bytes_per_token, held, fits,
                 c.batch if c else 0, c.output_tokens_per_s if c else 0.0, price_per_hour,
                 c.usd_per_conversation if c else float("inf"),
                 largest_measured=max(p.batch for p in costs))


def roofline_step(model: ModelSpec, gpu: Gpu, batch: int, context: float,
                  weight_bytes_per_value: float = 2, kv_bytes_per_value: int = 2
                  ) -> tuple[float, str]:
    """(seconds, "memory" or "compute"): one decode step of `batch` sequences at `context`
    positions each, on the roofline (theoretical):

    step = max((weights + batch × KV per token × context) ÷ bandwidth,
               batch × (2 × parameters + 4 × layers × heads × head_dim × context) ÷ peak)

    >>> s, bound = roofline_step(LEVER_MODEL, H200, 1, 0)  # 16.06 GB ÷ 4.8 TB/s
    >>> round(s * 1000, 2), bound
    (3.35, 'memory')
    """
    read = (model.parameters * weight_bytes_per_value
            + batch * model.bytes_per_token(kv_bytes_per_value) * context)
    attention = 4 * model.layers * model.query_heads * model.head_dim * context
    flops = batch * (2 * model.parameters + attention)
    memory_s, compute_s = read / (gpu.bandwidth_gbs * 1e9), flops / (gpu.peak_tflops * 1e12)
    return (memory_s, "memory") if memory_s >= compute_s else (compute_s, "compute")


def gpu_chain(model: ModelSpec, gpu: Gpu, prompt_tokens: int = GPU_PROMPT,
              output_tokens: int = GPU_OUTPUT, weight_bytes_per_value: float = 2,
              kv_bytes_per_value: int = 2, tokens_held: float | None = None,
              batch: int | None = None, label: str = "") -> Chain:
    """The chain for a published model on a published GPU (theoretical). `tokens_held`:
    positions each sequence keeps (default: the conversation); `batch`: default as many as fit."""
    weights = model.parameters * weight_bytes_per_value
    kv = model.bytes_per_token(kv_bytes_per_value)
    held = prompt_tokens + output_tokens if tokens_held is None else tokens_held
    fits = sequences_that_fit(gpu.memory_bytes, weights, kv, held)
    b = fits if batch is None else min(batch, fits)
    name = label or f"{model.name} on an {gpu.name}"
    if b == 0:
        return Chain(name, "theoretical", gpu.memory_bytes, weights, kv, held, fits, 0, 0.0,
                     gpu.usd_per_hour, float("inf"))
    step, bound = roofline_step(model, gpu, b, prompt_tokens + output_tokens / 2,
                                weight_bytes_per_value, kv_bytes_per_value)
    rate = b / step
    prefill_rate = gpu.peak_tflops * 1e12 / (2 * model.parameters)
    seconds = prompt_tokens / prefill_rate + output_tokens / rate
    return Chain(name, "theoretical", gpu.memory_bytes, weights, kv, held, fits, b, rate,
                 gpu.usd_per_hour, gpu.usd_per_hour * seconds / 3600, bound)


def published_chains(gpu: Gpu = H200) -> list[Chain]:
    """A few published models on `gpu`, fp16, 4,096-token conversations, as many as fit."""
    return [gpu_chain(m, gpu) for m in PUBLISHED
            if m.name in ("Llama-2-7B", "Llama-3-8B", "Llama-3-70B")]


def levers(model: ModelSpec = LEVER_MODEL, gpu: Gpu = H200) -> list[Chain]:
    """The explainer's levers one at a time (theoretical): batching (each sequence reserving
    the window), int8 weights, a paged cache (each holds its own tokens), an 8-bit cache."""
    window = model.context_window or GPU_PROMPT + GPU_OUTPUT
    mean = GPU_PROMPT + GPU_OUTPUT / 2
    return [
        gpu_chain(model, gpu, tokens_held=window, batch=1, label="one conversation at a time"),
        gpu_chain(model, gpu, tokens_held=window, label="+ batching (window reserved)"),
        gpu_chain(model, gpu, weight_bytes_per_value=1, tokens_held=window,
                  label="+ int8 weights"),
        gpu_chain(model, gpu, weight_bytes_per_value=1, tokens_held=mean,
                  label="+ paged cache"),
        gpu_chain(model, gpu, weight_bytes_per_value=1, kv_bytes_per_value=1, tokens_held=mean,
                  label="+ 8-bit cache"),
    ]


def cache_bound_tokens_per_s(model: ModelSpec, gpu: Gpu, context: float,
                             kv_bytes_per_value: int = 2) -> float:
    """Theoretical: as the batch grows a step reads mostly caches, so tokens/s approaches
    bandwidth ÷ (KV bytes per token × context).

    >>> round(cache_bound_tokens_per_s(LEVER_MODEL, H200, 3_584))
    10218
    """
    return gpu.bandwidth_gbs * 1e9 / (model.bytes_per_token(kv_bytes_per_value) * context)
