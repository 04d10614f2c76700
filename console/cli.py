"""Entry point `dflash-console`: the TUI by default, and subcommands for scripts.

Each subcommand lives in `console/commands/NAME.py` with `register(subparsers)`. Exit codes:
0 ok, 1 the operation failed (or warnings with --strict), 2 bad config or usage, 3 remote failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from console import version
from console.remote_text import safe_output

COMMANDS = (
    "status",
    "launch",
    "stop",
    "restart",
    "probe",
    "logs",
    "trust",
    "journal",
    "diagnose",
    "check",
    "bench",
    "compare",
    "sim",
    "router",
    "serve",
)


TUI_COMMANDS = ("serve",)
"""Subcommands that open the console's UI (in a browser): only they, and the TUI itself, take `--theme`."""

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE, what a shell reports for a program whose reader went away (`cmd | head`)."""


class Parser(argparse.ArgumentParser):
    """argparse with the console's one typo message for a word outside a fixed set (a command, a verb, a
    `--kind`): `unknown verb 'upp'; did you mean 'up'? (known: up, down, …)`, exit 2 as argparse exits."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if action.choices is not None and value not in action.choices:
            from console.commands.names import unknown

            kind = (action.metavar if isinstance(action.metavar, str) else action.dest).lower()
            raise argparse.ArgumentError(action, unknown(kind, str(value), [str(c) for c in action.choices]))


class _VersionAction(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (see console.version)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"dflash-console {version()}")
        parser.exit()


def _global_options(ap: argparse.ArgumentParser, suppress: bool, theme: bool = True) -> None:
    """`--hosts`, `--read-only` (and `--theme` where a UI opens): on the main parser, and again on each subcommand
    so they may follow it; there the default is SUPPRESS so an option given before the command is kept."""
    d: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    ap.add_argument(
        "--hosts", metavar="PATH", **d, help="hosts.toml to use (default: ./hosts.toml, then the user config dir)"
    )
    ap.add_argument("--read-only", action="store_true", **d, help="hide and refuse every mutating action")
    if theme:
        ap.add_argument(
            "--theme", metavar="NAME", **d, help="UI theme (a built-in one or one from the user themes folder)"
        )


def build_parser(with_commands: bool = True) -> argparse.ArgumentParser:
    ap = Parser(
        prog="dflash-console",
        description="A terminal console for SGLang GPU fleets. Without a command it opens the TUI.",
    )
    ap.add_argument("--version", action=_VersionAction, help="print the installed version and exit")
    _global_options(ap, suppress=False)
    ap.add_argument("--demo", action="store_true", help="open on a temporary simulated fleet (no real hosts)")
    if not with_commands:  # the TUI: no need to import every subcommand
        ap.set_defaults(command=None)
        return ap
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"console.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"console.commands.{name}":
                raise
            continue
        mod.register(sub)
    for name, p in sub.choices.items():
        if name != "sim":  # `sim up --hosts LIST` is the sim's own option
            _global_options(p, suppress=True, theme=name in TUI_COMMANDS)
    return ap


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    tui_only = not any(w in COMMANDS or w in ("-h", "--help") for w in words)
    ap = build_parser(with_commands=not tui_only)
    if not tui_only:
        args = ap.parse_args(words)
    else:
        args, rest = ap.parse_known_args(words)
        if rest:  # a word that is no command (a typo of one), or an option the TUI does not take
            from console.commands.names import unknown

            word = next((w for w in rest if not w.startswith("-")), None)
            ap.error(unknown("command", word, list(COMMANDS)) if word else f"unrecognized arguments: {' '.join(rest)}")
    try:
        if args.command is None:
            from console.commands.tui import run_tui

            return run_tui(args)
        with safe_output():  # every command's output sanitised and secret-masked, line by line
            rc = int(args.func(args) or 0)
            sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not in the exit-time flush
        return rc
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if not _is_config_error(e):
            raise
        for issue in e.issues:  # type: ignore[attr-defined]
            print(issue, file=sys.stderr)
        return 2


def _is_config_error(e: Exception) -> bool:
    """A ConfigError, told without importing console.config (pydantic) for commands that never load it:
    only a loaded console.config can have raised one."""
    config = sys.modules.get("console.config")
    return config is not None and isinstance(e, config.ConfigError)


def _drop_stdout() -> None:
    """The reader of stdout is gone (`check | head -2`): point stdout at /dev/null so the interpreter's
    own flush at exit has nowhere to fail (Python's documented SIGPIPE recipe)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (tests capture into StringIO)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
