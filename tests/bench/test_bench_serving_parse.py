"""The bench_serving summary parser, on the exact format of docs/sglang.md §7 (0.5.11 and 0.5.23 lines)."""

from __future__ import annotations

import pytest

from console.sglang.bench_serving_parse import parse_summaries, parse_summary


def _line(label: str, value: float | str) -> str:
    return (
        "{:<40} {:<10.2f}".format(label + ":", value)
        if isinstance(value, float)
        else "{:<40} {:<10}".format(label + ":", value)
    )


def summary(concurrency: str | int = 32, extra: tuple[tuple[str, float], ...] = ()) -> str:
    out = ["", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    rows: list[tuple[str, float | str | int]] = [
        ("Backend", "sglang"),
        ("Traffic request rate", "inf"),
        ("Max request concurrency", concurrency),
        ("Successful requests", 198),
        ("Benchmark duration (s)", 123.45),
        ("Total input tokens", 204800),
        ("Total input text tokens", 204800),
        ("Total generated tokens", 102400),
        ("Total generated tokens (retokenized)", 102391),
        ("Request throughput (req/s)", 1.62),
        ("Input token throughput (tok/s)", 1659.02),
        ("Output token throughput (tok/s)", 829.51),
        ("Peak output token throughput (tok/s)", 1024.00),
        ("Peak concurrent requests", 32),
        ("Total token throughput (tok/s)", 2488.53),
        ("Concurrency", 31.87),
        ("Accept length", 3.12),
    ]
    out += [_line(k, v) for k, v in rows]
    sections = [
        (
            "End-to-End Latency",
            [
                ("Mean E2E Latency (ms)", 1000.0),
                ("Median E2E Latency (ms)", 950.5),
                ("P90 E2E Latency (ms)", 1500.0),
                ("P99 E2E Latency (ms)", 2100.25),
            ],
        ),
        ("Time to First Token", [("Mean TTFT (ms)", 50.0), ("Median TTFT (ms)", 45.5), ("P99 TTFT (ms)", 120.0)]),
        (
            "Time per Output Token (excl. 1st token)",
            [("Mean TPOT (ms)", 9.0), ("Median TPOT (ms)", 8.8), ("P99 TPOT (ms)", 12.0)],
        ),
        (
            "Inter-Token Latency",
            [
                ("Mean ITL (ms)", 9.1),
                ("Median ITL (ms)", 8.7),
                ("P95 ITL (ms)", 11.0),
                ("P99 ITL (ms)", 15.5),
                ("Max ITL (ms)", 40.0),
                *extra,
            ],
        ),
    ]
    for title, items in sections:
        out.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        out += [_line(k, v) for k, v in items]
    out.append("=" * 50)
    return "\n".join(out) + "\n"


PREAMBLE = (
    "benchmark_args=Namespace(backend='sglang', dataset_name='random-ids')\n#Input tokens: 204800\n"
    "#Output tokens: 102400\nStarting warmup with 1 sequences...\n"
    "Warmup completed with 1 sequences. Starting main benchmark run...\n"
    "\r  0%|          | 0/200 [00:00<?, ?it/s]\r 50%|█████     | 100/200 [00:30<00:30]\r100%|██████████| 200/200\n"
)


def test_parses_reference_summary_into_level() -> None:
    s = parse_summary(PREAMBLE + summary())
    assert s.fields["Backend"] == "sglang"
    assert s.num("Accept length") == 3.12
    lv = s.to_level(num_prompts=200)
    assert lv.concurrency == 32 and lv.requests == 200 and lv.errors == 2
    assert lv.output_throughput_tok_s == 829.51
    assert lv.request_throughput_rps == 1.62
    assert lv.ttft_p50_s == pytest.approx(0.0455) and lv.ttft_p99_s == pytest.approx(0.12)
    assert lv.itl_p50_s == pytest.approx(0.0087) and lv.itl_p99_s == pytest.approx(0.0155)
    assert lv.e2e_p50_s == pytest.approx(0.9505) and lv.e2e_p99_s == pytest.approx(2.10025)
    assert lv.duration_s == 123.45 and lv.output_tokens == 102400


def test_concurrency_not_set_and_override() -> None:
    s = parse_summary(summary("not set"))
    assert s.fields["Max request concurrency"] == "not set"
    assert s.to_level().concurrency == 0
    assert s.to_level(concurrency=8).concurrency == 8
    assert s.to_level().errors == 0


def test_several_blocks_ansi_and_0523_extra_lines() -> None:
    text = "\x1b[32m" + summary(1) + "\x1b[0m" + "junk\n" + summary(64, (("P90 ITL (ms)", 10.0),))
    blocks = parse_summaries(text)
    assert [b.to_level().concurrency for b in blocks] == [1, 64]
    assert blocks[1].num("P90 ITL (ms)") == 10.0
    assert parse_summary(text).to_level().concurrency == 64


def test_missing_summary_names_the_failure() -> None:
    with pytest.raises(ValueError, match="Warmup failed"):
        parse_summary(PREAMBLE + "ValueError: Warmup failed - Please make sure benchmark arguments are correct\n")
    with pytest.raises(ValueError, match="no 'Serving Benchmark Result'"):
        parse_summary("")
