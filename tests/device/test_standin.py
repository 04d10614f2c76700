"""The device stand-in's parts that need no GPU: it refuses clearly without torch, reads the console's flags, sizes
the KV pool as SGLang does, and its arguments serve the sim's HTTP app (the GPU parts run in run_check.sh)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from console.sim.engine import Engine
from console.sim.http import App

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STANDIN = HERE / "standin"


def _module():
    spec = importlib.util.spec_from_file_location("dfc_standin", STANDIN / "sglang" / "launch_server.py")
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


@pytest.mark.skipif(_has_torch(), reason="torch is installed here: run_check.sh exercises the stand-in on a GPU")
@pytest.mark.parametrize("rank", [None, "0"])
def test_without_torch_it_exits_1_saying_so(tmp_path: Path, rank: str | None) -> None:
    argv = ["--model-path", str(tmp_path), "--port", "1", "--mem-fraction-static", "0.5"]
    r = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", *argv, *(["--standin-rank", rank] if rank else [])],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": f"{STANDIN}:{ROOT}"},
    )
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "torch with CUDA is needed" in r.stderr and "`import torch` failed" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_the_console_flags_are_read_and_other_flags_ignored() -> None:
    m = _module()
    a = m.parse_args(
        [
            "--model-path",
            "/m",
            "--port",
            "31000",
            "--tp-size",
            "2",
            "--mem-fraction-static",
            "0.6",
            "--trust-remote-code",
        ]
    )
    assert (a.model_path, a.port, a.tp_size, a.mem_fraction_static, a.served_model_name) == ("/m", 31000, 2, 0.6, "/m")
    assert m.parse_args(["--model-path", "/m"]).mem_fraction_static == 0.88  # SGLang's value when it cannot size it


def test_the_kv_pool_is_what_sglang_leaves_after_the_weights() -> None:
    m = _module()
    assert m.kv_plan(70.0, 80.0, 0.5) == pytest.approx(30.0)
    assert m.kv_plan(35.0, 80.0, 0.5) < 0  # another process took the room: SGLang's `Not enough memory`


async def test_its_arguments_serve_the_sims_http_app(tmp_path: Path) -> None:
    m = _module()
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}))
    a = m.parse_args(["--model-path", str(tmp_path), "--port", "31000", "--enable-metrics"])
    sa = m.server_args(a, m.model_config(str(tmp_path)))
    engine = Engine(
        peak_per_gpu=2000.0, tp=1, half=8.0, max_running=8, max_tokens=1000, prefix="", hybrid=False, mamba_slots=1
    )
    app = App(sa, engine, {"version": "0.5.11", "startup_time": 0.0}, reasoning_model=False)
    app.status = "Up"
    run = asyncio.create_task(engine.run())  # /health asks the engine for one token, as SGLang's does
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://standin") as c:
            assert (await asyncio.wait_for(c.get("/health"), 30)).status_code == 200
            info = (await c.get("/model_info")).json()
            assert info["model_path"] == str(tmp_path) and info["model_type"] == "qwen3"
            assert (await c.get("/v1/models")).json()["data"][0]["id"] == str(tmp_path)
            assert (await c.get("/metrics")).status_code == 200
    finally:
        run.cancel()
