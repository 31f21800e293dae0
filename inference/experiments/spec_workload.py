"""The speculative-decoding lesson's prompts, in one place: where guessing pays and where not.

- **edit**: "fix the spelling in ..." with a paragraph to give back. Most of the answer copies
  the prompt, so prompt lookup's guesses are usually right.
- **open question**: the answer is new text. Prompt lookup rarely finds a match (its passes are
  plain decode steps); a draft model still guesses the common words.
The bench (`bench/speculative.py`) and the lesson read the same texts from here.
"""
from __future__ import annotations

from ..errors import SettingOutOfRangeError

EDIT_PARAGRAPH = (
    "The quick broun fox jumpd over the lazy dog. It was a sunny day and the birds were singin "
    "in the trees. Evry child in the vilage came out to play in the feilds, and their parents "
    "watched from the porches while the bread was baking in the ovens.")

SPEC_PROMPTS: dict[str, str] = {
    "edit": f"Fix the spelling in this paragraph and write it out again:\n\n{EDIT_PARAGRAPH}",
    "open question": "Why do cats purr? Answer in a short paragraph.",
}
DEFAULT_SPEC_PROMPT = "edit"


def spec_prompt(name: str = DEFAULT_SPEC_PROMPT) -> str:
    """The named workload's prompt text (a clear error for an unknown name)."""
    if name not in SPEC_PROMPTS:
        raise SettingOutOfRangeError(
            f"Unknown workload {name!r}; choose one of: {', '.join(SPEC_PROMPTS)}.")
    return SPEC_PROMPTS[name]
