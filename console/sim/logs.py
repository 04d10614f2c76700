"""SGLang's log line prefixes, tqdm bars and Python-style tracebacks, written and flushed line by line.

Formats: docs/sglang.md §1.1 (`[%(asctime)s{ms}{prefix}] msg`, no level name), §1.3 (tqdm with `\\r`).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

SITE = "/usr/local/lib/python3.11/site-packages"
"""Where tracebacks say SGLang lives (the host's venv site-packages is used when known)."""


def site_packages() -> str:
    host = os.environ.get("DFLASH_SIM_HOST_DIR")
    return f"{host}/venv/lib/python3.11/site-packages" if host else SITE


def stamp(t: float | None = None) -> str:
    t = time.time() if t is None else t
    s = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    if os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true"):
        s += f".{int(t * 1000) % 1000:03d}"
    return s


def rank_prefix(tp_size: int, tp_rank: int | None) -> str:
    """Scheduler prefix: ` TPn` only when tp > 1 (docs/sglang.md §1.1)."""
    return f" TP{tp_rank}" if tp_rank is not None and tp_size > 1 else ""


def line(msg: str, prefix: str = "", stream: TextIO | None = None) -> None:
    out = stream or sys.stderr
    out.write(f"[{stamp()}{prefix}] {msg}\n")
    out.flush()


def raw(text: str, stream: TextIO | None = None) -> None:
    out = stream or sys.stderr
    out.write(text)
    out.flush()


def traceback_text(frames: list[tuple[str, int, str, str]], exc: str) -> str:
    """`Traceback (most recent call last):` + frames (file under sglang/, line, func, code) + the exception line."""
    site = site_packages()
    out = ["Traceback (most recent call last):"]
    for f, n, func, code in frames:
        path = f if f.startswith("/") else f"{site}/{f}"
        out += [f'  File "{path}", line {n}, in {func}', f"    {code}"]
    return "\n".join(out) + "\n" + exc


def _fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 60:02d}:{s % 60:02d}" if s < 3600 else f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _rate(n: int, elapsed: float) -> str:
    if n == 0 or elapsed <= 0:
        return "?it/s"
    r = n / elapsed
    return f"{1 / r:5.2f}s/it" if r < 1 else f"{r:5.2f}it/s"


def _remaining(n: int, total: int, elapsed: float) -> str:
    return "?" if n == 0 or elapsed <= 0 else _fmt_time(elapsed / n * (total - n))


def shard_bar(desc: str, n: int, total: int, elapsed: float) -> str:
    """SGLang's BAR_FORMAT: `{desc}: {percentage:3.0f}% Completed | {n}/{total} [{elapsed}<{remaining}, {rate}]`."""
    pct = 100 * n / total if total else 100
    return (
        f"{desc}: {pct:3.0f}% Completed | {n}/{total} [{_fmt_time(elapsed)}<"
        f"{_remaining(n, total, elapsed)}, {_rate(n, elapsed)}]"
    )


_PARTS = " ▏▎▍▌▋▊▉"


def tqdm_bar(desc: str, n: int, total: int, elapsed: float, width: int = 10) -> str:
    """tqdm's default format: `{desc}: {pct:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]`."""
    frac = n / total if total else 1.0
    full, rem = divmod(frac * width, 1)
    bar = "█" * int(full)
    if int(full) < width:
        bar += (_PARTS[int(rem * 8)] if rem * 8 >= 1 else " ") + " " * (width - int(full) - 1)
    return (
        f"{desc}: {frac * 100:3.0f}%|{bar}| {n}/{total} [{_fmt_time(elapsed)}<"
        f"{_remaining(n, total, elapsed)}, {_rate(n, elapsed)}]"
    )
