"""Lesson text lives in assets/ as markdown (and the page's CSS and scripts beside it). The
loaded model's figures are placeholders filled from its `ModelInfo` (`FROM_INFO`); other `$` signs
stay. A placeholder without a value drops its enclosing "( … )", or else its whole line: no figure
shows that was not read from the model. A tab shows a lesson's opening, the rest under "Read more".

    >>> fill_placeholders("all layers ($layers here) at once", None)
    'all layers at once'
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable

from visualizations.glossary import link_terms

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = os.path.join(ROOT, "assets")

FROM_INFO: dict[str, Callable[[object], str]] = {
    "layers": lambda i: f"{i.layers}",
    "vocab_size": lambda i: f"{i.vocab_size:,}",
    "hidden_size": lambda i: f"{i.hidden_size:,}",
    "weight_mb": lambda i: f"{i.weight_bytes / 1e6:,.0f} MB",
    "dtype": lambda i: f"{i.dtype}",
    "parameters_m": lambda i: f"{i.parameters / 1e6:,.0f} M",
    "embedding_share": lambda i: f"{i.vocab_size * i.hidden_size / i.parameters:.0%}",
}

BLOCKS = ("weights_origin",)  # whole notes a panel passes in `extra`; dropped when it doesn't


def fill_placeholders(text: str, info=None, extra: dict[str, str] | None = None) -> str:
    values = {name: f(info) for name, f in FROM_INFO.items()} if info is not None else {}
    values.update(extra or {})
    names = sorted(set(FROM_INFO) | set(BLOCKS) | set(extra or {}), key=len, reverse=True)
    pattern = r"\$(" + "|".join(map(re.escape, names)) + r")(?!\w)"
    missing = [n for n in names if n not in values]
    if missing:
        gone = r"\$(?:" + "|".join(map(re.escape, missing)) + r")(?!\w)"
        text = re.sub(r" ?\([^()]*" + gone + r"[^()]*\)", "", text)
        text = re.sub(r"^.*" + gone + r".*\n?", "", text, flags=re.MULTILINE)
    return re.sub(pattern, lambda m: values[m.group(1)], text)


def lesson_text(name: str, info=None, extra: dict[str, str] | None = None) -> str:
    """assets/<name>, filled from `info` (a ModelInfo) and `extra` (more named blocks)."""
    with open(os.path.join(ASSETS, name), encoding="utf-8") as f:
        return fill_placeholders(f.read(), info, extra)


def page_script(demo, name: str) -> None:
    """Run the script assets/<name> once when the page of `demo` (a gr.Blocks) loads."""
    demo.load(None, None, None, js=lesson_text(name), queue=False, api_visibility="private")


def lesson_page(name: str, info=None, extra: dict[str, str] | None = None) -> str:
    """`lesson_text` with each glossary term's first use linked to its Glossary entry."""
    return link_terms(lesson_text(name, info, extra))


READ_MORE = "<!-- read more -->"  # in a lesson's markdown: the opening ends here


def split_more(text: str) -> tuple[str, str]:
    """(the opening, the rest) of a lesson's text, split at its `READ_MORE` line.

    >>> split_more("Title\\n\\nShort.\\n<!-- read more -->\\nLong.\\n")
    ('Title\\n\\nShort.', 'Long.')
    """
    opening, _, rest = text.partition(READ_MORE)
    return opening.strip(), rest.strip()

