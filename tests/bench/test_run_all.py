"""benchmarks.run_all: a benchmark past its time limit is a MISS (not a SKIP), and the run prints a calibration rate."""

from __future__ import annotations

from benchmarks.run_all import calibration, run_one


def test_a_benchmark_that_times_out_is_a_miss() -> None:
    r = run_one("bench_logview_pull", ["--pulls", "1000000"], limit=2)  # a real benchmark, far past 2 s
    assert r.figure == "timed out" and r.ok is False  # before: ok None, shown as SKIP
    assert "MISS" in _printed(r)


def test_a_benchmark_that_fails_is_a_miss() -> None:
    r = run_one("bench_logview_pull", ["--no-such-flag"], limit=60)
    assert r.figure == "failed" and r.ok is False and "no-such-flag" in r.note


def test_calibration_is_this_machines_parse_rate() -> None:
    cal = calibration(lines=20_000)
    assert cal["mixed lines/s"] > 1000 and cal["serving lines/s"] > 1000


def _printed(r) -> str:  # type: ignore[no-untyped-def]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        r.print()
    return out.getvalue()


def test_other_work_runs_while_the_benchmarks_do_and_is_gone_after() -> None:
    import time
    from pathlib import Path

    from benchmarks.run_all import other_work

    with other_work(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
        stats = [Path(f"/proc/{p.pid}/stat") for p in procs]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
            int(s.read_text().rsplit(")", 1)[1].split()[11]) > 0 for s in stats
        ):
            time.sleep(0.05)  # utime in clock ticks: each has spent CPU, i.e. it is busy, not waiting
        assert all(int(s.read_text().rsplit(")", 1)[1].split()[11]) > 0 for s in stats)
    assert all(p.poll() is not None for p in procs)  # killed and reaped, also when the run fails
