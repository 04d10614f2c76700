"""The sessions' WebDriver: its reader wakes when a lone ESC's wait ends (the Escape itself is pressed in
tests/browser/, where the session's environment is checked to name this driver)."""

from __future__ import annotations

import pytest

from console.serve.web_driver import DRIVER, POLL_S, reader_timeout


def test_web_driver_reader_waits_no_longer_than_a_pending_escape() -> None:
    assert DRIVER == "console.serve.web_driver:PromptEscapeWebDriver"  # this Textual's internals are there
    assert reader_timeout(None, 100.0) == POLL_S  # idle: Textual's own poll
    assert reader_timeout(100.01, 100.0) == pytest.approx(0.01)  # a lone ESC pending: wake when its wait ends
    assert reader_timeout(99.0, 100.0) == 0.0  # overdue: at once
    assert reader_timeout(105.0, 100.0) == POLL_S
