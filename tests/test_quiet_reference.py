"""The quiet reference per machine: written only by a quiet run, read back, labelled with when
it was measured, shown big beside a busy live run, and a corrupt or foreign-machine file is
ignored with a log line, never shown."""
import json
import logging
from datetime import datetime

from inference.experiments import quiet_reference as qr
from inference.experiments.noise import judge
from visualizations.noise_view import reference_html

QUIET, BUSY = judge(spread=0.03, others_cpu=0.02), judge(others_cpu=0.6)
HERE, MORNING = "Test CPU, 2 cores", datetime(2026, 12, 2, 9, 12, 5)
KEY = "kv_race 24+30 float32"


def keep(path, noise, value=2.9, key=KEY, now=MORNING):
    return qr.keep_if_quiet(key, value, f"{value:.1f}×, range 2.7–3.0 over 5 rounds", noise,
                   path=str(path), machine=HERE, now=now)


def test_only_a_quiet_run_writes_and_the_first_one_stays(tmp_path):
    path = tmp_path / "cache" / qr.FILE
    assert keep(path, BUSY, 1.4) is None and not path.exists()  # busy: nothing kept
    first = keep(path, QUIET, 2.9)
    assert first.value == 2.9 and first.machine == HERE and path.exists()
    assert keep(path, QUIET, 3.3, now=datetime(2026, 12, 3, 8, 0)).value == 2.9  # not replaced
    assert keep(path, BUSY, 1.1).value == 2.9  # a busy run gets the reference back
    back = qr.read(str(path), HERE)
    assert back == {KEY: first} and back[KEY].measured_at == "2026-12-02T09:12:05"
    assert keep(path, BUSY, key="batch_gain 16 float32") is None  # another figure: none yet


def test_labelled_with_when_it_was_measured(tmp_path):
    ref = keep(tmp_path / qr.FILE, QUIET)
    assert ref.when(datetime(2026, 12, 2, 15, 0)) == "09:12"
    assert ref.when(datetime(2026, 12, 5, 15, 0)) == "2 Dec 09:12"


def test_a_busy_live_run_shows_the_reference_big_and_itself_small(tmp_path):
    ref = keep(tmp_path / qr.FILE, QUIET)
    shown = reference_html(ref, "The cache's speed-up", "1.4×", BUSY, now=MORNING)
    assert "<span class='lab-big-value'>2.9×</span>" in shown
    assert "measured on this machine at 09:12, quiet" in shown
    assert "<small" in shown and "1.4×" in shown and "other programs used 60%" in shown
    assert reference_html(ref, "The cache's speed-up", "2.8×", QUIET) == ""  # quiet: live alone
    assert reference_html(None, "The cache's speed-up", "1.4×", BUSY) == ""  # none on file yet


def test_a_corrupt_file_is_ignored_with_a_log_line(tmp_path, caplog):
    path = tmp_path / qr.FILE
    path.write_text("{\"machine\": \"Test CPU, 2 cores\", \"figures\": {\"kv", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger=qr.__name__):
        assert qr.read(str(path), HERE) == {}
        assert keep(path, BUSY) is None  # never shown
    assert "cannot be read" in caplog.text
    assert keep(path, QUIET).value == 2.9  # the next quiet run replaces it
    assert qr.read(str(path), HERE)[KEY].value == 2.9


def test_a_foreign_machine_file_is_ignored_with_a_log_line(tmp_path, caplog):
    path = tmp_path / qr.FILE
    keep(path, QUIET)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["machine"] = "AMD EPYC 7B13, 2 cores"  # a cache folder copied from another machine
    path.write_text(json.dumps(data), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger=qr.__name__):
        assert qr.read(str(path), HERE) == {}
        assert keep(path, BUSY) is None
    assert "AMD EPYC" in caplog.text and "ignored" in caplog.text


def test_this_machine_names_the_cpu():
    from inference.experiments.quiet_reference import this_cpu

    assert qr.this_machine().startswith(this_cpu()) and "cores" in qr.this_machine()


def test_the_race_and_the_sweep_keep_and_show_their_reference(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from inference.experiments.kv_race import summarize
    from test_robust_figures import point, race_steps
    from visualizations import batching_text, kv_text

    monkeypatch.setattr(qr, "default_path", lambda: str(tmp_path / qr.FILE))
    impossible = summarize(race_steps(cached_s=0.5), 20)
    assert qr.for_race(impossible, "float32", QUIET) is None  # quiet but impossible: not kept
    quiet = summarize(race_steps(), 20)
    ref = qr.for_race(quiet, "float32", QUIET)
    assert ref.value == quiet.speedup and ref.label == quiet.robust.label()
    busy = summarize(race_steps(slow_cached=set(range(1, 24))), 20)  # every cached step slowed
    assert qr.for_race(busy, "float32", BUSY) == ref
    text = kv_text.race_summary_markdown(busy, BUSY, ref)
    assert f"<span class='lab-big-value'>{quiet.speedup:.1f}×</span>" in text
    assert "quiet" in text and "This run, busy: not a possible result" in text
    sweep = SimpleNamespace(points=(point(1, 0.06), point(16, 0.24)), finished=True)
    kept = qr.for_sweep(sweep, "float32", QUIET)
    assert kept.value == 4.0 and kept.key != ref.key
    cards = batching_text.sweep_cards(sweep, BUSY, kept)
    assert "batch 16 ÷ 1, quiet" in cards  # the reference, big, in the cards' one row
    assert cards.count("lab-big-value") == 4 and "busy machine: noisy" in cards  # live beside
