"""The presenter's screens, read from `assets/presenter.md`: a `## ` heading per screen, its
settings on the lines under it (`measure`, `button`, and where the room guesses first
`predict`, `unit`, `why`), then its text."""
from __future__ import annotations

from dataclasses import dataclass

from .lesson_text import lesson_text

SETTINGS_KEYS = ("measure", "button", "predict", "unit", "why")


@dataclass(frozen=True)
class Screen:
    """One idea, in large type, with the one live measurement that shows it."""

    title: str
    body: str  # markdown
    measure: str  # key of the measurement its button runs (lessons.presenter_handlers)
    button: str
    predict: str | None = None  # the question the room answers with a number first
    unit: str = ""  # the guess's unit, e.g. "× faster"
    why: str = ""  # one sentence shown beside guess and result


def parse_screens(text: str) -> tuple[Screen, ...]:
    """The presenter file's screens (the part before the first `## ` is a preface).

    >>> s = parse_screens("# x\\n\\n## Hello\\nmeasure: tokens\\nbutton: Go\\n\\nText.")
    >>> (s[0].title, s[0].measure, s[0].body)
    ('Hello', 'tokens', 'Text.')
    """
    screens = []
    for part in ("\n" + text).split("\n## ")[1:]:
        title, _, rest = part.partition("\n")
        head, _, body = rest.partition("\n\n")
        fields = {}
        for line in head.splitlines():
            key, sep, value = line.partition(":")
            if not sep or key.strip() not in SETTINGS_KEYS:
                raise ValueError(f"presenter screen {title!r}: unknown setting line {line!r}")
            fields[key.strip()] = value.strip()
        if "measure" not in fields or "button" not in fields:
            raise ValueError(f"presenter screen {title!r} needs `measure:` and `button:` lines")
        screens.append(Screen(title=title.strip(), body=body.strip(), **fields))
    return tuple(screens)


def load_screens(info=None) -> tuple[Screen, ...]:
    return parse_screens(lesson_text("presenter.md", info))
