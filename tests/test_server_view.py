"""The live server view's builders on hand-made stats: the plotted numbers are the given ones."""
from dataclasses import dataclass

from visualizations.server_view import batch_history_figure, server_stats_md, shared_steps_note


@dataclass(frozen=True)
class Stats:
    active: int = 3
    queued: int = 2
    paused: bool = False
    steps: int = 40
    served: int = 7
    last_step_s: float = 0.125
    tokens_per_s: float = 21.5
    cache_bytes: int = 4_000_000
    held_bytes: int = 2_500_000
    history: tuple = ((2.0, 1, 0.1), (1.0, 3, 0.12), (0.0, 3, 0.125))


def test_history_figure_plots_rows_and_times():
    fig = batch_history_figure(Stats(), "cap")
    bars, line = fig.data
    assert list(bars.y) == [1, 3, 3] and list(bars.x) == [-2.0, -1.0, -0.0]
    assert [round(v) for v in line.y] == [100, 120, 125]


def test_empty_states():
    assert "Try it" in batch_history_figure(None).layout.annotations[0].text
    assert "fills in" in server_stats_md(None, 32, 60)


def test_stats_markdown_numbers():
    md = server_stats_md(Stats(), 32, 60)
    assert "**3** of 32 rows" in md and "**2** waiting" in md and "125 ms" in md
    assert "21.5 tokens/s" in md and "4.0 MB" in md and "**2.5 MB**" in md
    assert "paused" in server_stats_md(Stats(paused=True), 32, 60)


def test_stats_markdown_says_why_the_oldest_newcomer_waits():
    from dataclasses import replace

    from inference.server_plan import WAIT_BLOCKS, StepPlan

    @dataclass(frozen=True)
    class Planned(Stats):
        plan: StepPlan | None = StepPlan(index=9, decode=(1, 2, 3), chunks=(), waiting=WAIT_BLOCKS)

    assert "**2** waiting (the oldest: no free block) ·" in server_stats_md(Planned(), 32, 60)
    assert "(the oldest" not in server_stats_md(replace(Planned(), queued=0), 32, 60)
    assert "(the oldest" not in server_stats_md(Stats(), 32, 60)  # no plan yet


def test_shared_note():
    assert "**2.5** other" in shared_steps_note(3.5, 0.0)
    assert "ran alone" in shared_steps_note(1.0, 0.0)
    assert "waited 1.5 s" in shared_steps_note(2.0, 1.5)


def test_the_threads_line_names_the_fastest_count_with_its_timings():
    from inference.thread_choice import ThreadFigure
    from visualizations.server_view import threads_md

    figures = (ThreadFigure("decode", 16, 2, 0.0041, False),
               ThreadFigure("decode", 16, 1, 0.0010, True),
               ThreadFigure("decode", 4, 2, 0.002, True),
               ThreadFigure("prefill", 256, 1, 0.003, True))
    md = threads_md(figures)
    assert "CPU threads per pass: 1**" in md and "16-31 tokens" in md
    assert "1.00 ms per token with 1 thread" in md and "4.10 ms per token with 2 threads" in md
    assert threads_md(()) == ""
    only_prefill = threads_md((ThreadFigure("prefill", 256, 2, 0.003, True),))
    assert "prompt passes of 256-511 tokens" in only_prefill and "per pass: 2**" in only_prefill


def test_the_threads_line_of_one_token_passes_says_one_token():
    from inference.thread_choice import ThreadFigure
    from visualizations.server_view import threads_md

    md = threads_md((ThreadFigure("decode", 1, 2, 0.09, True),))
    assert "decode passes of 1 token," in md and "1-1" not in md
