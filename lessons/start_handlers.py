"""'Start here', the plain part: the example prompts a newcomer taps first (each opens 'Try it'
with the prompt filled in), and the text of the overview."""
from __future__ import annotations

from inference.config import LIMITS

from .common.lesson_text import lesson_text

STARTERS: tuple[str, ...] = (
    LIMITS.default_prompt,
    "What is 1234 * 5678?",
    "Translate to French: The cat sleeps on the warm windowsill.",
    "def fibonacci(n):",
    "Tell me a story about a robot 🤖 who loves gardening 🌱",
)
FIRST_STEP_MD = ("**Your first step:** tap a prompt. It opens **Try it** with the prompt filled "
                 "in; press **Generate** there and watch the answer stream.")


def overview_md() -> str:
    """The overview that opens the app (assets/overview.md)."""
    return lesson_text("overview.md")
