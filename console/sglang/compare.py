"""Pure drafter A/B figures: per-level accept length from a server's own Decode lines, B/A ratios, the table and
the verdict of `dflash-console compare` (no IO: the command feeds it what the load generator and the log saw)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.sglang.benchstats import LevelResult

SOURCE_LOG = "log"
"""The level's accept length is the mean of the Decode lines the server printed while the level ran."""
SOURCE_LIFETIME = "server_info"
"""No Decode line came during the level: /server_info's lifetime mean (avg_spec_accept_length) after it."""

SOURCE_TEXT = {
    SOURCE_LOG: "mean of the server's Decode-line `accept len` figures printed during the level",
    SOURCE_LIFETIME: "/server_info avg_spec_accept_length after the level (the launch's lifetime mean)",
}
DASH = "—"

Point = tuple[float | None, float]


def points_after(points: Sequence[Point], marker: Point | None) -> list[float]:
    """The figures appended after `marker`, the newest point when the level began, found by identity (a log
    history that dropped the marker off its far end: every figure it holds came after it)."""
    if marker is None:
        return [v for _, v in points]
    for i in range(len(points) - 1, -1, -1):
        if points[i] is marker:
            return [v for _, v in points[i + 1 :]]
    return [v for _, v in points]


def level_accept(new: Sequence[float], lifetime: float | None, spec: bool) -> tuple[float | None, str | None]:
    """(accept length, source) of one side's level: the Decode lines' mean, else the lifetime mean; (None, None)
    for a server without speculative decoding or when neither figure is there."""
    if not spec:
        return None, None
    if new:
        return round(sum(new) / len(new), 2), SOURCE_LOG
    if lifetime is not None:
        return round(lifetime, 2), SOURCE_LIFETIME
    return None, None


def ratio(b: float | None, a: float | None) -> float | None:
    """B/A, None when either is unknown or A is zero."""
    if a is None or b is None or a <= 0:
        return None
    return round(b / a, 3)


@dataclass(frozen=True)
class Side:
    """One server of the pair: what it is and what it ran."""

    server: str
    preset: str | None
    algorithm: str | None
    """`--speculative-algorithm`, None without speculative decoding."""

    @property
    def label(self) -> str:
        return self.preset or self.server

    def doc(self) -> dict[str, Any]:
        return {"server": self.server, "preset": self.preset, "algorithm": self.algorithm}


@dataclass(frozen=True)
class SideLevel:
    """One side's figures at one concurrency level: the load generator's and the server's accept length."""

    level: LevelResult
    accept_len: float | None
    accept_source: str | None

    def doc(self) -> dict[str, Any]:
        return {**self.level.public(), "accept_len": self.accept_len, "accept_source": self.accept_source}


@dataclass(frozen=True)
class LevelPair:
    concurrency: int
    a: SideLevel
    b: SideLevel

    def ratios(self) -> dict[str, float | None]:
        a, b = self.a.level, self.b.level
        return {
            "output_throughput_tok_s": ratio(b.output_throughput_tok_s, a.output_throughput_tok_s),
            "accept_len": ratio(self.b.accept_len, self.a.accept_len),
            "ttft_p50_s": ratio(b.ttft_p50_s, a.ttft_p50_s),
            "itl_p50_s": ratio(b.itl_p50_s, a.itl_p50_s),
        }

    def doc(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "a": self.a.doc(), "b": self.b.doc(), "ratio": self.ratios()}


def _acc(v: float | None) -> str:
    return DASH if v is None else f"{v:.2f}"


def _ms(v: float | None) -> str:
    return DASH if v is None else f"{v * 1000:.1f}" if v < 0.1 else f"{v * 1000:.0f}"


def _x(v: float | None) -> str:
    return DASH if v is None else f"{v:.2f}x"


