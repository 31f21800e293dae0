"""A memory budget for the KV caches that visitors keep between clicks (lesson 3).

`CacheBudget` frees caches (a Generation's, lesson 4's attention views), oldest use first, once
idle longer than `idle_s` or while all together exceed `cap_bytes` (never the one just used).
"""
from __future__ import annotations

import threading
import time
import weakref

from .compute_thread import trim_heap
from .generation import Generation


class CacheBudget:
    def __init__(self, cap_bytes: int, idle_s: float) -> None:
        self.cap_bytes, self.idle_s = cap_bytes, idle_s
        self._lock = threading.Lock()
        self._held: dict[int, tuple[weakref.ref, float]] = {}  # id -> (generation, last use)

    def touch(self, gen: Generation) -> None:
        """`gen` was just used: remember it and free others' caches if over the budget."""
        with self._lock:
            self._held[id(gen)] = (weakref.ref(gen), time.monotonic())
            freed = self._enforce(keep=gen)
        events = getattr(gen, "events", None)
        if freed or (events and events[-1].forward_tokens > 256):
            trim_heap()  # after freeing caches, or after a long prefill's scratch memory

    def forget(self, gen: Generation | None) -> None:
        """The visitor is gone (tab closed, state expired): free the cache now."""
        if gen is None:
            return
        with self._lock:
            self._held.pop(id(gen), None)
        gen.free_cache()
        trim_heap()

    def held_bytes(self) -> int:
        """Bytes of all held caches right now."""
        with self._lock:
            return sum(gen.held_bytes() for gen, _ in self._alive().values())

    def _alive(self) -> dict[int, tuple[Generation, float]]:
        """The held caches whose owner still exists (-> id: (it, last use)); the rest forgotten."""
        alive = {}
        for key, (ref, used) in list(self._held.items()):
            if (gen := ref()) is None:
                del self._held[key]
            else:
                alive[key] = (gen, used)
        return alive

    def _enforce(self, keep: Generation) -> int:
        now, freed = time.monotonic(), 0
        by_age = sorted(self._alive().items(), key=lambda kv: kv[1][1])  # oldest use first
        total = sum(gen.held_bytes() for _, (gen, _) in by_age)
        for key, (gen, used) in by_age:
            if gen is not keep and (total > self.cap_bytes or now - used > self.idle_s):
                total -= gen.held_bytes()
                gen.free_cache()
                del self._held[key]
                freed += 1
        return freed
