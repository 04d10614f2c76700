"""Sim SGLang serving vs docs/sglang.md §2-§4: chat stream chunks, auth, metric names, Decode lines, rate formula."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest

from console.sim.engine import Engine, Request

from .conftest import launch

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def _sse(text: str) -> list[dict | str]:
    out: list[dict | str] = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            body = block[6:]
            out.append(body if body == "[DONE]" else json.loads(body))
    return out


def test_chat_stream_reasoning_usage_auth_and_metrics(sim) -> None:
    _root, hosts = sim
    s = launch(
        hosts, "qwen36-bench", args=["--api-key", "sekrit", "--enable-metrics"], env={"DFLASH_SIM_TOKEN_RATE": "20000"}
    )
    s.wait("fired up", 30)
    auth = {"Authorization": "bearer sekrit"}  # scheme is case-insensitive
    assert httpx.get(f"{s.url}/health", timeout=5).status_code == 200  # /health needs no key
    r = httpx.post(f"{s.url}/v1/chat/completions", json={"messages": []}, timeout=5)
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Why is the sky blue?"}],
        "stream": True,
        "max_tokens": 40,
        "stream_options": {"include_usage": True},
    }
    chunks = _sse(httpx.post(f"{s.url}/v1/chat/completions", json=body, headers=auth, timeout=10).text)
    assert chunks[-1] == "[DONE]"
    first, *mid, finish, usage, _ = chunks
    assert first["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert set(first) == {"id", "object", "created", "model", "choices"} and re.fullmatch(r"[0-9a-f]{32}", first["id"])
    assert first["object"] == "chat.completion.chunk" and first["model"] == "m"
    assert set(first["choices"][0]) == {"index", "delta", "logprobs", "finish_reason", "matched_stop"}
    reasoning = [c for c in mid if "content" not in c["choices"][0]["delta"]]
    content = [c for c in mid if c["choices"][0]["delta"].get("content") is not None]
    assert reasoning and all(isinstance(c["choices"][0]["delta"]["reasoning_content"], str) for c in reasoning)
    assert mid.index(reasoning[-1]) < mid.index(content[0])
    assert (
        finish["choices"][0]["delta"] == {"reasoning_content": None}
        and finish["choices"][0]["finish_reason"] == "length"
    )
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 40
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 40
    assert set(usage["usage"]) == {
        "prompt_tokens",
        "total_tokens",
        "completion_tokens",
        "prompt_tokens_details",
        "reasoning_tokens",
    }
    # enable_thinking=false: no reasoning at all; ignore_eos honours max_tokens exactly.
    r = httpx.post(
        f"{s.url}/v1/chat/completions",
        headers=auth,
        timeout=10,
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 300,
            "ignore_eos": True,
            "chat_template_kwargs": {"enable_thinking": False},
        },
    ).json()
    msg = r["choices"][0]["message"]
    assert msg["reasoning_content"] is None and r["usage"]["completion_tokens"] == 300
    gen = httpx.post(
        f"{s.url}/generate", headers=auth, timeout=10, json={"text": "Hello", "sampling_params": {"max_new_tokens": 5}}
    ).json()
    assert gen["meta_info"]["finish_reason"] == {"type": "length", "length": 5} and len(gen["output_ids"]) == 5
    models = httpx.get(f"{s.url}/v1/models", headers=auth, timeout=5).json()
    assert models["data"][0]["owned_by"] == "sglang" and models["data"][0]["max_model_len"] == 8192
    metrics = httpx.get(f"{s.url}/metrics", timeout=5).text  # /metrics needs no key either
    label = r'\{engine_type="unified",model_name="[^"]+",moe_ep_rank="0",pp_rank="0",tp_rank="0"\}'
    for name in ("num_running_reqs", "num_queue_reqs", "gen_throughput", "token_usage", "max_total_num_tokens"):
        assert re.search(rf"^sglang:{name}{label} [\d.e+-]+$", metrics, re.M), name
    assert re.search(
        r'^sglang:generation_tokens_total\{engine_type="unified",model_name="[^"]+"\} (\d+)\.0$', metrics, re.M
    )
    assert re.search(r'^sglang:time_to_first_token_seconds_bucket\{.*le="\+Inf"\} ', metrics, re.M)
    loads = httpx.get(f"{s.url}/v1/loads", headers=auth, timeout=5).json()
    assert loads["dp_rank_count"] == 1 and loads["loads"][0]["max_running_requests"] == 128
    assert set(loads["aggregate"]) == {
        "total_running_reqs",
        "total_waiting_reqs",
        "total_reqs",
        "total_used_tokens",
        "total_tokens",
        "avg_token_usage",
        "avg_throughput",
        "avg_utilization",
    }
    flushed = httpx.post(f"{s.url}/flush_cache", headers=auth, timeout=5)
    assert flushed.status_code == 200 and flushed.text.startswith("Cache flushed.\n")
    s.wait(rf'^\[{TS}\] INFO:     127\.0\.0\.1:\d+ - "POST /v1/chat/completions HTTP/1\.1" 401 Unauthorized$')
    s.wait(r"Cache flushed successfully!")


def test_decode_batch_lines_under_load(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-bench", env={"DFLASH_SIM_TOKEN_RATE": "50000"})
    s.wait("fired up", 30)

    async def burst() -> None:
        async with httpx.AsyncClient(timeout=30) as c:
            await asyncio.gather(
                *[
                    c.post(
                        f"{s.url}/generate",
                        json={"text": "x" * 400, "sampling_params": {"max_new_tokens": 100, "ignore_eos": True}},
                    )
                    for _ in range(16)
                ]
            )

    asyncio.run(burst())
    m = s.wait(
        rf"^\[{TS}\] Decode batch, #running-req: (\d+), #full token: (\d+), full token usage: \d\.\d\d, mamba num: "
        r"\d+, mamba usage: \d\.\d\d, cuda graph: True, gen throughput \(token/s\): (\d+\.\d\d), #queue-req: \d+$"
    )
    assert int(m.group(1)) >= 1 and int(m.group(2)) > 100 and float(m.group(3)) > 0
    assert re.search(r"Prefill batch, #new-seq: \d+, #new-token: \d+, ", s.text())


class VirtualClock:
    """The batcher's clock and sleep, made virtual: its timing follows the formula exactly, whatever the machine's
    load (on a starved machine the real one falls behind, which is a figure: benchmarks/bench_sim_tolerance.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import types

        from console.sim import engine as engine_mod

        self.now = 0.0
        monkeypatch.setattr(engine_mod, "time", types.SimpleNamespace(perf_counter=lambda: self.now))
        monkeypatch.setattr(
            engine_mod, "asyncio", types.SimpleNamespace(sleep=self.sleep, Event=asyncio.Event, Queue=asyncio.Queue)
        )

    async def sleep(self, t: float) -> None:
        self.now += max(0.0, t)
        await asyncio.sleep(0)


async def _drain(e: Engine, reqs: list[Request], clock: VirtualClock) -> float:
    """Submit every request, read every token; the virtual seconds that took."""
    task = asyncio.create_task(e.run())
    t0 = clock.now
    for r in reqs:
        e.submit(r)
    for r in reqs:
        while await r.out.get() is not None:
            pass
    task.cancel()
    return clock.now - t0


@pytest.mark.parametrize("conc", [1, 8, 32])
async def test_rate_formula_matches_measured_throughput(conc: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """total_tok_s(C) = a * P * C / (C + H): the batcher's total throughput follows it (prefill adds 1/(20 P) per
    prompt token, under 0.1 % here)."""
    clock = VirtualClock(monkeypatch)
    e = Engine(
        peak_per_gpu=4000.0,
        tp=1,
        half=8.0,
        max_running=256,
        max_tokens=10**6,
        prefix="",
        hybrid=False,
        mamba_slots=1,
        log_interval=10**6,
    )
    dt = await _drain(e, [Request(prompt_tokens=1, max_new_tokens=120, ignore_eos=True) for _ in range(conc)], clock)
    assert conc * 120 / dt / e.total_tok_s(conc) == pytest.approx(1.0, rel=0.01)


def test_bench_serving_module_summary_and_rate(sim, tmp_path) -> None:
    import subprocess

    root, hosts = sim
    s = launch(hosts, "qwen36-bench", env={"DFLASH_SIM_TOKEN_RATE": "2000"})
    s.wait("fired up", 30)
    out = tmp_path / "r.jsonl"
    r = subprocess.run(
        [
            str(root / "blackwell/venv/bin/python3"),
            "-m",
            "sglang.bench_serving",
            "--backend",
            "sglang",
            "--host",
            "127.0.0.1",
            "--port",
            str(s.port),
            "--dataset-name",
            "random-ids",
            "--num-prompts",
            "16",
            "--max-concurrency",
            "8",
            "--random-input-len",
            "32",
            "--random-output-len",
            "32",
            "--random-range-ratio",
            "1.0",
            "--output-file",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "\n============ Serving Benchmark Result ============\n" in text
    for label in (
        "Backend",
        "Traffic request rate",
        "Max request concurrency",
        "Successful requests",
        "Benchmark duration (s)",
        "Total generated tokens",
        "Output token throughput (tok/s)",
        "Peak concurrent requests",
        "Mean TTFT (ms)",
        "Max ITL (ms)",
    ):
        assert re.search("^" + re.escape(f"{label}:".ljust(41)) + r"\S", text, re.M), label
    assert re.search(r"^Successful requests: {21}16 *$", text, re.M)
    assert re.search(r"^-{15}Time to First Token-{16}$", text, re.M) and text.rstrip().endswith("=" * 50)
    from console.sglang.bench_serving_parse import parse_summary

    assert parse_summary(text) is not None  # the console's own parser reads it
    res = json.loads(out.read_text())
    assert res["total_output_tokens"] == 512 and res["max_concurrent_requests"] == 8
    assert res["output_throughput"] < 2000 * 8 / (8 + 16) * 1.1  # never above the documented rate


async def test_zero_delay_mode_for_load_generator_ceilings(monkeypatch: pytest.MonkeyPatch) -> None:
    """P = inf: the batcher never sleeps (its virtual clock stays put), so a load generator meets no server limit."""
    clock = VirtualClock(monkeypatch)
    e = Engine(
        peak_per_gpu=float("inf"),
        tp=1,
        half=16.0,
        max_running=128,
        max_tokens=10**7,
        prefix="",
        hybrid=False,
        mamba_slots=1,
        log_interval=10**6,
    )
    reqs = [Request(prompt_tokens=8, max_new_tokens=200, ignore_eos=True) for _ in range(64)]
    assert await _drain(e, reqs, clock) == 0.0
    assert all(r.generated == 200 for r in reqs)


def test_no_reasoning_parser_keeps_think_tags_in_content(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-bench", drop=("--reasoning-parser",), env={"DFLASH_SIM_TOKEN_RATE": "20000"})
    s.wait("fired up", 30)
    r = httpx.post(
        f"{s.url}/v1/chat/completions",
        timeout=10,
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 60},
    ).json()
    msg = r["choices"][0]["message"]
    assert msg["reasoning_content"] is None
    assert msg["content"].startswith("<think> Let me think") and "</think>\n\n" in msg["content"]
