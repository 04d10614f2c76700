"""Pure bench statistics: per-request samples → per-level figures, run records, run-to-run deltas.

No IO and no clock here, so the numbers a sweep prints can be unit-tested from hand-made samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

LEVEL_KEYS = (
    "concurrency",
    "requests",
    "output_throughput_tok_s",
    "request_throughput_rps",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "errors",
)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation, as numpy's default; None when empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in 0..100, got {q}")
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


@dataclass
class RequestSample:
    """One request as the load generator saw it (times in seconds on one monotonic clock)."""

    start: float
    end: float
    ok: bool
    output_tokens: int = 0
    ttft_s: float | None = None
    itls_s: list[float] = field(default_factory=list)
    """Gaps between successive streamed content chunks (SGLang bench_serving's ITL)."""
    error: str | None = None

    @property
    def e2e_s(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class LevelResult:
    """The figures for one concurrency level (the `--json` level object plus a few extras)."""

    concurrency: int
    requests: int
    output_throughput_tok_s: float
    request_throughput_rps: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    errors: int
    duration_s: float = 0.0
    output_tokens: int = 0
    error_examples: tuple[str, ...] = ()

    def public(self) -> dict[str, Any]:
        """The level object of `bench --json` (exactly LEVEL_KEYS)."""
        d = asdict(self)
        return {k: d[k] for k in LEVEL_KEYS}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_examples"] = list(self.error_examples)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LevelResult:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        known["error_examples"] = tuple(known.get("error_examples", ()))
        return cls(**known)


def aggregate(concurrency: int, samples: Iterable[RequestSample], duration_s: float | None = None) -> LevelResult:
    """Fold a level's samples into figures; throughput is over the level's wall time (first start → last end)."""
    ss = list(samples)
    ok = [s for s in ss if s.ok]
    errs = [s for s in ss if not s.ok]
    if duration_s is None:
        duration_s = (max(s.end for s in ss) - min(s.start for s in ss)) if ss else 0.0
    tokens = sum(s.output_tokens for s in ok)
    ttfts = [s.ttft_s for s in ok if s.ttft_s is not None]
    itls = [g for s in ok for g in s.itls_s]
    e2es = [s.e2e_s for s in ok]
    examples: list[str] = []
    for s in errs:
        if s.error and s.error not in examples:
            examples.append(s.error)
        if len(examples) >= 3:
            break
    return LevelResult(
        concurrency=concurrency,
        requests=len(ss),
        output_throughput_tok_s=tokens / duration_s if duration_s > 0 else 0.0,
        request_throughput_rps=len(ok) / duration_s if duration_s > 0 else 0.0,
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p99_s=percentile(ttfts, 99),
        itl_p50_s=percentile(itls, 50),
        itl_p99_s=percentile(itls, 99),
        e2e_p50_s=percentile(e2es, 50),
        e2e_p99_s=percentile(e2es, 99),
        errors=len(errs),
        duration_s=duration_s,
        output_tokens=tokens,
        error_examples=tuple(examples),
    )


def default_num_prompts(concurrency: int, requested: int | None = None) -> int:
    """Requests per level: exactly `requested` when given (`--num-prompts 8` is 8), else 5 × concurrency
    so every slot turns over a few times."""
    return max(5 * concurrency, 1) if requested is None else max(requested, 1)


def num_prompts_notes(levels: Iterable[int], requested: int | None) -> list[str]:
    """Why a level will not look like its C: fewer requests than C cannot keep C in flight."""
    if requested is None:
        return []
    return [
        f"C={c}: {requested} requests per level keep at most {requested} in flight, not {c}"
        for c in levels
        if requested < c
    ]


def parse_concurrency(text: str) -> list[int]:
    """`1,32,64,128` → [1, 32, 64, 128]; rejects empty, non-integer and non-positive entries."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            c = int(part)
        except ValueError:
            raise ValueError(f"concurrency must be integers separated by commas, got {part!r}") from None
        if c < 1:
            raise ValueError(f"concurrency must be >= 1, got {c}")
        out.append(c)
    if not out:
        raise ValueError("no concurrency levels given")
    return out


def _pct(new: float, old: float) -> float | None:
    return None if old <= 0 else (new - old) / old * 100.0


def _signed(pct: float) -> str:
    """+12% / -5% / ±0% (never "-0%")."""
    r = round(pct)
    return "±0%" if r == 0 else f"{r:+d}%"


def compare_levels(current: Sequence[LevelResult], previous: Sequence[LevelResult]) -> list[str]:
    """One phrase per shared concurrency level, e.g. "+12% tok/s at C=64 (TTFT p50 -5%)".

    A level is compared only with one that kept as many requests in flight (fewer requests than C keep fewer)."""
    prev = {lv.concurrency: lv for lv in previous}
    out: list[str] = []
    for lv in current:
        old = prev.get(lv.concurrency)
        if old is None or min(old.requests, old.concurrency) != min(lv.requests, lv.concurrency):
            continue
        d = _pct(lv.output_throughput_tok_s, old.output_throughput_tok_s)
        if d is None:
            continue
        text = f"{_signed(d)} tok/s at C={lv.concurrency}"
        if lv.ttft_p50_s is not None and old.ttft_p50_s:
            t = _pct(lv.ttft_p50_s, old.ttft_p50_s)
            if t is not None:
                text += f" (TTFT p50 {_signed(t)})"
        out.append(text)
    return out


def previous_record(
    records: Iterable[dict[str, Any]],
    preset: str | None,
    server: str,
    engine: str = "console",
    input_len: int | None = None,
    output_len: int | None = None,
) -> dict[str, Any] | None:
    """The newest earlier run of the same preset (or the same server when there is no preset), engine and,
    when given, input and output lengths: a sweep at 256 tokens says nothing about one at 1024."""
    best: dict[str, Any] | None = None
    for r in records:
        if r.get("kind", "bench") != "bench":  # a `compare` record holds two servers' runs, not this one's
            continue
        if r.get("engine", "console") != engine:
            continue
        if (input_len is not None and r.get("input_len") != input_len) or (
            output_len is not None and r.get("output_len") != output_len
        ):
            continue
        same = r.get("preset") == preset if preset else r.get("server") == server
        if same and (best is None or str(r.get("time", "")) >= str(best.get("time", ""))):
            best = r
    return best


def levels_of(record: dict[str, Any]) -> list[LevelResult]:
    """LevelResults from a stored record, skipping entries that are not level objects."""
    out: list[LevelResult] = []
    for d in record.get("levels", []):
        if isinstance(d, dict) and "concurrency" in d:
            try:
                out.append(LevelResult.from_dict(d))
            except TypeError:
                continue
    return out
