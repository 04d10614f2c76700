"""Pure text helpers for the screens (sizes, ages, bars, sparklines, sanitising) so widgets stay thin and testable."""

from __future__ import annotations

import math
from collections.abc import Iterable

from console.remote_text import for_terminal
from console.sglang.phase import LABELS, STARTING_PHASES, Phase

BLOCKS = "▁▂▃▄▅▆▇█"

PHASE_WORDS: dict[str, str] = {p.value: words for p, words in LABELS.items()}
"""Phase -> words (`loading weights`), from console/sglang/phase.py's one table; a Phase or its value looks up."""
STARTING = STARTING_PHASES


def clean(text: str, limit: int | None = None) -> str:
    """Untrusted text as every screen, copy and save shows it: sanitised, secrets masked (tabs become spaces)."""
    text = for_terminal(text.replace("\t", "    "))
    return text if limit is None or len(text) <= limit else text[: max(0, limit - 1)] + "…"


def gib(mib: int | float | None) -> str:
    """`41.2` GiB from MiB, `?` when unknown."""
    return "?" if mib is None else f"{mib / 1024:.1f}"


def mem_pair(used: int | None, total: int | None) -> str:
    """`41.2/48.0 GiB`: the unit VRAM is thought of in."""
    return f"{gib(used)}/{gib(total)} GiB"


def age(seconds: float | None) -> str:
    """`14 s`, `3 min`, `2 h`: how old a number is."""
    if seconds is None:
        return "never"
    if seconds < 90:
        return f"{int(seconds)} s"
    if seconds < 5400:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds // 3600)} h"


def duration(seconds: float | None) -> str:
    """`12.3 s`, `4m05s` for timeline rows."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(round(seconds), 60)
    return f"{m}m{s:02d}s"


def bar(fraction: float | None, width: int) -> tuple[str, str]:
    """A horizontal bar split into (filled, empty) strings so callers can style each half."""
    if width <= 0:
        return "", ""
    f = 0.0 if fraction is None or math.isnan(fraction) else min(1.0, max(0.0, fraction))
    n = round(f * width)
    return "█" * n, "░" * (width - n)


def nice_ceiling(value: float) -> float:
    """The next 1/2/5×10^k at or above value, so a sparkline's top is a round number."""
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for m in (1, 2, 5, 10):
        if value <= m * exp:
            return float(m * exp)
    return float(10 * exp)


def sparkline(values: Iterable[float], width: int, top: float | None = None, floor_top: float = 100.0) -> str:
    """Zero-anchored fixed-range sparkline: 0 is the bottom block, `top` (or a round ceiling) the top."""
    vals = [v for v in values if v is not None and not math.isnan(v)][-width:] if width > 0 else []
    if not vals:
        return " " * max(0, width)
    hi = top if top is not None else nice_ceiling(max(max(vals), floor_top))
    out = []
    for v in vals:
        f = min(1.0, max(0.0, v / hi)) if hi > 0 else 0.0
        out.append(BLOCKS[min(len(BLOCKS) - 1, int(f * (len(BLOCKS) - 1) + 0.5))])
    return "".join(out).rjust(width)


def sparkline_rows(
    values: Iterable[float], width: int, rows: int, top: float | None = None, floor_top: float = 100.0
) -> list[str]:
    """A `rows`-tall zero-anchored graph (8 levels per cell), top row first; same fixed range as `sparkline`."""
    vals = [v for v in values if v is not None and not math.isnan(v)][-width:] if width > 0 else []
    if not vals or rows <= 0:
        return [" " * max(0, width) for _ in range(max(0, rows))]
    hi = top if top is not None else nice_ceiling(max(max(vals), floor_top))
    levels = [round(min(1.0, max(0.0, v / hi)) * rows * 8) if hi > 0 else 0 for v in vals]
    out = []
    for r in range(rows - 1, -1, -1):
        line = []
        for lv in levels:
            cell = lv - r * 8
            line.append(" " if cell <= 0 else "█" if cell >= 8 else BLOCKS[cell - 1])
        out.append("".join(line).rjust(width))
    return out


def gpu_span(gpus: Iterable[int]) -> str:
    """`0-3` for a contiguous TP group, `0,2` otherwise."""
    g = sorted(gpus)
    if not g:
        return ""
    if len(g) > 1 and g == list(range(g[0], g[-1] + 1)):
        return f"{g[0]}-{g[-1]}"
    return ",".join(str(x) for x in g)


def rate(v: float | None) -> str:
    """Tokens/s, compact."""
    if v is None:
        return "—"
    return f"{v / 1000:.1f}k" if v >= 10_000 else f"{v:.0f}"


def short_gpu_name(name: str) -> str:
    """Drops the vendor prefix nvidia-smi prints (`NVIDIA RTX A6000` -> `RTX A6000`)."""
    name = clean(name)
    for p in ("NVIDIA ", "Tesla "):
        if name.startswith(p):
            name = name[len(p) :]
    for long, short in ((" Workstation Edition", " WS"), (" Server Edition", " SE")):
        name = name.replace(long, short)
    return name


def plural(n: int, word: str) -> str:
    """`1 host`, `3 hosts`, `0 GPUs`."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


SERVER_KINDS = ("serving", "starting", "crashed", "stopped")


def server_counts(phases: Iterable[str]) -> str:
    """`2 serving · 1 starting · 1 crashed` from server phases: each word says what it counts, none is
    'servers' (a crashed server is not a running one); `no servers` when there are none."""
    counts = dict.fromkeys(SERVER_KINDS, 0)
    for p in phases:
        kind = "serving" if p in (Phase.READY, Phase.SERVING) else "starting" if p in STARTING else p
        if kind in counts:
            counts[kind] += 1
    parts = [f"{n} {kind}" for kind, n in counts.items() if n]
    return " · ".join(parts) or "no servers"


def exiting_words(phase: str) -> str:
    """One state for a log that says it ended while its process has not: `crashed, ranks exiting`, `stopping…`."""
    return "crashed, ranks exiting" if phase == "crashed" else "stopping…"


def end_words(phase: str, alive: bool, ended_at: float | None, now: float) -> str:
    """`stopped 3 min ago`, `crashed 14 s ago`, or, the process still there, `crashed, ranks exiting` /
    `stopping…` (never an end beside "still running")."""
    if alive:
        return exiting_words(phase)
    return f"{phase} {age(max(0.0, now - ended_at))} ago" if ended_at is not None else phase


def last_figures(tok_s: float | None, running: int | None, queued: int | None, kv: float | None) -> str:
    """`last: 267 tok/s · run 3 · queue 0 · KV 42%`: an ended server's final figures, never shown as current."""
    parts = [f"{rate(tok_s)} tok/s"] if tok_s is not None else []
    if running is not None:
        parts.append(f"run {running}")
    if queued is not None:
        parts.append(f"queue {queued}")
    if kv is not None:
        parts.append(f"KV {kv * 100:.0f}%")
    return ("last: " + " · ".join(parts)) if parts else ""
