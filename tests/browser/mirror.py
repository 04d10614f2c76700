"""What the browser's terminal shows, as text: the bytes its websocket received, replayed into a pyte screen.

textual-serve draws with xterm.js on a canvas, so the page's DOM holds no text; the same bytes the page's
terminal writes, at the size the page asked for (the websocket URL's width/height, then its resize
messages), give the same screen.
"""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs, urlsplit

import pyte
from playwright.sync_api import Page, WebSocket

from tests.patience import patient


class TerminalMirror:
    def __init__(self, page: Page) -> None:
        self.page = page
        self.screen = pyte.Screen(80, 24)
        self.stream = pyte.ByteStream(self.screen)
        self.sockets: list[WebSocket] = []
        self.bytes_in = 0
        self.paused = False
        """While True frames are counted but not fed (a benchmark feeds them itself, after stamping them)."""
        page.on("websocket", self._on_socket)

    def _on_socket(self, ws: WebSocket) -> None:
        self.sockets.append(ws)
        q = parse_qs(urlsplit(ws.url).query)
        self._resize(int(q.get("width", ["80"])[0]), int(q.get("height", ["24"])[0]))
        ws.on("framereceived", self._received)
        ws.on("framesent", self._sent)

    def _resize(self, width: int, height: int) -> None:
        self.screen.resize(lines=height, columns=width)

    def _received(self, payload: str | bytes) -> None:
        if isinstance(payload, bytes):
            self.bytes_in += len(payload)
            if not self.paused:
                self.stream.feed(payload)

    def _sent(self, payload: str | bytes) -> None:
        if isinstance(payload, str) and payload.startswith('["resize"'):
            size = json.loads(payload)[1]
            self._resize(int(size["width"]), int(size["height"]))

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, *needles: str, timeout: float = 10.0, poll_ms: float = 100) -> str:
        """The screen once every needle is on it (events arrive while Playwright waits)."""
        deadline = time.monotonic() + patient(timeout)
        while True:
            text = self.text()
            if all(n in text for n in needles):
                return text
            if time.monotonic() > deadline:
                missing = [n for n in needles if n not in text]
                raise AssertionError(f"not on the browser's screen: {missing!r}; screen:\n{text}")
            self.page.wait_for_timeout(poll_ms)

    def wait_gone(self, needle: str, timeout: float = 10.0, poll_ms: float = 100) -> str:
        deadline = time.monotonic() + patient(timeout)
        while needle in (text := self.text()):
            if time.monotonic() > deadline:
                raise AssertionError(f"still on the browser's screen: {needle!r}; screen:\n{text}")
            self.page.wait_for_timeout(poll_ms)
        return text
