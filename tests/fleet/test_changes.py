"""FleetState.apply's change-set: which hosts and servers an event touched, the notices' kinds, urgency."""

from __future__ import annotations

from console.fleet.changes import Changes
from console.fleet.events import (
    GpuSample,
    HealthResult,
    HostDown,
    HostUp,
    LogData,
    Notice,
    NoticeKind,
    ProcessSample,
    ServerAction,
    ServerAlive,
    ServerGone,
    ServerMeta,
    ServerRemoved,
    ServerSeen,
    TelemetryError,
)
from console.fleet.state import FleetState
from console.gpu.readings import ComputeApp, GpuReading
from console.sglang.phase import Phase

READY_LOG = b"[2026-01-01 00:00:00] The server is fired up and ready to roll!\n"
LOADING_THEN_READY = (
    b"[2026-12-01 14:00:01] server_args=ServerArgs(model_path='/m', port=30000)\n"
    b"[2026-12-01 14:00:30] The server is fired up and ready to roll!\n"
)


def meta(name: str = "p@h:gpu0", host: str = "h", sid: int = 100) -> ServerMeta:
    return ServerMeta(
        name=name,
        host=host,
        gpus=(0,),
        port=30000,
        preset="p",
        pid=sid,
        sid=sid,
        log_path="/l/a.log",
        launch_id="L1",
        started_at=1.0,
    )


def kinds(c: Changes) -> list[NoticeKind]:
    return [n.kind for n in c.notices]


def test_a_server_event_touches_its_host_and_itself() -> None:
    st = FleetState(["h", "other"])
    seen = st.apply(ServerSeen(meta(), 1.0))
    assert (seen.hosts, seen.servers, seen.urgent) == ({"h"}, {"p@h:gpu0"}, True)
    st.apply(LogData("p@h:gpu0", 1.2, "/l/a.log", 0, LOADING_THEN_READY[:70]))  # its log read while loading
    st.apply(HealthResult("p@h:gpu0", 1.5, "down"))  # still loading: refused
    health = st.apply(HealthResult("p@h:gpu0", 2.0, "ok"))
    assert (health.hosts, health.servers, health.urgent) == ({"h"}, {"p@h:gpu0"}, False)
    assert kinds(health) == [NoticeKind.READY]


def test_ready_is_news_only_when_it_happens_while_the_console_watches() -> None:
    """A server already up when the console looked (re-attach, another console's launch) is shown ready, not
    announced: 16 running servers gave 16 'is ready' toasts at every start. A launch is announced whenever."""
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    assert kinds(st.apply(HealthResult("p@h:gpu0", 2.0, "ok"))) == []  # the first answer ever: already up
    assert st.servers["p@h:gpu0"].phase is Phase.READY
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    assert (
        kinds(st.apply(LogData("p@h:gpu0", 2.0, "/l/a.log", 0, LOADING_THEN_READY))) == []
    )  # read from the log's start
    assert st.servers["p@h:gpu0"].phase is Phase.READY
    st = FleetState(["h"])  # watched while loading: the ready line arrives later in the file
    st.apply(ServerSeen(meta(), 1.0))
    st.apply(LogData("p@h:gpu0", 2.0, "/l/a.log", 0, LOADING_THEN_READY[:70]))
    assert kinds(st.apply(LogData("p@h:gpu0", 3.0, "/l/a.log", 70, LOADING_THEN_READY[70:]))) == [NoticeKind.READY]
    st = FleetState(["h"])  # launched by this console: told even when its log is first read whole
    st.apply(ServerSeen(meta(), 1.0))
    st.apply(ServerAction("p@h:gpu0", 1.0, "launch", True, "pid 1"))
    assert kinds(st.apply(LogData("p@h:gpu0", 2.0, "/l/a.log", 0, LOADING_THEN_READY))) == [NoticeKind.READY]


