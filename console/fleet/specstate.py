"""A server's speculative decoding as the screens and `status --json` show it: settings, the live accept figures
with their age and source, the accept history, and the alarms (pure: read from ServerState, nothing written)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from console.fleet.state import ServerState
from console.sglang.specdec import (
    DEFAULT_COLLAPSE,
    SpecConfig,
    accept_alarm,
    percentile,
    sane_accept_len,
    sane_accept_rate,
    spec_config,
)

FIGURE_STALE_S = 15.0
"""An accept figure older than this is shown with its age: SGLang prints Decode lines only while decoding (every
40 steps), so a busy server renews it within seconds and an idle one's last figure is history, not a reading."""


SHORT = {
    "accept-collapse": "drafter collapsed",
    "greedy-only": "greedy only",
    "block-size-mismatch": "block size mismatch",
    "draft-oom": "draft OOM",
    "draft-backend-fallback": "draft backend fallback",
}
"""What a pane has room for: the alarm's name; the server screen, `status` and the notice say the whole of it."""


@dataclass(frozen=True)
class SpecStatus:
    config: SpecConfig
    accept_len: float | None
    accept_rate: float | None
    at: float | None
    """When the figure was printed (log time) or scraped (/metrics); None: never seen."""
    source: str | None
    """"log" (Decode batch lines) or "metrics" (/metrics gauges, rank 0), whichever is newer."""
    history: tuple[float, ...]
    warnings: tuple[tuple[str, str], ...]
    """(kind, text) of every alarm standing now: accept collapse, and the notes the log raised."""
    cumulative: tuple[float, float] | None = None
    """(when, lifetime mean accept length) from /server_info."""

    def age_s(self, now: float) -> float | None:
        return None if self.at is None else max(0.0, now - self.at)

    def mean(self) -> float | None:
        return round(sum(self.history) / len(self.history), 2) if self.history else None


def spec_status(
    s: ServerState, now: float, *, below: float = DEFAULT_COLLAPSE, median: float | None = None
) -> SpecStatus | None:
    """None for a server without `--speculative-algorithm`."""
    cfg = spec_config(s.meta.argv)
    if cfg is None:
        return None
    ceiling = cfg.accept_max if cfg.draft_tokens else None
    points = [(t, v) for t, v in s.log.accepts if t is not None and (ceiling is None or v <= ceiling)]
    acc, rate, at, source = None, None, None, None
    if points:
        at, acc = points[-1]
        rate, source = s.log.accept_rate, "log"
    m_len = sane_accept_len(s.metrics.get("spec_accept_length"), ceiling or math.inf)
    if m_len is not None and s.metrics_at is not None and (at is None or s.metrics_at > at):
        acc, rate, at, source = m_len, sane_accept_rate(s.metrics.get("spec_accept_rate")), s.metrics_at, "metrics"
        points.append((s.metrics_at, m_len))
    warnings: list[tuple[str, str]] = []
    if s.alive:
        alarm = accept_alarm(points, now, below=below, median=median)
        if alarm is not None:
            warnings.append(("accept-collapse", alarm.text))
    for kind, (note, count, _) in s.log.spec_notes.items():
        times = f" ({count} times)" if count > 1 else ""
        warnings.append((kind, note.text + times))
    cum = s.spec_cumulative
    if cum is not None and sane_accept_len(cum[1], ceiling or math.inf) is None:
        cum = None
    return SpecStatus(cfg, acc, rate, at, source, tuple(v for _, v in points), tuple(warnings), cum)


def spec_doc(st: SpecStatus | None, now: float, *, alive: bool = True) -> dict[str, Any] | None:
    """The `spec` object of `status --json` (null without speculative decoding)."""
    if st is None:
        return None
    c = st.config
    hist = list(st.history)
    age = st.age_s(now)
    return {
        "algorithm": c.algorithm,
        "draft_model": c.draft_model,
        "num_steps": c.num_steps,
        "topk": c.topk,
        "draft_tokens": c.draft_tokens,
        "block_size": c.draft_tokens if c.dflash else None,
        "draft_attention_backend": c.draft_attention_backend,
        "draft_window": c.draft_window,
        "accept_len": st.accept_len if alive else None,
        "accept_rate": st.accept_rate if alive else None,
        "accept_len_age_s": None if age is None else round(age, 1),
        "source": st.source,
        "accept_len_mean": st.mean(),
        "accept_len_p10": percentile(hist, 10),
        "accept_len_p90": percentile(hist, 90),
        "accept_len_cumulative": round(st.cumulative[1], 3) if st.cumulative else None,
        "accept_len_cumulative_age_s": round(max(0.0, now - st.cumulative[0]), 1) if st.cumulative else None,
        "warnings": [{"kind": k, "text": t} for k, t in st.warnings],
    }


def spec_line(st: SpecStatus, now: float, stale_s: float) -> str:
    """`spec DFLASH · accept 3.12` for the pane and `status` (`(42 s ago)` once older than the stale limit)."""
    if st.accept_len is None:
        return f"spec {st.config.algorithm} · accept ?"
    age = st.age_s(now)
    old = f" ({age:.0f} s ago)" if age is not None and age > stale_s else ""
    return f"spec {st.config.algorithm} · accept {st.accept_len:.2f}{old}"
