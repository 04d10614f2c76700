"""Speculative decoding as SGLang runs it: the preset's spec settings, sane accept figures, the spec log notes,
and the accept-length alarm (pure; the pane, the server screen and `status --json` read these).

Facts (docs/sglang.md, "Speculative decoding"):
- `accept len` on a Decode batch line is accepted drafts plus the bonus token per verify step, so 1.0 means no
  draft token was accepted and the most it can be is the verify width (`--speculative-num-draft-tokens`; for
  DFLASH the block size). Older SGLang prints `accept len: X, ` alone, newer `accept len: X, accept rate: Y, `.
- DFLASH (`server_args` `_handle_dflash`, SGLang main 2026): a draft model path is required; no DP attention;
  pp size 1; steps and topk are forced to 1; `--speculative-dflash-block-size` sets num-draft-tokens (they must
  agree when both are given); `--speculative-draft-window-size` must be at least the block size; the draft
  attention backend is flashinfer or fa3 (others fall back to flashinfer with a warning).
- `speculative/dflash_worker.py` prints the notes matched by `spec_note` below.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from console.sglang.argflags import parse_flags

ALGORITHM_FLAG = "--speculative-algorithm"
_ALIASES = {
    "--speculative-draft-model": "--speculative-draft-model-path",
    "--speculative-dflash-draft-window-size": "--speculative-draft-window-size",
}
_SPEC_FLAGS = (
    ALGORITHM_FLAG,
    "--speculative-draft-model-path",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-dflash-block-size",
    "--speculative-draft-attention-backend",
    "--speculative-draft-window-size",
)
ACCEPT_CEILING = 64.0
"""No verify width SGLang supports comes near this: a larger accept length is garbage, shown as unknown."""
DEFAULT_COLLAPSE = 1.3
"""Accept length under this (per preset: `spec_alarm_below`) is a collapsed drafter: almost nothing accepted."""
HALF_MEDIAN_FOR_S = 60.0
"""Below half the preset's history median for this long is a collapse too (a drafter that fell, not one that is weak)."""


@dataclass(frozen=True)
class SpecConfig:
    """A server's speculative-decoding settings, read from its argv (None fields: SGLang chooses)."""

    algorithm: str
    draft_model: str | None = None
    num_steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    """The verify width: `--speculative-num-draft-tokens`, or DFLASH's block size."""
    draft_attention_backend: str | None = None
    draft_window: int | None = None

    @property
    def dflash(self) -> bool:
        return self.algorithm == "DFLASH"

    @property
    def accept_max(self) -> float:
        """The top of the accept-length graph: draft tokens + 1 (steps + 2, else 8, while SGLang chooses)."""
        if self.draft_tokens:
            return float(self.draft_tokens + 1)
        if self.num_steps:
            return float(self.num_steps + 2)
        return 8.0

    def shape(self) -> str:
        """`block 16` for DFLASH, `steps 3 · topk 1 · draft 4` for the EAGLE family (what was given)."""
        if self.dflash:
            return f"block {self.draft_tokens}" if self.draft_tokens else "block auto"
        parts = [f"{k} {v}" for k, v in (("steps", self.num_steps), ("topk", self.topk), ("draft", self.draft_tokens))]
        return " · ".join(p for p in parts if not p.endswith(" None")) or "auto"


def _flags(argv: Sequence[str]) -> dict[str, str]:
    """The last value of each spec flag (aliases under their full names), as argparse keeps it."""
    out: dict[str, str] = {}
    for k, vals in parse_flags(argv).items():
        k = _ALIASES.get(k, k)
        if k in _SPEC_FLAGS and vals[-1]:
            out[k] = vals[-1]
    return out


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def spec_config(argv: Sequence[str]) -> SpecConfig | None:
    """The spec settings of a launch command line; None when it runs no speculative decoding. Read on every pane
    render and new batch line: a server's argv is fixed, so each one is read once."""
    return _spec_config(tuple(argv))


@lru_cache(maxsize=512)
def _spec_config(argv: tuple[str, ...]) -> SpecConfig | None:
    f = _flags(argv)
    algo = (f.get(ALGORITHM_FLAG) or "").strip().upper()
    if not algo:
        return None
    block = _int(f.get("--speculative-dflash-block-size"))
    draft = _int(f.get("--speculative-num-draft-tokens"))
    if algo == "DFLASH" and block is not None:
        draft = block
    return SpecConfig(
        algorithm=algo,
        draft_model=f.get("--speculative-draft-model-path"),
        num_steps=1 if algo == "DFLASH" else _int(f.get("--speculative-num-steps")),
        topk=1 if algo == "DFLASH" else _int(f.get("--speculative-eagle-topk")),
        draft_tokens=draft,
        draft_attention_backend=f.get("--speculative-draft-attention-backend"),
        draft_window=_int(f.get("--speculative-draft-window-size")),
    )


