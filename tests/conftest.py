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


# Browser tests: one app server per test session, one browser per module, a fresh tab per test.
@pytest.fixture(scope="session")
def server(request):
    from e2e_server import shared_server

    return shared_server(request.config)


@pytest.fixture(scope="module")
def browser():
    from e2e_browser import open_browser

    with open_browser() as context:
        yield context


@pytest.fixture
def visitor(server, browser):
    """A new tab on the app: (page, console watch). Closed after the test."""
    from e2e_browser import new_visitor

    page, watch = new_visitor(browser, server.url)
    yield page, watch
    page.close()
