"""Benchmark 5: chat TTFT through the console's client (console.sglang.client) against `curl -N`, same server.

Two servers, requests alternating between the two clients:
- the raw fake peer with a fixed 20 ms TTFT and no role chunk, so curl's own `time_starttransfer`
  (first byte, spawn excluded) is exactly its TTFT: this is the headline, median console − median curl;
- a sim SGLang server (role chunk first, as SGLang sends it): curl's first content line as seen by a
  reader, spawn included, for context.
Each console figure is set against curl on an equally warm connection: the console's reused client
(one kept connection) against one curl process sending the requests one after another on its kept
connection (the first, cold transfer dropped); a fresh console client (a new connection, construction
not timed) and the UI's path (a new SGLangClient per message, construction timed) against a new curl
per request. Target: <= +3 ms median, warm against warm and cold against cold.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result, bench_parser, fake_server_proc, pcts, report, sim_server
from console.sglang.benchstats import percentile

TARGET_MS = 3.0
MESSAGES = [{"role": "user", "content": "Say something about GPUs."}]


def curl_body(max_tokens: int) -> str:
    return json.dumps(
        {
            "model": "default",
            "messages": MESSAGES,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


def curl_starttransfer(url: str, max_tokens: int) -> float:
    """curl's own time to the first response byte (seconds, process spawn excluded)."""
    out = subprocess.run(
        [
            "curl",
            "-sN",
            "-o",
            "/dev/null",
            "-w",
            "%{time_starttransfer}",
            "-H",
            "Content-Type: application/json",
            "-d",
            curl_body(max_tokens),
            url + "/v1/chat/completions",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def curl_first_content(url: str, max_tokens: int) -> float:
    """Seconds from spawning `curl -N` to its first data line carrying content, read from its stdout."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [
            "curl",
            "-sN",
            "-H",
            "Content-Type: application/json",
            "-d",
            curl_body(max_tokens),
            url + "/v1/chat/completions",
        ],
        stdout=subprocess.PIPE,
    )
    assert p.stdout is not None
    first: float | None = None
    for line in p.stdout:  # read to the end: an abandoned stream would keep the server busy for the next one
        if (
            first is None
            and line.startswith(b"data:")
            and ((b'"content":"' in line and b'"content":""' not in line) or b'"reasoning_content":"' in line)
        ):
            first = time.perf_counter() - t0
    p.wait()
    if first is None:
        raise RuntimeError("curl stream had no content")
    return first


def curl_warm_starttransfer(url: str, max_tokens: int, n: int) -> list[float]:
    """n transfers in one curl process on one kept connection: each one's time to first byte (the first
    transfer, which connects, is dropped)."""
    out = subprocess.run(
        [
            "curl",
            "-sN",
            "-w",
            "%{stderr}%{time_starttransfer}\\n",
            "-H",
            "Content-Type: application/json",
            "-d",
            curl_body(max_tokens),
            *([url + "/v1/chat/completions"] * (n + 1)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    times = [float(x) for x in out.stderr.split()]
    if len(times) != n + 1:
        raise RuntimeError(f"curl gave {len(times)} timings for {n + 1} transfers")
    return times[1:]


async def console_ttft(client: object, max_tokens: int) -> float:
    """The console client's TTFT: from the call to its first reasoning/content delta (stream then drained)."""
    t0 = time.perf_counter()
    ttft: float | None = None
    async for ev in client.chat_stream(MESSAGES, max_tokens=max_tokens):  # type: ignore[attr-defined]
        if ttft is None and getattr(ev, "kind", "") in ("reasoning", "content"):
            ttft = time.perf_counter() - t0
    if ttft is None:
        raise RuntimeError("no content from the console client")
    return ttft


async def side_by_side(url: str, n: int, max_tokens: int, curl_fn) -> dict[str, list[float]]:
    from console.sglang.client import SGLangClient

    res: dict[str, list[float]] = {
        "console reused": [],
        "console fresh": [],
        "console as the UI calls it": [],
        "curl": [],
        "curl warm": [],
    }
    async with SGLangClient(url, timeout=30) as reused:
        await console_ttft(reused, max_tokens)  # warm the connection
        for _ in range(n):
            res["console reused"].append(await console_ttft(reused, max_tokens))
            async with SGLangClient(url, timeout=30) as fresh:
                res["console fresh"].append(await console_ttft(fresh, max_tokens))
            t0 = time.perf_counter()  # the UI's ChatBackend builds a new SGLangClient for every message
            async with SGLangClient(url, timeout=30) as ui:
                built = time.perf_counter() - t0
                res["console as the UI calls it"].append(built + await console_ttft(ui, max_tokens))
            res["curl"].append(await asyncio.to_thread(curl_fn, url, max_tokens))
            if curl_fn is curl_starttransfer:  # warm curl: a few transfers on one connection, interleaved too
                res["curl warm"] += await asyncio.to_thread(curl_warm_starttransfer, url, max_tokens, 3)
    return res


def run(args: argparse.Namespace) -> Result:
    detail: dict[str, object] = {}
    with fake_server_proc(options="ttft_s=0.02, role_chunk=False") as url:
        fake = asyncio.run(side_by_side(url, args.requests, 8, curl_starttransfer))
    for k, v in fake.items():
        detail[f"fake peer (TTFT 20 ms) {k} ms"] = pcts(v, qs=(50, 95))
    note = ""
    try:
        with tempfile.TemporaryDirectory(prefix="bench5-") as d, sim_server(Path(d), "700") as sim:
            simres = asyncio.run(side_by_side(sim.url, max(5, args.requests // 3), 8, curl_first_content))
        for k, v in simres.items():
            detail[f"sim server {k} ms" + (" (reader, incl. spawn)" if k == "curl" else "")] = pcts(v, qs=(50, 95))
    except (RuntimeError, OSError) as e:
        note = f"sim part skipped: {e}"
    med = {k: percentile(v, 50) or 0.0 for k, v in fake.items()}
    delta = (med["console reused"] - med["curl warm"]) * 1000
    delta_fresh = (med["console fresh"] - med["curl"]) * 1000
    delta_ui = (med["console as the UI calls it"] - med["curl"]) * 1000
    detail["median delta vs curl (ms)"] = {
        "reused client vs warm curl": round(delta, 2),
        "fresh client vs a new curl": round(delta_fresh, 2),
        "UI path (new client, construction timed) vs a new curl": round(delta_ui, 2),
    }
    if delta_ui > TARGET_MS:
        note = (note + "; " if note else "") + (
            "the UI path builds an SGLangClient (an httpx.AsyncClient, whose default "
            "SSL context loads the CA bundle) per message: see the report"
        )
    return Result(
        "5 chat TTFT vs curl -N",
        f"warm {delta:+.2f} ms, cold {delta_fresh:+.2f} ms, UI path {delta_ui:+.1f} ms (median, vs curl as warm)",
        "<= +3 ms median",
        max(delta, delta_fresh, delta_ui) <= TARGET_MS,
        detail,
        note,
    )


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--requests", type=int, default=30)
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
