"""Lesson 4b handlers: the learner drives a small private block pool on the real model, each
button one action of `paged_demo` (every number from the pool's own `PoolStats`)."""
from __future__ import annotations

from typing import NamedTuple

from inference.config import Settings
from inference.errors import NotReadyError
from inference.experiments import paged_demo
from inference.experiments.paged_demo import DemoPool, DemoView
from visualizations import server_view as pool_view

from .common.prompt_input import encode_prompt

EMPTY_STORY = ("*No pool yet. Press **Add request** (a pool of the chosen size starts for you), "
               "or **Fill the pool** to watch one run out of blocks.*")
SHARED_PREFIX = "You answer questions about cooking, in one short line."
SHARED_QUESTIONS = ("How long do eggs boil?", "How long does rice cook?")


class PagesFrame(NamedTuple):
    pool: DemoPool | None  # the visitor's pool (kept in gr.State)
    view: DemoView | None  # what the last action returned (its numbers are the pool's)
    story: str  # markdown: what happened, in one sentence, then each request
    grid: str  # HTML: one cell per block
    tables: str  # HTML: each request's block table
    bytes_md: str  # markdown: padded vs paged bytes (waste %), prefix-cache counts


def frame(demo: DemoPool | None = None, view: DemoView | None = None) -> PagesFrame:
    """What the panel shows for the pool after `view` (no pool yet: the empty story)."""
    if view is None:
        return PagesFrame(demo, None, EMPTY_STORY, pool_view.pool_grid_html(None),
                          pool_view.block_tables_html(None), pool_view.pool_bytes_md(None))
    pool = view.pool
    caption = (f"Your private pool: {pool.blocks_total} blocks of {pool.block_tokens} tokens, "
               f"{pool.block_bytes:,} bytes each (keys and values of every layer).")
    grid = (pool_view.pool_grid_html(pool, caption) if not pool_view.is_empty(pool) else
            f"<div class='lab-pool lab-empty'>{pool.blocks_total} free blocks: add a request "
            f"to see it take some.</div>")
    return PagesFrame(demo, view, pool_view.demo_md(view), grid, pool_view.block_tables_html(pool),
                      pool_view.pool_bytes_md(pool))


def new_pool(lm, settings: Settings, blocks: float) -> PagesFrame:
    """A fresh empty pool of `blocks` blocks (the old one, if any, is dropped)."""
    demo, view = paged_demo.start_pool(lm, int(blocks) if blocks is not None else None, settings)
    return frame(demo, view)


def _pool(lm, settings: Settings, demo: DemoPool | None, blocks: float) -> DemoPool:
    return demo if demo is not None else new_pool(lm, settings, blocks).pool


def add(lm, settings: Settings, demo: DemoPool | None, blocks: float, text: str) -> PagesFrame:
    """Admit one prompt (checked against the app's limits) and prefill it: its first token."""
    encode_prompt(lm, settings, text)  # an empty or too-long prompt gets its sentence here
    demo = _pool(lm, settings, demo, blocks)
    return frame(demo, paged_demo.add_request(lm, demo, text))


def step_all(lm, demo: DemoPool | None) -> PagesFrame:
    """One decode step for every running request (new blocks taken, preemption if none)."""
    if demo is None or not demo.prompts:
        raise NotReadyError("Add a request first: there is nothing in the pool to step.")
    return frame(demo, paged_demo.step_pool(lm, demo))


def finish_oldest(lm, demo: DemoPool | None) -> PagesFrame:
    """End the oldest running request: its blocks go back (full ones stay cached)."""
    if demo is None or not demo.batch.rows:
        raise NotReadyError("No request is running: add one first, then finish it.")
    return frame(demo, paged_demo.finish(lm, demo))


def shared_prefix(lm, settings: Settings, demo: DemoPool | None, blocks: float) -> PagesFrame:
    """Two prompts with one system prefix: the second maps the first's full blocks."""
    demo = _pool(lm, settings, demo, blocks)
    return frame(demo, paged_demo.add_shared_prefix(lm, demo, SHARED_PREFIX, *SHARED_QUESTIONS))


def fill(lm, settings: Settings, demo: DemoPool | None, blocks: float) -> PagesFrame:
    """Add short requests and step until the pool runs out and the newest is preempted."""
    demo = _pool(lm, settings, demo, blocks)
    return frame(demo, paged_demo.fill_pool(lm, demo))


def forget(demo: DemoPool | None) -> None:
    """The tab closed or idled: every request's blocks go back (the tensors go with the state)."""
    if demo is None:
        return
    for rid in list(demo.batch.rows):
        demo.batch.release(rid)
