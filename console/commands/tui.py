"""The default command: open the TUI on hosts.toml, or on a temporary sim fleet with --demo."""

from __future__ import annotations

import argparse
import os

ESCDELAY_MS = 10
"""How long a lone ESC byte waits for the rest of an escape sequence before it counts as the Escape key.

Textual's default is 100 ms, which made every Escape (close a dialog, leave a screen) a tenth of a
second slow (benchmarks/bench_keypress.py). The console runs in a local terminal (it is the SSH
client), where a key's escape sequence arrives in one read; 10 ms is the `escape-time` tmux's own
FAQ suggests. Set ESCDELAY yourself (e.g. `ESCDELAY=100`) when the terminal itself is remote over a
slow link, where an arrow key's bytes could be split.
"""


def run_tui(args: argparse.Namespace) -> int:
    """Imports Textual only here, so the script subcommands start without it."""
    os.environ.setdefault("ESCDELAY", str(ESCDELAY_MS))  # read once, when Textual is first imported
    from console.ui.app import run_app

    return run_app(args)
