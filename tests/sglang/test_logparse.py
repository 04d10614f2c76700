"""The incremental parser on synthetic 0.5.11/0.5.23 logs: every phase, ranks, draft, facts, stats, timeline."""

from __future__ import annotations

import pytest

from console.sglang.logparse import LogParser, parse_text
from console.sglang.phase import Phase

from .synth import startup


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
@pytest.mark.parametrize(
    ("until", "phase"),
    [
        ("loading_weights", Phase.LOADING_WEIGHTS),
        ("kv_cache", Phase.KV_CACHE),
        ("cuda_graph", Phase.CUDA_GRAPH),
        ("warming", Phase.WARMING),
        ("ready", Phase.READY),
        ("serving", Phase.SERVING),
    ],
)
def test_every_phase_both_wordings(version: str, until: str, phase: Phase) -> None:
    s = parse_text(startup(2, version, until=until))
    assert s.phase is phase
    assert not s.crashed


def test_launching_then_progress() -> None:
    s = parse_text(startup(2, until="loading_weights"))
    assert s.shards is not None and s.shards.as_tuple() == (2, 4)
    assert parse_text("[2026-01-01 10:00:00] server_args=ServerArgs(model_path='/m')\n").phase is Phase.LAUNCHING


def test_graph_progress_and_facts() -> None:
    s = parse_text(startup(2, until="cuda_graph"))
    assert s.graphs is not None and s.graphs.as_tuple() == (2, 4) and s.graph_bs == 4
    f = s.facts
    assert f.model_class == "Qwen3ForCausalLM" and f.quant == "fp8/e4m3" and f.weight_gib == 16.25
    assert f.avail_gib_before_load == 78.5 and f.kv_tokens == 400000 and f.kv_size_gib == 54.94
    assert f.capture_bs == [1, 2, 4, 8] and f.kv_cache_dtype == "bfloat16" and f.tp_size == 2
    assert s.ranks["TP1"].avail_gib == 6.4


def test_full_start_facts_timeline_and_secrets() -> None:
    s = parse_text(startup(2))
    f = s.facts
    assert (f.max_total_num_tokens, f.max_running_requests, f.context_len) == (400000, 4096, 40960)
    assert f.listen_url == "http://127.0.0.1:30000" and f.pid == 4242 and f.graph_mem_gib == 0.4
    assert "api_key" not in f.args and f.model_path == "/m/Qwen3-8B"
    assert s.timeline == {
        "launching": 4.0,
        "loading_weights": 10.0,
        "kv_cache": 2.0,
        "cuda_graph": 11.0,
        "warming": 2.0,
    }
    assert s.cold_start_s == 29.0
    assert s.stats.gen_throughput == 300.0 and s.stats.gen_throughput_avg == 200.0
    assert (s.stats.running_reqs, s.stats.queue_reqs, s.stats.token_usage, s.stats.num_tokens) == (3, 2, 0.05, 512)


def test_slowest_rank_decides() -> None:
    s = parse_text(startup(4, until="cuda_graph", lag_rank=2))
    assert s.phase is Phase.LOADING_WEIGHTS
    assert s.ranks["TP0"].phase is Phase.CUDA_GRAPH and s.ranks["TP2"].phase is Phase.LOADING_WEIGHTS


def test_draft_model_phases() -> None:
    p = LogParser()
    text = startup(1, spec=True)
    cut = text.index("Capture draft cuda graph begin")
    p.feed(text[:cut])
    assert p.snapshot().phase is Phase.KV_CACHE and p.snapshot().draft
    assert p.snapshot().draft_shards.as_tuple() == (1, 1)  # type: ignore[union-attr]
    p.feed(text[cut:])
    s = p.snapshot()
    assert s.phase is Phase.SERVING and s.facts.draft_model_class == "LlamaForCausalLMEagle"
    assert s.stats.accept_len == 3.41 and s.stats.accept_rate == 0.81
    assert "draft_loading_weights" in s.timeline and "draft_cuda_graph" in s.timeline


def test_dp_tp_prefixes_and_lines_returned_clean() -> None:
    p = LogParser()
    lines = p.feed(
        b"[2026-01-01 10:00:00 DP1 TP3] Load weight begin. avail mem=10.00 GB\n\x1b[31m[2026-01-01 10:00:01] x\x1b[0m\n"
    )
    assert lines == ["[2026-01-01 10:00:00 DP1 TP3] Load weight begin. avail mem=10.00 GB", "[2026-01-01 10:00:01] x"]
    s = p.snapshot()
    assert "DP1 TP3" in s.ranks and s.facts.tp_size == 4 and s.facts.dp_size == 2


def test_hybrid_usage_fields_and_input_throughput() -> None:
    s = parse_text(
        "[2026-08-24 15:56:11] Decode batch, #running-req: 1, #full token: 704, full token usage: 0.10, mamba num: 3, "
        "mamba usage: 0.19, accept len: 5.15, accept rate: 0.59, cuda graph: True, gen throughput (token/s): 150.30, #queue-req: 0\n"
        "[2026-05-15 12:50:14] Prefill batch, #new-seq: 1, #new-token: 2048, #cached-token: 0, full token usage: 0.01, "
        "swa token usage: 0.02, #running-req: 0, #queue-req: 0, input throughput (token/s): 46.36, cuda graph: False\n"
    )
    st = s.stats
    assert st.usage == {"full token usage": 0.01, "swa token usage": 0.02} and st.token_usage == 0.02
    assert st.input_throughput == 46.36 and st.gen_throughput == 150.3 and st.accept_len == 5.15
    assert s.phase is Phase.SERVING


