"""Which screen each open presenter page shows now, as its own moves said (page id -> screen
index). A measurement can end seconds after it started, on a busy machine after the presenter
has turned several pages: its figure then lands in the visitor's progress without turning the
page back to the screen it was started on."""
from __future__ import annotations

import threading
from collections import OrderedDict


class PageScreens:
    """The newest screen of at most `limit` pages (the oldest-moved forgotten first)."""

    def __init__(self, limit: int) -> None:  # Settings.sessions_held: as many as visitors held
        self._limit = limit
        self._at: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def moved(self, page: str | None, screen: int) -> None:
        """Page `page` now shows `screen` (None: a page without an id, not remembered)."""
        if page is None:
            return
        with self._lock:
            self._at[page] = screen
            self._at.move_to_end(page)
            while len(self._at) > self._limit:
                self._at.popitem(last=False)

    def now(self, page: str | None, otherwise: int) -> int:
        """The screen `page` shows now, or `otherwise` when it never moved (or was forgotten)."""
        with self._lock:
            return self._at.get(page, otherwise) if page is not None else otherwise
