"""Visitors type anything: each bad input gets a clear message, and the next request works.

Requests go to the running app's named endpoints (gradio_client, or raw HTTP where the client
cannot even encode the input, e.g. lone surrogates), so the browser's own clamping of sliders
and text lengths is bypassed. Browser-only cases (double click, Stop, closing the tab while
an answer streams) run in headless Chromium.
"""
from __future__ import annotations

import json
import re
import time

import pytest
from gradio_client import Client

from e2e_browser import (
    click_reading,
    fill_text,
    open_tab,
    record_changes,
    recorded_changes,
    set_slider,
    text_of,
    toasts,
    wait_settled,
    wait_until,
)
from e2e_server import call_raw

LEAK = re.compile(r"Traceback|File \"|\.py\b|line \d+|/work/|site-packages")
TOO_MANY_TOKENS = "7 " * 9_000  # 18,000 characters (under the 20,000 limit), ~9,000 tokens


def error_of(call) -> str:
    """Run `call`, which must fail; return the message the visitor gets (checked clean)."""
    with pytest.raises(Exception) as info:
        call()
    message = str(info.value)
    assert message and message != "None", f"no message for the visitor: {info.value!r}"
    assert not LEAK.search(message), f"stack trace or path leaked: {message!r}"
    return message


def answer_text(chat_result) -> str:
    """The assistant's text from the chat endpoint's (history, stats) result."""
    history = chat_result[0]
    content = history[-1]["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def assert_serving(client: Client) -> None:
    """The next ordinary request still works."""
    result = client.predict("Say hi.", 2, api_name="/chat")
    assert answer_text(result).strip()
    assert "Measured" in result[1]


def test_empty_and_whitespace_prompts(client):
    for prompt in ["", "   ", " \n\t "]:
        assert "empty" in error_of(lambda p=prompt: client.predict(p, 4, api_name="/chat"))
        assert "empty" in error_of(lambda p=prompt: client.predict(p, api_name="/prefill_measure"))
        assert "empty" in error_of(lambda p=prompt: client.predict(p, 4, 0, 0, 1, 0,
                                                                   api_name="/decode_step"))
    assert_serving(client)


def test_hundred_thousand_characters(client):
    huge = "a" * 100_000
    assert "20,000" in error_of(lambda: client.predict(huge, 4, api_name="/chat"))
    assert "20,000" in error_of(lambda: client.predict(huge, api_name="/prefill_measure"))
    assert "20,000" in error_of(lambda: client.predict(huge, False, api_name="/tokenize"))
    assert_serving(client)


def test_control_characters_and_lone_surrogates(server, client):
    nasty = "a\x00b\x07c\x1b[31m\ud800d\udfff say hi"
    event, data = call_raw(server.url, "chat", [nasty, 2])
    assert event == "complete", data
    assert "Measured" in data[1]
    event, data = call_raw(server.url, "tokenize", [nasty, True])
    assert event == "complete", data
    view = data[0]
    assert "\x00" not in view and "\ud800" not in view and "\x1b" not in view
    assert "tokens" in data[1]
    result = client.predict("tab\there\x0bvertical\x0cfeed", 2, 0, 0, 1, 0, api_name="/decode_step")
    assert "Tokens:** 1" in result[1]
    assert_serving(client)


def test_emoji_and_right_to_left_text(client):
    text = "مرحبا بالعالم 🚀👩‍👩‍👧 שלום עולם ‮reversed‬ 🍕"
    view, counts, _note = client.predict(text, False, api_name="/tokenize")
    assert "🍕" in view and "ל" in view and "ب" in view  # emoji, Hebrew and Arabic pieces shown
    assert f"**{len(text)}** characters" in counts
    assert int(re.search(r"\*\*(\d+)\*\* tokens", counts).group(1)) > len(text.split())
    assert answer_text(client.predict(text, 3, api_name="/chat")).strip()


def test_prompt_longer_than_the_token_limit(client):
    for call in [lambda: client.predict(TOO_MANY_TOKENS, 4, api_name="/chat"),
                 lambda: client.predict(TOO_MANY_TOKENS, api_name="/prefill_measure"),
                 lambda: client.predict(TOO_MANY_TOKENS, 4, 0, 0, 1, 0, api_name="/decode_step")]:
        message = error_of(call)
        assert "tokens" in message and "4,096" in message, message
    assert_serving(client)


@pytest.mark.parametrize("api, args, expected", [
    ("/chat", ("hi", 0), "minimum"),
    ("/chat", ("hi", 513), "maximum"),
    ("/chat", ("hi", 10**9), "maximum"),
    ("/decode_step", ("hi", 4, 5.0, 0, 1, 0), "maximum"),     # temperature
    ("/decode_step", ("hi", 4, -1.0, 0, 1, 0), "minimum"),
    ("/decode_step", ("hi", 4, 0, 0, 0.0, 0), "minimum"),     # top-p
    ("/decode_step", ("hi", 4, 0, 0, 1.5, 0), "maximum"),
    ("/decode_step", ("hi", 4, 0, -3, 1, 0), "minimum"),      # top-k
    ("/decode_step", ("hi", 100_000, 0, 0, 1, 0), "maximum"),  # max new tokens
    ("/decode_step", ("hi", 4, 0, 0, 1, -1), "minimum"),      # seed
    ("/prefill_sweep", ([1, 999_999], 8, None), "choices"),    # prompt lengths
    ("/prefill_sweep", ([1], 100_000, None), "maximum"),       # one-at-a-time limit
    ("/prefill_sweep", ([1], 8, -5), "minimum"),               # a guess below zero
    ("/token_cost", ("hi", -5, 1, 1), "minimum"),
    ("/token_cost", ("hi", 5, 1e9, 1), "maximum"),
])
def test_out_of_range_settings(client, api, args, expected):
    assert expected in error_of(lambda: client.predict(*args, api_name=api))


def test_not_a_number_settings(server, client):
    # NaN (valid for Python's JSON reader) and text where a number belongs.
    for data in (["hi", float("nan")], ["hi", "abc"]):
        event, payload = call_raw(server.url, "chat", data)
        assert event == "error"
        assert not LEAK.search(json.dumps(payload)), payload
    assert_serving(client)


def test_two_requests_at_once_from_one_visitor(client):
    jobs = [client.submit("Say hi.", 3, api_name="/chat") for _ in range(2)]
    for job in jobs:
        assert answer_text(job.result(timeout=120)).strip()


def test_stop_mid_run_through_the_api(client):
    job = client.submit("Tell me a long story about a dragon.", 200, api_name="/chat")
    wait_until(lambda: len(job.outputs()) >= 2, 60, "the answer to start streaming")
    job.cancel()
    started = time.monotonic()
    assert_serving(client)
    assert time.monotonic() - started < 60


def decode_tokens(stats_md: str) -> int:
    return int(re.search(r"Tokens:\*\* (\d+)", stats_md).group(1))


def test_one_visitors_stop_and_reset_leave_another_alone(server):
    alice, bob = Client(server.url, verbose=False), Client(server.url, verbose=False)
    for n in range(1, 4):
        assert decode_tokens(alice.predict("Name a fruit.", 20, 0, 0, 1, 0,
                                           api_name="/decode_step")[1]) == n
    assert decode_tokens(bob.predict("Name a colour.", 20, 0, 0, 1, 0,
                                     api_name="/decode_step")[1]) == 1
    bob.predict(0, 0, 0, 1, 0, api_name="/decode_stop")  # (tokens shown, T, top-k, top-p, seed)
    bob.predict(0, 0, 1, 0, api_name="/decode_reset")
    stats = alice.predict("Name a fruit.", 20, 0, 0, 1, 0, api_name="/decode_step")[1]
    assert decode_tokens(stats) == 4 and "stopped" not in stats


# ---- in the browser (the `visitor` fixture: a fresh tab on the app, closed after) -------------

def generated(stats: str) -> int | None:
    """The "N tokens generated" count in the chat's stats line (None before any token)."""
    m = re.search(r"(\d+) tokens generated", stats)
    return int(m.group(1)) if m else None


def test_browser_empty_prompt_shows_a_clear_message(visitor):
    page, watch = visitor
    open_tab(page, "Try it")
    fill_text(page, "chat-prompt", "   ")
    page.locator("#chat-generate").click()
    shown = wait_until(lambda: toasts(page), 30, "an error message")
    assert any("empty" in t for t in shown), shown
    assert not any(LEAK.search(t) for t in shown), shown
    assert watch.problems == []


def test_browser_double_click_runs_once(visitor):
    page, watch = visitor
    open_tab(page, "Try it")
    set_slider(page, "chat-generate", "Max new tokens", 4)
    fill_text(page, "chat-prompt", "Say hi.")
    record_changes(page, "chat-stats")
    page.locator("#chat-generate").dblclick()
    wait_until(lambda: "tokens generated" in text_of(page, "chat-stats"), 60, "an answer")
    wait_settled(page, "chat-stats")  # the answer is finished and nothing else is running
    counts = [n for t in recorded_changes(page, "chat-stats") if (n := generated(t)) is not None]
    # One run: its count only grows. A second run would start again from 1 (replacing the
    # answer) or add a second "Say hi." to the chat.
    assert counts and counts == sorted(counts) and counts[-1] <= 4, counts
    box = text_of(page, "chat-box")
    assert box.count("Say hi.") == 1, box
    assert toasts(page) == [] and watch.problems == []


def test_browser_stop_mid_stream_then_generate_again(visitor):
    page, watch = visitor
    open_tab(page, "Try it")
    set_slider(page, "chat-generate", "Max new tokens", 300)
    fill_text(page, "chat-prompt", "Tell me a long story about a dragon.")
    page.locator("#chat-generate").click()
    wait_until(lambda: "tokens generated" in text_of(page, "chat-stats"), 60, "streaming")
    at_stop = generated(click_reading(page, "chat-stop", "chat-stats"))
    # Tokens still coming after Stop: the text never settles, or settles far past the click.
    # Stop lands at the handler's next yield: a token, or an idle tick (`stop_check_s`); the
    # page then waits for Gradio's /cancel and /reset. Minutes only on a badly loaded machine.
    stopped = wait_settled(page, "chat-stats", timeout_s=120)
    n = generated(stopped)
    assert at_stop is not None and n is not None and n < 300, stopped
    assert at_stop <= n <= at_stop + 3, f"{at_stop} tokens when Stop was clicked, {n} after"
    set_slider(page, "chat-generate", "Max new tokens", 3)
    page.locator("#chat-generate").click()
    wait_until(lambda: (m := generated(text_of(page, "chat-stats"))) is not None and m <= 3,
               60, "the next answer")
    assert toasts(page) == [] and watch.problems == []


def test_browser_closing_the_tab_mid_stream(server, visitor, client):
    page, _watch = visitor
    open_tab(page, "Try it")
    set_slider(page, "chat-generate", "Max new tokens", 400)
    fill_text(page, "chat-prompt", "Tell me a long story about a castle.")
    page.locator("#chat-generate").click()
    wait_until(lambda: "tokens generated" in text_of(page, "chat-stats"), 60, "streaming")
    page.close()  # the visitor leaves while the answer is still streaming
    started = time.monotonic()
    assert_serving(client)
    assert time.monotonic() - started < 60
    assert server.alive()
