"""The teacher's guide lists every Present screen, in Present's order, with what a teacher needs
for each (the idea, what to say, the expected result, how long it runs, the guess's answer),
and both plans; it is reachable from Present and from Start here."""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from inference.experiments.quiet_reference import QuietFigure
from lessons.common.exports import GUIDE, guide_md, quiet_reference_md

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def sections(markdown: str) -> dict[str, str]:
    """`## ` heading -> the text under it, in order."""
    parts = re.split(r"^## (.+)$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_guide_lists_every_present_screen_in_order():
    screens = sections((ASSETS / "presenter.md").read_text(encoding="utf-8"))
    guide = sections((ASSETS / GUIDE).read_text(encoding="utf-8"))
    assert [h for h in guide if h in screens] == list(screens)  # every screen, same order
    for heading, settings in screens.items():
        text = guide[heading]
        for part in ("**The idea:**", "**Say:**", "**Runs:**"):
            assert part in text, (heading, part)
        if re.search(r"^predict: ", settings, flags=re.MULTILINE):
            assert "**Guess:**" in text and "**Answer:**" in text, heading
        else:
            assert "**Expected:**" in text, heading


def test_the_guide_has_both_plans_and_labels_where_figures_come_from():
    guide = (ASSETS / GUIDE).read_text(encoding="utf-8")
    assert "## A 45-minute lesson" in guide and "## A 15-minute lesson" in guide
    assert "measured elsewhere" in guide and "NVIDIA H200" in guide and "2-core AMD EPYC" in guide


def test_this_machines_quiet_reference_is_shown_when_there_is_one():
    now = datetime.now().isoformat(timespec="seconds")
    ref = QuietFigure("kv_race 24 tokens after 30 float32", 2.9, "2.9×, range 2.7–3.0", now, "cpu")
    md = quiet_reference_md({ref.key: ref})
    assert "kv_race 24 tokens after 30 float32" in md and "2.9×, range 2.7–3.0" in md
    assert f"measured on this machine at {ref.when()}, quiet" in md
    assert quiet_reference_md({}) == ""
    assert guide_md().startswith("# A teacher's guide to Present")


def _tab_of(block) -> str | None:
    while block is not None:
        if type(block).__name__ == "Tab":
            return block.id
        block = block.parent
    return None


def test_the_guide_is_reachable_from_present_and_start_here(app_module):
    blocks = {getattr(b, "elem_id", None): b for b in app_module.demo.blocks.values()}
    assert _tab_of(blocks["present-guide"]) == "present"
    assert _tab_of(blocks["start-guide"]) == "start"
    for place in ("present-guide", "start-guide"):
        assert blocks[place + "-text"].value.startswith("# A teacher's guide")
