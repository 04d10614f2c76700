"""Pure bench statistics: percentiles against numpy's definition, aggregation, run-to-run deltas."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.sglang.benchstats import (
    LEVEL_KEYS,
    LevelResult,
    RequestSample,
    aggregate,
    compare_levels,
    default_num_prompts,
    levels_of,
    num_prompts_notes,
    parse_concurrency,
    percentile,
    previous_record,
)


def test_percentile_linear_interpolation_like_numpy() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    assert percentile(xs, 50) == 2.5
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile(xs, 101)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_is_bounded_and_monotonic(xs: list[float], q: float) -> None:
    p = percentile(xs, q)
    assert p is not None
    assert min(xs) - 1e-6 <= p <= max(xs) + 1e-6
    assert percentile(xs, min(q + 1, 100)) >= p - 1e-6


def test_aggregate_figures_from_hand_made_samples() -> None:
    ss = [
        RequestSample(0.0, 1.0, True, 100, 0.1, [0.01] * 99),
        RequestSample(0.5, 2.0, True, 100, 0.3, [0.02] * 99),
        RequestSample(1.0, 1.5, False, 0, error="HTTP 503: busy"),
        RequestSample(1.0, 1.6, False, 0, error="HTTP 503: busy"),
    ]
    lv = aggregate(2, ss)
    assert lv.duration_s == 2.0
    assert lv.requests == 4 and lv.errors == 2
    assert lv.output_tokens == 200
    assert lv.output_throughput_tok_s == 100.0
    assert lv.request_throughput_rps == 1.0
    assert lv.ttft_p50_s == pytest.approx(0.2)
    assert lv.itl_p50_s == pytest.approx(0.015)
    assert lv.e2e_p99_s == pytest.approx(1.495)
    assert lv.error_examples == ("HTTP 503: busy",)
    assert list(lv.public()) == list(LEVEL_KEYS)


def test_aggregate_empty_and_explicit_duration() -> None:
    assert aggregate(1, []).output_throughput_tok_s == 0.0
    lv = aggregate(1, [RequestSample(0, 1, True, 50, 0.1)], duration_s=0.5)
    assert lv.output_throughput_tok_s == 100.0 and lv.itl_p50_s is None


def test_level_roundtrip_tolerates_extra_keys() -> None:
    lv = aggregate(4, [RequestSample(0, 1, True, 10, 0.1, [0.1])])
    d = lv.to_dict() | {"future_field": 1}
    assert LevelResult.from_dict(d) == lv
    assert levels_of({"levels": [d, "junk", {"x": 1}]}) == [lv]


def test_num_prompts_is_what_was_asked_and_concurrency_parsing() -> None:
    assert default_num_prompts(32) == 160
    assert default_num_prompts(4, 8) == 8  # `--num-prompts 8` is 8 requests (it was 20 at C=4)
    assert default_num_prompts(1, 50) == 50
    assert num_prompts_notes([1, 4, 32], 8) == ["C=32: 8 requests per level keep at most 8 in flight, not 32"]
    assert num_prompts_notes([1, 32], None) == []
    assert parse_concurrency("1, 32,64,128") == [1, 32, 64, 128]
    for bad in ("", "0", "a,2", "-1"):
        with pytest.raises(ValueError):
            parse_concurrency(bad)


def _lv(c: int, tps: float, ttft: float | None = 0.1) -> LevelResult:
    return LevelResult(c, 10, tps, 1.0, ttft, ttft, None, None, None, None, 0)


def test_compare_levels_phrases() -> None:
    cur = [_lv(1, 100), _lv(64, 1120, 0.095), _lv(128, 10)]
    prev = [_lv(64, 1000), _lv(128, 0), _lv(32, 5)]
    assert compare_levels(cur, prev) == ["+12% tok/s at C=64 (TTFT p50 -5%)"]


def test_previous_record_same_preset_and_engine_newest() -> None:
    recs = [
        {"time": "2026-01-01T00:00:00+00:00", "preset": "a", "server": "a@h:gpu0", "levels": []},
        {"time": "2026-01-03T00:00:00+00:00", "preset": "a", "server": "a@h:gpu1", "engine": "sglang"},
        {"time": "2026-01-02T00:00:00+00:00", "preset": "a", "server": "a@h:gpu0", "tag": "want"},
        {"time": "2026-01-04T00:00:00+00:00", "preset": "b", "server": "b@h:gpu0"},
        {"time": "2026-01-05T00:00:00+00:00", "preset": None, "server": "http://x:1"},
    ]
    assert previous_record(recs, "a", "a@h:gpu0")["tag"] == "want"
    assert previous_record(recs, "a", "", engine="sglang")["server"] == "a@h:gpu1"
    assert previous_record(recs, None, "http://x:1")["time"].startswith("2026-01-05")
    assert previous_record(recs, "zzz", "") is None


def test_previous_record_only_with_the_same_input_and_output_lengths() -> None:
    recs = [
        {
            "time": "2026-01-01T00:00:00+00:00",
            "preset": "a",
            "server": "a@h:gpu0",
            "input_len": 1024,
            "output_len": 256,
            "tag": "same",
        },
        {"time": "2026-01-02T00:00:00+00:00", "preset": "a", "server": "a@h:gpu0", "input_len": 1024, "output_len": 16},
        {"time": "2026-01-03T00:00:00+00:00", "preset": "a", "server": "a@h:gpu0", "input_len": 8, "output_len": 256},
    ]
    assert previous_record(recs, "a", "a@h:gpu0", "console", 1024, 256)["tag"] == "same"
    assert previous_record(recs, "a", "a@h:gpu0", "console", 512, 256) is None


def test_compare_never_prints_minus_zero() -> None:
    assert compare_levels([_lv(1, 99.8, 0.1)], [_lv(1, 100, 0.1)]) == ["±0% tok/s at C=1 (TTFT p50 ±0%)"]
