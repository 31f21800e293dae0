"""Tokenization on the real tokenizer."""
from inference.tokens import clean_text, tokenize, tokenize_chat


def test_round_trip(tok):
    for text in ["Hello world", "The year 2024 had 366 days.", "naïve café 🙂 مرحبا",
                 "def f(x):\n\treturn x**2"]:
        t = tokenize(tok, text)
        assert tok.decode(t.ids) == text
        assert "".join(x.text for x in t.tokens) == text  # offsets cover the text exactly once


def test_chat_template_markers_are_special(tok):
    t = tokenize_chat(tok, "Hi")
    assert t.text == tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                             add_generation_prompt=True)
    assert tokenize(tok, t.text, typed=False).ids == t.ids  # the template text, read as markers
    special = [x.vocab_piece for x in t.tokens if x.special]
    assert "<|im_start|>" in special and "<|im_end|>" in special
    assert not any(x.special for x in t.tokens if x.text == "Hi")
    assert t.special_count == len(special) >= 4


def test_clean_text_removes_controls_and_surrogates():
    assert clean_text("a\x00b\x07c\nd") == "abc\nd"
    assert "\ud800" not in clean_text("x\ud800y")
    assert clean_text("🙂 שלום") == "🙂 שלום"
