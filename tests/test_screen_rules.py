"""Without a browser: the rules behind what a class sees. Branch only with a candidate
of the step looked at, the controls that reshape the candidates fire on typing, a forced step is
not averaged into time per output token, the sweep's verdict survives sharing, chart text is
readable (contrast) and legends sit apart from titles."""
import gradio as gr
import pytest

from chart_reading import caption_text, contrast_ratio, plot_height
from fake_events import Ev
from inference.config import Settings
from inference.errors import SettingOutOfRangeError
from inference.experiments.shared_results import SharedResults
from inference.sampling import SamplingSettings
from lessons import decode_handlers, decode_panel, prefill_handlers
from lessons.common.context import AppContext
from visualizations.noise_view import BUSY
from visualizations.style import CAPTION_GREY, PALETTE, PLOT_MIN, styled
from visualizations.timing_charts import candidates_figure, decode_latency_figure
from visualizations.token_view import decode_stats_md

SETTINGS = Settings()
PROMPT = "Write one sentence about the moon."


def steps(lm, n: int):
    gen = None
    for _ in range(n):
        gen = decode_handlers.step(lm, SETTINGS, gen, PROMPT, 12, SamplingSettings())
    return gen


def test_branch_refuses_a_candidate_of_another_step(lm):
    gen = steps(lm, 6)
    at_two = {c.token_id for c in gen.events[2].candidates}
    stranger = next(c.token_id for c in gen.events[5].candidates if c.token_id not in at_two)
    before = list(gen.generated)
    with pytest.raises(SettingOutOfRangeError, match="not one of step 2's"):
        decode_handlers.branch_to(lm, gen, 2, stranger)
    assert gen.generated == before and len(gen.events) == 6  # refused: the run is unchanged
    own = gen.events[2].candidates[1].token_id
    gen = decode_handlers.branch_to(lm, gen, 2, own)
    assert gen.generated[2] == own and gen.events[2].chosen_by == "your pick"


def test_looking_at_a_step_redraws_its_candidates_and_choices(lm):
    gen = steps(lm, 5)
    view = decode_handlers.views(lm, gen, SamplingSettings(), at_step=2)
    assert view.look_at == 2 and "step 2" in view.candidates.layout.title.text
    assert [v for _, v in view.choices] == [c.token_id for c in gen.events[2].candidates]
    assert view.pick in {c.token_id for c in gen.events[2].candidates}


def test_typing_into_the_step_and_sampling_boxes_fires_events(lm, serving):
    with gr.Blocks() as demo:
        decode_panel.build(AppContext(lm, SETTINGS, SharedResults(), serving, demo))
    by_id = {b._id: b for b in demo.blocks.values()}
    triggers = {}
    for fn in demo.fns.values():
        for block_id, event in fn.targets:
            block = by_id.get(block_id)
            label = getattr(block, "elem_id", None) or getattr(block, "label", None)
            triggers.setdefault(fn.api_name, set()).add((label, event))
    # A number typed into a slider's box fires `input` (not `release`): both must be wired.
    assert ("decode-branch-step", "input") in triggers["decode_look"]
    for label in ("decode-temperature", "Top-k (0 = off)", "Top-p (1 = off)"):
        assert (label, "input") in triggers["decode_sampling"], label




def test_branch_pick_is_not_averaged_into_time_per_token():
    evs = [Ev(0, "A", False, 1, "greedy", 0.5, 30, 30, 1), Ev(1, "b", False, 2, "greedy", 0.1, 1,
                                                             31, 2),
           Ev(2, "c", False, 3, "your pick", 0.9, 1, 32, 3),
           Ev(3, "d", False, 4, "greedy", 0.1, 1, 33, 4)]
    md = decode_stats_md(evs, None)
    assert "100 ms</span><span class='lab-big-note'>mean of 2 steps<" in md
    assert "10.0 tokens/s" in md
    assert "1 step left out: your branch pick" in md
    fig = decode_latency_figure([e.seconds for e in evs], "cap", forced=[2])
    first, steps, pick, rate = fig.data  # one trace per colour, each its legend entry
    assert list(pick.x) == [2] and pick.marker.color == PALETTE["purple"] != steps.marker.color
    assert abs(rate.y[3] - 10.0) < 1e-9  # two ordinary steps of 0.1 s: 10 tokens/s


def test_shared_sweep_shows_the_same_verdict(lm):
    shared = SharedResults()
    first = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4, 16], 16))[-1].progress
    again = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4, 16], 16))
    assert "Done. At 16 tokens" in first
    if BUSY.capitalize() in first:  # judged busy (noise.py): the notice first, measured again
        assert first.startswith("<div class='lab-busy'") and len(again) > 1
        return
    assert len(again) == 1 and "shared result" in again[0].progress
    assert again[0].progress.startswith(first)  # the same cards and verdict, then the note
    assert first.startswith("<div class='lab-cards'>")


def test_caption_contrast_and_legend_apart_from_title():
    assert contrast_ratio(CAPTION_GREY, "#ffffff") >= 4.5
    assert contrast_ratio(PALETTE["grey"], "#ffffff") < 4.5  # why the caption is not it
    fig = styled(gr_free_figure(), "A title", "x", "y", "Measured live on cpu")
    legend, title = fig.layout.legend, fig.layout.title
    assert legend.yref == "container" and legend.y == 0 and legend.yanchor == "bottom"
    assert title.yref == "container" and title.yanchor == "top"  # placed from the top
    assert caption_text(fig) == "Measured live on cpu"
    # a caption that wraps to two lines gets a line's room more above the plot (it printed
    # over the top bar of the candidates chart)
    long = styled(gr_free_figure(), "A title", "x", "y", "Measured live on cpu · float32 · 2 "
                  "threads · each timed pass ran alone on the compute thread")
    assert long.layout.title.subtitle.text.count("<br>") == 1
    assert long.layout.margin.t >= 8 + 26 + 2 * 17 and plot_height(long) >= PLOT_MIN


def test_candidates_title_names_the_step():
    from inference.events import Candidate

    fig = candidates_figure([Candidate(5, " a", 0.7, 0.7)], 5, None, "cap", step=3)
    assert fig.layout.title.text.startswith("Candidates at step 3")


def gr_free_figure():
    import plotly.graph_objects as go

    return go.Figure(go.Scatter(x=[1, 2], y=[1, 2], name="a trace"))
