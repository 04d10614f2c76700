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


def test_a_key_from_the_browser_opens_the_log_readers_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's input loop, fed the browser's framed bytes: the keys reach the app as before, and each
    opens the log readers' hold (console/keys_first.py), as the terminal's input loop does."""
    import asyncio
    import time

    from textual.app import App
    from textual.drivers import web_driver as textual_web_driver
    from textual.events import Key

    from console.keys_first import FRAME_AFTER_S, KEYS_FIRST
    from console.serve.web_driver import PromptEscapeWebDriver

    async def make() -> PromptEscapeWebDriver:
        return PromptEscapeWebDriver(App())

    class Reader:
        """The browser's bytes: packets of a type byte, a big-endian size and the payload ("D": terminal input)."""

        timeout = POLL_S

        def __iter__(self):  # type: ignore[no-untyped-def]
            payload = b"x\x1b[A"
            yield b"D" + len(payload).to_bytes(4, "big") + payload

        def close(self) -> None:
            pass

    monkeypatch.setattr(textual_web_driver, "InputReader", Reader)  # not the test's stdin

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # Driver.__init__ notes the running loop; nothing is posted to it here
    try:
        driver = loop.run_until_complete(make())
    finally:
        asyncio.set_event_loop(None)
        loop.close()

    keys: list[str] = []
    driver.process_message = lambda m: keys.append(m.key) if isinstance(m, Key) else None  # type: ignore[method-assign]
    before = KEYS_FIRST.key_at
    driver.run_input_thread()  # returns when the reader ends
    try:
        assert keys == ["x", "up"]
        assert KEYS_FIRST.key_at > before and KEYS_FIRST.holding()
    finally:
        KEYS_FIRST.key_taken()  # close the hold: no app here draws the keys' frame
        time.sleep(FRAME_AFTER_S)
        KEYS_FIRST.frame_drawn()
    assert not KEYS_FIRST.holding()
