"""`python -m sglang.bench_serving` on a sim host: SGLang's flags, run phases and summary block (docs/sglang.md §7).

The client is aiohttp, as in the real tool, reading the stream line by line (`async for line in
response.content`), so its figures carry the real tool's client costs. Supports `--backend sglang` (streaming /generate) and `sglang-oai-chat` (streaming chat), datasets
`random-ids` and `random` (the latter needs --dataset-path, as offline hosts do), --max-concurrency,
--request-rate inf, and appends the JSONL result like the real tool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from console.sim import logs

BACKENDS = [
    "sglang",
    "sglang-native",
    "sglang-oai",
    "sglang-oai-chat",
    "sglang-embedding",
    "vllm",
    "vllm-chat",
    "lmdeploy",
    "lmdeploy-chat",
    "trt",
    "gserver",
    "truss",
]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    p.add_argument("--backend", choices=BACKENDS, default="sglang")
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int)
    p.add_argument(
        "--dataset-name",
        default="sharegpt",
        choices=["sharegpt", "random", "random-ids", "generated-shared-prefix", "mmmu", "image"],
    )
    p.add_argument("--dataset-path", default="")
    p.add_argument("--model")
    p.add_argument("--tokenizer")
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--output-file")
    p.add_argument("--disable-stream", action="store_true")
    p.add_argument("--disable-ignore-eos", action="store_true")
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--ready-check-timeout-sec", type=int, default=60)
    p.add_argument("--flush-cache", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--extra-request-body", default=None)
    p.add_argument("--tokenize-prompt", action="store_true")
    return p


@dataclass
class Out:
    """One request's outcome."""

    ok: bool = False
    prompt_len: int = 0
    output_len: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    error: str = ""


