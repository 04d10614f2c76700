"""The HTTP client against a real uvicorn server on loopback: readiness, info redaction, metrics, SSE, errors, curl."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest

from console.sglang.client import (
    ContentDelta,
    Finish,
    Malformed,
    NotUp,
    ReasoningDelta,
    ServerReportedError,
    SGLangClient,
    StreamStats,
    Timeout,
    Unauthorized,
    Usage,
    Warming,
    curl_command,
    parse_metrics,
    redact,
)

from .fake_http import METRICS, FakeState, free_port, serve


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, FakeState]]:
    state = FakeState()
    with serve(state) as url:
        yield url, state


@pytest.fixture
def fake(server: tuple[str, FakeState]) -> Iterator[tuple[str, FakeState]]:
    url, state = server
    state.health, state.api_key, state.mode, state.token_delay = 200, None, "ok", 0.0
    state.requests.clear()
    yield url, state


async def test_health_states(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    async with SGLangClient(url) as c:
        assert (await c.health()).ready
        state.health = 503
        h = await c.health()
        assert h.state == "warming" and not h.ready
    async with SGLangClient(f"http://127.0.0.1:{free_port()}") as down:
        h = await down.health()
        assert h.state == "down" and "refused" in h.message
    assert all(r["path"] != "/v1/models" for r in state.requests)


async def test_model_info_and_redacted_server_info(fake: tuple[str, FakeState]) -> None:
    url, _ = fake
    async with SGLangClient(url) as c:
        assert (await c.model_info())["model_path"] == "/m/Qwen3-8B"
        info = await c.server_info()
    assert "api_key" not in info and "admin_api_key" not in info and "hf_token" not in info
    assert "api_key" not in info["internal_states"][0] and info["max_total_num_tokens"] == 400000
    assert info["tokenizer_path"] == "/m" and "sk-" not in repr(info)
    assert redact({"a": [{"secret_x": 1, "b": 2}]}) == {"a": [{"b": 2}]}


async def test_metrics(fake: tuple[str, FakeState]) -> None:
    url, _ = fake
    async with SGLangClient(url) as c:
        m = await c.metrics()
    assert m.num_running_reqs == 5 and m.num_queue_reqs == 1 and m.token_usage == 0.5
    assert m.gen_throughput == 1200.5 and m.cache_hit_rate == 0.4 and m.generation_tokens_total == 98765
    assert m.ttft_mean_s == 0.5
    assert parse_metrics(METRICS).samples["num_running_reqs"] == 5


async def test_stream_events_and_timings(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    state.token_delay = 0.02
    async with SGLangClient(url) as c:
        evs = [e async for e in c.chat_stream([{"role": "user", "content": "hi"}], max_tokens=8)]
    kinds = [e.kind for e in evs]
    assert kinds == ["reasoning", "content", "content", "finish", "usage", "stats"]
    assert isinstance(evs[0], ReasoningDelta) and evs[0].text == "think"
    assert "".join(e.text for e in evs if isinstance(e, ContentDelta)) == "Hello"
    fin = evs[3]
    assert isinstance(fin, Finish) and fin.reason == "stop" and fin.matched_stop == 151645
    u = evs[4]
    assert isinstance(u, Usage) and (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens) == (5, 4, 1)
    st = evs[5]
    assert isinstance(st, StreamStats) and st.tokens == 3 and st.ttft_s is not None and st.ttft_s >= 0.03
    assert len(st.inter_token_s) == 2 and all(g >= 0.01 for g in st.inter_token_s) and st.tokens_per_s
    body = state.requests[-1]["body"]
    assert b'"stream":true' in body and b"include_usage" in body


async def test_bearer_from_named_env_var(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    state.api_key = "sk-test"
    async with SGLangClient(url, api_key_env="MY_KEY", env={"MY_KEY": "sk-test"}) as c:
        assert (await c.model_info())["is_generation"]
    assert state.requests[-1]["headers"]["authorization"] == "Bearer sk-test"
    async with SGLangClient(url, api_key_env="MY_KEY", env={}) as c:
        with pytest.raises(Unauthorized, match="401"):
            await c.model_info()
        with pytest.raises(Unauthorized):
            _ = [e async for e in c.chat_stream([{"role": "user", "content": "x"}])]


async def test_typed_errors(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    async with SGLangClient(url) as c:
        state.mode = "malformed"
        with pytest.raises(Malformed, match="bad SSE event"):
            _ = [e async for e in c.chat_stream([{"role": "user", "content": "x"}])]
        state.mode = "error"
        with pytest.raises(ServerReportedError, match="boom"):
            _ = [e async for e in c.chat_stream([{"role": "user", "content": "x"}])]
        state.mode = "html"
        with pytest.raises(Malformed):
            _ = [e async for e in c.chat_stream([{"role": "user", "content": "x"}])]
        state.health = 503
        with pytest.raises(Warming, match="503"):
            await c._get("/health")
    async with SGLangClient(url, timeout=0.3) as slow:
        state.mode = "slow"
        with pytest.raises(Timeout):
            _ = [e async for e in slow.chat_stream([{"role": "user", "content": "x"}], timeout=0.3)]
    async with SGLangClient(f"http://127.0.0.1:{free_port()}") as down:
        with pytest.raises(NotUp, match="refused") as ei:
            await down.model_info()
        assert "\n" not in str(ei.value)


async def test_probe(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    async with SGLangClient(url) as c:
        r = await c.probe()
        assert r.ok and r.text == "Hello" and r.reasoning == "think" and r.stats and r.usage
        state.health = 503
        r2 = await c.probe()
        assert not r2.ok and r2.health.state == "warming"


def test_curl_command_uses_env_reference() -> None:
    cmd = curl_command(
        "http://127.0.0.1:30000/",
        [{"role": "user", "content": "it's $(rm -rf /)"}],
        model="qwen",
        max_tokens=32,
        api_key_env="SGLANG_KEY",
    )
    argv = shlex.split(cmd)
    assert argv[:3] == ["curl", "-N", "http://127.0.0.1:30000/v1/chat/completions"]
    assert '"Authorization: Bearer $SGLANG_KEY"' in cmd
    assert "it's $(rm -rf /)" in argv[-1]
    with pytest.raises(ValueError):
        curl_command("http://x", [], api_key_env="A; rm")


async def test_probe_cut_by_its_deadline_keeps_the_ttft_it_measured() -> None:
    """A probe stopped by its deadline mid-stream printed `TTFT -` though tokens had arrived; the first token's
    time and the rate over the tokens received are real figures and are kept with the deadline error."""
    from tests.hostile.badhttp import serve as serve_bad

    with serve_bad() as bad:
        bad.mode = "endless"
        async with SGLangClient(bad.url) as c:
            r = await c.probe(deadline_s=1.5)
    assert r.error is not None and "1.5 s" in r.error and r.text
    assert r.stats is not None and r.stats.ttft_s is not None and 0 < r.stats.ttft_s < 1.5
    assert r.stats.tokens >= 2 and r.stats.tokens_per_s is not None and r.stats.tokens_per_s > 0
