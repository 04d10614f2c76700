"""Speculative decoding: settings from argv, accept figures from real-format Decode lines and /metrics, the alarms."""

from __future__ import annotations

import math

from console.fleet.logmodel import LogModel
from console.sglang.metrics import parse_metrics
from console.sglang.specdec import accept_alarm, percentile, sane_accept_len, spec_config, spec_note
from tests.sglang.samples import sample

# The two Decode formats SGLang has printed (scheduler_metrics_mixin.py): older `accept len: X, ` alone, newer with
# `accept rate: Y, `; TP/DP rank prefixes in the header.
OLD = b"[2025-03-02 10:00:01 TP0] Decode batch. #running-req: 4, #token: 900, token usage: 0.01, accept len: 2.41, gen throughput (token/s): 310.50, #queue-req: 0\n"
NEW = b"[2026-11-20 10:00:02 DP0 TP0] Decode batch, #running-req: 8, #token: 1900, token usage: 0.02, accept len: 3.12, accept rate: 0.53, cuda graph: True, gen throughput (token/s): 612.40, #queue-req: 0\n"
GREEDY = b"[2026-11-20 10:00:03 TP0] DFLASH currently supports greedy verification only; ignoring non-greedy sampling params (e.g. temperature/top_p/top_k) and using argmax.\n"


def test_spec_config_reads_each_algorithm_as_sglang_does() -> None:
    assert spec_config(["--model-path", "m"]) is None
    d = spec_config(
        [
            "--speculative-algorithm",
            "dflash",
            "--speculative-draft-model-path",
            "/d",
            "--speculative-dflash-block-size=16",
        ]
    )
    assert d is not None and d.dflash and d.draft_tokens == 16 and d.num_steps == 1 and d.topk == 1
    assert d.accept_max == 17 and d.shape() == "block 16" and d.draft_model == "/d"
    e = spec_config(
        ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]
    )
    assert e is not None and e.algorithm == "NEXTN" and e.num_steps == 3 and e.draft_tokens is None
    assert e.accept_max == 5 and e.shape() == "steps 3 · topk 1"
    assert spec_config(["--speculative-algorithm", "EAGLE", "--speculative-draft-model", "/x"]).draft_model == "/x"  # type: ignore[union-attr]


def test_both_decode_formats_give_the_figure_and_its_time() -> None:
    m = LogModel()
    m.feed(OLD + NEW)
    assert [v for _, v in m.accepts] == [2.41, 3.12]
    assert m.accept_len == 3.12 and m.accept_rate == 0.53
    m2 = LogModel()
    m2.feed(OLD)
    assert m2.accept_len == 2.41 and m2.accept_rate is None


def test_real_mtp_log_accept_figures() -> None:
    m = LogModel()
    m.feed(sample("13"))
    vals = [v for _, v in m.accepts]
    assert vals[:3] == [5.60, 5.15, 3.42] and all(1.0 <= v <= 8 for v in vals)


def test_malformed_figures_are_unknown_never_a_number_not_printed() -> None:
    for bad in (b"nan", b"-1.00", b"1e9", b"inf", b"x.y", b""):
        line = NEW.replace(b"accept len: 3.12", b"accept len: " + bad)
        m = LogModel()
        m.feed(line)
        assert m.accept_len is None and list(m.accepts) == [], bad
    m = LogModel()
    m.feed(NEW.replace(b"accept rate: 0.53", b"accept rate: 7.0"))
    assert m.accept_len == 3.12 and m.accept_rate is None
    assert sane_accept_len(math.nan) is None and sane_accept_len(65.0) is None and sane_accept_len(1.0) == 1.0


def test_metrics_take_rank_zero_and_reject_garbage() -> None:
    text = "".join(
        f'sglang:spec_accept_length{{model_name="m",tp_rank="{r}"}} {v}\n' for r, v in ((1, 9.5), (0, 3.2), (2, "NaN"))
    )
    text = "# TYPE sglang:spec_accept_length gauge\n" + text
    text += '# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate{tp_rank="0"} -0.5\n'
    m = parse_metrics(text)
    assert m.spec_accept_length == 3.2 and m.spec_accept_rate is None
    many = "# TYPE sglang:spec_accept_length gauge\n" + "".join(
        f'sglang:spec_accept_length{{tp_rank="{r}"}} {r + 1}\n' for r in range(64)
    )
    assert parse_metrics(many).spec_accept_length == 1.0


def test_dflash_notes_from_sglang_text() -> None:
    n = spec_note(GREEDY[len(b"[2026-11-20 10:00:03 TP0] ") :].decode())
    assert n is not None and n.kind == "greedy-only"
    mm = spec_note("DFLASH block size mismatch: using speculative_num_draft_tokens=8 but draft config block_size=16.")
    assert mm is not None and mm.kind == "block-size-mismatch" and "block_size=16" in mm.text
    oom = spec_note("RuntimeError: DFLASH draft OOM when allocating 768 block tokens.")
    assert oom is not None and oom.kind == "draft-oom" and oom.severity == "error"
    assert spec_note("Initialized DFLASH draft runner. attention_backend=fa3, model=X, block_size=16") is None
    assert spec_note("some text mentioning DFLASH later") is None


def test_greedy_warning_counted_once_as_an_event() -> None:
    m = LogModel()
    m.feed(GREEDY + GREEDY)
    note, count, ts = m.spec_notes["greedy-only"]
    assert note.kind == "greedy-only" and count == 2 and ts is not None
    assert [e.kind for e in m.parser.events].count("spec") == 1


def test_draft_oom_exception_line_in_a_traceback_raises_the_alarm() -> None:
    tb = (
        b"[2026-11-20 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        b'  File "/x/dflash_worker.py", line 300, in _prepare_for_speculative_decoding\n'
        b"    raise RuntimeError(\n"
        b"RuntimeError: DFLASH draft OOM when allocating 768 block tokens.\n"
    )
    m = LogModel()
    m.feed(tb)
    assert "draft-oom" in m.spec_notes


def test_accept_alarm_threshold_median_and_recovery() -> None:
    pts = [(float(t), 3.0) for t in range(0, 50)]
    assert accept_alarm(pts, 50.0) is None
    low = [*pts, (50.0, 1.02), (52.0, 1.01)]
    a = accept_alarm(low, 53.0)
    assert a is not None and "1.01" in a.text and a.since == 50.0
    assert accept_alarm([*low, (54.0, 2.9)], 55.0) is None  # recovered: clears by itself
    assert accept_alarm(low, 53.0 + 31) is None  # idle: an old figure raises nothing
    half = [(float(t), 1.4) for t in range(0, 70, 2)]
    assert accept_alarm([p for p in half if p[0] <= 30], 30.0, median=3.2) is None  # under half only 30 s
    b = accept_alarm(half, 69.0, median=3.2)
    assert b is not None and "median 3.20" in b.text
    assert accept_alarm(half, 69.0, median=3.2, below=1.5) is not None


def test_percentile_nearest_rank() -> None:
    vals = [float(v) for v in range(1, 11)]
    assert percentile(vals, 10) == 1.0 and percentile(vals, 90) == 9.0 and percentile([], 50) is None
