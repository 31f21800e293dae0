"""Lesson 1: text becomes tokens, word pieces with ids, before the model sees anything.

`tokenize()` returns each piece with its id, its place in the text (character offsets) and
whether it is a special token (like the chat template's `<|im_start|>` markers).
`chat_prompt()` wraps a user message in the model's chat template, the exact text the model
reads, so the cost of the role markers can be counted in tokens.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .config import LIMITS
from .errors import EmptyPromptError, PromptTooLongError


@dataclass(frozen=True)
class Token:
    id: int
    text: str  # the characters of the source text this token covers ("" for a split byte)
    vocab_piece: str  # the vocabulary entry, e.g. "Ġworld" (Ġ marks a leading space)
    start: int
    end: int
    special: bool


@dataclass(frozen=True)
class TokenizedText:
    text: str
    tokens: tuple[Token, ...]

    @property
    def ids(self) -> list[int]:
        return [t.id for t in self.tokens]

    @property
    def words(self) -> int:
        return len(self.text.split())

    @property
    def special_count(self) -> int:
        return sum(t.special for t in self.tokens)


def clean_text(text: str) -> str:
    """Make user text safe to tokenize: drop lone surrogates and control characters
    (keeping newlines and tabs), normalise to NFC. Emoji and right-to-left text pass through."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate becomes "?"
    keep = {"\n", "\t"}
    text = "".join(c for c in text if c in keep or unicodedata.category(c) not in ("Cc", "Cs"))
    return unicodedata.normalize("NFC", text)


def tokenize(tokenizer, text: str, typed: bool = True) -> TokenizedText:
    """Split `text` into tokens with ids, offsets and special flags (no tokens added).
    `typed`: the text was typed by a person, so marker-like strings stay plain text."""
    return TokenizedText(text=text, tokens=_tokens(tokenizer, text, typed, 0))


def tokenize_chat(tokenizer, user_text: str) -> TokenizedText:
    """The chat template around `user_text`, tokenized as the model receives it (the same ids
    as `encode_chat`): the template's markers special, the typed text plain."""
    slot = _SLOT.format("user")
    before, after = chat_prompt(tokenizer, slot).split(slot)
    tokens = (_tokens(tokenizer, before, False, 0)
              + _tokens(tokenizer, user_text, True, len(before))
              + _tokens(tokenizer, after, False, len(before) + len(user_text)))
    return TokenizedText(text=before + user_text + after, tokens=tokens)


def _tokens(tokenizer, text: str, typed: bool, shift: int) -> tuple[Token, ...]:
    """`text`'s tokens, offsets shifted by `shift` (its place in a longer text)."""
    if not text:
        return ()
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                    split_special_tokens=typed)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    vocab = tokenizer.convert_ids_to_tokens(ids)
    special = set(tokenizer.all_special_ids) | {
        i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    tokens, last_end = [], 0
    for i, (s, e), piece in zip(ids, offsets, vocab):
        # Byte-level pieces of one character (an emoji split in two) share its offsets;
        # show the character once, on its first piece.
        shown = text[s:e] if s >= last_end else ""
        tokens.append(Token(id=i, text=shown, vocab_piece=piece, start=s + shift, end=e + shift,
                            special=i in special))
        last_end = max(last_end, e)
    return tuple(tokens)


def chat_prompt(tokenizer, user_text: str, system: str | None = None) -> str:
    """The exact text the model reads for one user turn, with the assistant's turn opened."""
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user_text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


_SLOT = "\x00{}\x00"  # stands in for typed text inside the template (cleaning removes NULs)


def encode_text(tokenizer, text: str) -> list[int]:
    """Ids of text a person typed: marker-like strings such as `<|im_start|>` stay plain text
    (split into ordinary tokens), so nobody can forge a turn of the conversation by typing it."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def encode_chat(tokenizer, user_text: str, system: str | None = None) -> list[int]:
    """The chat template's ids around the typed texts: the template's own markers are real
    special tokens, the typed texts are encoded with `encode_text`."""
    slots = {"user": _SLOT.format("user"), "system": _SLOT.format("system")}
    full = chat_prompt(tokenizer, slots["user"], slots["system"] if system else None)
    typed = {slots["user"]: user_text, slots["system"]: system or ""}
    ids: list[int] = []
    for part in re.split("(" + "|".join(map(re.escape, typed)) + ")", full):  # slots kept
        if part in typed:
            ids += encode_text(tokenizer, typed[part])
        elif part:
            ids += tokenizer(part, add_special_tokens=False)["input_ids"]
    return ids


def prompt_ids(tokenizer, user_text: str, *, chat: bool = True, system: str | None = None,
               max_chars: int = LIMITS.max_prompt_chars,
               max_tokens: int = LIMITS.max_prompt_tokens) -> list[int]:
    """Validate and encode a user's prompt; raise a clear error for empty or oversized input.
    The limits default to the app's (`Settings`); every lesson encodes typed text here."""
    if user_text is None or not clean_text(user_text).strip():
        raise EmptyPromptError("The prompt is empty: type some text first.")
    if len(user_text) > max_chars:
        raise PromptTooLongError(
            f"The prompt has {len(user_text):,} characters; the limit is {max_chars:,}.")
    text = clean_text(user_text)
    if system is not None:
        system = clean_text(system)
    ids = encode_chat(tokenizer, text, system) if chat else encode_text(tokenizer, text)
    if len(ids) > max_tokens:
        raise PromptTooLongError(
            f"The prompt is {len(ids):,} tokens; this app's limit is {max_tokens:,} tokens.")
    return ids
