"""`dflash-console bench` end to end on a sim fleet: NAME resolution, --json shape, saved history, compare line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from console.config import load_fleet
from console.fleet.controller import FleetController
from console.sglang.benchstats import LEVEL_KEYS
from console.sim.fleet import sim_down, sim_up
from tests.bench.servertruth import Truth, scrape, settle
from tests.bench.simserver import free_port

TOML = """
[hosts.h]
transport = "local"
[presets.one]
host = "h"
gpus = [0]
model = "/m"
[presets.four]
host = "h"
gpus = [0, 1, 2, 3]
tp = 1
model = "/m"
port = 31000
"""


@pytest.fixture
def sim_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("DFLASH_SIM_TOKEN_RATE", "4000")
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path / "state"))
    toml = sim_up(tmp_path / "sim", hosts=("blackwell",), time_scale=0.01)
    text = toml.read_text().replace("port = 31000", f"port = {free_port()}")
    head, sep, rest = text.partition("[presets.qwen36-bench]")  # its /metrics: the figures are checked against it
    toml.write_text(head + sep + rest.replace("args = [", 'args = ["--enable-metrics", ', 1))

    async def launch() -> None:
        async with FleetController(load_fleet(toml)) as c:
            await c.wait_hosts(10)
            out = await c.launch("qwen36-bench", wait=True)
            assert out.ok, out.message

    try:
        asyncio.run(launch())
        yield toml
    finally:
        sim_down(tmp_path / "sim")


def test_bench_cli_json_and_compare(sim_fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--hosts",
        str(sim_fleet),
        "bench",
        "qwen36-bench",
        "--concurrency",
        "1,4",
        "--output-len",
        "16",
        "--input-len",
        "16",
    ]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["server"] == "qwen36-bench@blackwell:gpu0" and out["preset"] == "qwen36-bench"
    assert [lv["concurrency"] for lv in out["levels"]] == [1, 4]
    assert all(list(lv) == list(LEVEL_KEYS) for lv in out["levels"])
    assert out["levels"][1]["requests"] == 20 and out["levels"][1]["errors"] == 0
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "tok/s at C=4" in text and "vs previous run" in text
    lines = (tmp_path / "state" / "bench.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    assert len(lines) == 2 and rec["gpu_model"].endswith("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert "--mamba-scheduler-strategy" in rec["server_args"] and "api_key" not in rec["server_info"]
    # --num-prompts is the number of requests per level; other lengths are no "previous run" to compare with
    argv[-1] = "32"
    assert main([*argv, "--num-prompts", "3"]) == 0
    cap = capsys.readouterr()
    assert "vs previous run" not in cap.out and "C=4: 3 requests per level keep at most 3 in flight" in cap.err
    rec = json.loads((tmp_path / "state" / "bench.jsonl").read_text().splitlines()[-1])
    assert [lv["requests"] for lv in rec["levels"]] == [3, 3] and rec["input_len"] == 32


def test_bench_names_resolve_as_every_command_does(sim_fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A preset of several replicas, none running, is no server (it was its first replica, waited on 20 s); a
    typo gets the one typo message."""
    assert main(["--hosts", str(sim_fleet), "bench", "qwen36-gen", "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert "preset qwen36-gen has no server running (its replicas: qwen36-gen@blackwell:gpu0," in err, err
    assert main(["--hosts", str(sim_fleet), "bench", "qwen36-bnch", "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert "error: unknown server or preset 'qwen36-bnch'; did you mean 'qwen36-bench'? (known: " in err, err


def test_bench_cli_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "http://127.0.0.1:9", "--concurrency", "0"]) == 2
    assert main(["bench", "http://127.0.0.1:9", "--engine", "sglang"]) == 2
    assert "needs a server or preset" in capsys.readouterr().err


def test_engine_sglang_runs_bench_serving_on_the_host_and_agrees(
    sim_fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both engines' figures agree with the server's own /metrics for the same requests (not with each other's
    run, which a busy machine may have slowed differently): exact counts, C in flight, e2e never below the server's."""
    preset = load_fleet(sim_fleet).presets["qwen36-bench"]
    url = f"http://127.0.0.1:{preset.port if isinstance(preset.port, int) else preset.port[0]}"
    settle(url)
    problems: list[str] = []
    counts: dict[str, list[int]] = {}
    for engine in ("sglang", "console"):
        for c in (1, 8):
            argv = [
                "--hosts",
                str(sim_fleet),
                "bench",
                "qwen36-bench",
                "--concurrency",
                str(c),
                "--output-len",
                "32",
                "--input-len",
                "32",
                "--json",
                "--no-save",
            ] + (["--engine", "sglang"] if engine == "sglang" else [])
            before = scrape(url)
            assert main(argv) == 0
            lv = json.loads(capsys.readouterr().out)["levels"][0]
            assert lv["concurrency"] == c and lv["errors"] == 0, (engine, lv)
            counts.setdefault(engine, []).append(lv["requests"])
            problems += [
                f"{engine}: {p}" for p in Truth.between(before, scrape(url)).check_level(lv, 32, warmup=1, strays=3)
            ]
    assert counts["sglang"] == counts["console"], counts
    assert not problems, problems
    assert list((sim_fleet.parent / "blackwell" / "run" / "bench").glob("*-c8.jsonl"))
