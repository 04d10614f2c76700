"""Pure parser for `python -m sglang.bench_serving`'s printed summary (reference §7), for side-by-side runs.

The summary is `"{label:<40} {value}"` lines between `== Serving Benchmark Result ==` and a line
of `=`; labels are exact, numbers are ms for latencies. Extra 0.5.23 lines are kept in `fields`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.sglang.benchstats import LevelResult

_START = re.compile(r"^=+ Serving Benchmark Result =+\s*$")
_END = re.compile(r"^=+\s*$")
_SECTION = re.compile(r"^-+.*-+\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LINE = re.compile(r"^(?P<label>[^:]+?):\s+(?P<value>\S.*?)\s*$")


@dataclass
class ServingSummary:
    """One summary block: every `label: value` pair, numbers as floats where they parse."""

    fields: dict[str, float | str] = field(default_factory=dict)

    def num(self, label: str) -> float | None:
        v = self.fields.get(label)
        return v if isinstance(v, float) else None

    def ms(self, label: str) -> float | None:
        v = self.num(label)
        return None if v is None else v / 1000.0

    def to_level(self, num_prompts: int | None = None, concurrency: int | None = None) -> LevelResult:
        """The summary as a LevelResult; errors = num_prompts − successful when the prompt count is known."""
        ok = int(self.num("Successful requests") or 0)
        c = self.num("Max request concurrency")
        conc = concurrency if concurrency is not None else int(c) if c is not None else 0
        requests = num_prompts if num_prompts is not None else ok
        out_tokens = self.num("Total generated tokens")
        return LevelResult(
            concurrency=conc,
            requests=requests,
            output_throughput_tok_s=self.num("Output token throughput (tok/s)") or 0.0,
            request_throughput_rps=self.num("Request throughput (req/s)") or 0.0,
            ttft_p50_s=self.ms("Median TTFT (ms)"), ttft_p99_s=self.ms("P99 TTFT (ms)"),
            itl_p50_s=self.ms("Median ITL (ms)"), itl_p99_s=self.ms("P99 ITL (ms)"),
            e2e_p50_s=self.ms("Median E2E Latency (ms)"), e2e_p99_s=self.ms("P99 E2E Latency (ms)"),
            errors=max(requests - ok, 0),
            duration_s=self.num("Benchmark duration (s)") or 0.0,
            output_tokens=int(out_tokens) if out_tokens is not None else 0,
        )


def _value(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def parse_summaries(output: str) -> list[ServingSummary]:
    """Every summary block in the output, in order (tqdm `\\r` updates and ANSI colours tolerated)."""
    text = _ANSI.sub("", output).replace("\r", "\n")
    out: list[ServingSummary] = []
    cur: ServingSummary | None = None
    for raw in text.split("\n"):
        line = raw.rstrip()
        if _START.match(line):
            cur = ServingSummary()
            continue
        if cur is None:
            continue
        if _END.match(line):
            out.append(cur)
            cur = None
            continue
        if not line or _SECTION.match(line):
            continue
        m = _LINE.match(line)
        if m:
            cur.fields[m.group("label").strip()] = _value(m.group("value"))
    if cur is not None and cur.fields:
        out.append(cur)
    return out


def parse_summary(output: str) -> ServingSummary:
    """The last summary block; ValueError naming the problem when there is none (e.g. warmup failed)."""
    blocks = parse_summaries(output)
    if not blocks:
        tail = [ln for ln in _ANSI.sub("", output).replace("\r", "\n").splitlines() if ln.strip()][-3:]
        hint = f": {' | '.join(tail)}" if tail else ""
        raise ValueError("no 'Serving Benchmark Result' summary in bench_serving output" + hint)
    return blocks[-1]
