"""Two memory figures: what visitors leave in the running app's memory once gone.

Both watch the app process's resident memory (RSS, `RssWatch`) on a fresh app and report it at
the start (after one warm call), at its peak, and after the visitors' time is up;
`rss_growth_mb` is after − start. Every visitor speaks Gradio's queue protocol
(`bench.gradio_stream.call`) with its own session hash, as an API client does; nobody closes a
tab, so what ends a session is its idle time.

`fresh_sessions`: 2,000 calls of the cheapest endpoint (the tokenizer view: no model pass),
8 at a time, each with a new session hash. Gradio keeps a `SessionState` per hash (over a
gigabyte for 2,000 such calls when uncapped, kept for good); the app caps them
(`Settings.sessions_held`) and sweeps those unused for `state_ttl_s`
(classroom/session_budget.py).

`attention_sessions`: 10 visitors at once each run lesson 4's attention view once on the
longest prompt the app accepts (the lessons' own prose, cut to `Settings.max_prompt_tokens` as
the tokenizer view counts it), then leave. Each view is held under the held-cache budget
(`held_idle_s`) and in the visitor's session (`state_ttl_s`).

An hour's wait is not a bench: the app runs with both idle times at `IDLE_S` (60 s, longer
than 2,000 calls take, so the peak holds what the cap allows). The app exposes no session
count, so "after" waits for the sweep's deadline (the last call + the idle time + two sweeps),
then polls RSS until it stops falling (`settled`), at most `SETTLE_BOUND_S` longer.

Run: `make bench-memory` writes bench/visitor-memory-results.json; `make bench` puts the same
keys in `results["serving"]`.
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
from bench.gradio_stream import app_config, call, endpoint_data
from bench.targets import finish
from classroom.session_budget import SWEEP_EVERY_S
from inference.config import LIMITS

FIGURES = ("fresh_sessions", "attention_sessions")  # their keys in results["serving"]
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
    `tolerance_mb` over that last window (it stopped falling; a rise counts as settled).

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


def rss_after_expiry(watch: RssWatch, deadline: float) -> tuple[float, float]:
    """RSS once the visitors' time is up: from monotonic `deadline` on, poll until `settled`,
    at most SETTLE_BOUND_S longer. Returns (MB, seconds waited past the deadline)."""
    while time.monotonic() < deadline + SETTLE_BOUND_S:
        since = [s for s in watch.samples if s[0] >= deadline]
        if settled(since):
            break
        time.sleep(SAMPLE_S)  # the next sample
    return watch.now_mb(), time.monotonic() - deadline


def fitting_prompt(text: str, count_tokens, limit: int, max_chars: int) -> str:
    """The longest start of `text`, cut where a word ends, within `max_chars` whose token
    count (`count_tokens(cut)`) is at most `limit`; found by bisection (a dozen counts).

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
    """The lessons' own paragraphs (assets/lesson*.md, then the story the quality check
    reads), headings, tables and placeholders left out, one blank line apart."""
    out = []
    for path in sorted((ROOT / "assets").glob("lesson*.md")) + [ROOT / "assets" /
                                                               "perplexity_text.txt"]:
        text = path.read_text(encoding="utf-8")
        out += [p.strip() for p in text.split("\n\n")
                if p.strip() and not p.lstrip().startswith(("#", "|", "<")) and "{" not in p]
    return "\n\n".join(out)


def long_prompt(url: str, config: dict) -> tuple[str, int]:
    """The longest prompt of lesson prose the app accepts (`max_prompt_tokens` as the model
    reads it: the tokenizer view's count with the chat template), and its tokens; counted
    by one visitor (one session)."""
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
    """RSS before, at peak and after expiry of `n` calls of `fn` with `data`, `threads` at a
    time, each a visitor of its own (a new session hash)."""
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
        after_mb, waited = rss_after_expiry(watch, ended + IDLE_S + 2 * SWEEP_EVERY_S)
        return {"start_mb": start_mb, "peak_mb": watch.peak_mb(began), "after_mb": after_mb,
                "rss_growth_mb": after_mb - start_mb, "calls_s": ended - began,
                "errors": len(errors), "error_messages": errors[:5], "idle_s": IDLE_S,
                "waited_past_expiry_s": waited}


def fresh_sessions(n: int = 2_000, threads: int = 8) -> dict:
    """`n` tokenizer-view calls, each a new session hash; RSS before, at peak, after expiry."""
    with start_app(SHORT_IDLE) as app:
        fn, data = endpoint_data(app_config(app.url), "tokenize",
                                 {"tok-text": "Hello, class!", "tok-template": False})
        call(app.url, fn, data)  # the warm call
        fig = rss_of_visitors(app, fn, data, n, threads)
    return {"sessions": n, "threads": threads, "endpoint": "tokenize", **fig}


def attention_sessions(n: int = 10) -> dict:
    """`n` visitors' attention views on the longest prompt; RSS before, at peak, after."""
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
    """Both figures, each on its own fresh app: the keys `make bench` puts in `serving`."""
    print(f"== fresh sessions: {sessions} calls, a new session hash each "
          f"({time.strftime('%H:%M:%S')})", flush=True)
    fresh = fresh_sessions(sessions)
    print(json.dumps(fresh, indent=1), flush=True)
    print(f"== attention sessions: {attention} visitors' attention views on a long prompt "
          f"({time.strftime('%H:%M:%S')})", flush=True)
    return {"fresh_sessions": fresh, "attention_sessions": attention_sessions(attention)}


def main() -> dict:
    t0 = time.perf_counter()
    machine = {"cpus": os.cpu_count(), "memory_gb": psutil.virtual_memory().total / 2**30,
               "load_1min_at_start": os.getloadavg()[0]}  # its cores are shared with others
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine,
                     "serving": measure_visitor_memory()}
    print(json.dumps(results["serving"], indent=1))
    return finish(results, TARGETS, t0, "visitor-memory-results.json")


if __name__ == "__main__":
    main()
