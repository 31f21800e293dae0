"""Shared fixtures: the real model, loaded once for the whole test session."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def lm():
    from inference.loading import load_model

    return load_model()


@pytest.fixture(scope="session")
def tok(lm):
    return lm.tokenizer


@pytest.fixture(scope="session")
def chat_ids(lm):
    from inference.tokens import prompt_ids

    return prompt_ids(lm.tokenizer, "Explain why the sky is blue in two sentences.")
