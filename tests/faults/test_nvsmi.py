"""nvidia-smi missing, hanging, failing on the driver, printing garbage or `[N/A]`: the GPU panes (or the host
band, when no GPU could be listed) say so, and nothing else breaks: links stay up, other hosts keep updating."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from console.fleet import actions
from console.ui.app import DflashApp
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.host_band import HostBand, HostHeader
from tests.faults import results
from tests.faults.simfleet import SimHost, build_sim_fleet, controller, preset_toml

WATCH_S = 7.0
FAULTS = {
    "nosmi": "nvidia-smi-missing",
    "stuck": "nvidia-smi-hang",
    "noise": "nvidia-smi-garbage",
    "nodrv": "nvidia-smi-driver",
}
# what each host's band must say (any of the words, case-insensitive)
SAYS = {
    "nosmi": ("not found", "no such file", "not installed", "missing"),
    "stuck": ("hung", "no sample", "timed out"),
    "noise": ("garbage", "unreadable", "cannot parse"),
    "nodrv": ("driver",),
    "na": ("util    ?",),
}
KNOWN_GAPS: set[str] = set()
# ^ since the 16:2x telemetry changes a garbage-printing nvidia-smi shows as "nvidia-smi exited without a sample:
#   %%%" (console/fleet telemetry): not called unreadable; recorded as a failed trial until fixed
"""Recorded as failed trials but not asserted here: each has its own strict xfail below (regression tests once fixed)."""
NA_SMI = """#!/bin/sh
case "$*" in
  *query-gpu*) while :; do
      echo "0, GPU-0000000a-0000-0000-0000-000000000000, NVIDIA H200, 00000000:01:00.0, [N/A], 143771, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]"
      case "$*" in *-lms*) sleep 0.5;; *) exit 0;; esac
    done;;
  *) exit 0;;
esac
"""


def _na(h: SimHost) -> None:
    smi = h.dir / "bin" / "nvidia-smi"
    smi.write_text(NA_SMI)
    smi.chmod(0o755)


def _band_text(app: DflashApp, host: str) -> str:
    for band in app.screen.query(HostBand):
        if band.host == host:
            parts = [str(w.render()) for w in band.query(HostHeader)]
            parts += [str(w.render()) for w in band.query(GpuPane)]
            parts += [str(w.render()) for w in band.query(".nogpu") if w.display]
            return "\n".join(parts)
    return ""


async def test_bad_nvidia_smi_is_shown_and_contained(ssh_host_factory, sim_root: Path) -> None:
    names = ["ok", *FAULTS, "na"]
    sf = build_sim_fleet(ssh_host_factory, sim_root, names, faults={n: [f] for n, f in FAULTS.items()})
    _na(sf.hosts["na"])
    fleet = sf.fleet(
        preset_toml("good", sf.hosts["ok"], port=30500) + preset_toml("blind", sf.hosts["nosmi"], port=30501)
    )
    ctl = controller(fleet)
    app = DflashApp(ctl)
    t0 = time.monotonic()
    seen: dict[str, set[str]] = {n: set() for n in names}
    downs: dict[str, int] = {n: 0 for n in names}
    async with app.run_test(size=(160, 60)) as pilot:
        assert await ctl.wait_hosts(15), {n: h.conn for n, h in ctl.state.hosts.items()}
        launched = await actions.launch(ctl, "good", wait=True)
        refused = await actions.launch(ctl, "blind")
        ok_at = ctl.state.hosts["ok"].gpu_at
        end = time.monotonic() + WATCH_S
        while time.monotonic() < end:
            await pilot.pause(0.25)
            for n in names:
                seen[n].add(_band_text(app, n))
                downs[n] += ctl.state.hosts[n].conn != "up"
        good = ctl.state.servers.get(launched.servers[0]) if launched.servers else None
        checks: dict[str, tuple[bool, str]] = {
            "healthy host keeps updating": (ctl.state.hosts["ok"].gpu_at not in (None, ok_at), ""),
            "its server stays ready": (good is not None and good.phase in ("ready", "serving"), launched.message),
            "launch onto the host without nvidia-smi refused, naming it": (
                not refused.ok
                and ("nvidia-smi" in refused.message.lower() or "cannot check gpus" in refused.message.lower()),
                refused.message,
            ),
        }
        for n in (*FAULTS, "na"):
            text = "\n".join(seen[n]).lower()
            checks[f"{n}: band says so"] = (any(w in text for w in SAYS[n]), text[-300:])
            checks[f"{n}: link stays up"] = (downs[n] == 0, f"{downs[n]} samples not up")
        await ctl.close()
    dt = time.monotonic() - t0
    for i, (what, (ok, detail)) in enumerate(checks.items()):
        results.record("faults", f"nvidia-smi: {what}", 0, ok, dt if i == 0 else 0.0, "" if ok else detail)
    bad = {w: d for w, (ok, d) in checks.items() if not ok and w not in KNOWN_GAPS}
    assert not bad, bad


DRIVER_MSG = (
    "nvidia-smi exited without a sample: NVIDIA-SMI has failed because it couldn't communicate with the "
    "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
)


@pytest.mark.parametrize(
    ("message", "word"),
    [("nvidia-smi exited without a sample: sh: 1: exec: nvidia-smi: not found", "not found"), (DRIVER_MSG, "driver")],
)  # regression: the cut-off text hid the driver (was a strict xfail)
async def test_nvidia_smi_failure_is_named_on_screen(message: str, word: str) -> None:
    from console.fleet.events import HostUp, TelemetryError
    from console.fleet.state import FleetState
    from tests.ui.fakes import NOW, FakeApi, demo_fleet

    st = FleetState(["ct129", "blackwell"])
    st.apply(HostUp("ct129", NOW - 10))
    st.apply(TelemetryError("ct129", NOW - 1, message))
    app = DflashApp(FakeApi(st, fleet=demo_fleet()), clock=lambda: NOW)
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause(0.1)
        assert word in _band_text(app, "ct129").lower()
