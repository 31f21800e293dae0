"""In the browser: lesson 4b's small pool redraws after each button, and the live server view's
pool changes while a chat streams (its blocks appear, grow, and go back when it ends)."""
from __future__ import annotations

from e2e_browser import (
    assert_clean,
    fill_text,
    open_tab,
    screenshot,
    set_slider,
    text_of,
    wait_text_change,
    wait_until,
)


def held(page, elem_id: str) -> int:
    """Blocks drawn as held by a request (plain or shared) in the grid with this elem_id."""
    return page.locator(f"#{elem_id} .lab-block[data-kind^='request'], "
                        f"#{elem_id} .lab-block[data-kind^='shared']").count()


def test_lesson_4b_pages_and_the_live_pool_while_a_chat_streams(visitor):
    page, watch = visitor
    open_tab(page, "4b · KV pages")
    before = text_of(page, "pages-story")
    fill_text(page, "pages-prompt", "Name a bird.")
    page.locator("#pages-add").click()
    story = wait_text_change(page, "pages-story", before, timeout_s=90)
    assert "Request 0" in story and "blocks" in story
    wait_until(lambda: held(page, "pages-grid") > 0, 30, "the request's blocks drawn")
    screenshot(page, "4b-kv-pages")

    # Watch first, then start a long answer: a short one could end before the first redraw.
    open_tab(page, "This machine")
    page.locator("#server-watch input").check()  # the view redraws itself every 2 s
    open_tab(page, "Try it")
    set_slider(page, "chat-generate", "Max new tokens", 256)
    fill_text(page, "chat-prompt", "Write a long poem about the sea, the wind and the ships.")
    page.locator("#chat-generate").click()
    open_tab(page, "This machine")
    seen: list[int] = []

    def streaming_seen() -> bool:
        seen.append(held(page, "server-pool"))
        return len({n for n in seen if n > 0}) >= 2 or (max(seen) > 0 and seen[-1] == 0)

    wait_until(streaming_seen, 120, "the server's pool changing while the chat streams")
    assert max(seen) > 0, seen
    assert "block table" in text_of(page, "server-pool-tables") or seen[-1] == 0
    screenshot(page, "server-pool-live")
    open_tab(page, "Try it")
    page.locator("#chat-stop").click()  # the later tests need the server to themselves
    assert_clean(page, watch)
