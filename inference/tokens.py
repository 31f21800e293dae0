"""Lesson 1: text becomes tokens, word pieces with ids, before the model sees anything.

`tokenize()` gives each piece its id, its place in the text (character offsets) and whether it
is special; `tokenize_chat()` does it for the exact text the model reads: the chat template
around the typed text, whose markers (`<|im_start|>`, ...) are counted in tokens too.
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
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cs"))
    return unicodedata.normalize("NFC", text)


def tokenize(tokenizer, text: str, typed: bool = True) -> TokenizedText:
    """Split `text` into tokens with ids, offsets and special flags (no tokens added).
    `typed`: the text was typed by a person, so marker-like strings stay plain text."""
    return TokenizedText(text=text, tokens=_tokens(tokenizer, text, typed, 0))


def tokenize_chat(tokenizer, user_text: str, system: str | None = None) -> TokenizedText:
    """The chat template around the typed texts, tokenized as the model receives it: the
    template's own markers special, the typed texts plain (as `encode_text` encodes them)."""
    user, sys_slot = _SLOT.format("user"), _SLOT.format("system")
    slots = {user: user_text, sys_slot: system or ""}
    messages = ([{"role": "system", "content": sys_slot}] if system else []) + [
        {"role": "user", "content": user}]  # the assistant's turn opened after them
    template = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    text, tokens = "", ()
    for part in re.split("(" + "|".join(map(re.escape, slots)) + ")", template):  # slots kept
        piece = slots.get(part, part)
        tokens += _tokens(tokenizer, piece, part in slots, len(text))
        text += piece
    return TokenizedText(text=text, tokens=tokens)


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


_SLOT = "\x00{}\x00"  # stands in for typed text inside the template (cleaning removes NULs)


def encode_text(tokenizer, text: str) -> list[int]:
    """Ids of text a person typed: marker-like strings such as `<|im_start|>` stay plain text
    (split into ordinary tokens), so nobody can forge a turn of the conversation by typing it."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def prompt_ids(tokenizer, user_text: str, *, chat: bool = True, system: str | None = None,
               max_chars: int = LIMITS.max_prompt_chars,
               max_tokens: int = LIMITS.max_prompt_tokens) -> list[int]:
    """Validate and encode typed text (limits: the app's `Settings`); every lesson does it here."""
    text = clean_text(user_text or "")
    if not text.strip():
        raise EmptyPromptError("The prompt is empty: type some text first.")
    if len(user_text) > max_chars:
        raise PromptTooLongError(
            f"The prompt has {len(user_text):,} characters; the limit is {max_chars:,}.")
    system = None if system is None else clean_text(system)
    ids = tokenize_chat(tokenizer, text, system).ids if chat else encode_text(tokenizer, text)
    if len(ids) > max_tokens:
        raise PromptTooLongError(
            f"The prompt is {len(ids):,} tokens; this app's limit is {max_tokens:,} tokens.")
    return ids
