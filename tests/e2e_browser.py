"""A real, headless Chromium for end-to-end tests, and the few moves a test needs in it.

Playwright drives Debian's `/usr/bin/chromium` (Playwright cannot download its own browser
on these machines; `make browser` installs Chromium). Each `open_browser()` gets a fresh
user-data folder, so every test run is a brand-new visitor. `ConsoleWatch` collects what
the browser console reports, minus the one known harmless message (see KNOWN_HARMLESS).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from e2e_server import ARTIFACTS

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = ARTIFACTS / "screenshots"
# Gradio's client aborts its event stream after each finished event: harmless.
KNOWN_HARMLESS = re.compile(r"/gradio_api/queue/data")


@contextmanager
def open_browser() -> Iterator[object]:
    """Yield a Playwright browser context (headless Chromium, fresh profile); close it after."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: run `make browser` (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="e2e-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
                viewport={"width": 1280, "height": 900})
            context.set_default_timeout(30_000)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class ConsoleWatch:
    """Everything that went wrong in one page: console errors, page errors, failed requests."""

    def __init__(self, page) -> None:
        self.problems: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("requestfailed", self._on_request_failed)
        page.on("response", self._on_response)

    def _on_response(self, response) -> None:
        if response.status == 422 or response.status >= 500:  # say which, with what it sent
            body = (response.request.post_data or "")[:300]
            self.problems.append(f"refused request ({response.status}): {response.url} {body}")

    def _on_console(self, msg) -> None:
        if msg.type == "error":
            self.problems.append(f"console error: {msg.text}")

    def _on_request_failed(self, request) -> None:
        if not KNOWN_HARMLESS.search(request.url):
            self.problems.append(f"request failed: {request.url} ({request.failure})")


def new_visitor(context, url: str):
    """Open the app in a new tab as a new visitor; return (page, console watch)."""
    page = context.new_page()
    watch = ConsoleWatch(page)
    page.goto(url)
    page.wait_for_selector("#lesson-tabs", timeout=60_000)  # the model card is in "About"
    return page, watch


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def fill_text(page, elem_id: str, text: str) -> None:
    """Type into the textbox with this elem_id (replacing what was there)."""
    box = page.locator(f"#{elem_id} textarea")
    box.fill(text)
    box.blur()


def tab_panel(page, elem_id: str):
    """The innermost tab panel holding #elem_id (sub-tabs inside a lesson have their own)."""
    return page.locator(f"#{elem_id}").locator("xpath=ancestor::div[@role='tabpanel'][1]")


def set_slider(page, near_elem_id: str, label: str, value: float) -> None:
    """Set the slider labelled `label` in the same tab as `near_elem_id`, via its number box."""
    box = tab_panel(page, near_elem_id).get_by_label(f"number input for {label}", exact=True)
    box.fill(str(value))
    box.press("Enter")
    box.blur()


def set_number(page, elem_id: str, value: float) -> None:
    """Type a value into the gr.Number with this elem_id and commit it (Enter, then blur)."""
    box = page.locator(f"#{elem_id} input")
    box.fill(str(value))
    box.press("Enter")
    box.blur()


def choose_option(page, elem_id: str, option: str) -> None:
    """Pick `option` in the gr.Dropdown with this elem_id, as a visitor would: open, click."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


def table_rows(page, elem_id: str) -> list[dict[str, str]]:
    """The rows of the first table inside #elem_id (a rendered markdown table), keyed by header."""
    return page.evaluate(
        """id => { const t = document.querySelector('#' + id + ' table');
                   if (!t) return [];
                   const heads = Array.from(t.querySelectorAll('thead th'))
                     .map(h => h.innerText.trim());
                   return Array.from(t.querySelectorAll('tbody tr')).map(tr => {
                     const row = {};
                     Array.from(tr.children).forEach((td, i) => {
                       row[heads[i] || String(i)] = td.innerText.trim(); });
                     return row; }); }""", elem_id)