def test_retraction_and_health_failures_are_not_crashes() -> None:
    s = parse_text(
        startup(1)
        + "[2026-01-01 10:01:00] Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.5 -> 1.0\n"
        "[2026-01-01 10:01:00] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: 0.7000 -> 1.0000\n"
        "[2026-01-01 10:01:01] Health check failed. Server couldn't get a response from detokenizer for last 20 "
        "seconds. tic start time: 10:00:41. last_heartbeat time: 10:00:40\n"
    )
    assert s.stats.retractions == 2 and s.stats.retracted_reqs == 5 and s.stats.health_check_failures == 1
    assert not s.crashed and s.phase is Phase.SERVING
    assert any(e.kind == "retraction" for e in s.events)


def test_stopped_by_sigterm_and_port_conflict_crash() -> None:
    s = parse_text(
        startup(1)
        + "[2026-01-01 10:02:00] SIGTERM received. signum=15 frame=None. Draining requests and shutting down...\n"
    )
    assert s.phase is Phase.STOPPED and not s.crashed
    port = parse_text(
        startup(1, until="ready").replace(
            "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        )
    )
    assert port.crashed and port.phase is Phase.CRASHED


def test_asgi_exception_is_recoverable() -> None:
    s = parse_text(
        startup(1)
        + "[2026-01-01 10:02:00] ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in f\nValueError: bad request\n'
    )
    assert not s.crashed and s.phase is Phase.SERVING


def test_traceback_then_progress_is_not_a_crash() -> None:
    s = parse_text(
        'Traceback (most recent call last):\n  File "a.py", line 1\nImportError: optional thing\n' + startup(1)
    )
    assert not s.crashed and s.phase is Phase.SERVING


def test_tqdm_then_header_on_one_physical_line() -> None:
    s = parse_text(
        "[2025-03-08 12:29:21 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB\n"
        "  0%|          | 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture cuda graph begin. avail mem=1.45 GB\n"
    )
    assert s.ranks["TP1"].phase is Phase.CUDA_GRAPH and s.graphs is not None and s.graphs.as_tuple() == (0, 13)


def test_mark_exit_settles_phase() -> None:
    p = LogParser()
    p.feed(startup(1, until="loading_weights"))
    p.mark_exit(None, "SIGKILL")
    assert p.snapshot().phase is Phase.CRASHED
    q = LogParser()
    q.feed(startup(1))
    q.mark_exit(137, 9, stop_requested=True)
    assert q.snapshot().phase is Phase.STOPPED


def test_0523_dict_server_args_labelled_kv_and_draft_capture() -> None:
    s = parse_text(
        "[2026-01-01 10:00:00] server_args={'model_path': '/m/Qwen3.6-27B', 'tp_size': 2, 'api_key': 'sk-x', "
        "'speculative_algorithm': 'EAGLE', 'hf_token': 'hf_abc'}\n"
        "[2026-01-01 10:00:05 TP0] Load weight begin. avail mem=90.00 GB\n"
        "[2026-01-01 10:00:09 TP0] Load weight end. elapsed=4.00 s, type=Qwen3_5ForConditionalGeneration, avail mem=40.00 GB, mem usage=50.00 GB.\n"
        "[2026-01-01 10:00:10 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 100000, K size: 5.00 GB, V size: 5.00 GB\n"
        "[2026-01-01 10:00:10 TP0] Mamba Cache is allocated. max_mamba_cache_size: 48, conv_state size: 0.10GB, ssm_state size: 2.00GB \n"
        "[2026-01-01 10:00:11 TP0] Capture target decode CUDA graph begin. backend=fa3, num_tokens_per_req=4, avail mem=20.00 GB\n"
        "[2026-01-01 10:00:15 TP0] Capture target decode CUDA graph end. bs=[1, 2], elapsed=4.00 s, mem usage=0.50 GB, avail mem=19.50 GB.\n"
        "[2026-01-01 10:00:16 TP0] Draft KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 0.50 GB, V size: 0.50 GB\n"
        "[2026-01-01 10:00:16 TP0] Capture draft decode CUDA graph begin. backend=fa3, num_tokens_per_req=1, avail mem=18.00 GB\n"
    )
    f = s.facts
    assert f.model_path == "/m/Qwen3.6-27B" and f.tp_size == 2 and f.speculative_algorithm == "EAGLE"
    assert "api_key" not in f.args and "hf_token" not in f.args
    assert f.kv_tokens == 100000 and f.kv_size_gib == 10.0 and f.kv_cache_dtype == "bfloat16" and f.mamba_cache
    assert f.graph_mem_gib == 0.5 and f.weight_gib == 50.0
    assert s.phase is Phase.CUDA_GRAPH and s.draft


def test_log_ms_and_main_process_lines_do_not_make_ranks() -> None:
    s = parse_text(
        "[2026-01-01 10:00:00.100] Attention backend not specified. Use fa3 backend by default.\n"
        "[2026-01-01 10:00:00.900 TP1] Load weight begin. avail mem=10.00 GB\n"
    )
    assert list(s.ranks) == ["TP1"] and s.first_ts is not None and s.last_ts is not None
    assert abs(s.last_ts - s.first_ts - 0.8) < 1e-6


def test_traceback_while_serving_needs_a_marker_or_exit() -> None:
    text = startup(1) + "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'rid'\n"
    p = LogParser()
    p.feed(text)
    assert not p.snapshot().crashed and p.snapshot().phase is Phase.SERVING
    assert "KeyError: 'rid'" in p.snapshot().errors
    p.mark_exit(1)
    s = p.snapshot()
    assert s.crashed and s.crash is not None and s.crash.exception_lines == ["KeyError: 'rid'"]

    q = LogParser()
    q.feed(text)
    q.mark_exit(137, "KILL", stop_requested=True)
    assert q.snapshot().phase is Phase.STOPPED
