"""UI test setup: no cursor blink (deterministic frames) and a fresh app factory over the fake fleet."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Input

from console.ui.app import DflashApp
from tests.ui.fakes import NOW, FakeApi, FakeBackend


@pytest.fixture(autouse=True)
def _no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture(autouse=True)
def _isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """User themes and exports go to a temp dir, never the developer's real config."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture
def make_app() -> Callable[..., DflashApp]:
    def make(api: FakeApi | None = None, **kw: object) -> DflashApp:
        api = api or FakeApi()
        kw.setdefault("backend", FakeBackend())
        return DflashApp(api, clock=lambda: NOW, **kw)  # type: ignore[arg-type]

    return make
