"""FleetState reducer (pure): hosts, GPU samples, session joins, servers, logs, health, notices."""

from __future__ import annotations

from console.fleet.events import (
    GpuSample,
    HealthResult,
    HostConnecting,
    HostDown,
    HostUp,
    LogData,
    NoticeKind,
    ProcessSample,
    ProcInfo,
    ServerAction,
    ServerAlive,
    ServerGone,
    ServerMeta,
    ServerSeen,
    TelemetryError,
)
from console.fleet.state import FleetState
from console.gpu.readings import ComputeApp, GpuReading
from tests.samples import SAMPLES

U0, U1 = "GPU-aaaa", "GPU-bbbb"


def meta(name="p@h:gpu0-1", gpus=(0, 1), sid=100, launch_id="L1", log="/l/a.log", **kw) -> ServerMeta:
    return ServerMeta(
        name=name,
        host="h",
        gpus=gpus,
        port=30000,
        preset="p",
        pid=sid,
        sid=sid,
        log_path=log,
        launch_id=launch_id,
        started_at=1.0,
        **kw,
    )


LOADING = b"[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=78.00 GB, mem usage=0.00 GB.\n"


def sample(used=(10, 20)) -> GpuSample:
    return GpuSample(
        "h",
        10.0,
        (
            GpuReading(0, U0, "H200", memory_used_mib=used[0], memory_total_mib=143771),
            GpuReading(1, U1, "H200", memory_used_mib=used[1], memory_total_mib=143771),
        ),
    )


def test_host_lifecycle_and_notices():
    st = FleetState(["h"])
    assert st.hosts["h"].conn == "connecting"
    assert st.apply(HostConnecting("h", 1.0)).notices == ()
    assert st.apply(HostUp("h", 2.0)).notices == ()  # first up: no "back" toast
    n = st.apply(HostDown("h", 3.0, "connection lost", 0.5)).notices
    assert n[0].level == "error" and "connection lost" in n[0].message and n[0].kind is NoticeKind.HOST_DOWN
    h = st.hosts["h"]
    assert (h.conn, h.since, h.last_error) == ("down", 3.0, "connection lost")
    st.apply(HostConnecting("h", 3.6, attempt=2))
    assert h.since == 3.0 and h.conn == "connecting"  # still counting from when it went down
    assert st.apply(HostDown("h", 4.0, "refused")).notices == ()  # no repeated toast while down
    n = st.apply(HostUp("h", 5.0)).notices
    assert "back" in n[0].message and h.last_error is None and n[0].kind is NoticeKind.HOST_BACK


def test_gpu_ages_and_staleness():
    st = FleetState(["h"])
    h = st.hosts["h"]
    assert h.age_s(100.0) is None and h.stale(100.0)
    st.apply(HostUp("h", 9.0))
    st.apply(sample())
    assert h.gpus[1].reading.memory_used_mib == 20
    assert h.age_s(12.0) == 2.0 and not h.stale(12.0) and h.stale(16.0)
    n = st.apply(TelemetryError("h", 11.0, "nvidia-smi hung")).notices
    assert n and h.telemetry_error == "nvidia-smi hung"
    assert st.apply(TelemetryError("h", 12.0, "nvidia-smi hung")).notices == ()
    st.apply(sample())
    assert h.telemetry_error is None


def test_every_tp_rank_counts_for_its_server_by_session():
    st = FleetState(["h"])
    st.apply(sample())
    st.apply(ServerSeen(meta(), 1.0))
    procs = (
        ProcInfo(100, 1, 100, "python -m sglang.launch_server"),
        ProcInfo(101, 100, 100, "sglang::scheduler_TP0"),
        ProcInfo(102, 100, 100, "sglang::scheduler_TP1"),
        ProcInfo(555, 1, 555, "other"),
    )
    apps = (ComputeApp(101, U0, "python", 30000), ComputeApp(102, U1, "python", 31000), ComputeApp(555, U1, "x", 500))
    st.apply(ProcessSample("h", 11.0, apps, procs))
    s = st.servers["p@h:gpu0-1"]
    assert s.memory_mib == 61000
    g1 = st.hosts["h"].gpus[1]
    assert [(p.pid, p.server) for p in g1.processes] == [(102, "p@h:gpu0-1"), (555, None)]
    assert st.server_on_gpu("h", 1) is s and st.live_owner("h", 0) is s


def test_log_offsets_dedupe_and_gaps():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    s = st.servers["p@h:gpu0-1"]
    st.apply(LogData(s.name, 2.0, "/l/a.log", 0, b"one\ntw"))
    st.apply(LogData(s.name, 2.0, "/l/a.log", 0, b"one\ntwo\n"))  # a resumed tail re-sent bytes
    st.apply(LogData(s.name, 2.0, "/l/a.log", 8, b"three\n"))
    st.apply(LogData(s.name, 2.0, "/l/other.log", 0, b"not mine\n"))  # an old file's bytes are ignored
    assert list(s.log.lines) == ["one", "two", "three"] and s.log_offset == 14 and s.log.gaps == 0
    st.apply(LogData(s.name, 2.0, "/l/a.log", 20, b"four\n"))
    assert s.log.gaps == 1 and list(s.log.lines)[-1] == "four"


def test_crash_then_relaunch_keeps_previous_log():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    n = st.apply(ServerGone("p@h:gpu0-1", 5.0, exit_status=137)).notices
    s = st.servers["p@h:gpu0-1"]
    assert s.phase == "crashed" and not s.alive and "crashed" in n[0].message
    st.apply(ServerSeen(meta(launch_id="L2", log="/l/b.log", sid=200), 6.0))
    s2 = st.servers["p@h:gpu0-1"]
    assert s2 is not s and s2.alive and s2.previous_logs == ["/l/a.log"] and s2.meta.log_path == "/l/b.log"


