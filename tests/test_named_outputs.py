"""Records become `{component: value}` dicts: None and unshown fields are not sent, and a
component named for no field raises instead of silently never updating."""
from typing import NamedTuple

import pytest

from lessons.common.named_outputs import keyed, showing


class Frame(NamedTuple):
    progress: str
    chart: str | None = None
    summary: object = None  # carried for the caller, shown by no component here


def test_fields_left_none_or_without_a_component_are_not_sent():
    assert keyed({"progress": "P", "chart": "C"}, Frame("50%", summary=3)) == {"P": "50%"}
    frames = showing({"progress": "P", "chart": "C"}, lambda: iter([Frame("1"), Frame("2", "c")]))
    assert list(frames()) == [{"P": "1"}, {"P": "2", "C": "c"}]


def test_a_component_named_for_no_field_raises():
    with pytest.raises(KeyError, match="Frame has no field cards"):
        keyed({"progress": "P", "cards": "K"}, Frame("50%"))