def test_a_removed_server_still_names_its_host() -> None:
    """The host is read before the server is gone from the state, so a screen need not redraw everything."""
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    c = st.apply(ServerRemoved("p@h:gpu0", 2.0))
    assert (c.hosts, c.servers, c.urgent) == ({"h"}, {"p@h:gpu0"}, True)
    assert "p@h:gpu0" not in st.servers


def test_an_event_about_an_unknown_server_touches_nothing() -> None:
    st = FleetState(["h"])
    c = st.apply(LogData("nobody@h:gpu0", 1.0, "/l/x.log", 0, b"x\n"))
    assert c.empty and c.hosts == frozenset()


def test_notice_kinds_for_every_told_fact() -> None:
    st = FleetState(["h"])
    st.apply(HostUp("h", 1.0))
    assert kinds(st.apply(HostDown("h", 2.0, "connection lost"))) == [NoticeKind.HOST_DOWN]
    assert kinds(st.apply(HostUp("h", 3.0))) == [NoticeKind.HOST_BACK]
    assert kinds(st.apply(TelemetryError("h", 4.0, "nvidia-smi hung"))) == [NoticeKind.TELEMETRY]
    st.apply(ServerSeen(meta(), 5.0))
    st.apply(LogData("p@h:gpu0", 5.5, "/l/a.log", 0, b"[2026-01-01 00:00:00] Load weight begin.\n"))
    assert kinds(st.apply(LogData("p@h:gpu0", 6.0, "/l/a.log", 41, READY_LOG))) == [NoticeKind.READY]
    crash = st.apply(ServerGone("p@h:gpu0", 7.0, exit_status=1))
    assert kinds(crash) == [NoticeKind.CRASHED] and crash.notices[0].host == "h"
    assert kinds(st.apply(ServerAlive("p@h:gpu0", 8.0))) == [NoticeKind.RUNNING_AGAIN]
    act = st.apply(ServerAction("p@h:gpu0", 9.0, "stop", True, "SIGTERM"))
    assert kinds(act) == [NoticeKind.ACTION] and act.notices[0].host == "h"
    assert kinds(st.apply(ServerGone("p@h:gpu0", 10.0))) == [NoticeKind.STOPPED]
    free = st.apply(Notice(11.0, "info", "hello", host="h"))
    assert kinds(free) == [NoticeKind.OTHER] and free.hosts == {"h"}


def test_streams_are_not_urgent_lifecycle_is() -> None:
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    gpu = st.apply(GpuSample("h", 2.0, (GpuReading(0, "GPU-a", memory_used_mib=1, memory_total_mib=2),)))
    assert (gpu.hosts, gpu.servers, gpu.urgent) == ({"h"}, frozenset(), False)
    procs = st.apply(ProcessSample("h", 3.0, (ComputeApp(100, "GPU-a", "python", 1),), ()))
    assert (procs.servers, procs.urgent) == ({"p@h:gpu0"}, False)  # its VRAM is recomputed
    assert st.apply(HostDown("h", 4.0, "cut")).urgent


def test_union_keeps_order_and_urgency() -> None:
    st = FleetState(["a", "b"])
    st.apply(ServerSeen(meta("x@a:gpu0", "a"), 1.0))
    st.apply(LogData("x@a:gpu0", 1.2, "/l/a.log", 0, LOADING_THEN_READY[:70]))
    parts = [
        st.apply(HealthResult("x@a:gpu0", 1.5, "down")),
        st.apply(HealthResult("x@a:gpu0", 2.0, "ok")),
        st.apply(HostUp("b", 3.0)),
        st.apply(HostDown("b", 4.0, "cut")),
    ]
    u = Changes.union(parts)
    assert u.hosts == {"a", "b"} and u.servers == {"x@a:gpu0"} and u.urgent
    assert kinds(u) == [NoticeKind.READY, NoticeKind.HOST_DOWN]
    assert (parts[1] | parts[2]).notices == parts[1].notices and not (parts[1] | parts[1]).urgent
    assert u.of_kind(NoticeKind.HOST_DOWN)[0].host == "b"
