"""Every shared fixture, defined once: the real model, the app, the app server, the browser.

Test files ask for these by name and define no copies of their own. The repository root is on
sys.path through pyproject.toml (`pythonpath`), and this folder through pytest's own import
of conftest, so `import app`, `from inference...` and `from e2e_browser ...` all work.
"""
from __future__ import annotations

import os
import tempfile

import pytest

# The tests' quiet figures go to a file of their own (the app servers they start inherit it),
# never into the reference the app shows on this machine.
os.environ.setdefault("LLM_LAB_QUIET_REFERENCE", os.path.join(
    tempfile.mkdtemp(prefix="llm-lab-tests-"), "quiet-reference.json"))


@pytest.fixture(scope="session")
def lm():
    """The real model, loaded once for the whole session."""
    from inference.loading import load_model

    return load_model()


@pytest.fixture(scope="session")
def tok(lm):
    return lm.tokenizer


@pytest.fixture(scope="session")
def chat_ids(lm):
    from inference.config import LIMITS
    from inference.tokens import prompt_ids

    return prompt_ids(lm.tokenizer, LIMITS.default_prompt)


@pytest.fixture(scope="session")
def serving(lm):
    """The serving engine (one continuous batcher) on the shared model, default Settings."""
    from inference.server import Server

    srv = Server(lm)
    yield srv
    srv.close()


@pytest.fixture(scope="session")
def app_module():
    """`app.py` imported (builds `app.demo` and loads its own model; ~30 s), not launched."""
    import app

    return app


# End-to-end: one app server per test session, one browser per module, a fresh tab per test.
@pytest.fixture(scope="session")
def server(request):
    """The app running as its own process (tests/e2e_server.py), shared by the session."""
    from e2e_server import shared_server

    return shared_server(request.config)


@pytest.fixture(scope="module")
def client(server):
    """A gradio_client talking to the running app's named endpoints."""
    from gradio_client import Client

    return Client(server.url, verbose=False)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium context with a fresh profile (skips when Chromium is missing)."""
    from e2e_browser import open_browser

    with open_browser() as context:
        yield context


@pytest.fixture
def visitor(server, browser):
    """A new tab on the app: (page, console watch). Closed after the test."""
    from e2e_browser import new_visitor

    page, watch = new_visitor(browser, server.url)
    yield page, watch
    if not page.is_closed():
        page.close()