def sane_accept_len(v: float | None, ceiling: float = ACCEPT_CEILING) -> float | None:
    """An accept length as printed, or None when it cannot be one (NaN, infinite, negative, past the width)."""
    if v is None or not math.isfinite(v) or v < 0 or v > ceiling:
        return None
    return v


def sane_accept_rate(v: float | None) -> float | None:
    """An accept rate in [0, 1] as printed, else None."""
    if v is None or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        return None
    return v


@dataclass(frozen=True)
class SpecNote:
    """A spec-decoding line worth an alarm: `kind` is stable (json), `text` is what the operator reads."""

    kind: str
    text: str
    severity: str = "warning"


_NOTES: tuple[tuple[str, str, str, str], ...] = (
    # (message prefix, kind, severity, operator text); messages from speculative/dflash_worker.py
    (
        "DFLASH currently supports greedy verification only",
        "greedy-only",
        "warning",
        "DFLASH runs greedy: requests with temperature/top_p/top_k were decoded with argmax",
    ),
    ("DFLASH block size mismatch", "block-size-mismatch", "warning", "DFLASH block size differs from the draft config"),
    ("DFLASH draft OOM", "draft-oom", "error", "DFLASH draft KV cache ran out of memory"),
    (
        "DFLASH draft worker only supports attention_backend",
        "draft-backend-fallback",
        "warning",
        "DFLASH draft attention backend fell back to flashinfer",
    ),
    (
        "DFLASH draft worker does not support 'trtllm_mha'",
        "draft-backend-fallback",
        "warning",
        "DFLASH draft attention backend fell back to flashinfer",
    ),
)


def spec_note(msg: str) -> SpecNote | None:
    """The alarm a log message (after its header) raises, if it is one of SGLang's spec warnings; also the
    exception line of a raised one (`RuntimeError: DFLASH draft OOM ...`)."""
    i = msg.find("DFLASH ", 0, 40)
    if i < 0 or (i and not msg[:i].rstrip().endswith(("Error:", "Exception:"))):
        return None
    msg = msg[i:]
    for prefix, kind, severity, text in _NOTES:
        if msg.startswith(prefix):
            detail = msg[len(prefix) :].lstrip(":;. ").rstrip()
            return SpecNote(kind, f"{text} ({detail})" if detail and kind != "greedy-only" else text, severity)
    return None


@dataclass(frozen=True)
class AcceptAlarm:
    """A collapsed accept length: why, and since when (None when healthy)."""

    text: str
    since: float


def history_median(values: Iterable[float]) -> float | None:
    vals = [v for v in values if math.isfinite(v)]
    return statistics.median(vals) if vals else None


def accept_alarm(
    points: Sequence[tuple[float, float]],
    now: float,
    *,
    below: float = DEFAULT_COLLAPSE,
    median: float | None = None,
    fresh_s: float = 30.0,
) -> AcceptAlarm | None:
    """The accept-length alarm from the figures `(t, accept_len)` in time order.

    Raised when the newest figure (no older than `fresh_s`: an idle server prints none and is not collapsing) is
    under `below`, or when every figure of the last HALF_MEDIAN_FOR_S seconds sits under half the preset's history
    `median`. Clears by itself once a figure recovers."""
    if not points:
        return None
    t_last, last = points[-1]
    if now - t_last > fresh_s:
        return None
    if last < below:
        since = t_last
        for t, v in reversed(points):
            if v >= below:
                break
            since = t
        return AcceptAlarm(f"accept length {last:.2f} under {below:g}: the drafter is accepting almost nothing", since)
    if median is not None and median > 0 and last < median / 2:
        since = t_last
        for t, v in reversed(points):
            if v >= median / 2:
                break
            since = t
        if t_last - since >= HALF_MEDIAN_FOR_S or now - since >= HALF_MEDIAN_FOR_S:
            return AcceptAlarm(
                f"accept length {last:.2f} under half this preset's median {median:.2f} for {now - since:.0f} s", since
            )
    return None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]) of the figures a launch printed; None for none."""
    vals = sorted(v for v in values if math.isfinite(v))
    if not vals:
        return None
    k = max(0, min(len(vals) - 1, math.ceil(q / 100 * len(vals)) - 1))
    return vals[k]