def verdict(a: Side, b: Side, pairs: Sequence[LevelPair]) -> str:
    """`qwen36-dflash vs qwen36-mtp: 1.41x tok/s at C=32, accept 3.22 vs 1.80`, at the highest level run."""
    if not pairs:
        return f"{b.label} vs {a.label}: no level ran"
    top = max(pairs, key=lambda p: p.concurrency)
    r = top.ratios()["output_throughput_tok_s"]
    tok = f"{_x(r)} tok/s" if r is not None else "tok/s not comparable"
    text = f"{b.label} vs {a.label}: {tok} at C={top.concurrency}"
    if top.a.accept_len is not None or top.b.accept_len is not None:
        text += f", accept {_acc(top.b.accept_len)} vs {_acc(top.a.accept_len)}"
    return text


def render_level(a: Side, b: Side, pair: LevelPair) -> str:
    """One concurrency level: a row per figure, the A and B columns and B/A."""
    la, lb, r = pair.a.level, pair.b.level, pair.ratios()
    mark = {SOURCE_LOG: "", SOURCE_LIFETIME: " *", None: ""}
    rows = [
        (f"C={pair.concurrency}", f"A {a.label}", f"B {b.label}", "B/A"),
        ("requests", str(la.requests), str(lb.requests), ""),
        (
            "out tok/s",
            f"{la.output_throughput_tok_s:,.0f}",
            f"{lb.output_throughput_tok_s:,.0f}",
            _x(r["output_throughput_tok_s"]),
        ),
        (
            "accept len",
            _acc(pair.a.accept_len) + mark[pair.a.accept_source],
            _acc(pair.b.accept_len) + mark[pair.b.accept_source],
            _x(r["accept_len"]),
        ),
        ("TTFT ms p50", _ms(la.ttft_p50_s), _ms(lb.ttft_p50_s), _x(r["ttft_p50_s"])),
        ("ITL ms p50", _ms(la.itl_p50_s), _ms(lb.itl_p50_s), _x(r["itl_p50_s"])),
        ("errors", str(la.errors), str(lb.errors), ""),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def render_report(a: Side, b: Side, pairs: Sequence[LevelPair]) -> str:
    """Title, a table per level, where the accept figures come from, error examples, and the verdict."""

    def what(s: Side) -> str:
        return f"{s.server} ({s.algorithm or 'no speculative decoding'})"

    lines = [f"compare A {what(a)} and B {what(b)}, A then B at each level", ""]
    for p in pairs:
        lines += [render_level(a, b, p), ""]
    sources = {s for p in pairs for s in (p.a.accept_source, p.b.accept_source) if s}
    if sources:
        lines.append(f"accept len: {SOURCE_TEXT[SOURCE_LOG]}")
        if SOURCE_LIFETIME in sources:
            lines.append(f"  * no Decode line came during the level: {SOURCE_TEXT[SOURCE_LIFETIME]}")
    for p in pairs:
        for side, sl in (("A", p.a), ("B", p.b)):
            for e in sl.level.error_examples:
                lines.append(f"C={p.concurrency} {side} error: {e}")
    lines.append(verdict(a, b, pairs))
    return "\n".join(lines)


def compare_doc(
    a: Side, b: Side, pairs: Sequence[LevelPair], *, input_len: int, output_len: int, requests: int | None
) -> dict[str, Any]:
    """The `compare --json` document (and, with the run's time and args, its bench.jsonl record)."""
    return {
        "kind": "compare",
        "a": a.doc(),
        "b": b.doc(),
        "input_len": input_len,
        "output_len": output_len,
        "requests": requests,
        "accept_sources": dict(SOURCE_TEXT),
        "levels": [p.doc() for p in pairs],
        "verdict": verdict(a, b, pairs),
    }


def all_failed(pairs: Sequence[LevelPair]) -> bool:
    """Bench's failure rule per side: every request of every level errored on A, or on B."""
    if not pairs:
        return False
    return any(all(getattr(p, s).level.errors == getattr(p, s).level.requests for p in pairs) for s in ("a", "b"))
