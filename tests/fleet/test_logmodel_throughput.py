"""The per-chunk throughput read (the sparkline's point) is the newest decode line's figure, without the
batch-line re-parse that `stats` does: checked line by line over every real sample log."""

from __future__ import annotations

import pytest

from console.fleet.logmodel import LogModel
from console.sglang import logbatch
from tests.sglang.samples import all_samples


@pytest.mark.parametrize("path", all_samples(), ids=lambda p: p.name[:2])
def test_gen_throughput_per_line_equals_the_materialised_figure(path) -> None:
    fast, full = LogModel(), LogModel()
    seen = 0
    for line in path.read_bytes().splitlines(keepends=True):
        fast.feed(line)
        full.feed(line)
        assert fast.gen_throughput == full.stats.gen_throughput, line
        seen += fast.gen_throughput is not None
    if b"gen throughput (token/s): " in path.read_bytes():
        assert seen, "a log with decode lines gave no throughput"


def test_reading_gen_throughput_parses_no_batch_line(monkeypatch) -> None:
    calls = 0
    real = logbatch.parse_pairs

    def counting(text: str) -> dict[str, str]:
        nonlocal calls
        calls += 1
        return real(text)

    monkeypatch.setattr(logbatch, "parse_pairs", counting)
    m = LogModel()
    for i in range(50):
        m.feed(
            f"[2026-04-01 10:00:{i:02d}] Decode batch, #running-req: 3, #token: 900, token usage: 0.01, "
            f"cuda graph: True, gen throughput (token/s): {100 + i}.50, #queue-req: 0\n".encode()
        )
        assert m.gen_throughput == 100 + i + 0.5
    assert calls == 0
    assert m.running == 3 and calls > 0  # the other figures still come from the on-demand parse
