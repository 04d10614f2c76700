"""The command each browser session runs: the console itself, as a process of its own.

textual-serve starts one process per websocket through a shell, so the argv is quoted with shlex.join
and `exec`ed (the shell is not left between textual-serve and the app, and a quit reaches the app).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class SessionOptions:
    """What `serve` passes on to every session's console."""

    read_only: bool = True
    demo: bool = False
    hosts: str | None = None
    theme: str | None = None
    python: str = sys.executable


def session_argv(opts: SessionOptions) -> list[str]:
    argv = [opts.python, "-m", "console"]
    if opts.hosts is not None:
        argv += ["--hosts", opts.hosts]
    if opts.theme is not None:
        argv += ["--theme", opts.theme]
    if opts.demo:
        argv.append("--demo")
    if opts.read_only:
        argv.append("--read-only")
    return argv


def session_command(opts: SessionOptions) -> str:
    return "exec " + shlex.join(session_argv(opts))


def describe(opts: SessionOptions) -> str:
    """One line for the start banner: what a browser gets."""
    what = "a demo on its own simulated fleet" if opts.demo else f"the fleet in {opts.hosts or 'hosts.toml'}"
    mode = "read-only (start with --allow-actions to launch/stop)" if opts.read_only else "actions ALLOWED"
    return f"each browser session: {what}, {mode}"
