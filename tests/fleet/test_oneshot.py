"""`status` in one round trip per host (console.fleet.oneshot): the answer's parser on real nvidia-smi and SGLang
output, the agent's `oneshot` mode run for real on this machine, and `status --json` over real sshd (one exec per
host after the connect, no stream, no forward)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.config import parse_fleet
from console.fleet import oneshot
from console.fleet.events import GpuSample, HealthResult, LogData, ProcessSample, ServerGone, ServerSeen, TelemetryError
from console.fleet.oneshot import look_once, oneshot_command, oneshot_events, parse_oneshot, parse_sections
from console.fleet.report import status_doc
from console.fleet.state import FleetState
from tests.fleet.conftest import preset_toml
from tests.fleet.test_cli import cli
from tests.samples import SAMPLES

SMI = SAMPLES / "nvidia-smi" / "h200-real"
LOGS = SAMPLES / "sglang-logs"
UUID = "GPU-4c23b9da-4dff-5472-7f9c-3d31521d0cd8"  # the H200 of the samples (query-gpu-busy.csv, compute-apps.csv)


def sect(name: str, data: bytes | str = b"", **head: Any) -> bytes:
    b = data.encode() if isinstance(data, str) else data
    return f"==> {name} {json.dumps({**head, 'n': len(b)})}\n".encode() + b + b"\n"


def meta(name: str, pid: int, sid: int, port: int, log: str, **kw: Any) -> str:
    return json.dumps(
        {
            "name": name,
            "host": "h200",
            "preset": "p",
            "gpus": [0],
            "port": port,
            "pid": pid,
            "sid": sid,
            "log_path": log,
            "argv": ["python3", "-m", "sglang.launch_server", "--port", str(port)],
            "launch_id": f"id-{pid}",
            "started_at": 1.0,
            **kw,
        }
    )


def answer(
    listing: str,
    *,
    logs: list[tuple[str, int, bytes]] = (),
    health: list[tuple[int, str, str]] = (),
    gpu: str | None = None,
    gpu_rc: int = 0,
    apps: str | None = None,
    end: bool = True,
) -> bytes:
    out = sect("listing", listing)
    for port, kind, what in health:
        out += sect("health", what, addr="127.0.0.1", port=port, kind=kind, ms=1.5)
    for path, off, data in logs:
        out += sect("log", data, path=path, offset=off)
    out += sect("gpu", (SMI / "query-gpu-busy.csv").read_text() if gpu is None else gpu, rc=gpu_rc, s=0.1)
    out += sect("apps", (SMI / "compute-apps.csv").read_text() if apps is None else apps, rc=0, s=0.1)
    return out + (b"==> end {}\n" if end else b"")


def apply(events: list, host: str = "h200") -> FleetState:
    from console.fleet.events import HostUp

    st = FleetState([host])
    st.apply(HostUp(host, time.time()))
    for e in events:
        st.apply(e)
    return st


# -- the answer, parsed (pure) ------------------------------------------------------------------------------
def test_sections_are_length_framed_so_a_log_line_that_looks_like_a_header_is_data() -> None:
    log = b'==> end {}\n==> gpu {"n": 3}\nplain\n'
    secs, ended = parse_sections(sect("log", log, path="/l", offset=0) + b"==> end {}\n")
    assert ended and [(s.name, s.data) for s in secs] == [("log", log)]
    secs, ended = parse_sections(sect("log", log, path="/l", offset=0)[:-5])  # cut short: nothing invented
    assert not ended and secs == []
    assert parse_sections(b"sh: 1: exec: /no/python3: not found\n") == ([], False)


def test_a_live_server_on_the_real_h200_samples_becomes_the_same_state_as_the_controller_builds() -> None:
    log = (LOGS / "24-docs-qwen25-05b-2025-08-startup-info.log").read_bytes()
    listing = (
        "==> meta\n" + meta("p@h200:gpu0", 421, 421, 30000, "/logs/p.log") + "\n"
        "==> hist\n" + json.dumps({"log_path": "/logs/p-old.log"}) + "\n"
        "==> ps\n421 1 421 python3 -m sglang.launch_server --port 30000\n"
        "430 421 421 sglang::scheduler_TP0\n"
    )
    shot = parse_oneshot(answer(listing, logs=[("/logs/p.log", 0, log)], health=[(30000, "http", "200")]))
    assert shot.complete and shot.gpu is not None and shot.gpu.rc == 0
    events = oneshot_events("h200", shot, 100.0)
    kinds = [type(e) for e in events]
    assert kinds == [GpuSample, ServerSeen, LogData, ProcessSample, HealthResult], kinds
    (sample,) = [e for e in events if isinstance(e, GpuSample)]
    assert [(g.index, g.name, g.memory_used_mib, g.memory_total_mib, g.utilization_pct) for g in sample.gpus] == [
        (0, "NVIDIA H200", 21491, 143771, 100)
    ]
    doc = status_doc(apply(events), now=100.5)
    (h,) = doc["hosts"]
    assert (h["state"], h["age_s"], h["telemetry_error"]) == ("up", 0.5, None)
    (g,) = h["gpus"]
    assert g["server"] == "p@h200:gpu0" and g["processes"] == [
        {"pid": 421, "used_mib": 21482, "name": "python3", "server": "p@h200:gpu0"}
    ]
    (s,) = doc["servers"]
    assert (s["phase"], s["health"], s["alive"], s["memory_mib"], s["gen_throughput"]) == (
        "serving",
        "ok",
        True,
        21482,
        5.7,
    )
    assert s["previous_logs"] == ["/logs/p-old.log"]


def test_a_dead_server_is_found_ended_with_its_crash_cause() -> None:
    log = (LOGS / "20-crash-runtime-cuda-oom-overlap-thread.log").read_bytes()
    listing = "==> meta\n" + meta("p@h200:gpu0", 999, 999, 30000, "/logs/p.log") + "\n==> ps\n"
    events = oneshot_events("h200", parse_oneshot(answer(listing, logs=[("/logs/p.log", 0, log)], apps="")), 1.0)
    assert [type(e) for e in events] == [GpuSample, ServerSeen, LogData, ServerGone, ProcessSample]
    assert next(e for e in events if isinstance(e, ServerGone)).found_ended
    (s,) = status_doc(apply(events))["servers"]
    assert (s["phase"], s["alive"], s["health"], s["cause"]) == ("crashed", False, None, "cuda_oom_runtime")


def test_a_log_read_as_head_and_tail_keeps_the_phase_and_the_newest_figures() -> None:
    head = (LOGS / "01-docs-llama31-8b-2024-11-startup.log").read_bytes()
    tail = (LOGS / "08-prefill-decode-http-interleaved-2026-04.log").read_bytes()
    listing = (
        "==> meta\n" + meta("p@h200:gpu0", 421, 421, 30000, "/l") + "\n==> ps\n"
        "421 1 421 python3 -m sglang.launch_server --port 30000\n"
    )
    events = oneshot_events(
        "h200",
        parse_oneshot(answer(listing, logs=[("/l", 0, head), ("/l", 10**7, tail)], health=[(30000, "http", "200")])),
        1.0,
    )
    st = apply(events)
    (s,) = status_doc(st, now=1.0)["servers"]
    assert s["phase"] == "serving" and s["gen_throughput"] == 1635.1
    assert st.servers["p@h200:gpu0"].log.gaps == 1


def test_an_external_server_is_found_on_the_gpu_its_session_holds() -> None:
    listing = "==> ps\n421 1 421 python3 -m sglang.launch_server --model-path /m --port 31000\n"
    events = oneshot_events("h200", parse_oneshot(answer(listing, health=[(31000, "http", "503")])), 1.0)
    doc = status_doc(apply(events))
    (s,) = doc["servers"]
    assert (s["name"], s["managed"], s["gpus"], s["health"], s["memory_mib"]) == (
        "external@h200:31000",
        False,
        [0],
        "warming",
        21482,
    )
    assert doc["hosts"][0]["gpus"][0]["server"] == "external@h200:31000"
    shared = oneshot_events("h200", parse_oneshot(answer(listing, apps="")), 1.0, shares_process_table=True)
    assert not any(isinstance(e, ServerSeen) for e in shared)  # another local host's server, holding no GPU here


@pytest.mark.parametrize(
    ("kind", "what", "status", "detail"),
    [
        ("http", "200", "ok", "HTTP 200"),
        ("http", "503", "warming", "HTTP 503"),
        ("http", "401", "unauthorized", "HTTP 401"),
        ("http", "500", "error", "HTTP 500"),
        ("down", "ConnectError", "down", "ConnectError"),
        ("timeout", "0", "error", "no complete answer within 5 s"),
        ("big", "200", "error", "/health larger than 64 KiB; refused"),
    ],
)
def test_health_answers_read_as_the_controller_words_them(kind: str, what: str, status: str, detail: str) -> None:
    from console.fleet.oneshot import HealthAnswer, health_result

    r = health_result("s", HealthAnswer("127.0.0.1", 1, kind, what, 2.0), 1.0)
    assert (r.status, r.detail) == (status, detail)


def test_the_health_limits_are_the_controllers() -> None:
    from console.sglang import httpbound
    from console.sglang.httpbound import BodyTooLarge

    assert (oneshot.HEALTH_DEADLINE_S, oneshot.HEALTH_MAX_BYTES) == (
        httpbound.HEALTH_DEADLINE_S,
        httpbound.HEALTH_MAX_BYTES,
    )
    assert str(BodyTooLarge("/health", httpbound.HEALTH_MAX_BYTES)) == "/health larger than 64 KiB; refused"


@pytest.mark.parametrize(
    ("gpu", "rc", "message"),
    [
        ("sh: 1: nvidia-smi: not found\n", 127, "nvidia-smi exited without a sample: sh: 1: nvidia-smi: not found"),
        ("", 124, "nvidia-smi hung: no sample for 4 s"),
        ((SMI / "query-bad-field.txt").read_text(), 2, None),
        (
            "\x00\x01 binary noise\n",
            0,
            "nvidia-smi printed garbage, no sample could be read: '\\x00\\x01 binary noise'",
        ),
    ],
)
def test_nvidia_smi_failures_are_the_telemetry_errors_the_stream_tells(gpu: str, rc: int, message: str | None) -> None:
    events = oneshot_events("h200", parse_oneshot(answer("==> ps\n", gpu=gpu, gpu_rc=rc, apps="")), 1.0)
    assert not any(isinstance(e, GpuSample) for e in events)
    errs = [e.message for e in events if isinstance(e, TelemetryError)]
    assert errs and errs[-1].startswith("nvidia-smi "), errs
    if message is not None:
        assert errs[-1] == message
    h = status_doc(apply(events))["hosts"][0]
    assert h["gpus"] == [] and h["telemetry_error"] == errs[-1] and h["age_s"] is None


def test_an_answer_without_its_end_is_not_complete() -> None:
    assert not parse_oneshot(answer("==> ps\n", end=False)).complete
    assert not parse_oneshot(b"").complete


# -- the agent's oneshot mode, run for real on this machine -------------------------------------------------
class _Health(http.server.BaseHTTPRequestHandler):
    code = 200
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(self.code)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a: object) -> None:
        pass


def _serve(code: int, body: bytes = b"{}") -> http.server.ThreadingHTTPServer:
    handler = type("H", (_Health,), {"code": code, "body": body})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fake_procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for p in made:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _fake_server(port: int, made: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A process whose command line is an SGLang server's (its own session, as a launch makes one)."""
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m", "sglang.launch_server", "--port", str(port)],
        start_new_session=True,
    )
    made.append(p)
    return p