def text_of(page, elem_id: str) -> str:
    """The visible text of #elem_id, without Gradio's progress timer ("0.4s")."""
    return page.evaluate(
        """id => { const el = document.querySelector('#' + id); if (!el) return '';
                   return Array.from(el.children)
                     .filter(c => !c.matches('[data-testid=status-tracker]'))
                     .map(c => c.innerText).join('\\n').trim(); }""", elem_id)


def judged_busy(text: str) -> bool:
    """True when a shown result says the noise rule judged its run busy (the browser shares
    this machine's cores with the app, so a test's run may be busy): no verdict is drawn then."""
    return "busy while measuring" in text.lower() or "on a busy machine" in text.lower()


def busy(page, elem_id: str) -> bool:
    """True while Gradio shows a progress indicator on #elem_id (its event is running)."""
    return page.locator(f"#{elem_id} [data-testid=status-tracker]:not(.hide)").count() > 0


def wait_until(predicate: Callable[[], object], timeout_s: float = 60, what: str = "") -> object:
    """Poll `predicate` until it returns something truthy; fail with `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.25)


def settled_value(read: Callable[[], object], ok: Callable[[object], bool],
                  timeout_s: float = 10) -> object:
    """Poll `read()` until `ok(value)` holds (e.g. a layout after a resize has settled) and
    return the value; on timeout return the last value read, so the caller's assert says why."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def wait_text_change(page, elem_id: str, before: str, timeout_s: float = 60) -> str:
    """Wait until the text of #elem_id differs from `before`; return the new text."""
    return wait_until(lambda: (t := text_of(page, elem_id)) != before and t,
                      timeout_s, f"#{elem_id} to change from {before[:60]!r}")


def plot_title(page, elem_id: str) -> str | None:
    """The title of the Plotly chart inside #elem_id once drawn, else None."""
    return page.evaluate(
        """id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
                   if (!g || !g.layout) return null;
                   const t = g.layout.title; const s = t ? (t.text || String(t)) : '';
                   return s.replace(/<br>/g, ' '); }""",  # long titles wrap (style.py)
        elem_id)


def plot_caption(page, elem_id: str) -> str:
    """The caption under the title of the Plotly chart inside #elem_id, or ""."""
    return page.evaluate(
        """id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
                   const t = g && g.layout && g.layout.title;
                   return ((t && t.subtitle && t.subtitle.text) || '').replace(/<br>/g, ' '); }""",
        elem_id)


def plot_points(page, elem_id: str) -> int:
    """How many data points the chart inside #elem_id draws (all traces together)."""
    return page.evaluate(
        """id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
                   if (!g || !g.data) return 0;
                   return g.data.reduce((n, t) => n + ((t.x || t.y || []).length || 0), 0); }""",
        elem_id)


def toasts(page) -> list[str]:
    """Texts of the error/warning toasts showing now."""
    return [t.strip() for t in page.locator("[data-testid=toast-body]").all_inner_texts()]


def close_toasts(page) -> None:
    for button in page.locator("[data-testid=toast-close]").all():
        if button.is_visible():
            button.click()


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def number(pattern: str, text: str) -> float:
    """The number captured by `pattern` in `text` (thousands separators allowed)."""
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not found in {text!r}"
    return float(m.group(1).replace(",", ""))


def wait_stable(page, elem_id: str, quiet_s: float, timeout_s: float, seen: list | None = None
                ) -> str:
    """Wait until #elem_id's text stops changing for `quiet_s`; record each version seen."""
    seen = [] if seen is None else seen
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() < deadline:
        now = text_of(page, elem_id)
        if now != last:
            seen.append(now)
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(0.2)
    raise AssertionError(f"#{elem_id} kept changing for {timeout_s} s")


