"""A launch's own process seen by a sample before its launch command returned is not an external server.

Found under stress-ng: the gate `exec`s SGLang once meta.json is written, and the console learns the pid
one round trip later; a process sample in between showed `external@host:PORT`, and the next restart was
refused for a port "owned" by it.
"""

from __future__ import annotations

from console.fleet.events import ProcInfo, ServerSeen
from console.fleet.monitor import ProcFrame
from tests.fleet.conftest import make_fleet, preset_toml


def _frame(port: int, sid: int) -> ProcFrame:
    args = f"/venv/bin/python3 -m sglang.launch_server --model-path /m --port {port}"
    return ProcFrame(procs=[ProcInfo(sid, 1, sid, args), ProcInfo(sid + 1, sid, sid, "sglang::scheduler")])


def _externals(ctl, host: str, frame: ProcFrame, sids: set[int | None]) -> list[str]:
    return [e.meta.name for e in ctl._externals(host, frame, [], 0.0, sids) if isinstance(e, ServerSeen)]


async def test_process_of_a_launch_in_flight_is_not_external(sim_ssh, controller_factory) -> None:
    h = sim_ssh("flight")
    ctl = controller_factory(make_fleet(h.section() + preset_toml("p", h, [0], 30000)))
    frame = _frame(30000, 4242)
    assert _externals(ctl, "flight", frame, set()) == ["external@flight:30000"]  # the rule's other side
    ctl.launching["flight"] = {30000}
    assert _externals(ctl, "flight", frame, set()) == []
    assert _externals(ctl, "flight", _frame(30001, 4343), set()) == ["external@flight:30001"]  # another port
