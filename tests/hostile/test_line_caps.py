"""Lines with no newline from a host (issue 19.2): a real process prints 50 MB without one into each line reader
(nvidia-smi's, the process loop's, the log tail's); what they hold stays under their cap and the stream goes on."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

from console.fleet.hostlink import PROC_MAX_LINE
from console.fleet.logtail import MAX_HEADER, Chunk, FrameReader
from console.fleet.monitor import ProcFrameParser
from console.gpu import nvsmi
from console.linecap import LineCap
from tests.faults import results

TOTAL = 50 * 1024 * 1024
ROW = "0, GPU-0, NVIDIA H200, 0:0, 21453, 143771, 0, 5, 99, 30, 90.5, 700, 345\n"


def _flood(prefix: bytes = b"", suffix: bytes = b"") -> Iterator[bytes]:
    """stdout of a real process: prefix, TOTAL bytes with no newline, suffix; read in 64 KiB chunks."""
    code = (
        "import sys; o = sys.stdout.buffer; o.write(bytes.fromhex(sys.argv[1])); z = b'z' * 65536\n"
        f"for _ in range({TOTAL // 65536}): o.write(z)\no.write(bytes.fromhex(sys.argv[2])); o.flush()"
    )
    p = subprocess.Popen([sys.executable, "-c", code, prefix.hex(), suffix.hex()], stdout=subprocess.PIPE)
    assert p.stdout is not None
    try:
        while chunk := p.stdout.read(65536):
            yield chunk
    finally:
        p.stdout.close()
        p.wait(10)


def test_nvidia_smi_line_without_newline_is_capped_and_reported_once() -> None:
    buf = nvsmi.GpuLineBuffer()
    held = 0
    bad: list[str] = []
    samples = []
    for chunk in _flood(ROW.encode(), b"\n" + ROW.encode() + ROW.encode()):
        s, b = buf.feed(chunk.decode())
        samples += s
        bad += b
        held = max(held, len(buf._partial))
    samples += [buf.flush()]
    ok = (
        held <= nvsmi.MAX_LINE
        and len(bad) == 1
        and "longer than 65536 characters" in bad[0]
        and [r.memory_used_mib for t in samples if t for r in t] == [21453, 21453, 21453]
    )
    results.record(
        "hostile",
        "lines: 50 MB nvidia-smi line without newline held to 64 KiB, reported once",
        0,
        ok,
        0.0,
        bad[0][:80] if bad else "no report",
        held_bytes=held,
    )
    assert ok, (held, bad[:2], samples)


def test_process_loop_line_without_newline_is_capped() -> None:
    cap: LineCap[bytes] = LineCap(PROC_MAX_LINE)
    parser = ProcFrameParser()
    frames = []
    held = 0
    good = b"==> ps 1.0\n7 1 7 python -m sglang.launch_server\n==> end\n"
    for chunk in _flood(good + b"==> ps 2.0\n", b"\n==> end\n" + good):
        frames += parser.feed(cap.feed(chunk), 0.0)
        held = max(held, len(parser._partial))
    ok = held <= PROC_MAX_LINE and cap.cut == 1 and len(frames) == 3 and frames[-1].procs[0].pid == 7
    results.record(
        "hostile",
        "lines: 50 MB process-loop line without newline held to 1 MiB",
        0,
        ok,
        0.0,
        f"{len(frames)} frames",
        held_bytes=held,
    )
    assert ok, (held, cap.cut, frames)


def test_log_tail_noise_without_newline_is_dropped_and_frames_go_on() -> None:
    r = FrameReader()
    held = 0
    out = []
    for chunk in _flood(b"==> 0 0 5\nhello", b"\n==> 0 5 6\n world"):
        out += r.feed(chunk)
        held = max(held, len(r._buf))
    chunks = [c for c in out if isinstance(c, Chunk)]
    ok = held <= MAX_HEADER + 65536 and [c.data for c in chunks] == [b"hello", b" world"]
    assert ok and r.noise_dropped >= TOTAL - MAX_HEADER, (held, chunks, r.noise_dropped)


def test_line_cap_passes_short_lines_untouched_across_any_split() -> None:
    text = "a\nbb\n" + "c" * 10 + "\nd\n"
    for split in range(len(text)):
        cap: LineCap[str] = LineCap(4)
        out = cap.feed(text[:split]) + cap.feed(text[split:])
        assert out == "a\nbb\ncccc\nd\n" and cap.cut == 1, split


def test_agent_sends_at_most_1_mib_of_a_flooding_compute_apps_query(tmp_path) -> None:
    """The real agent, whose compute-apps command prints 8 MB: its apps section stays at 1 MiB."""
    import time

    from console.fleet.agent import agent_procs_command

    flood = tmp_path / "apps"
    flood.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c \"import sys; sys.stdout.write(('1, GPU-0, p, 9' + chr(10)) * 600000)\"\n"
    )
    flood.chmod(0o755)
    p = subprocess.Popen(
        ["/bin/sh", "-c", agent_procs_command(sys.executable, apps_command=str(flood))], stdout=subprocess.PIPE
    )
    assert p.stdout is not None
    data = b""
    deadline = time.monotonic() + 30
    try:
        while b"==> end\n" not in data and time.monotonic() < deadline:
            data += p.stdout.read1(1 << 20)  # type: ignore[attr-defined]
    finally:
        p.kill()
        p.wait()
    apps = data.split(b"==> apps\n", 1)[1].split(b"==> rc", 1)[0]
    assert b"==> end\n" in data and 1_000_000 < len(apps) <= 1024 * 1024 + 1


def test_log_tail_header_claiming_a_huge_frame_is_noise() -> None:
    """`==> 0 0 9999999999` would make the reader hold 10 GB for one frame; no loop sends over MAX_FRAME."""
    r = FrameReader()
    out = r.feed(b"==> 0 0 9999999999\n" + b"q" * 100_000 + b"\n==> 0 0 3\nabc")
    assert [c.data for c in out if isinstance(c, Chunk)] == [b"abc"] and not r._got
