"""Every real sample log: the phase it reached, its facts, its crash cause; and chunking never changes the result."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.sglang.diagnose import diagnose_text
from console.sglang.logparse import LogParser, parse_text
from console.sglang.phase import Phase

from .samples import all_samples, sample

EXPECTED = {
    "01": ("serving", None),
    "02": ("ready", None),
    "03": ("stopped", None),
    "04": ("serving", None),
    "05": ("serving", None),
    "06": ("serving", None),
    "07": ("serving", None),
    "08": ("serving", None),
    "09": ("serving", None),
    "10": ("serving", None),
    "11": ("kv_cache", None),
    "12": ("crashed", "mamba_radix_cache_incompatible"),
    "13": ("serving", None),
    "14": ("crashed", "cuda_oom_cuda_graph"),
    "15": ("crashed", "unsupported_gpu_arch"),
    "16": ("crashed", "kernel_missing"),
    "17": ("crashed", "unknown"),
    "19": ("crashed", "nccl_error"),
    "20": ("crashed", "cuda_oom_runtime"),
    "21": ("crashed", "kernel_compile_error"),
    "22": ("cuda_graph", None),
    "23": ("launching", None),
    "24": ("serving", None),
    "25": ("cuda_graph", None),
    "26": ("crashed", "kernel_compile_error"),
    "27": ("crashed", "cuda_oom_weights"),
    "28": ("crashed", "multinode_rank_load_failure"),
    "29": ("cuda_graph", None),
    "30": ("ready", None),
}


def test_every_sample_is_covered() -> None:
    assert sorted(p.name[:2] for p in all_samples()) == sorted(EXPECTED)


@pytest.mark.parametrize("prefix", sorted(EXPECTED))
def test_sample_phase_and_cause(prefix: str) -> None:
    summary, diag = diagnose_text(sample(prefix))
    phase, cause = EXPECTED[prefix]
    assert summary.phase.value == phase
    assert (diag.cause if diag else None) == cause
    assert summary.crashed == (cause is not None)
    if diag:
        assert diag.summary and diag.hint and diag.error_line


def test_crash_summaries_name_the_key_fact() -> None:
    assert "asked for 384 MiB" in diagnose_text(sample("14"))[1].summary  # type: ignore[union-attr]
    assert "cuda:0 of the process" in diagnose_text(sample("14"))[1].summary  # type: ignore[union-attr]
    assert "-lcudart" in diagnose_text(sample("26"))[1].summary  # type: ignore[union-attr]
    assert "fp8e4nv" in diagnose_text(sample("15"))[1].summary  # type: ignore[union-attr]
    d12 = diagnose_text(sample("12"))[1]
    assert d12 is not None and "--mamba-scheduler-strategy extra_buffer" in d12.hint
    d17 = diagnose_text(sample("17"))[1]
    assert d17 is not None and "operation not permitted" in d17.error_line
    d21 = diagnose_text(sample("21"))[1]
    assert d21 is not None and "/usr/bin/gcc" in d21.error_line  # the build error above the cut traceback decides


def test_sample_facts() -> None:
    s = parse_text(sample("02"))
    assert s.facts.tp_size == 4 and s.shards.as_tuple() == (14, 14) and s.graphs.as_tuple() == (13, 13)  # type: ignore[union-attr]
    assert s.facts.model_class == "Qwen2ForCausalLM" and s.facts.max_total_num_tokens == 46611
    s29 = parse_text(sample("29"))
    assert s29.shards.as_tuple() == (163, 163) and s29.facts.kv_size_gib == 21.35 and s29.facts.capture_bs[-1] == 128  # type: ignore[union-attr,index]
    s05 = parse_text(sample("05"))
    assert s05.facts.dp_size == 8 and s05.facts.tp_size == 8
    s23 = parse_text(sample("23"))
    assert s23.facts.tp_size == 2
    s13 = parse_text(sample("13"))
    assert s13.stats.usage["mamba usage"] == 0.19 and s13.stats.accept_len == 3.77
    s25 = parse_text(sample("25"))
    assert s25.draft and s25.draft_shards.as_tuple() == (1, 1) and s25.graphs.as_tuple() == (4, 4)  # type: ignore[union-attr]
    s01 = parse_text(sample("01"))
    assert s01.timeline["loading_weights"] == 4.0 and s01.cold_start_s == 30.0
    assert parse_text(sample("10")).stats.usage == {"full token usage": 0.01, "swa token usage": 0.02}


def _view(s: object) -> tuple:
    from console.sglang.logstate import LogSummary

    assert isinstance(s, LogSummary)
    return (
        s.phase,
        s.draft,
        s.shards,
        s.draft_shards,
        s.graphs,
        s.facts,
        s.stats,
        s.timeline,
        s.crashed,
        s.crash,
        s.errors,
        s.lines,
        s.tail,
        [(e.kind, e.text) for e in s.events],
    )


_BLOBS = {p.name[:2]: p.read_bytes() for p in all_samples()}


def _parse_chunked(data: bytes | str, sizes: list[int]) -> LogParser:
    p = LogParser()
    i = k = 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        p.feed(data[i : i + n])
        i += n
        k += 1
    p.close()
    return p


_WHOLE = {k: _parse_chunked(v, [len(v) or 1]).snapshot() for k, v in _BLOBS.items()}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_BLOBS)), st.lists(st.integers(1, 3000), min_size=1, max_size=20))
def test_random_chunking_same_result(prefix: str, sizes: list[int]) -> None:
    assert _view(_parse_chunked(_BLOBS[prefix], sizes).snapshot()) == _view(_WHOLE[prefix])


@pytest.mark.parametrize("prefix", ["02", "25", "26"])
def test_text_chunks_same_as_bytes(prefix: str) -> None:
    text = _BLOBS[prefix].decode("utf-8", "replace")
    assert _view(_parse_chunked(text, [1, 5, 333]).snapshot()) == _view(_WHOLE[prefix])


def test_concatenated_samples_never_raise_and_crash_sticks() -> None:
    p = LogParser()
    for blob in _BLOBS.values():
        p.feed(blob)
    p.close()
    s = p.snapshot()
    assert s.phase is Phase.CRASHED and s.lines > 900