def test_stop_is_stopped_not_crashed():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    st.apply(ServerAction("p@h:gpu0-1", 2.0, "stop", True, "SIGTERM"))
    n = st.apply(ServerGone("p@h:gpu0-1", 3.0)).notices
    assert st.servers["p@h:gpu0-1"].phase == "stopped" and "stopped" in n[0].message


def test_health_confirms_ready_once():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    s = st.servers["p@h:gpu0-1"]
    st.apply(LogData(s.name, 1.5, "/l/a.log", 0, LOADING))  # watched while loading (its log is read from the start)
    assert st.apply(HealthResult(s.name, 2.0, "down")).notices == () and s.phase.starting
    n = st.apply(HealthResult(s.name, 3.0, "ok")).notices
    assert s.phase == "ready" and s.ready_confirmed and "ready" in n[0].message
    assert st.apply(HealthResult(s.name, 4.0, "ok")).notices == ()


def test_same_launch_seen_again_updates_meta_only():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    s = st.servers["p@h:gpu0-1"]
    st.apply(LogData(s.name, 2.0, "/l/a.log", 0, b"x\n"))
    st.apply(ServerSeen(meta(gpus=(0, 1, 2)), 3.0))
    assert st.servers["p@h:gpu0-1"] is s and s.meta.gpus == (0, 1, 2) and s.log.line_count == 1


def test_ready_and_crash_are_toasted_once():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    s = st.servers["p@h:gpu0-1"]
    st.apply(LogData(s.name, 1.2, "/l/a.log", 0, LOADING))
    st.apply(HealthResult(s.name, 1.5, "down"))  # loading: refused
    assert [n.message for n in st.apply(HealthResult(s.name, 2.0, "ok")).notices] == ["p@h:gpu0-1 is ready"]
    st.apply(LogData(s.name, 3.0, "/l/a.log", 0, b"[2026-01-01 00:00:00] The server is fired up and ready to roll!\n"))
    assert st.apply(HealthResult(s.name, 4.0, "ok")).notices == ()
    n1 = st.apply(ServerGone(s.name, 5.0, exit_status=137)).notices
    assert len(n1) == 1 and "crashed" in n1[0].message


def test_previous_logs_carried_by_reattach():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0, previous_logs=("/l/0.log",)))
    assert st.servers["p@h:gpu0-1"].previous_logs == ["/l/0.log"]
    st.apply(ServerSeen(meta(launch_id="L2", log="/l/b.log"), 2.0))
    assert st.servers["p@h:gpu0-1"].previous_logs == ["/l/0.log", "/l/a.log"]


OOM_LOG = (SAMPLES / "sglang-logs" / "14-crash-oom-tp2-3090-piecewise-graph-begin.log").read_bytes()


def test_crash_is_told_at_the_end_not_from_a_log_still_being_written():
    """13.2: a traceback seen while the process lives is not toasted (its last lines may still come); the end is,
    with the diagnosis of every line read, the pane's."""
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    s = st.servers["p@h:gpu0-1"]
    assert st.apply(LogData(s.name, 2.0, "/l/a.log", 0, OOM_LOG)).notices == ()
    assert s.phase == "crashed" and s.alive
    n = st.apply(ServerGone(s.name, 3.0)).notices
    assert [x.message for x in n] == [f"{s.name} crashed: {s.log.diagnosis.summary}"]
    assert "out of memory" in n[0].message.lower()


def test_vanished_end_never_says_exit_status_none():
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    st.apply(LogData("p@h:gpu0-1", 2.0, "/l/a.log", 0, OOM_LOG[:120]))
    st.apply(ServerGone("p@h:gpu0-1", 3.0))
    d = st.servers["p@h:gpu0-1"].log.diagnosis
    assert d is not None and "None" not in f"{d.summary} {d.error_line}", d


def test_ended_server_keeps_no_live_health():
    """13.3: after the end nothing answers: health is cleared and late answers are dropped."""
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    st.apply(HealthResult("p@h:gpu0-1", 2.0, "ok"))
    st.apply(ServerGone("p@h:gpu0-1", 3.0))
    st.apply(HealthResult("p@h:gpu0-1", 3.1, "ok"))  # was in flight when it ended
    s = st.servers["p@h:gpu0-1"]
    assert s.health is None and s.last_health_at == 2.0 and s.phase == "crashed"


def test_server_alive_again_is_un_ended_and_its_log_re_read():
    """13.1: a server called ended whose process is seen again is running, not crashed; its log model starts
    over from a re-read at byte 0 (tail chunks before it are dropped, they are in the re-read)."""
    st = FleetState(["h"])
    st.apply(ServerSeen(meta(), 1.0))
    s = st.servers["p@h:gpu0-1"]
    st.apply(LogData(s.name, 2.0, "/l/a.log", 0, b"[2026-01-01 00:00:00] a\n"))
    st.apply(ServerGone(s.name, 3.0))
    assert s.phase == "crashed"
    n = st.apply(ServerAlive(s.name, 4.0)).notices
    assert s.alive and s.ended_at is None and s.phase == "launching" and "running" in n[0].message
    st.apply(LogData(s.name, 4.1, "/l/a.log", 24, b"[2026-01-01 00:00:01] late\n"))
    assert s.log.line_count == 0
    st.apply(LogData(s.name, 4.2, "/l/a.log", 0, b"[2026-01-01 00:00:00] a\n[2026-01-01 00:00:01] late\n"))
    assert s.log.line_count == 2 and s.log_offset == 51 and s.log.gaps == 0
    assert len(st.apply(ServerGone(s.name, 5.0)).notices) == 1  # a later real end is told again
