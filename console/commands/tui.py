"""The default command: open the TUI on hosts.toml, or on a temporary sim fleet with --demo."""

from __future__ import annotations

import argparse


def run_tui(args: argparse.Namespace) -> int:
    """Imports Textual only here, so the script subcommands start without it."""
    from console.ui.app import run_app

    return run_app(args)
