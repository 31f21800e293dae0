"""A visitor's prompt, checked and encoded the same way in every lesson: the character and
token limits come from `Settings`, the chat template is applied, and an empty or oversized
prompt raises the engine's typed error (shown by `feedback.guarded`)."""
from __future__ import annotations

from inference.config import Settings
from inference.tokens import prompt_ids


def encode_prompt(lm, settings: Settings, text: str, max_tokens: int | None = None) -> list[int]:
    """Token ids of `text` wrapped in the chat template, within the app's limits (or a lower
    `max_tokens` where a lesson re-reads the prompt many times)."""
    limit = settings.max_prompt_tokens if max_tokens is None else min(max_tokens,
                                                                      settings.max_prompt_tokens)
    return prompt_ids(lm.tokenizer, text, max_chars=settings.max_prompt_chars, max_tokens=limit)


def prompt_lines(settings: Settings, text: str | None) -> list[str]:
    """Prompts typed one a line: blank lines dropped, at most `Settings.max_lines`."""
    return [t.strip() for t in (text or "").splitlines() if t.strip()][:settings.max_lines]
