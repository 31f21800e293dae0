"""Three costs the web stack (Gradio 6.31) adds to serving, removed where they are paid.

Found by profiling the running app under the class workload (30 chats at once, py-spy on the
app's process), where they held the event loop (and Python's lock, which the server's
compute thread needs between its kernels) for seconds while the class waited:

- **A new session built every block's config** (`gradio.state_holder.SessionState`): the first
  event of each visitor copies the config of all of the app's blocks (~140 ms on a 2-core CPU
  here, on the event loop), though Gradio reads one only when an event updates that block, and
  all of them only for a "deep link". `lazy_session_configs()` makes that dict lazy: each
  block's config is built the first time it is read, the same value as before.
- **A failed import on every call**: around each handler call (each streamed update too)
  Gradio does `import matplotlib` to switch its backend. This app draws with Plotly and
  does not install Matplotlib, so each call searched `sys.path` again (a failed import is
  not remembered). `no_matplotlib_search()` records it as absent (`sys.modules[...] = None`,
  Python's own way to say "not importable"), so the import fails at once, as it did before.

- **The queue looks for work 1,000 times a second**: Gradio's queue loop sleeps 1 ms between
  looks when it has nothing to start (and its progress loop 10 ms), so even an idle app kept
  ~9% of a core busy and took Python's lock from the compute thread ~1,000 times a second;
  on 2 cores that also pushes one of PyTorch's threads off its core mid-product, so a decode
  step beside an idle web server is slower than without one. `calm_queue(demo,
  poll_s)` sets the look to `poll_s` (`Settings.queue_poll_s`): a new event starts at most
  that much later, far below a token's time; progress lines are sent every 0.1 s.

All three are checked against the real Gradio in tests/test_web_costs.py, so an upgrade that
changes what they rely on fails there.
"""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from gradio import state_holder


class LazyConfigs(dict):
    """`SessionState.config_values`, built per block on first read instead of all at once."""

    def __init__(self, blocks_config: Any, keys: Iterable[int]) -> None:
        super().__init__()
        self._blocks_config = blocks_config
        self._pending = set(keys)  # blocks whose config is not built yet

    def __missing__(self, key: int) -> dict:
        if key not in self._pending:
            raise KeyError(key)
        self._pending.discard(key)
        value = self._blocks_config.config_for_block(key, [], self._blocks_config.blocks[key])
        super().__setitem__(key, value)
        return value

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or key in self._pending

    def __setitem__(self, key: int, value: dict) -> None:
        self._pending.discard(key)
        super().__setitem__(key, value)

    def _built(self) -> None:
        for key in sorted(self._pending):
            self[key]  # noqa: B018 (builds it through __missing__)

    def items(self):  # a deep link reads them all
        self._built()
        return super().items()

    def values(self):
        self._built()
        return super().values()

    def keys(self):
        self._built()
        return super().keys()

    def __iter__(self) -> Iterator[int]:
        self._built()
        return super().__iter__()

    def __len__(self) -> int:
        return super().__len__() + len(self._pending)


def _lazy_init(self, blocks) -> None:
    """`SessionState.__init__` with `config_values` lazy (the rest as Gradio sets it)."""
    _GRADIO_INIT(self, _NoBlocks(blocks))
    self.config_values = LazyConfigs(self.blocks_config,
                                     [k for k in self.blocks_config.blocks if k in blocks.blocks])


class _NoBlocks:
    """`blocks` as Gradio's own `__init__` sees it: every attribute, but no block to build a
    config for (the lazy dict replaces that part)."""

    def __init__(self, blocks) -> None:
        self._blocks = blocks
        self.blocks: dict = {}

    def __getattr__(self, name: str):
        return getattr(self._blocks, name)


_GRADIO_INIT = state_holder.SessionState.__init__


def lazy_session_configs() -> None:
    """A new visitor's session builds block configs only when they are read (idempotent)."""
    if state_holder.SessionState.__init__ is not _lazy_init:
        state_holder.SessionState.__init__ = _lazy_init


def no_matplotlib_search() -> None:
    """Record Matplotlib as absent when it is not installed, so Gradio's per-call
    `import matplotlib` fails at once instead of searching every path again."""
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]


PROGRESS_POLL_S = 0.1  # how often Gradio's progress loop sends pending progress updates


def calm_queue(demo, poll_s: float) -> None:
    """Gradio's queue (after `demo.queue()`) looks for new work every `poll_s` seconds."""
    queue = demo._queue
    queue.sleep_when_free = max(poll_s, queue.sleep_when_free)
    queue.progress_update_sleep_when_free = max(PROGRESS_POLL_S,
                                                queue.progress_update_sleep_when_free)


def trim_web_costs() -> None:
    """The per-visitor two, once, before the app builds its blocks (`calm_queue` comes
    after `demo.queue()`)."""
    lazy_session_configs()
    no_matplotlib_search()
