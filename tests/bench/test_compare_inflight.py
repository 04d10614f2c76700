"""'vs previous run' compares a level only with one that kept as many requests in flight."""

from __future__ import annotations

from console.sglang.benchstats import LevelResult, compare_levels


def _lv(c: int, requests: int, tok_s: float) -> LevelResult:
    return LevelResult(
        concurrency=c,
        requests=requests,
        output_throughput_tok_s=tok_s,
        request_throughput_rps=1.0,
        ttft_p50_s=0.05,
        ttft_p99_s=0.06,
        itl_p50_s=0.02,
        itl_p99_s=0.03,
        e2e_p50_s=0.5,
        e2e_p99_s=0.6,
        errors=0,
    )


def test_fewer_requests_than_c_is_not_compared_with_c_in_flight() -> None:
    """`--num-prompts 2` at C=4 kept 2 in flight: it was shown as '-42% tok/s at C=4' against a run of 8 requests."""
    assert compare_levels([_lv(4, 2, 113)], [_lv(4, 8, 194)]) == []
    assert compare_levels([_lv(4, 8, 194)], [_lv(4, 2, 113)]) == []


def test_the_same_in_flight_count_is_compared_whatever_the_request_count() -> None:
    assert compare_levels([_lv(4, 8, 194)], [_lv(4, 20, 194)]) == ["±0% tok/s at C=4 (TTFT p50 ±0%)"]
    assert compare_levels([_lv(4, 2, 113)], [_lv(4, 2, 113)]) == ["±0% tok/s at C=4 (TTFT p50 ±0%)"]
