"""nvidia-smi stand-in vs the real tool's samples (tests/samples/nvidia-smi): headers, units, layout, errors."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.sim import state
from console.sim.control import hold_vram
from console.sim.hostdir import build_host, set_faults
from console.sim.spec import BLACKWELL_SPEC, CT129_SPEC, GpuSpec, SimHostSpec
from tests.patience import patient

from .conftest import SAMPLES, smi

NV = SAMPLES / "nvidia-smi"
H200 = SimHostSpec(
    name="h200",
    driver_version="580.159.04",
    cuda_version="13.0",
    models=[],
    gpus=[
        GpuSpec(
            name="NVIDIA H200",
            memory_mib=143771,
            uuid="GPU-4c23b9da-4dff-5472-7f9c-3d31521d0cd8",
            pci_bus_id="00000000:00:06.0",
            power_limit_w=700.0,
            idle_power_w=96.8,
            sm_clock_max=1980,
            fan=False,
            persistence="On",
        )
    ],
)
FIELDS = (
    "index,uuid,name,pci.bus_id,memory.used,memory.total,memory.free,utilization.gpu,utilization.memory,"
    "temperature.gpu,power.draw,power.limit,clocks.sm"
)


@pytest.fixture
def h200(tmp_path: Path) -> Path:
    return build_host(tmp_path / "h200", H200)


@pytest.fixture
def ct129(tmp_path: Path) -> Path:
    return build_host(tmp_path / "ct129", CT129_SPEC)


def _sample(name: str) -> list[str]:
    return (NV / name).read_text().splitlines()


def test_query_gpu_header_and_units_match_real(h200: Path) -> None:
    r = smi(h200, f"--query-gpu={FIELDS}", "--format=csv")
    real = _sample("h200-real/query-gpu-idle.csv")
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == real[0]
    # Same units per column as the real idle row, field by field.
    unit = re.compile(r"^(?:.*?)( MiB| %| W| MHz)?$")
    for ours, theirs in zip(lines[1].split(", "), real[1].split(", "), strict=True):
        assert unit.match(ours).group(1) == unit.match(theirs).group(1), (ours, theirs)
    assert lines[1].split(", ")[:4] == real[1].split(", ")[:4]
    assert lines[1].split(", ")[5] == "143771 MiB"


def test_noheader_nounits_and_bad_field(h200: Path) -> None:
    r = smi(h200, "--query-gpu=index,memory.used,utilization.gpu", "--format=csv,noheader,nounits")
    assert re.fullmatch(r"\d+, \d+, \d+\n", r.stdout)
    bad = smi(h200, "--query-gpu=index,bogus.field", "--format=csv")
    real = (NV / "h200-real/query-bad-field.txt").read_text()
    assert bad.returncode == int(real.rsplit("rc=", 1)[1]) == 2
    assert bad.stdout == real.rsplit("rc=", 1)[0]


def test_list_and_version(h200: Path) -> None:
    assert smi(h200, "-L").stdout.splitlines() == _sample("h200-real/list.txt")
    assert smi(h200, "--version").stdout.splitlines() == _sample("h200-real/version.txt")


def test_table_idle_matches_real_h200_layout(h200: Path) -> None:
    ours, real = smi(h200).stdout.splitlines(), _sample("h200-real/table-idle.txt")
    assert len(ours) == len(real)
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} {7}", ours[0])
    for i, (a, b) in enumerate(zip(ours[1:], real[1:], strict=True), 1):
        if i == 9:  # fan/temp/power row: live numbers, same column layout
            assert [m.start() for m in re.finditer(r"\|", a)] == [m.start() for m in re.finditer(r"\|", b)]
            assert a.split("|")[2] == b.split("|")[2]  # "       0MiB / 143771MiB"
        else:
            assert a == b, i


def test_table_rows_match_blackwell_and_a6000_samples(tmp_path: Path) -> None:
    bw = smi(build_host(tmp_path / "bw", BLACKWELL_SPEC)).stdout.splitlines()
    real_bw = _sample("02-rtx-pro-6000-blackwell-table-with-processes.txt")
    assert bw[8] == real_bw[8]  # "|   0  NVIDIA RTX PRO 6000 Blac...    On  |   00000000:05:00.0 Off |  ..."
    assert bw[2] == real_bw[2]  # driver 580.95.05 header
    a6 = smi(build_host(tmp_path / "a6", CT129_SPEC)).stdout.splitlines()
    real_a6 = _sample("01-rtx-a6000-table-with-processes.txt")
    assert a6[2] == real_a6[2]
    assert a6[4:8] == real_a6[4:8]
    assert re.fullmatch(
        r"\|   0  NVIDIA RTX A6000               Off \|   00000000:[0-9A-F]{2}:00\.0 Off \|  +Off \|", a6[8]
    )


def test_processes_memory_and_liveness(ct129: Path) -> None:
    hog = hold_vram(ct129, 1, 26296, "python3")
    try:
        table = smi(ct129).stdout.splitlines()
        # the process row, by its PID column (a small pid, as in a fresh pid namespace, is also in "580.126.09")
        row = next(ln for ln in table if re.match(rf"\|\s+1\s+N/A\s+N/A\s+{hog.pid}\s", ln))
        real_row = _sample("01-rtx-a6000-table-with-processes.txt")[-2]
        expected = real_row.replace("|    0   N/A", "|    1   N/A").replace(f"{3288294:>16}", f"{hog.pid:>16}")
        assert row == expected
        apps = smi(ct129, "--query-compute-apps=pid,gpu_uuid,process_name,used_memory", "--format=csv")
        assert apps.stdout.splitlines()[0] == _sample("h200-real/compute-apps.csv")[0]
        assert re.fullmatch(rf"{hog.pid}, GPU-[0-9a-f-]{{36}}, python3, 26296 MiB", apps.stdout.splitlines()[1])
        used = smi(ct129, "--query-gpu=memory.used,memory.free", "--format=csv,noheader", "-i", "1").stdout
        assert used == "26296 MiB, 22246 MiB\n"
    finally:
        hog.kill()
        hog.wait()
    assert state.snapshot(ct129) == {}
    assert smi(ct129, "--query-gpu=memory.used", "--format=csv,noheader").stdout == "0 MiB\n0 MiB\n"
    assert "No running processes found" in smi(ct129).stdout


def test_utilisation_drives_power_and_temperature(ct129: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        state.register(ct129, pid=sleeper.pid, name="python3", gpus={0: 30000}, util={0: 100})
        rows = smi(ct129, "--query-gpu=utilization.gpu,temperature.gpu,power.draw", "--format=csv,noheader,nounits")
        busy, idle = [list(map(float, ln.split(", "))) for ln in rows.stdout.splitlines()]
        assert busy[0] == 100 and idle[0] == 0
        assert busy[1] > idle[1] + 20 and busy[2] > 250 > idle[2]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_loop_ms_prints_header_once_and_flushes(ct129: Path) -> None:
    p = subprocess.Popen(
        [
            str(ct129 / "bin/nvidia-smi"),
            "--query-gpu=index,memory.used,utilization.gpu,power.draw",
            "--format=csv",
            "-lms",
            "100",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    got = [p.stdout.readline() for _ in range(7)]
    p.kill()
    p.wait()
    assert got[0].startswith("index, memory.used [MiB]") and all(
        re.match(r"[01], \d+ MiB, \d+ %, [\d.]+ W", g) for g in got[1:]
    )


def test_faults_missing_garbage_driver_hang(ct129: Path) -> None:
    set_faults(ct129, ["nvidia-smi-missing"])
    assert not (ct129 / "bin/nvidia-smi").exists()
    set_faults(ct129, ["nvidia-smi-driver"])
    r = smi(ct129)
    assert r.returncode == 9 and r.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate")
    set_faults(ct129, ["nvidia-smi-garbage"])
    assert "MiB" not in smi(ct129, "--query-gpu=memory.used", "--format=csv").stdout
    set_faults(ct129, ["nvidia-smi-hang"])
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        smi(ct129, timeout=0.5)
    assert time.monotonic() - t0 < patient(3)
    set_faults(ct129, [])
    assert smi(ct129, "-L").returncode == 0


def test_query_long_memory_utilization_layout(h200: Path) -> None:
    ours = smi(h200, "-q", "-d", "MEMORY,UTILIZATION").stdout.splitlines()
    real = _sample("h200-real/q-memory-util.txt")
    assert len(ours) == len(real)
    for a, b in zip(ours, real, strict=True):
        assert a.split(":")[0] == b.split(":")[0]  # same keys, indentation and padding
    assert "        Total                                          : 143771 MiB" in ours
