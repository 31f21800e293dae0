"""Nothing piles up: what visitors' clicks leave on the server stays bounded."""
from __future__ import annotations

import glob
import os
import tempfile

from inference.config import LIMITS
from lessons.common.exports import KEPT
from visualizations.exports import export_folder, write_csv


def _export_folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "llm-lab-export-*")))


def test_pileup_200_csv_clicks_leave_one_folder_of_bounded_files():
    before = _export_folders()
    paths = [write_csv(f"length,ms\n{i},{i * 1.5}\n", "prefill-sweep", KEPT)
             for i in range(200)]  # 200 clicks, each a different finished sweep
    new = _export_folders() - before
    assert len(new | {export_folder()} - before) <= 1, new
    folder = export_folder()
    assert all(os.path.dirname(p) == folder for p in paths)
    left = os.listdir(folder)
    assert 1 <= len(left) <= KEPT == LIMITS.export_files_kept, len(left)
    with open(paths[-1], encoding="utf-8") as f:  # the newest export is intact
        assert f.read() == "length,ms\n199,298.5\n"
    assert write_csv("same\n", "x", KEPT) == write_csv("same\n", "x", KEPT)  # no duplicates


def test_pileup_sessions_capped_and_swept_when_ended_or_idle():
    """Gradio's own StateHolder with this app's cap and sweep: 2,000 fresh session hashes
    (an API client's calls) hold at most the cap, and ended or idle ones are dropped."""
    import datetime

    import gradio as gr
    from gradio.state_holder import StateHolder

    from classroom.session_budget import bound_sessions, sweep_sessions

    with gr.Blocks() as demo:
        box = gr.Textbox("hi")
        kept = gr.State([])
        box.submit(lambda t, s: s + [t], [box, kept], kept)
    bound_sessions(demo, held=100, idle_s=600, closed_s=60)
    holder = StateHolder()
    holder.set_blocks(demo)
    assert holder.capacity == 100
    for i in range(2_000):
        holder[f"api-{i}"][kept._id] = [i]  # each call: a new hash, some state
    assert len(holder.session_data) == 100  # the newest 100
    now = datetime.datetime.now()
    holder.session_data["api-1999"].is_closed = True
    assert sweep_sessions(holder, now, idle_s=600, closed_s=60) == 0  # all fresh
    later = now + datetime.timedelta(seconds=61)
    assert sweep_sessions(holder, later, idle_s=600, closed_s=60) == 1  # the closed tab
    assert "api-1999" not in holder.session_data and "api-1998" in holder.session_data
    much_later = datetime.datetime.now() + datetime.timedelta(seconds=601)
    assert sweep_sessions(holder, much_later, idle_s=600, closed_s=60) == 99
    assert len(holder.session_data) == 0 and not holder.time_last_used


def test_pileup_a_sweep_that_dropped_sessions_hands_the_heap_back():
    """glibc keeps freed heap: without a trim after dropping 2,000 sessions, RSS stayed at
    its peak (bench/visitor_memory.py). One sweep trims when, and only when, it dropped some."""
    import datetime

    import gradio as gr
    from gradio.state_holder import StateHolder

    from classroom.session_budget import sweep_app

    with gr.Blocks() as demo:
        kept = gr.State([])
    holder = StateHolder()
    holder.set_blocks(demo)
    for i in range(50):
        holder[f"api-{i}"][kept._id] = [i]
    trims = []
    assert sweep_app(holder, 40, 600, 60, trim=lambda: trims.append(1)) == 0  # all fresh
    assert trims == [] and holder.capacity == 40
    old = datetime.datetime.now() - datetime.timedelta(seconds=601)
    for i in range(10):
        holder.time_last_used[f"api-{i}"] = old
    assert sweep_app(holder, 40, 600, 60, trim=lambda: trims.append(1)) == 10
    assert trims == [1] and len(holder.session_data) == 40
