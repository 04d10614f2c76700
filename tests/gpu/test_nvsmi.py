"""nvidia-smi parsing on real captures (tests/samples/nvidia-smi), [N/A] cells, garbage and -lms grouping."""

from __future__ import annotations

import pytest

from console.gpu import nvsmi
from tests.samples import NVIDIA_SMI as SAMPLES

H200 = SAMPLES / "h200-real"


def test_h200_busy_with_header_and_units():
    rows = nvsmi.parse_gpu_csv((H200 / "query-gpu-busy.csv").read_text())
    assert len(rows) == 1
    r = rows[0]
    assert r.index == 0 and r.name == "NVIDIA H200"
    assert r.uuid == "GPU-4c23b9da-4dff-5472-7f9c-3d31521d0cd8"
    assert r.pci_bus_id == "00000000:00:06.0"
    assert (r.memory_used_mib, r.memory_total_mib) == (21491, 143771)
    assert r.utilization_pct == 100 and r.memory_util_pct == 24 and r.temperature_c == 56
    assert r.power_w == pytest.approx(690.01) and r.power_limit_w == 700.0 and r.clocks_sm_mhz == 1485


def test_h200_idle():
    (r,) = nvsmi.parse_gpu_csv((H200 / "query-gpu-idle.csv").read_text())
    assert r.memory_used_mib == 0 and r.utilization_pct == 0 and r.clocks_sm_mhz == 345


def test_compute_apps_real():
    (a,) = nvsmi.parse_apps_csv((H200 / "compute-apps.csv").read_text())
    assert a.pid == 421 and a.process_name == "python3" and a.used_mib == 21482
    assert a.gpu_uuid.startswith("GPU-4c23")


def test_loop_sample_other_fields():
    fields = ("index", "memory.used", "utilization.gpu", "power.draw")
    rows = nvsmi.parse_gpu_csv((H200 / "loop-lms500.csv").read_text(), fields)
    assert len(rows) == 8 and all(r.index == 0 and r.memory_used_mib == 21491 for r in rows)


def test_bad_field_error_text():
    text = (H200 / "query-bad-field.txt").read_text()
    assert nvsmi.error_text(text) == 'Field "bogus.field" is not a valid field to query.'
    with pytest.raises(nvsmi.NvsmiParseError):
        nvsmi.parse_gpu_csv(text)


def test_older_samples_with_subset_headers():
    rows = nvsmi.parse_gpu_csv(
        (SAMPLES / "05-rtx-a6000-x2-query-gpu-csv.txt").read_text(),
        ("index", "name", "memory.total", "memory.used", "memory.free", "utilization.gpu"),
    )
    assert [r.index for r in rows] == [0, 1] and rows[1].memory_used_mib == 20 and rows[0].name == "NVIDIA RTX A6000"


def test_na_cells_become_none():
    line = "1, GPU-abc, NVIDIA H200, 00000000:01:00.0, [N/A], 143771, [N/A], [Not Supported], [N/A], 40, [N/A], 700.00, [N/A]"
    r = nvsmi.parse_gpu_line(line)
    assert r.index == 1 and r.memory_used_mib is None and r.utilization_pct is None and r.power_w is None
    assert r.memory_total_mib == 143771 and r.temperature_c == 40


@pytest.mark.parametrize(
    "line",
    [
        "garbage",
        "0, 1, 2",
        "x, GPU-a, n, b, 1, 2, 3, 4, 5, 6, 7, 8, 9",
        "0, notauuid, n, b, 1, 2, 3, 4, 5, 6, 7, 8, 9",
        "0, GPU-a, n, b, lots, 2, 3, 4, 5, 6, 7, 8, 9",
    ],
)
def test_garbage_raises(line):
    with pytest.raises(nvsmi.NvsmiParseError):
        nvsmi.parse_gpu_line(line)


def test_apps_no_processes_and_commas_in_name():
    assert nvsmi.parse_apps_csv("No running processes found\n") == []
    (a,) = nvsmi.parse_apps_csv("77, GPU-1, python -c a,b, [N/A]\n")
    assert a.process_name == "python -c a, b" and a.used_mib is None


def _row(i: int, used: int) -> str:
    return f"{i}, GPU-{i}, NVIDIA H200, 0:{i}, {used}, 143771, 0, 5, 1, 30, 90.5, 700, 345\n"


def test_line_buffer_groups_ticks_and_learns_gpu_count():
    buf = nvsmi.GpuLineBuffer()
    s, bad = buf.feed(_row(0, 1) + _row(1, 2))
    assert s == [] and bad == []
    s, _ = buf.feed(_row(0, 3)[:10])  # partial line is held back
    assert s == []
    s, _ = buf.feed(_row(0, 3)[10:])
    assert [[r.memory_used_mib for r in t] for t in s] == [[1, 2]]
    s, _ = buf.feed(_row(1, 4))  # count known now: the tick ends at once
    assert [[r.memory_used_mib for r in t] for t in s] == [[3, 4]]
    s, bad = buf.feed("noise here\n")
    assert s == [] and bad == ["noise here"]
    assert buf.flush() is None


def test_line_buffer_flush_single_gpu():
    buf = nvsmi.GpuLineBuffer()
    buf.feed(_row(0, 9))
    assert [r.memory_used_mib for r in buf.flush()] == [9]
    s, _ = buf.feed(_row(0, 10))
    assert [[r.memory_used_mib for r in t] for t in s] == [[10]]


def test_commands_are_quoted_and_complete():
    cmd = nvsmi.query_gpu_command(500)
    assert cmd.startswith("nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.used,memory.total,memory.free,")
    assert cmd.endswith("--format=csv,noheader,nounits -lms 500")
    assert nvsmi.query_apps_command() == (
        "nvidia-smi --query-compute-apps=pid,gpu_uuid,process_name,used_memory --format=csv,noheader,nounits"
    )
