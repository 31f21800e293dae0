"""'Try it' handlers: the answer streaming in, timed live, served by the app's one continuous
batcher. `generate_chat` waits on the event loop, not in a thread of its own: a class of waiting
chats costs one wake-up per step, not thirty threads taking Python's lock from it."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import NamedTuple

from inference.config import Settings
from inference.experiments import noise
from inference.sampling import SamplingSettings
from inference.tokens import clean_text
from visualizations.noise_view import busy_notice_html
from visualizations.server_view import limit_note, shared_steps_note, waiting_md
from visualizations.timing_text import live_stats_md

from .common.client_timing import FramePace, atimed_events
from .common.prompt_input import encode_prompt
from .start_handlers import STARTERS

EXAMPLES = [[p] for p in STARTERS]  # the same prompts as Start here's buttons


class ChatFrame(NamedTuple):
    history: list[dict]  # the chat as messages: the visitor's prompt, the answer so far
    stats: str  # measured TTFT / time per token / tokens/s, then the batching line


async def generate_chat(lm, settings: Settings, server, prompt: str, max_new: int,
                        visitor: str = "") -> AsyncIterator[ChatFrame]:
    """Stream a greedy answer from the shared server, timed as this visitor saw it (TTFT from
    pressing Generate). `visitor`: who asks, for the server's fair line."""
    ids = encode_prompt(lm, settings, prompt)
    shown = clean_text(prompt)  # echo the cleaned text (a lone surrogate cannot be sent back)
    history = [{"role": "user", "content": shown}, {"role": "assistant", "content": ""}]
    if isinstance(max_new, float) and max_new.is_integer():
        max_new = int(max_new)
    req = server.submit(ids, SamplingSettings(), max_new, visitor=visitor)
    frame = ChatFrame([dict(m) for m in history], waiting_md(req.ahead))
    yield frame
    # LLM_LAB_SERVE_URL: another engine answers; say which (asked once, not per token)
    remote = (f"Served by {await asyncio.to_thread(server.describe)}, not by this machine."
              if hasattr(server, "describe") else "")  # an HTTP call: off the event loop
    pace, behind = FramePace(settings.chat_frames_per_s), None  # the class's frames, shared
    first = None  # the first token's event: what its prefill computed
    marks: list[float] = []  # decode seconds so far at each token: their gaps, for the noise rule
    try:
        async for timed in atimed_events(req, settings.stop_check_s):
            if timed is not None:
                first = first or timed[0]
                marks.append(timed[2])
                behind = timed
                if not pace.due(timed[0]):  # a class is answered: drawn at its next due token
                    continue
            if behind is not None:  # else nothing new: the newest frame, where a Stop can land
                frame = _chat_frame(lm, req, ids, history, remote, behind, first,
                                    _judged(behind, marks, settings))
                behind = None
            yield frame
    finally:
        req.cancel()  # Stop, a closed tab or an error: the row is freed at the next step


def _judged(timed, marks: list[float], settings: Settings) -> noise.Noise | None:
    """The finished answer's noise reading, from the gaps between its tokens (None before)."""
    if not timed[0].finished:
        return None
    return noise.reading([b - a for a, b in zip(marks[1:], marks[2:])], settings)


def _chat_frame(lm, req, ids: list[int], history: list[dict], remote: str, timed,
                first=None, judged: noise.Noise | None = None) -> ChatFrame:
    """The chat after `timed`'s event: the answer so far and its times (`first`: the first
    token's event, what the prefill computed; `judged`: the finished answer's reading)."""
    ev, ttft, decode_s, n = timed
    ended = ev.finished == "end of turn"
    history[1]["content"] = ev.text.replace(lm.tokenizer.eos_token, "") if ended else ev.text
    served = remote or shared_steps_note(req.mean_batch_rows, 0.0)  # the wait: in TTFT's line
    lines = [live_stats_md(ttft, decode_s, n, len(ids), first, req.queued_seconds), served,
             limit_note(ev.finished, req.max_new_tokens)]
    return ChatFrame([dict(m) for m in history],
                     busy_notice_html(judged) + "  \n".join(x for x in lines if x))
