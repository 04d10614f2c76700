"""Sim speculative decoding: DFLASH's startup lines and checks, accept length per algorithm and temperature,
the greedy-only warning, the /metrics gauges, and the drafter-collapse control (docs/sglang.md, speculative)."""

from __future__ import annotations

import re

import httpx
import pytest

from console.fleet.logmodel import LogModel
from console.sim.control import inject
from console.sim.engine import SPEC_ACCEPT_P, geometric_accept
from console.sim.fleet import sim_up

from .conftest import launch

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def _chat(url: str, n: int, temperature: float | None = 0.0, max_tokens: int = 400) -> None:
    body: dict = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens, "ignore_eos": True}
    if temperature is not None:
        body["temperature"] = temperature
    with httpx.Client(timeout=30) as c:
        for _ in range(n):
            assert c.post(f"{url}/v1/chat/completions", json=body).status_code == 200


def _accepts(text: str) -> list[float]:
    m = LogModel()
    m.feed(text.encode())
    return [v for _, v in m.accepts]


def test_accept_model_per_algorithm() -> None:
    assert geometric_accept(SPEC_ACCEPT_P["EAGLE"], 2) == pytest.approx(1.8)  # MTP, one step: the team's ~1.8
    assert 3.1 < geometric_accept(SPEC_ACCEPT_P["DFLASH"], 16) < 3.3  # a DFlash drafter at block 16: ~3.2
    assert geometric_accept(0.0, 16) == 1.0  # nothing accepted: only the bonus token


def test_dflash_startup_lines_accept_greedy_warning_metrics_and_collapse(sim) -> None:
    root, hosts = sim
    s = launch(hosts, "qwen36-dflash", env={"DFLASH_SIM_TOKEN_RATE": "20000"}, update={"env": {}})
    s.wait("fired up", 40)
    text = s.text()
    assert re.search(
        rf"^\[{TS}\] Initialized DFLASH draft runner\. attention_backend=flashinfer, model=DFlashDraftModel, "
        r"block_size=16$",
        text,
        re.M,
    )
    assert re.search(rf"^\[{TS}\] Overlap scheduler is disabled when using DFLASH speculative decoding", text, re.M)
    assert "type=DFlashDraftModel" in text  # the drafter's own weights load as their own row
    _chat(s.url, 3)
    s.wait(r"accept len: \d\.\d\d, accept rate: \d\.\d\d, ", 20)
    acc = _accepts(s.text())
    assert acc and all(3.0 < v < 3.4 for v in acc), acc
    assert "greedy verification only" not in s.text()
    _chat(s.url, 1, temperature=None)  # no temperature: the model's generation_config (0.6) -> SGLang warns once
    _chat(s.url, 1, temperature=0.9)
    s.wait("DFLASH currently supports greedy verification only; ignoring non-greedy sampling params", 10)
    assert s.text().count("greedy verification only") == 1
    assert all(3.0 < v < 3.4 for v in _accepts(s.text())), "DFLASH verifies greedily: accept length unchanged"
    metrics = httpx.get(f"{s.url}/metrics", timeout=5).text
    assert re.search(r'^sglang:spec_accept_length\{[^}]*tp_rank="0"\} 3\.\d+$', metrics, re.M)
    assert re.search(r'^sglang:spec_accept_rate\{[^}]*tp_rank="0"\} 0\.\d+$', metrics, re.M)
    inject(root / "blackwell", s.port, "accept", p=0.0)
    before = len(_accepts(s.text()))
    _chat(s.url, 3)
    s.wait(r"accept len: 1\.00, accept rate: 0\.00, ", 20)
    assert len(_accepts(s.text())) > before
    info = httpx.get(f"{s.url}/server_info", timeout=5).json()["internal_states"][0]
    assert 1.0 < info["avg_spec_accept_length"] < 3.3  # lifetime mean, the collapse pulls it down


def test_mtp_accept_falls_with_temperature(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", env={"DFLASH_SIM_TOKEN_RATE": "20000"})
    s.wait("fired up", 40)
    _chat(s.url, 2, max_tokens=300)
    s.wait(r"accept len: ", 20)
    greedy = _accepts(s.text())
    assert greedy and all(v == pytest.approx(1.8, abs=0.01) for v in greedy), greedy
    _chat(s.url, 2, temperature=1.0, max_tokens=300)
    end = _accepts(s.text())[len(greedy) :]
    assert end and end[-1] == pytest.approx(1.48, abs=0.01), end  # p 0.8 x (1 - 0.4): 1 + 0.48
    assert "greedy verification only" not in s.text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--enable-dp-attention"], "Currently DFLASH speculative decoding does not support dp attention."),
        (
            ["--speculative-num-draft-tokens", "8"],
            "Both --speculative-num-draft-tokens and --speculative-dflash-block-size",
        ),
        (
            ["--speculative-draft-window-size", "8"],
            "--speculative-draft-window-size must be >= --speculative-num-draft-tokens",
        ),
    ],
)
def test_dflash_argument_errors_as_sglang_words_them(sim, args: list[str], message: str) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-dflash", args=args, update={"env": {}})
    s.wait(re.escape(message), 30)
    s.wait_gone(20)


def test_dflash_without_draft_path_fails(tmp_path) -> None:
    hosts = sim_up(tmp_path / "f", hosts=["blackwell"], time_scale=0.02)
    try:
        s = launch(hosts, "qwen36-dflash", drop=("--speculative-draft-model-path",), update={"env": {}})
        s.wait(re.escape("DFLASH speculative decoding requires setting --speculative-draft-model-path."), 30)
        s.wait_gone(20)
    finally:
        from console.sim.fleet import sim_down

        sim_down(tmp_path / "f", timeout=3)
