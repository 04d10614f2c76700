"""`dflash-console compare A B` end to end on a sim fleet: a plain server against a DFlash one, the ratio's direction,
accept lengths read from the servers (they follow a drafter collapse), the saved record, and bad input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.cli import main
from console.config import load_fleet
from console.fleet.controller import FleetController
from console.sglang.bench import load_records
from console.sglang.benchstats import previous_record
from console.sim.control import inject
from console.sim.fleet import sim_down, sim_up
from tests.bench.simserver import free_port


@pytest.fixture
def pair_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The blackwell sim host with qwen36-bench (GPU 0, no speculative decoding) and qwen36-dflash (GPU 1)."""
    monkeypatch.setenv("DFLASH_SIM_TOKEN_RATE", "3000")
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path / "state"))
    ports = {"qwen36-bench": free_port(), "qwen36-dflash": free_port()}
    toml = sim_up(tmp_path / "sim", hosts=("blackwell",), time_scale=0.01, ports=ports)

    async def launch() -> None:
        async with FleetController(load_fleet(toml)) as c:
            await c.wait_hosts(10)
            for preset in ("qwen36-bench", "qwen36-dflash"):
                out = await c.launch(preset, wait=True)
                assert out.ok, out.message

    try:
        asyncio.run(launch())
        yield toml
    finally:
        sim_down(tmp_path / "sim")


def lifetime_accept(port: int) -> float:
    info = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5, trust_env=False).json()
    return float(info["internal_states"][0]["avg_spec_accept_length"])


ARGS = ["--concurrency", "1,4", "--requests", "8", "--max-tokens", "96", "--input-len", "16"]


def test_compare_plain_vs_dflash(pair_fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--hosts", str(pair_fleet), "compare", "qwen36-bench", "qwen36-dflash", *ARGS]
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "compare" and doc["a"]["algorithm"] is None and doc["b"]["algorithm"] == "DFLASH"
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 4]
    port = load_fleet(pair_fleet).presets["qwen36-dflash"].port
    assert isinstance(port, int)
    for lv in doc["levels"]:
        a, b, r = lv["a"], lv["b"], lv["ratio"]
        assert a["errors"] == 0 and b["errors"] == 0 and a["requests"] == 8 == b["requests"]
        assert a["accept_len"] is None and a["accept_source"] is None  # no speculative decoding: no figure
        assert b["accept_source"] == "log", b
        # the sim's DFlash drafter accepts ~3.2 tokens a step; its Decode lines say so, and so tok/s is higher
        assert 2.5 < b["accept_len"] < 4.5, b
        assert r["output_throughput_tok_s"] > 1.5, r
        assert r["accept_len"] is None
    assert abs(doc["levels"][-1]["b"]["accept_len"] - lifetime_accept(port)) < 0.5
    assert doc["verdict"].startswith("qwen36-dflash vs qwen36-bench: ") and " tok/s at C=4, accept " in doc["verdict"]
    assert doc["verdict"].endswith(" vs —")

    # the drafter collapses: the figures follow the server, B's accept length and its speed fall to A's
    inject(pair_fleet.parent / "blackwell", port, "accept", p=0.02)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "accept len: mean of the server's Decode-line `accept len` figures printed during the level" in text
    recs = [r for r in load_records() if r.get("kind") == "compare"]
    assert len(recs) == 2
    last = recs[-1]["levels"][-1]
    assert last["b"]["accept_len"] < 1.3, last
    assert last["ratio"]["output_throughput_tok_s"] < 1.5, last
    assert recs[-1]["b"]["server"] == "qwen36-dflash@blackwell:gpu1" and recs[-1]["a"]["url"]
    assert "--speculative-algorithm" in recs[-1]["b"]["server_args"]
    assert "qwen36-dflash vs qwen36-bench: " in text.splitlines()[-1]
    # bench's "vs previous run" never takes a compare record for one of its own
    assert previous_record(load_records(), None, "qwen36-dflash@blackwell:gpu1") is None
    assert previous_record(load_records(), "qwen36-dflash", "qwen36-dflash@blackwell:gpu1") is None


def test_compare_bad_input(pair_fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = ["--hosts", str(pair_fleet), "compare"]
    assert main([*h, "qwen36-dflash", "qwen36-dflash@blackwell:gpu1", "--concurrency", "1"]) == 2
    assert "A and B are the same server (qwen36-dflash@blackwell:gpu1)" in capsys.readouterr().err
    assert main([*h, "qwen36-dflash", "qwen36-dflash"]) == 2
    assert "A and B are the same server" in capsys.readouterr().err
    assert main([*h, "qwen36-bench", "qwen36-dflsh", "--concurrency", "1"]) == 2
    assert "unknown server or preset 'qwen36-dflsh'; did you mean 'qwen36-dflash'?" in capsys.readouterr().err
    assert main([*h, "qwen36-bench", "qwen36-gen", "--concurrency", "1"]) == 2
    assert "preset qwen36-gen has no server running" in capsys.readouterr().err
    assert main([*h, "qwen36-bench", "qwen36-dflash", "--concurrency", "0"]) == 2
    assert main([*h, "qwen36-bench", "http://127.0.0.1:9"]) == 2
    assert "needs a server or preset name" in capsys.readouterr().err
