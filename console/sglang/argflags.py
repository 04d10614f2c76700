"""A launch command line's `--flag value` pairs as argparse would read them (pure; the lint and the spec view)."""

from __future__ import annotations

from collections.abc import Sequence


def parse_flags(args: Sequence[str]) -> dict[str, list[str | None]]:
    """`["--a", "1", "--b", "--c=2"]` -> {"--a": ["1"], "--b": [None], "--c": ["2"]} (argparse-like)."""
    out: dict[str, list[str | None]] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a.split("=", 1)
                out.setdefault(k, []).append(v)
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out.setdefault(a, []).append(args[i + 1])
                i += 1
            else:
                out.setdefault(a, []).append(None)
        i += 1
    return out