async def one(
    c: aiohttp.ClientSession,
    url: str,
    backend: str,
    model: str,
    prompt_len: int,
    out_len: int,
    ignore_eos: bool,
    extra: dict[str, Any],
) -> Out:
    o = Out(prompt_len=prompt_len)
    text = "abcd" * prompt_len  # the sim counts ceil(bytes / 4) tokens
    if backend.endswith("chat"):
        path, body = (
            "/v1/chat/completions",
            {
                "model": model,
                "messages": [{"role": "user", "content": text}],
                "max_tokens": out_len,
                "ignore_eos": ignore_eos,
                "stream": True,
                "stream_options": {"include_usage": True},
                **extra,
            },
        )
    else:
        path, body = (
            "/generate",
            {
                "text": text,
                "stream": True,
                **extra,
                "sampling_params": {"max_new_tokens": out_len, "ignore_eos": ignore_eos},
            },
        )
    t0 = last = time.perf_counter()
    try:
        async with c.post(url + path, json=body) as r:
            if r.status != 200:
                o.error = f"HTTP {r.status}"
                return o
            async for raw in r.content:
                line = raw.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                d = json.loads(line[6:])
                now = time.perf_counter()
                if "meta_info" in d:
                    n = d["meta_info"]["completion_tokens"]
                elif d.get("usage"):
                    o.output_len = d["usage"]["completion_tokens"]
                    continue
                else:
                    delta = d["choices"][0]["delta"] if d.get("choices") else {}
                    n = o.output_len + (1 if delta.get("content") or delta.get("reasoning_content") else 0)
                if n > o.output_len:
                    if o.output_len == 0:
                        o.ttft = now - t0
                    else:
                        o.itl.append(now - last)
                    o.stamps.append(now)
                    o.output_len, last = n, now
    except aiohttp.ClientError as e:
        o.error = repr(e)
        return o
    o.latency, o.ok = time.perf_counter() - t0, True
    return o


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def summary(
    a: argparse.Namespace, outs: list[Out], duration: float, peak_conc: int, accept: float | None
) -> tuple[str, dict[str, Any]]:
    good = [o for o in outs if o.ok]
    tin, tout = sum(o.prompt_len for o in good), sum(o.output_len for o in good)
    buckets: dict[int, int] = {}
    for o in good:
        for t in o.stamps:
            buckets[int(t)] = buckets.get(int(t), 0) + 1
    e2e = [o.latency * 1000 for o in good]
    ttft = [o.ttft * 1000 for o in good]
    tpot = [(o.latency - o.ttft) / (o.output_len - 1) * 1000 for o in good if o.output_len > 1]
    itl = [x * 1000 for o in good for x in o.itl]
    r = {
        "backend": a.backend,
        "request_rate": a.request_rate,
        "max_concurrency": a.max_concurrency,
        "completed": len(good),
        "duration": duration,
        "total_input_tokens": tin,
        "total_output_tokens": tout,
        "request_throughput": len(good) / duration,
        "input_throughput": tin / duration,
        "output_throughput": tout / duration,
        "max_output_tokens_per_s": float(max(buckets.values(), default=0)),
        "max_concurrent_requests": peak_conc,
        "total_throughput": (tin + tout) / duration,
        "concurrency": sum(o.latency for o in good) / duration,
        "accept_length": accept,
        "mean_e2e_latency_ms": _mean(e2e),
        "median_e2e_latency_ms": _pct(e2e, 50),
        "p90_e2e_latency_ms": _pct(e2e, 90),
        "p99_e2e_latency_ms": _pct(e2e, 99),
        "mean_ttft_ms": _mean(ttft),
        "median_ttft_ms": _pct(ttft, 50),
        "p99_ttft_ms": _pct(ttft, 99),
        "mean_tpot_ms": _mean(tpot),
        "median_tpot_ms": _pct(tpot, 50),
        "p99_tpot_ms": _pct(tpot, 99),
        "mean_itl_ms": _mean(itl),
        "median_itl_ms": _pct(itl, 50),
        "p95_itl_ms": _pct(itl, 95),
        "p99_itl_ms": _pct(itl, 99),
        "max_itl_ms": max(itl, default=0.0),
    }

    def s(label: str, v: Any) -> str:
        return "{:<40} {:<10}".format(label + ":", v)

    def f(label: str, v: float) -> str:
        return "{:<40} {:<10.2f}".format(label + ":", v)

    lines = [
        "\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        s("Backend", a.backend),
        s("Traffic request rate", a.request_rate),
        s("Max request concurrency", a.max_concurrency or "not set"),
        s("Successful requests", len(good)),
        f("Benchmark duration (s)", duration),
        s("Total input tokens", tin),
        s("Total input text tokens", tin),
        s("Total generated tokens", tout),
        s("Total generated tokens (retokenized)", tout),
        f("Request throughput (req/s)", r["request_throughput"]),
        f("Input token throughput (tok/s)", r["input_throughput"]),
        f("Output token throughput (tok/s)", r["output_throughput"]),
        f("Peak output token throughput (tok/s)", r["max_output_tokens_per_s"]),
        s("Peak concurrent requests", peak_conc),
        f("Total token throughput (tok/s)", r["total_throughput"]),
        f("Concurrency", r["concurrency"]),
    ]
    if accept is not None:
        lines.append(f("Accept length", accept))
    for title, rows in (
        (
            "End-to-End Latency",
            [
                ("Mean E2E Latency (ms)", "mean_e2e_latency_ms"),
                ("Median E2E Latency (ms)", "median_e2e_latency_ms"),
                ("P90 E2E Latency (ms)", "p90_e2e_latency_ms"),
                ("P99 E2E Latency (ms)", "p99_e2e_latency_ms"),
            ],
        ),
        (
            "Time to First Token",
            [
                ("Mean TTFT (ms)", "mean_ttft_ms"),
                ("Median TTFT (ms)", "median_ttft_ms"),
                ("P99 TTFT (ms)", "p99_ttft_ms"),
            ],
        ),
        (
            "Time per Output Token (excl. 1st token)",
            [
                ("Mean TPOT (ms)", "mean_tpot_ms"),
                ("Median TPOT (ms)", "median_tpot_ms"),
                ("P99 TPOT (ms)", "p99_tpot_ms"),
            ],
        ),
        (
            "Inter-Token Latency",
            [
                ("Mean ITL (ms)", "mean_itl_ms"),
                ("Median ITL (ms)", "median_itl_ms"),
                ("P95 ITL (ms)", "p95_itl_ms"),
                ("P99 ITL (ms)", "p99_itl_ms"),
                ("Max ITL (ms)", "max_itl_ms"),
            ],
        ),
    ):
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        lines += [f(label, r[key]) for label, key in rows]
    lines.append("=" * 50)
    return "\n".join(lines), r


