"""The default command: open the TUI on hosts.toml, or on a temporary sim fleet with --demo.

The entry points live here, not in `console.ui`: they build the fleet (a FleetController, or a DemoFleet
over the sim) and hand it to the app, so the UI package never imports the CLI's arguments and the app and
the demo do not import each other.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.ui.demo import DemoFleet

ESCDELAY_MS = 10
"""How long a lone ESC byte waits for the rest of an escape sequence before it counts as the Escape key.

Textual's default is 100 ms, which made every Escape (close a dialog, leave a screen) a tenth of a
second slow (benchmarks/bench_keypress.py). The console runs in a local terminal (it is the SSH
client), where a key's escape sequence arrives in one read; 10 ms is the `escape-time` tmux's own
FAQ suggests. A read that ends in a lone ESC with nothing behind it does not wait at all (it is the
Escape key: `textual_private.ESCAPE_AT_ONCE`). Set ESCDELAY yourself (e.g. `ESCDELAY=100`) when the
terminal itself is remote over a slow link, where an arrow key's bytes could be split: then every lone
ESC waits that long.
"""

FRAME_RATE = 240
"""Textual's frame cap (its default is 60), which is also the grid its next frame waits for.

A key's change is drawn on the next tick of that grid, so at 60 a press waited up to 16.7 ms (often two
ticks, behind a log frame) before anything was drawn; at 240 that wait is at most ~4 ms. It is a cap,
not a rate: the console only draws when something changed (log pulls at most ~33 a second, the fleet
once a second), so an idle or flooded console draws no more frames than before (benchmarks/
bench_keypress.py, bench_console_cpu.py). Set TEXTUAL_FPS yourself to override it.
"""

EXIT_GRACE_S = 5.0
"""After SIGTERM the console gets this long to restore the terminal and exit before it is ended hard."""


def terminal_defaults() -> None:
    """ESCDELAY and TEXTUAL_FPS where the user set neither (both are read once, when Textual is first imported).
    A user's own ESCDELAY also makes every lone ESC wait it out: the terminal's sequences may come split."""
    global _USER_ESCDELAY
    if _USER_ESCDELAY is None:  # the first call sees the user's environment; a later one would see ours
        _USER_ESCDELAY = "ESCDELAY" in os.environ
    os.environ.setdefault("ESCDELAY", str(ESCDELAY_MS))
    os.environ.setdefault("TEXTUAL_FPS", str(FRAME_RATE))
    from console.ui import textual_private

    textual_private.ESCAPE_AT_ONCE = not _USER_ESCDELAY


_USER_ESCDELAY: bool | None = None
"""Whether the user's environment set ESCDELAY (noted by the first `terminal_defaults`)."""


def run_tui(args: argparse.Namespace) -> int:
    """Imports Textual only here, so the script subcommands start without it."""
    terminal_defaults()
    if getattr(args, "demo", False):
        return run_demo(args)
    return run_app(args)


def run_app(args: argparse.Namespace) -> int:
    """The real fleet from hosts.toml."""
    from console.config import load_fleet
    from console.fleet.controller import FleetController
    from console.ui.app import DflashApp

    fleet = load_fleet(args.hosts)
    api = FleetController(fleet, read_only=bool(args.read_only))
    app = DflashApp(api, fleet=fleet, read_only=bool(args.read_only), theme=args.theme)
    app.run()
    return int(app.return_code or 0)


def run_demo(args: argparse.Namespace) -> int:
    """Opens the UI at once on an empty fleet; the sim comes up in a worker."""
    from console.ui.app import DflashApp
    from console.ui.demo import DemoFleet

    scale = float(os.environ.get("DFC_DEMO_TIME_SCALE", "0.25"))
    demo = DemoFleet(read_only=bool(getattr(args, "read_only", False)), time_scale=scale)
    os.environ["DFLASH_STATE_DIR"] = str(demo.state_dir)  # bench history and exports too: this process is the demo
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, lambda n, f: _on_exit_signal(demo, n, f))
    app = DflashApp(api_factory=demo.bring_up, demo=demo, read_only=demo.read_only, theme=getattr(args, "theme", None))
    try:
        app.run()
    finally:
        demo.cleanup()
    return int(app.return_code or 0)


def _on_exit_signal(demo: DemoFleet, signum: int, _frame: FrameType | None) -> None:
    """SIGHUP (terminal closed) or SIGTERM: the sim and temp dir go first, as on quit, then the process.

    SIGHUP leaves at once (no terminal is left to restore); SIGTERM unwinds the app so the terminal is
    restored, with a hard exit after EXIT_GRACE_S in case unwinding hangs."""
    demo.cleanup()
    code = 128 + signum
    if signum == signal.SIGHUP:
        os._exit(code)
    hard = threading.Timer(EXIT_GRACE_S, _hard_exit, (demo, code))
    hard.daemon = True
    hard.start()
    raise SystemExit(code)


def _hard_exit(demo: DemoFleet, code: int) -> None:
    """The unwinding after SIGTERM hung: end now, without leaving what the console journaled since the cleanup
    (the demo's journal lives in its temp tree, and writing it makes the directory again)."""
    demo.remove_tree()
    os._exit(code)
