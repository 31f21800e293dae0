"""What every tab's `build` receives: one record for all tabs, so `app.py` builds them in one
loop from `lessons.TABS`."""
from __future__ import annotations

from dataclasses import dataclass

from inference.config import Settings


@dataclass(frozen=True)
class AppContext:
    """The app-wide objects a panel may use (the model is shared, read-only, by every visitor)."""

    lm: object  # the loaded model (inference.loading.LoadedModel)
    settings: Settings  # every default and limit
    shared: object = None  # SharedResults: finished sweeps, shared by the visitors of a process
    server: object = None  # the serving engine: chat goes through it, measurements take turns
    demo: object = None  # the gr.Blocks app (for page-load events)
    tabs: object = None  # the gr.Tabs strip (buttons that switch tabs)
    chat: object = None  # where "Try it" chats go: `server`, or a RemoteEngine (LLM_LAB_SERVE_URL)
    runs: object = None  # SharedRuns: identical measurements share one run (classroom.shared_runs)
