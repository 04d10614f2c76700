"""Line splitting and cleaning: any chunking, \\r bars, ANSI, bad UTF-8, huge lines, header prefixes."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from console.sglang.logtext import LineSplitter, clean_line, parse_header, parse_pairs, split_ranks


def split_all(data: bytes, cuts: list[int], max_line: int = 16384) -> list[str]:
    sp = LineSplitter(max_line)
    out: list[str] = []
    prev = 0
    for c in sorted(set(cuts)):
        out += sp.feed(data[prev:c])
        prev = c
    out += sp.feed(data[prev:])
    return out + sp.close()


def test_terminators_and_partial_lines() -> None:
    sp = LineSplitter()
    assert sp.feed(b"a\nb\rc\r\nd") == ["a", "b", "c"]
    assert sp.feed(b"e") == []
    assert sp.close() == ["de"]


def test_crlf_split_across_chunks_is_one_terminator() -> None:
    sp = LineSplitter()
    assert sp.feed(b"one\r") == ["one"]
    assert sp.feed(b"\ntwo\n") == ["two"]


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=300).map(lambda b: b.replace(b"x", b"\r").replace(b"y", b"\n")),
    st.lists(st.integers(0, 300), max_size=12),
    st.integers(4, 64),
)
def test_any_chunking_same_lines(data: bytes, cuts: list[int], cap: int) -> None:
    assert split_all(data, cuts, cap) == split_all(data, [], cap)


def test_ansi_and_control_chars_removed_tab_kept() -> None:
    raw = "\x1b[32mINFO\x1b[0m:\tready\x07\x00 ok\x1b]0;title\x07"
    assert clean_line(raw) == "INFO:\tready ok"


def test_invalid_utf8_replaced_and_split_multibyte_kept() -> None:
    sp = LineSplitter()
    bar = "█".encode()
    out = sp.feed(b"bad \xff\xfe " + bar[:1]) + sp.feed(bar[1:] + b"\n")
    assert out == ["bad \ufffd\ufffd █"]


def test_megabyte_line_is_capped_and_linear() -> None:
    sp = LineSplitter(max_line=1000)
    t0 = time.perf_counter()
    out: list[str] = []
    big = b"z" * 1_000_000
    for i in range(0, len(big), 777):
        out += sp.feed(big[i : i + 777])
    out += sp.feed(b"\nnext\n")
    assert time.perf_counter() - t0 < 1.0
    assert out == ["z" * 1000, "next"]
    assert sp.truncated_lines == 1


def test_header_plain_ms_and_ranks() -> None:
    h = parse_header("[2025-01-01 12:00:00 DP1 PP0 TP3 EP2] Load weight begin.")
    assert h is not None and h.ranks == "DP1 PP0 TP3 EP2"
    assert split_ranks(h.ranks) == {"DP": 1, "PP": 0, "TP": 3, "EP": 2}
    h2 = parse_header("[2025-01-01 12:00:00.250 TP0] x")
    assert h2 is not None and abs(h2.ts - h.ts - 0.25) < 1e-6
    assert parse_header("[2025-01-01 12:00:00] x").ranks == ""  # type: ignore[union-attr]


def test_header_after_docker_kubectl_and_compose_prefixes() -> None:
    for line in (
        "2025-11-01T16:50:36.123456789Z [2025-11-01 16:50:36 TP1] Load weight begin.",
        "sglang-1  | [2025-11-01 16:50:36 TP1] Load weight begin.",
        "[pod/sglang-0/server] [2025-11-01 16:50:36 TP1] Load weight begin.",
    ):
        h = parse_header(line)
        assert h is not None and h.ranks == "TP1" and line[h.end :] == "Load weight begin."


def test_not_a_header() -> None:
    assert parse_header("[Gloo] Rank 0 is connected") is None
    assert parse_header("[2025-01-01 12:00:00 lowercase] x") is None


def test_pairs_generic_plain_swa_mamba() -> None:
    p = parse_pairs(
        "Decode batch, #running-req: 1, #full token: 704, full token usage: 0.00, mamba num: 3, "
        "mamba usage: 0.19, accept len: 5.15, cuda graph: True, gen throughput (token/s): 150.30, #queue-req: 0"
    )
    assert p["mamba usage"] == "0.19" and p["#full token"] == "704" and p["gen throughput (token/s)"] == "150.30"
    old = parse_pairs("Prefill batch. #new-seq: 1, #new-token: 7, cache hit rate: 2.04%, #queue-req: 0, ")
    assert old["#new-seq"] == "1" and old["cache hit rate"] == "2.04%" and old["#queue-req"] == "0"
