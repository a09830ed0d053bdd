"""Shared fixtures of the webhook tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.webhook.fakes import FakeView, ScriptedAdmit, result
from webhook.server import create_app


@pytest.fixture
def view() -> FakeView:
    return FakeView()


@pytest.fixture
def admit() -> ScriptedAdmit:
    return ScriptedAdmit(result("skipped", reason="NoSignificantChange"))


@pytest.fixture
def client(view: FakeView, admit: ScriptedAdmit) -> Iterator[TestClient]:
    """The ASGI app in-process, lifespan included, with the scripted `admit`."""
    with TestClient(create_app(view, admit=admit)) as test_client:
        yield test_client
