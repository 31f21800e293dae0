"""What visitors leave in the running app's memory once gone: its RSS at the start, at the peak
and after their idle time (cut to `IDLE_S`), the session sweep and RSS settling (`settled`), for
2,000 fresh tokenizer-view sessions and 10 attention views on the longest prompt the app accepts.
Run alone: `make bench-memory`.
"""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psutil

from bench.app_server import ROOT, SAMPLE_S, AppServer, RssWatch, start_app
from bench.clients import app_config, call, endpoint_data
from bench.targets import announce, run_alone
from classroom.session_budget import SWEEP_EVERY_S
from inference.config import LIMITS

TARGETS = {"serving.fresh_sessions.rss_growth_mb": ("<=", 200),
           "serving.attention_sessions.rss_growth_mb": ("<=", 300)}
IDLE_S = 60  # the bench's idle time for sessions and held caches (the app's: 3,600 and 600 s)
SHORT_IDLE = {"LLM_LAB_STATE_TTL_S": str(IDLE_S), "LLM_LAB_HELD_IDLE_S": str(IDLE_S)}
SETTLE_WINDOW_S, SETTLE_MB = 10.0, 2.0  # settled: fell less than 2 MB over the last 10 s
SETTLE_BOUND_S = 120.0  # past the sweep's deadline, the longest wait for RSS to settle
TOKENS = re.compile(r"\*\*([\d,]+)\*\* tokens")  # the tokenizer view's count line


def settled(samples: list[tuple[float, float]], window_s: float = SETTLE_WINDOW_S,
            tolerance_mb: float = SETTLE_MB) -> bool:
    """True when the samples [(t, MB)] span `window_s` and RSS fell by less than
    `tolerance_mb` over the last window (a rise counts as settled).

    >>> settled([(0, 900.0), (5, 700.0), (10, 699.0), (20, 698.5)])
    True
    >>> settled([(0, 900.0), (5, 700.0), (12, 650.0)])
    False
    """
    if not samples or samples[-1][0] - samples[0][0] < window_s:
        return False
    end = samples[-1][0]
    start_mb = next(mb for t, mb in samples if t >= end - window_s)
    return start_mb - samples[-1][1] < tolerance_mb


def fitting_prompt(text: str, count_tokens, limit: int, max_chars: int) -> str:
    """The longest start of `text` ending a word, within `max_chars` and `limit` tokens.

    >>> fitting_prompt("one two\\n\\nthree four five", lambda t: len(t.split()), 3, 100)
    'one two\\n\\nthree'
    """
    ends = [m.start() for m in re.finditer(r"\s+", text + " ") if 0 < m.start() <= max_chars]
    lo, hi = 0, len(ends) - 1  # ends[lo]: known to fit (the first word is assumed to)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:ends[mid]]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:ends[lo]]


def lesson_prose() -> str:
    """The prose paragraphs of assets/lesson*.md and of the quality check's story."""
    out = []
    for path in sorted((ROOT / "assets").glob("lesson*.md")) + [ROOT / "assets" /
                                                               "perplexity_text.txt"]:
        text = path.read_text(encoding="utf-8")
        out += [p.strip() for p in text.split("\n\n")
                if p.strip() and not p.lstrip().startswith(("#", "|", "<")) and "{" not in p]
    return "\n\n".join(out)


def long_prompt(url: str, config: dict) -> tuple[str, int]:
    """The longest lesson prose the app accepts, and its tokens as the tokenizer view counts."""
    session = uuid.uuid4().hex[:12]

    def count(text: str) -> int:
        fn, data = endpoint_data(config, "tokenize", {"tok-text": text, "tok-template": True})
        found = TOKENS.search(" ".join(str(v) for v in call(url, fn, data, session)))
        if found is None:
            raise RuntimeError("the tokenizer view gave no token count")
        return int(found.group(1).replace(",", ""))

    text = fitting_prompt(lesson_prose(), count, LIMITS.max_prompt_tokens,
                          LIMITS.max_prompt_chars)
    return text, count(text)


def rss_of_visitors(app: AppServer, fn: int, data: list, n: int, threads: int) -> dict:
    """RSS before, at peak and after expiry of `n` calls, each a visitor of its own."""
    def one(_: int) -> str | None:
        try:
            call(app.url, fn, data, session=uuid.uuid4().hex[:12])
            return None
        except Exception as exc:  # counted in the figure
            return f"{type(exc).__name__}: {exc}"[:200]

    with RssWatch(app.pid) as watch:
        start_mb, began = watch.now_mb(), time.monotonic()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            errors = [e for e in pool.map(one, range(n)) if e]
        ended = time.monotonic()
        deadline = ended + IDLE_S + 2 * SWEEP_EVERY_S
        while time.monotonic() < deadline + SETTLE_BOUND_S and not settled(
                [s for s in watch.samples if s[0] >= deadline]):
            time.sleep(SAMPLE_S)  # the next sample
        after_mb, waited = watch.now_mb(), time.monotonic() - deadline
        return {"start_mb": start_mb, "peak_mb": watch.peak_mb(began), "after_mb": after_mb,
                "rss_growth_mb": after_mb - start_mb, "calls_s": ended - began,
                "errors": len(errors), "error_messages": errors[:5], "idle_s": IDLE_S,
                "waited_past_expiry_s": waited}


def fresh_sessions(n: int = 2_000, threads: int = 8) -> dict:
    with start_app(SHORT_IDLE) as app:
        fn, data = endpoint_data(app_config(app.url), "tokenize",
                                 {"tok-text": "Hello, class!", "tok-template": False})
        call(app.url, fn, data)  # the warm call
        fig = rss_of_visitors(app, fn, data, n, threads)
    return {"sessions": n, "threads": threads, "endpoint": "tokenize", **fig}


def attention_sessions(n: int = 10) -> dict:
    with start_app(SHORT_IDLE) as app:
        config = app_config(app.url)
        prompt, tokens = long_prompt(app.url, config)
        fn, warm = endpoint_data(config, "kv_attention", {"kv-attn-prompt": "Hello, class!"})
        call(app.url, fn, warm)  # the warm call: a short prompt
        fn, data = endpoint_data(config, "kv_attention", {"kv-attn-prompt": prompt})
        fig = rss_of_visitors(app, fn, data, n, threads=n)
    return {"visitors": n, "prompt_tokens": tokens, "prompt_chars": len(prompt),
            "endpoint": "kv_attention", **fig}


def measure_visitor_memory(sessions: int = 2_000, attention: int = 10) -> dict:
    announce(f"fresh sessions: {sessions} calls, a new session hash each")
    fresh = fresh_sessions(sessions)
    print(json.dumps(fresh, indent=1), flush=True)
    announce(f"attention sessions: {attention} visitors' attention views on a long prompt")
    return {"fresh_sessions": fresh, "attention_sessions": attention_sessions(attention)}


def main() -> dict:
    machine = {"cpus": os.cpu_count(), "memory_gb": psutil.virtual_memory().total / 2**30,
               "load_1min_at_start": os.getloadavg()[0]}  # its cores are shared with others
    return run_alone("visitor-memory-results.json", TARGETS, measure_visitor_memory,
                     machine=machine)


if __name__ == "__main__":
    main()
