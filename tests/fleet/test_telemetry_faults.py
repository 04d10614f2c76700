"""nvidia-smi missing, hanging, garbage or driver-less: a TelemetryError on that host, nothing else breaks."""

from __future__ import annotations

import time

from tests.fleet.conftest import make_fleet
from tests.fleet.test_lifecycle import wait_for

FAULTS = {
    "nosmi": "nvidia-smi-missing",
    "hangs": "nvidia-smi-hang",
    "noise": "nvidia-smi-garbage",
    "nodrv": "nvidia-smi-driver",
}


async def test_nvidia_smi_faults_are_telemetry_errors(sim_ssh, controller_factory):
    hosts = {name: sim_ssh(name, faults=(fault,)) for name, fault in FAULTS.items()}
    good = sim_ssh("fine")
    ctl = controller_factory(make_fleet("".join(h.section() for h in (*hosts.values(), good))))
    await ctl.start()
    assert await ctl.wait_hosts(10)
    await wait_for(lambda: all(ctl.state.hosts[n].telemetry_error for n in FAULTS), 12)
    errors = {n: ctl.state.hosts[n].telemetry_error for n in FAULTS}
    assert "not found" in errors["nosmi"] or "No such file" in errors["nosmi"], errors
    assert "hung" in errors["hangs"] or "timed out" in errors["hangs"], errors
    assert "couldn't communicate" in errors["nodrv"] or "failed" in errors["nodrv"], errors
    await wait_for(lambda: ctl.state.hosts["fine"].gpus and not ctl.state.hosts["fine"].telemetry_error, 5)
    t0 = time.time()
    await wait_for(lambda: all(ctl.state.hosts[n].apps_at and ctl.state.hosts[n].apps_at > t0 for n in FAULTS), 8)
    for n in FAULTS:  # the process loop (and so the link) kept working
        assert ctl.state.hosts[n].conn == "up" and ctl.links[n].connects == 1, (n, ctl.state.hosts[n].last_error)
    assert all(
        g.reading.memory_used_mib is None or g.reading.memory_used_mib >= 0
        for g in ctl.state.hosts["noise"].gpus.values()
    )


NOLINE_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu*-lms*) exec {py} -c 'import sys, time
o = sys.stdout.buffer
o.write(b"0, GPU-x, NVIDIA H200, 0:0, 21453, 143771, 0, 5, 99, 30, 90.5, 700, 345\\n"); o.flush()
while True:
    o.write(b"z" * 65536); o.flush(); time.sleep(0.02)' ;;
  *) exec {real} "$@" ;;
esac
"""
"""nvidia-smi whose streaming query prints one sample, then 3 MB/s with no newline, forever (a real process)."""


async def test_nvidia_smi_line_without_newline_is_reported_and_bounded(sim_ssh, controller_factory):
    """Issue 19.2: an endless line is called out within seconds, the host stays up, the process loop runs on."""
    host = sim_ssh("noline")
    smi = host.dir / "bin" / "nvidia-smi"
    real = smi.with_name("nvidia-smi.real")
    smi.rename(real)
    smi.write_text(NOLINE_SMI.format(py=host.dir / "venv" / "bin" / "python3", real=real))
    smi.chmod(0o755)
    ctl = controller_factory(make_fleet(host.section()))
    await ctl.start()
    assert await ctl.wait_hosts(10)
    await wait_for(lambda: "longer than 65536" in (ctl.state.hosts["noline"].telemetry_error or ""), 15)
    t0 = time.time()
    await wait_for(lambda: (ctl.state.hosts["noline"].apps_at or 0) > t0, 8)
    assert ctl.state.hosts["noline"].conn == "up" and ctl.links["noline"].connects == 1
