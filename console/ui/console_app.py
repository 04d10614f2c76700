"""What screens and widgets use of the console's App, typed: `console_app(self)` instead of an untyped `self.app`.

Textual types `Widget.app` as a plain `App`, so every `self.app.state` was an `attr-defined` ignore. This
protocol names what the UI reads and asks of DflashApp (console/ui/app.py checks that it conforms) without
importing the app module, so no screen joins the app's import cycle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from rich.text import Text
from textual.dom import DOMNode

if TYPE_CHECKING:
    from console.config import Fleet
    from console.fleet.api import FleetApi
    from console.fleet.events import Notice
    from console.fleet.state import FleetState
    from console.ui.backend import ChatBackend
    from console.ui.probe_note import ProbeNote


class ConsoleApp(Protocol):
    """The console's App as its screens and widgets see it."""

    @property
    def fleet(self) -> Fleet: ...

    @property
    def api(self) -> FleetApi | None:
        """None until the demo's sim fleet is up (the UI opens first)."""
        ...

    @property
    def state(self) -> FleetState: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def demo(self) -> Any: ...

    @property
    def status_line(self) -> str: ...

    @property
    def activity(self) -> deque[Notice]: ...

    @property
    def backend(self) -> ChatBackend: ...

    @property
    def probe_note(self) -> ProbeNote | None: ...

    @property
    def bench_runner(self) -> Callable[..., None] | None: ...

    def copy_to_clipboard(self, text: str) -> None: ...

    def now(self) -> float: ...

    def catch_up_screen(self, screen: Any) -> None: ...

    def refuse_if_read_only(self, action: str) -> bool: ...

    def _run(self, action: str, target: str, fn: Callable[[], Awaitable[tuple[bool, str]]]) -> None: ...

    def confirm(self, question: Text, then: Callable[[], Any]) -> None: ...

    def api_key_for(self, name: str) -> str | None: ...

    def start_launch(self, preset: str, gpus: list[int] | None, stamp: str | None = None) -> None: ...

    def request_relaunch(self, name: str | None) -> None: ...

    def request_stop(self, name: str | None) -> None: ...

    def request_probe(self, name: str | None) -> None: ...

    def request_bench(self, name: str | None) -> None: ...

    def open_server(self, name: str | None) -> None: ...

    def open_chat(self, name: str | None) -> None: ...

    def open_launch(self, host: str | None, gpus: list[int], marked: bool = False) -> None: ...


def console_app(node: DOMNode | Any) -> ConsoleApp:
    """`node.app` (a mounted widget or screen, or a mixin of one), typed as the console's App: it always is."""
    return cast(ConsoleApp, node.app)
