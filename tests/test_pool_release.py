"""Memory that comes back from the KV pool (`PagedKV.release_free`): the free blocks' pages go
back to the system and read as zeros, every kept block keeps its values to the bit, and the
released pages leave the resident set. Then the real server on the real model: chats end, the
compute thread goes idle, the free blocks are released there, and a new chat still gets its
solo greedy tokens, mapping the idle cached blocks that were kept.

Resident memory is checked per page with `mincore` on the pool's own pages, not as the
process's RSS: the RSS moves with whatever else the process (or the test runner) allocates,
while a private anonymous page dropped by MADV_DONTNEED is gone from the page table at once,
so `mincore` says so deterministically."""
from __future__ import annotations

import ctypes
import mmap
import sys

import pytest
import torch

from inference import compute_thread
from inference.compute_thread import IdleHook
from inference.config import Settings
from inference.generation import stream
from inference.paged_cache import PagedKV
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.tokens import prompt_ids
from polling import wait_for

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="madvise zeroes pages on Linux")
PAGE = mmap.PAGESIZE


def filled_pool(num_blocks: int, block_tokens: int = 16) -> PagedKV:
    kv = PagedKV.allocate(2, 3, 64, num_blocks, block_tokens, torch.float32, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    for t in kv.keys + kv.values:
        t.copy_(torch.rand(t.shape, generator=gen) + 1.0)  # no zero anywhere
    return kv


def expected_after(t: torch.Tensor, before: torch.Tensor, runs: list[tuple[int, int]]
                   ) -> torch.Tensor:
    """`before` with the whole pages inside each run of released blocks zeroed (bytes)."""
    out = before.view(-1).view(torch.uint8).clone()
    row, base = t[0].numel() * t.element_size(), t.data_ptr()
    for first, end in runs:
        start = -(-(base + first * row) // PAGE) * PAGE - base
        stop = (base + end * row) // PAGE * PAGE - base
        out[start:max(start, stop)] = 0
    return out


@linux_only
def test_released_blocks_read_as_zeros_and_kept_blocks_keep_their_values():
    kv = filled_pool(64)  # a block is 16 × 3 × 64 × 4 bytes = 3 pages, per layer tensor
    before = [t.clone() for t in kv.keys + kv.values]
    runs = [(3, 6), (10, 11), (20, 31)]
    released = [b for first, end in runs for b in range(first, end)]
    kept = [b for b in range(kv.keys[0].shape[0]) if b not in released]  # scratch included
    assert kv.release_free(released) > 0
    for t, old in zip(kv.keys + kv.values, before):
        assert torch.equal(t[kept], old[kept])  # to the bit, the scratch block too
        assert torch.equal(t.view(-1).view(torch.uint8), expected_after(t, old, runs))
        assert not t[4].any() and not t[21:30].any()  # inside a run: whole blocks are zeros
    assert kv.release_free([]) == 0


def test_memory_it_cannot_own_is_left_alone():
    kv = filled_pool(8)
    for t in kv.keys + kv.values:
        t.share_memory_()  # shared memory: a dropped page would not read as zeros
    before = [t.clone() for t in kv.keys + kv.values]
    assert kv.release_free(list(range(8))) == 0
    assert all(torch.equal(t, old) for t, old in zip(kv.keys + kv.values, before))


def resident_pages(t: torch.Tensor) -> int:
    """Pages of `t`'s memory in the resident set now (`mincore`)."""
    start = t.data_ptr() // PAGE * PAGE
    pages = -(-(t.data_ptr() + t.numel() * t.element_size() - start) // PAGE)
    vec = (ctypes.c_ubyte * pages)()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    assert libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(pages * PAGE), vec) == 0
    return sum(v & 1 for v in vec)


@linux_only
def test_released_pages_leave_the_resident_set():
    kv = filled_pool(1_365)  # ~64 MB of keys and values, every page written
    total = sum(resident_pages(t) for t in kv.keys + kv.values)
    pool_bytes = kv.block_bytes() * kv.keys[0].shape[0]  # every block, the scratch one too
    assert total * PAGE >= 0.95 * pool_bytes
    released = kv.release_free(list(range(100, 1_300)))  # the first and last blocks kept
    after = sum(resident_pages(t) for t in kv.keys + kv.values)
    assert released >= 0.85 * pool_bytes
    assert after <= total - released // PAGE
    assert after * PAGE >= 150 * kv.block_bytes()  # the kept blocks are still there


def test_the_idle_hook_holds_what_it_gives_back_weakly():
    class Pool:
        def give_back(self) -> int:
            return 1

    idle, pool = IdleHook(0, lambda: None), Pool()
    idle.also(pool.give_back)
    assert [f() for f in idle.extras()] == [1]
    del pool  # a closed server's pool is not kept alive by the hook
    assert idle.extras() == []


TEACHER = ("You are the teaching assistant of a class on how language models are served. "
           "Answer in one short sentence, plainly, for a beginner.")


def test_after_the_idle_release_a_new_chat_gets_its_solo_tokens(lm, monkeypatch):
    released: list[tuple[PagedKV, int, bool]] = []  # (pool, bytes, on the compute thread)
    release = PagedKV.release_free

    def counted(kv, blocks):
        released.append((kv, release(kv, blocks), compute_thread.on_compute_thread()))
        return released[-1][1]

    monkeypatch.setattr(PagedKV, "release_free", counted)
    monkeypatch.setattr(compute_thread.idle, "after_s", 0.2)
    srv = Server(lm, Settings(server_rows=8, block_tokens=16, unread_stream_s=0))
    try:
        asks = ["What is a KV cache?", "What is a block table?", "Why batch requests?"]
        chats = [srv.submit(prompt_ids(lm.tokenizer, a, system=TEACHER), max_new_tokens=12)
                 for a in asks]
        for c in chats:
            assert len([e.token_id for e in c.events()]) == 12
        assert wait_for(lambda: srv.stats().pool.blocks_used == 0)
        mark = len(released)
        compute_thread.run(lambda: None)  # one more job: an idle spell after every chat

        def ours():
            return [(n, here) for kv, n, here in released[mark:] if kv is srv.batch.kv]
        assert wait_for(ours, timeout=60)
        assert ours()[0][0] > 0 and ours()[0][1]  # pages given back, on the compute thread
        before = srv.stats().pool
        assert before.blocks_cached_idle >= 2  # the teacher's prefix stays cached
        ids = prompt_ids(lm.tokenizer, "What does prefill compute?", system=TEACHER)
        got = [e.token_id for e in srv.submit(ids, max_new_tokens=16).events()]
        assert srv.stats().pool.prefix_hit_tokens > before.prefix_hit_tokens
        assert got == [e.token_id for e in stream(lm, ids, SamplingSettings(), 16)]
    finally:
        srv.close()
