"""`status --json` never shows a dead server's figures as current (issue 13.3, the CLI side)."""

from __future__ import annotations

from console.fleet.events import ServerGone
from console.fleet.report import server_doc
from console.fleet.state import FleetState
from tests.ui.fakes import NOW, scenario


def test_an_ended_servers_figures_move_under_last() -> None:
    st: FleetState = scenario()
    s = next(s for s in st.servers.values() if s.alive and s.log.running is not None)
    live = server_doc(s, NOW)
    assert live["last"] is None and live["ended_at"] is None and live["running"] == s.log.running
    st.apply(ServerGone(s.name, NOW))
    doc = server_doc(st.servers[s.name], NOW)
    assert doc["alive"] is False and doc["ended_at"] == NOW
    assert all(doc[k] is None for k in ("health", "gen_throughput", "running", "queued", "memory_mib"))
    assert doc["last"]["running"] == live["running"] and doc["last"]["gen_throughput"] == live["gen_throughput"]
