"""Hostile input: random mixes of real fragments, control bytes and huge lines never raise and never depend on chunking."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.sglang.diagnose import diagnose
from console.sglang.logparse import LogParser
from console.sglang.phase import Phase

FRAGMENTS = [
    "[2026-01-01 10:00:00 TP0] ",
    "[2026-01-01 10:00:01 DP1 TP3 EP2] ",
    "[2026-01-01 10:00:02] ",
    "sglang-1  | ",
    "2026-01-01T10:00:00.5Z ",
    "Load weight begin. avail mem=70.00 GB",
    "Load weight end. type=X, avail mem=1 GB, mem usage=2 GB.",
    "KV Cache is allocated. #tokens: 5, K size: 1 GB, V size: 1 GB",
    "Memory pool end. avail mem=3 GB",
    "Capture cuda graph begin. avail mem=2 GB",
    "Capture cuda graph end. Time elapsed: 1 s. mem usage=0.1 GB. avail mem=1 GB.",
    "Capture cuda graph bs [1, 2, 4]",
    "Capturing batches (bs=4 avail_mem=1.00 GB):  50%|█| 2/4 [00:01<00:01]",
    "Multi-thread loading shards:  50% Completed | 2/4 [00:01<00:01]",
    "max_total_num_tokens=5, max_running_requests=x",
    "INFO:     Uvicorn running on http://0.0.0.0:30000",
    "The server is fired up and ready to roll!",
    "Decode batch, #running-req: 1, token usage: x, gen throughput (token/s): nan, #queue-req: ",
    "Prefill batch. #new-seq: 1, #new-token: q, ",
    "Traceback (most recent call last):",
    '  File "a.py", line 1',
    "RuntimeError: CUDA error: out of memory",
    "ValueError(",
    "Received sigquit from a child process.",
    "Scheduler hit an exception: ",
    "ERROR:    [Errno 98] address already in use",
    "SIGTERM received.",
    "\x1b[31m",
    "\x1b]0;t\x07",
    "\x00",
    "\x7f",
    "\t",
    "\r",
    "\n",
    "\r\n",
    "[",
    "]",
    ", ",
    ": ",
    "=",
    "█",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=60),
    st.lists(st.integers(1, 40), min_size=1, max_size=6),
    st.booleans(),
)
def test_fragments_never_raise_and_chunking_is_invisible(parts: list[str], sizes: list[int], as_bytes: bool) -> None:
    text = "".join(parts)
    data: bytes | str = text.encode("utf-8", "surrogatepass") if as_bytes else text
    whole = LogParser()
    whole.feed(data)
    whole.close()
    chunked = LogParser()
    i = k = 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        chunked.feed(data[i : i + n])
        i, k = i + n, k + 1
    chunked.close()
    a, b = whole.snapshot(), chunked.snapshot()
    assert (a.phase, a.facts, a.stats, a.timeline, a.crash, a.errors, a.lines) == (
        b.phase,
        b.facts,
        b.stats,
        b.timeline,
        b.crash,
        b.errors,
        b.lines,
    )
    assert isinstance(a.phase, Phase)
    diagnose(a)


def test_megabyte_lines_through_the_parser() -> None:
    p = LogParser(max_line=4096)
    big = "[2026-01-01 10:00:00] server_args=ServerArgs(" + "model_path='/m', " * 70_000 + ")\n"
    tb = "Traceback (most recent call last):\n" + "RuntimeError: " + "x" * 1_500_000 + "\n"
    for blob in (big, tb, big):
        for i in range(0, len(blob), 65536):
            p.feed(blob[i : i + 65536].encode())
    s = p.snapshot()
    assert s.lines == 4 and s.facts.model_path == "/m"
    assert all(len(x) <= 4096 for x in s.errors)


def test_invalid_utf8_in_traceback() -> None:
    p = LogParser()
    p.feed(b"Traceback (most recent call last):\nOSError: lib\xff\xfe.so: cannot open shared object file\n")
    d = diagnose(p.snapshot())
    assert d is not None and d.cause == "missing_shared_library" and "\ufffd" in d.summary
