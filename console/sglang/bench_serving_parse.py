"""Pure parser for `python -m sglang.bench_serving`'s printed summary (docs/sglang.md §7), for side-by-side runs.

The summary is `"{label:<40} {value}"` lines between `== Serving Benchmark Result ==` and a line
of `=`; labels are exact, numbers are ms for latencies. Extra 0.5.23 lines are kept in `fields`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from console.remote_text import sanitize
from console.sglang.benchstats import LevelResult

_START = re.compile(r"^=+ Serving Benchmark Result =+\s*$")
_END = re.compile(r"^=+\s*$")
_SECTION = re.compile(r"^-+.*-+\s*$")
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
            ttft_p50_s=self.ms("Median TTFT (ms)"),
            ttft_p99_s=self.ms("P99 TTFT (ms)"),
            itl_p50_s=self.ms("Median ITL (ms)"),
            itl_p99_s=self.ms("P99 ITL (ms)"),
            e2e_p50_s=self.ms("Median E2E Latency (ms)"),
            e2e_p99_s=self.ms("P99 E2E Latency (ms)"),
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
    text = sanitize(output.replace("\r", "\n"))
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
        tail = [ln for ln in sanitize(output.replace("\r", "\n")).splitlines() if ln.strip()][-3:]
        hint = f": {' | '.join(tail)}" if tail else ""
        raise ValueError("no 'Serving Benchmark Result' summary in bench_serving output" + hint)
    return blocks[-1]


def bench_serving_command(
    python: str,
    *,
    port: int,
    concurrency: int,
    num_prompts: int,
    input_len: int,
    output_len: int,
    output_file: str,
    tokenizer: str | None = None,
    env: dict[str, str] | None = None,
    read_key: bool = False,
    backend: str = "sglang",
) -> str:
    """The remote shell command for one level: offline-safe `random-ids`, fixed lengths (ratio 1.0).

    With read_key the API key is read from stdin into OPENAI_API_KEY, so it never shows in `ps`.
    `python` may start with `~/` (expanded remotely as "$HOME").
    """
    py = _q(python)
    argv = [
        "-m",
        "sglang.bench_serving",
        "--backend",
        backend,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dataset-name",
        "random-ids",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--output-file",
        "@OUT@",
    ]
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    out_dir = output_file.rsplit("/", 1)[0] if "/" in output_file else "."
    env_words = shlex.join([f"{k}={v}" for k, v in (env or {}).items()])
    args = shlex.join(argv).replace("@OUT@", _q(output_file))
    run = f"{'env ' + env_words + ' ' if env_words else ''}{py} {args}"
    prefix = "IFS= read -r OPENAI_API_KEY; export OPENAI_API_KEY; " if read_key else ""
    return f"{prefix}mkdir -p {_q(out_dir)} && {run} 2>&1"


def _q(path: str) -> str:
    """Shell-quote a remote path, keeping a leading `~/` meaningful."""
    return ('"$HOME"/' + shlex.quote(path[2:])) if path.startswith("~/") else shlex.quote(path)