def test_the_agent_oneshot_mode_on_this_machine(
    tmp_path: Path, fake_procs: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real /proc, real meta.json and logs, a stand-in nvidia-smi on PATH, /health of real HTTP servers: 200, 503,
    a body over the cap, and a port nobody listens on; a long log arrives as head and tail on whole lines."""
    monkeypatch.setattr(oneshot, "LIVE_HEAD", 4096)
    monkeypatch.setattr(oneshot, "LIVE_TAIL", 2048)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\ncase "$1" in --query-gpu*) cat {SMI / "query-gpu-busy.csv"};; '
        f"*) cat {SMI / 'compute-apps.csv'};; esac\n"
    )
    smi.chmod(0o755)
    ok, warm, big = _serve(200), _serve(503), _serve(200, b"x" * (oneshot.HEALTH_MAX_BYTES + 1))
    closed = _free_port()
    run = tmp_path / "run"
    servers = {}
    for name, port in (
        ("ok", ok.server_port),
        ("warm", warm.server_port),
        ("big", big.server_port),
        ("closed", closed),
    ):
        p = _fake_server(port, fake_procs)
        d = run / "servers" / name
        d.mkdir(parents=True)
        log = tmp_path / f"{name}.log"
        servers[name] = (p, log)
        (d / "meta.json").write_text(meta(f"{name}@box:gpu0", p.pid, p.pid, port, str(log), host="box"))
    long_log = b"".join(b"line %06d of a long log\n" % i for i in range(2000))
    servers["ok"][1].write_bytes(long_log)
    for name in ("warm", "big", "closed"):
        servers[name][1].write_bytes((LOGS / "01-docs-llama31-8b-2024-11-startup.log").read_bytes())
    dead = run / "servers" / "dead"
    dead.mkdir()
    (dead / "meta.json").write_text(
        meta("dead@box:gpu0", 2**22 + 7, 2**22 + 7, closed, str(tmp_path / "dead.log"), host="box")
    )
    (tmp_path / "dead.log").write_bytes((LOGS / "20-crash-runtime-cuda-oom-overlap-thread.log").read_bytes())
    fleet = parse_fleet(
        f'[hosts.box]\ntransport = "local"\npython = "{sys.executable}"\nrun_dir = "{run}"\n'
        f'env = {{ PATH = "{bin_}:/usr/bin:/bin" }}\n',
        "t.toml",
    )
    try:
        r = subprocess.run(["/bin/sh", "-c", oneshot_command(fleet.hosts["box"])], capture_output=True, timeout=60)
    finally:
        for s in (ok, warm, big):
            s.shutdown()
    assert r.returncode == 0, r.stderr
    shot = parse_oneshot(r.stdout)
    assert shot.complete and shot.gpu is not None and shot.gpu.rc == 0
    pieces = [(off, data) for path, off, data in shot.logs if path == str(servers["ok"][1])]
    assert len(pieces) == 2 and pieces[0][0] == 0 and pieces[1][0] > len(pieces[0][1])
    (_, d0), (h1, d1) = pieces
    assert long_log.startswith(d0) and d0.endswith(b"\n") and long_log.endswith(d1) and long_log[h1:] == d1
    assert long_log[h1 - 1 : h1] == b"\n"  # the tail starts on a whole line
    events = oneshot_events("box", shot, time.time())
    health = {e.server: e.status for e in events if isinstance(e, HealthResult)}
    assert {k: v for k, v in health.items() if "@box:gpu0" in k and not k.startswith("external")} == {
        "ok@box:gpu0": "ok",
        "warm@box:gpu0": "warming",
        "big@box:gpu0": "error",
        "closed@box:gpu0": "down",
    }
    doc = status_doc(apply(events, "box"))
    by = {s["name"]: s for s in doc["servers"]}
    assert by["dead@box:gpu0"]["phase"] == "crashed" and by["dead@box:gpu0"]["cause"] == "cuda_oom_runtime"
    assert by["ok@box:gpu0"]["pid"] == servers["ok"][0].pid and by["ok@box:gpu0"]["alive"]
    assert doc["hosts"][0]["gpus"][0]["name"] == "NVIDIA H200"


# -- status over real sshd: one exec per host -----------------------------------------------------------------
class Counting:
    """A transport that counts what is asked of it."""

    def __init__(self, inner: Any, counts: dict[str, int]) -> None:
        self._inner, self.counts = inner, counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def connect(self) -> None:
        await self._inner.connect()
        self.counts["connect"] += 1

    async def run(self, command: str, **kw: Any) -> Any:
        self.counts["run"] += 1
        return await self._inner.run(command, **kw)

    async def stream(self, command: str) -> Any:
        self.counts["stream"] += 1
        return await self._inner.stream(command)

    async def forward_local(self, host: str, port: int) -> int:
        self.counts["forward"] += 1
        return await self._inner.forward_local(host, port)


def test_status_over_sshd_is_one_exec_per_host(sim_ssh, ssh_host_factory, tmp_path: Path) -> None:
    import asyncio

    from console.config import load_fleet
    from console.transport import make_transport

    h = sim_ssh("onehost")
    nopy = sim_ssh("nopy")
    gone = ssh_host_factory("gonehost", kind="refusing")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("[console]\npoll_ms = 500\n" + h.section() + preset_toml("small", h, [1], 30040))
    r = cli(hosts, "launch", "small", "--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    hosts.write_text(
        "[console]\npoll_ms = 500\n"
        + h.section()
        + preset_toml("small", h, [1], 30040)
        + nopy.section().replace(f'python = "{nopy.dir}/venv/bin/python3"', 'python = "/no/such/python3"')
        + gone.hosts_toml_section("gonehost")
    )
    name = "small@onehost:gpu1"

    r = cli(hosts, "status", "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "dflash-console/status/1"
    by = {x["name"]: x for x in doc["hosts"]}
    one = by["onehost"]
    assert one["state"] == "up" and one["age_s"] is not None and one["error"] is None and len(one["gpus"]) >= 2
    g1 = next(g for g in one["gpus"] if g["index"] == 1)
    assert g1["server"] == name and g1["memory_used_mib"] > 0 and g1["processes"]
    (srv,) = [s for s in doc["servers"] if s["host"] == "onehost"]
    assert (srv["name"], srv["health"], srv["alive"]) == (name, "ok", True)
    assert srv["phase"] in ("ready", "serving") and srv["memory_mib"] > 0
    assert by["nopy"]["state"] == "up" and by["nopy"]["gpus"]  # no Python there: the controller's look instead
    assert by["gonehost"]["state"] == "down" and "gonehost" in by["gonehost"]["error"]
    human = cli(hosts, "status")
    assert human.returncode == 3 and "gonehost  down" in human.stdout and name in human.stdout

    counts = {h: {"connect": 0, "run": 0, "stream": 0, "forward": 0} for h in ("onehost", "nopy", "gonehost")}
    fleet = load_fleet(str(hosts))
    found = asyncio.run(
        look_once(
            fleet, 6.0, factory=lambda n, host, hook: Counting(make_transport(n, host, on_command=hook), counts[n])
        )
    )
    state, fallback = found.state, found.fallback
    assert fallback == ["nopy"]
    assert counts["onehost"] == {"connect": 1, "run": 1, "stream": 0, "forward": 0}
    assert counts["gonehost"]["run"] == 0 and state.hosts["gonehost"].conn == "down"
    assert state.servers[name].health == "ok"


class _FakeTransport:
    """Connects, then its one exec fails (a wedged host) or answers what it is given."""

    def __init__(self, stdout: str | None) -> None:
        self.stdout, self.closed = stdout, False

    async def connect(self) -> None:
        pass

    async def run(self, command: str, **kw: Any) -> Any:
        from console.transport.base import CommandResult, TransportError

        if self.stdout is None:
            raise TransportError("box", "timed out after 19s", command)
        return CommandResult("box", command, 127, self.stdout, "", 0.1)

    async def close(self) -> None:
        self.closed = True


async def test_a_failed_exec_names_host_and_command_and_no_python_asks_for_the_fallback() -> None:
    fleet = parse_fleet('[hosts.box]\ntransport = "local"\npython = "/opt/venv/bin/python3"\n', "t.toml")
    made: list[_FakeTransport] = []

    def factory(stdout: str | None) -> Any:
        def make(n: str, h: Any, hook: Any) -> _FakeTransport:
            made.append(_FakeTransport(stdout))
            return made[-1]

        return make

    found = await look_once(fleet, 5.0, factory=factory(None))
    h = found.state.hosts["box"]
    assert found.fallback == [] and h.conn == "down"
    assert h.last_error == "box: `/opt/venv/bin/python3 -c <agent> oneshot`: timed out after 19s"
    found = await look_once(fleet, 5.0, factory=factory(""))  # sh: exec: python3: not found
    assert found.fallback == ["box"] and found.state.hosts["box"].conn == "up"
    assert all(t.closed for t in made)