def wait_settled(page, elem_id: str, polls: int = 8, every_s: float = 0.25,
                 timeout_s: float = 60) -> str:
    """Wait until #elem_id has no event running on it and shows the same text for `polls`
    polls in a row (`every_s` apart); return that text. Fails when the text keeps changing,
    e.g. tokens still arriving after Pause or Stop: use this, not a sleep, before asserting
    that something stopped."""
    deadline, last, same = time.monotonic() + timeout_s, None, 0
    while time.monotonic() < deadline:
        now = None if busy(page, elem_id) else text_of(page, elem_id)
        same = same + 1 if now is not None and now == last else 0
        if same >= polls:
            return now
        last = now
        time.sleep(every_s)
    tracker = page.locator(f"#{elem_id} [data-testid=status-tracker]")
    state = tracker.first.inner_text() if tracker.count() else "no tracker"
    raise AssertionError(f"#{elem_id} did not settle within {timeout_s:.0f} s "
                         f"(last text {last!r:.120}; its progress shows {state!r:.80}; "
                         f"it reads {text_of(page, elem_id)!r:.120})")


def click_reading(page, button_id: str, elem_id: str) -> str:
    """Click #button_id and return the text #elem_id showed at that instant (one script in
    the page, so no update can land between the read and the click)."""
    return page.evaluate(
        """([button, id]) => { const el = document.querySelector('#' + id);
                               const t = Array.from(el.children)
                                 .filter(c => !c.matches('[data-testid=status-tracker]'))
                                 .map(c => c.innerText).join('\\n').trim();
                               document.querySelector('#' + button).click(); return t; }""",
        [button_id, elem_id])


def record_changes(page, elem_id: str) -> None:
    """Start recording every text #elem_id shows (a MutationObserver in the page, so no
    version is missed between polls); read them with `recorded_changes`."""
    page.evaluate(
        """id => { const el = document.querySelector('#' + id);
                   const seen = (window.__seen = window.__seen || {})[id] = [];
                   const text = () => Array.from(el.children)
                     .filter(c => !c.matches('[data-testid=status-tracker]'))
                     .map(c => c.innerText).join('\\n').trim();
                   new MutationObserver(() => { const t = text();
                     if (t !== seen[seen.length - 1]) seen.push(t); })
                     .observe(el, {subtree: true, childList: true, characterData: true}); }""",
        elem_id)


def recorded_changes(page, elem_id: str) -> list[str]:
    """Every text #elem_id showed since `record_changes`, in order (repeats collapsed)."""
    return page.evaluate("id => (window.__seen || {})[id] || []", elem_id)


def assert_clean(page, watch) -> None:
    """No error toast on screen and nothing wrong in the browser console."""
    shown = toasts(page)
    assert shown == [], f"error toasts on screen: {shown}"
    assert watch.problems == [], f"problems in the page: {watch.problems}"


def decode_count(stats: str) -> int:
    """The token count in the decode lesson's stats text (0 before the first Step)."""
    return 0 if "No tokens yet" in stats else int(number(r"Tokens:\s*(\d+)", stats))


def decode_tokens(page) -> int:
    """How many tokens the decode lesson shows now."""
    return decode_count(text_of(page, "decode-stats"))


def app_base(server) -> str:
    return server.url.rstrip("/") + "/"


# Requests a reload cuts off: the heartbeat, a quick unqueued event, and a script chunk the page
# was still fetching for a tab just opened (a real asset failure is a 404, not an abort).
DROPPED_BY_NAVIGATION = ("/gradio_api/heartbeat/", "/gradio_api/run/predict", "/assets/")
# What Gradio's client logs when a reload cuts the stream of the first screen's live answer
# (Start here answers on page load): the page went away mid-stream, nothing failed.
STREAM_CUT_BY_NAVIGATION = ("AbortError: signal is aborted without reason",
                            "Unexpected error Connection errored out")


def assert_clean_after_navigation(page, watch) -> None:
    """`assert_clean`, less the requests a page drops when the test navigates it away
    (`DROPPED_BY_NAVIGATION`: aborted by the reload, not failed)."""
    watch.problems[:] = [p for p in watch.problems if not (
        ("ERR_ABORTED" in p and any(url in p for url in DROPPED_BY_NAVIGATION))
        or any(cut in p for cut in STREAM_CUT_BY_NAVIGATION))]
    assert watch.problems == [], watch.problems
    assert_clean(page, watch)


def goto(page, url: str) -> None:
    """Open `url` and wait for the app's tab strip."""
    page.goto(url)
    page.wait_for_selector("#lesson-tabs", state="attached", timeout=60_000)