async def run(a: argparse.Namespace) -> int:
    url = a.base_url or f"http://{a.host}:{a.port or 30000}"
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"} if os.environ.get("OPENAI_API_KEY") else {}
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=6 * 3600),
        trust_env=False,
        headers=headers,
        read_bufsize=10 * 1024**2,
        connector=aiohttp.TCPConnector(limit=a.max_concurrency or 0),
    ) as c:
        model = a.model
        end = time.monotonic() + a.ready_check_timeout_sec
        while True:
            try:
                async with c.get(url + "/v1/models") as r:
                    if r.status == 200:
                        model = model or (await r.json())["data"][0]["id"]
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > end:
                raise ValueError(f"Server at {url} did not become ready within {a.ready_check_timeout_sec} seconds.")
            await asyncio.sleep(1)
        rng = random.Random(a.seed)
        lo_in, lo_out = (
            max(int(a.random_input_len * a.random_range_ratio), 1),
            max(int(a.random_output_len * a.random_range_ratio), 1),
        )
        reqs = [
            (rng.randint(lo_in, a.random_input_len), rng.randint(lo_out, a.random_output_len))
            for _ in range(a.num_prompts)
        ]
        print(f"#Input tokens: {sum(x for x, _ in reqs)}\n#Output tokens: {sum(y for _, y in reqs)}", flush=True)
        extra = json.loads(a.extra_request_body) if a.extra_request_body else {}
        ignore = not a.disable_ignore_eos
        print(f"Starting warmup with {a.warmup_requests} sequences...", flush=True)
        for _ in range(a.warmup_requests):
            w = await one(c, url, a.backend, model, reqs[0][0], min(reqs[0][1], 16), ignore, extra)
            if not w.ok:
                raise ValueError(
                    f"Warmup failed - Please make sure benchmark arguments are correctly specified. Error: {w.error}"
                )
        print(f"Warmup completed with {a.warmup_requests} sequences. Starting main benchmark run...", flush=True)
        if a.flush_cache:
            async with c.post(url + "/flush_cache"):
                pass
        sem = asyncio.Semaphore(a.max_concurrency or len(reqs) or 1)
        live, peak, done = 0, 0, 0
        t0 = time.perf_counter()

        async def go(pl: int, ol: int) -> Out:
            nonlocal live, peak, done
            async with sem:
                live += 1
                peak = max(peak, live)
                o = await one(c, url, a.backend, model, pl, ol, ignore, extra)
                live -= 1
                done += 1
                logs.raw("\r" + logs.tqdm_bar("", done, len(reqs), time.perf_counter() - t0).removeprefix(": "))
                return o

        outs = await asyncio.gather(*[go(pl, ol) for pl, ol in reqs])
        logs.raw("\n")
        duration = time.perf_counter() - t0
        accept = None
        try:
            async with c.get(url + "/server_info") as r:
                st = (await r.json(content_type=None))["internal_states"][0]
            accept = st.get("avg_spec_accept_length")
        except (aiohttp.ClientError, ValueError, KeyError, IndexError):
            pass
    text, result = summary(a, outs, duration, peak, accept)
    print(text, flush=True)
    path = (
        a.output_file
        or f"{a.backend}_{time.strftime('%m%d')}_{a.num_prompts}_{a.random_input_len}_{a.random_output_len}.jsonl"
    )
    with open(path, "a") as fh:
        fh.write(json.dumps(result) + "\n")
    return 0


def main() -> None:
    a = parser().parse_args()
    print(f"benchmark_args={a}", flush=True)
    if a.dataset_name == "random" and not a.dataset_path:
        print(
            "Downloading from https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/"
            "ShareGPT_V3_unfiltered_cleaned_split.json to /tmp/ShareGPT_V3_unfiltered_cleaned_split.json",
            flush=True,
        )
        sys.stderr.write("OSError: [Errno 101] Network is unreachable\n")
        sys.exit(1)
    if a.dataset_name not in ("random", "random-ids"):
        sys.stderr.write(
            f"ValueError: the sim bench supports --dataset-name random-ids and random, not {a.dataset_name}\n"
        )
        sys.exit(1)
    sys.exit(asyncio.run(run(a)))
