"""`status` looks at routers in its one round trip per host: the agent runs the router's status script, reads its
log's end and asks /health, /workers and /metrics on the host; router_views folds that as the manager's refresh
folds its own calls (console.router.look). Pure folds on crafted answers, then the agent for real on this machine
against a real process and a real HTTP server standing in for the router."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.config import Fleet, parse_fleet
from console.fleet.oneshot import look_once, oneshot_command, parse_oneshot
from console.router import look
from console.router.look import router_config, router_views
from console.router.state import RouterView
from tests.fleet.test_oneshot import Counting, _free_port, sect

METRICS = (
    'smg_router_requests_total{endpoint="chat"} 10\n'
    'smg_worker_cb_outcomes_total{worker="http://127.0.0.1:31000",outcome="success"} 7\n'
    "smg_http_connections_active 2\n"
)


def fleet_with_router(
    run_dir: Path,
    port: int = 30080,
    metrics_port: int | None = None,
    python: str = "/opt/venv/bin/python3",
    where: str = 'transport = "local"',
) -> Fleet:
    return parse_fleet(
        f'[hosts.box]\n{where}\npython = "{python}"\nrun_dir = "{run_dir}"\n\n'
        f'[presets.gen]\nhost = "box"\ngpus = [0, 1]\ntp = 1\nport = 31000\nmodel = "/m"\n\n'
        f'[routers.lb]\nhost = "box"\npresets = ["gen"]\nport = {port}\n'
        f"metrics_port = {metrics_port or port + 1}\n",
        "t.toml",
    )


def shot_of(**parts: tuple[str, int | None, str]) -> bytes:
    out = b""
    for part, (kind, status, text) in parts.items():
        out += sect("router", text, router="lb", part=part, kind=kind, status=status, ms=1.0)
    return out + b"==> end {}\n"


def view(fleet: Fleet, data: bytes) -> RouterView:
    return router_views(fleet, "box", parse_oneshot(data), 100.0, 5.0)["lb"]


RUNNING = 'pid 4242\nproc Sl sglang::router --port 30080\nmeta\n{"log_path": "/l/router-lb.log", "started_at": 1.5}\n'
WORKERS = json.dumps(
    {
        "workers": [
            {"id": "w1", "url": "http://127.0.0.1:31000", "is_healthy": True, "load": 0},
            {"id": "w2", "url": "http://127.0.0.1:31001", "is_healthy": False},
        ]
    }
)


def test_router_views_fold_each_outcome_as_the_manager_does(tmp_path: Path) -> None:
    f = fleet_with_router(tmp_path)
    v = view(f, shot_of(proc=("proc", None, 'none\nmeta\n{"log_path": "/l/old.log"}\n')))
    assert (v.phase, v.pid, v.log_path, v.error) == ("stopped", None, "/l/old.log", None)

    v = view(
        f,
        shot_of(
            proc=("proc", None, 'pid 4242\nmeta\n{"log_path": "/l/r.log"}\n'),
            log=("log", None, "Traceback\nModuleNotFoundError: No module named 'sglang_router'\n"),
        ),
    )
    assert v.phase == "crashed" and "sglang-router is not installed for /opt/venv/bin/python3 on box" in v.error

    v = view(f, shot_of(proc=("proc", None, RUNNING), health=("down", None, "ConnectError")))
    assert (v.phase, v.pid, v.error) == ("starting", 4242, "ConnectError")
    v = view(f, shot_of(proc=("proc", None, RUNNING), health=("http", 503, "")))
    assert (v.phase, v.error) == ("starting", "/health HTTP 503")
    v = view(f, shot_of(proc=("proc", None, RUNNING), health=("timeout", None, "0")))
    assert v.phase == "starting" and "no complete answer within 5 s" in v.error
    v = view(f, shot_of(proc=("proc", None, RUNNING), health=("http", 200, "{}"), workers=("http", 500, "oops")))
    assert (v.phase, v.error) == ("starting", "router /workers: HTTP 500")

    v = view(
        f,
        shot_of(
            proc=("proc", None, RUNNING),
            health=("http", 200, "{}"),
            workers=("http", 200, WORKERS),
            metrics=("http", 200, METRICS),
        ),
    )
    assert (v.phase, v.pid, v.started_at, v.log_path, v.error) == ("running", 4242, 1.5, "/l/router-lb.log", None)
    assert [(w.url, w.healthy, w.load) for w in v.workers] == [
        ("http://127.0.0.1:31000", True, 0),
        ("http://127.0.0.1:31001", False, None),
    ]
    assert v.counters is not None and v.counters.requests == 10 and v.rps is None  # one read: no rate yet

    v = view(
        f,
        shot_of(
            proc=("proc", None, RUNNING),
            health=("http", 200, "{}"),
            workers=("http", 200, "[not json"),
            metrics=("down", None, "ConnectError"),
        ),
    )
    assert v.phase == "starting" and v.error.startswith("ValueError")
    v = view(f, shot_of())  # the status script printed nothing: not called stopped
    assert v.phase == "unknown" and "printed nothing" in v.error


class _Router(http.server.BaseHTTPRequestHandler):
    """/health, /workers and /metrics as sglang-router 0.3 answers them."""

    def do_GET(self) -> None:
        body = {"/health": b"OK", "/workers": WORKERS.encode(), "/metrics": METRICS.encode()}.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture
def router_http() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Router)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_port
    srv.shutdown()


def test_the_agent_looks_at_a_router_on_this_machine_in_the_one_exec(tmp_path: Path, router_http: int) -> None:
    """A real process named as the router, in its own session, with the pid file and meta.json a start writes; its
    API answered by a real HTTP server (the metrics on a second port). Running, then crashed with why, then stopped:
    each from one exec of the agent, and `look_once` asks nothing more of the host than that exec."""
    metrics = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Router)
    threading.Thread(target=metrics.serve_forever, daemon=True).start()
    run = tmp_path / "run"
    state = run / "routers" / "lb"
    state.mkdir(parents=True)
    log = tmp_path / "router-lb.log"
    log.write_text("2026-12-06 INFO sglang_router starting\nError: Address already in use (os error 98)\n")
    # a command line longer than 80 columns, as a router's from a deep venv is: ps must not cut it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            "--model-dir=/" + "x" * 90,
            "-m",
            "sglang_router.launch_router",
        ],
        start_new_session=True,
    )
    try:
        (state / "pid").write_text(f"{proc.pid}\n")
        (state / "meta.json").write_text(json.dumps({"name": "lb", "log_path": str(log), "started_at": 7.0}))
        f = fleet_with_router(run, router_http, metrics.server_port, sys.executable)

        seen: list[object] = []  # the status script's output, for a failure's message

        def once() -> RouterView:
            r = subprocess.run(
                ["/bin/sh", "-c", oneshot_command(f.hosts["box"], routers=router_config(f, "box"))],
                capture_output=True,
                timeout=60,
            )
            assert r.returncode == 0, r.stderr
            shot = parse_oneshot(r.stdout)
            assert shot.complete
            seen[:] = [shot.routers.get("lb", {}).get("proc")]
            return router_views(f, "box", shot, time.time(), time.monotonic())["lb"]

        v = once()
        assert proc.poll() is None, f"the stand-in router exited: {proc.returncode}"
        assert (v.phase, v.pid, v.started_at, v.log_path) == ("running", proc.pid, 7.0, str(log)), (v, seen)
        assert len(v.workers) == 2 and v.counters is not None and v.counters.requests == 10

        counts = {"connect": 0, "run": 0, "stream": 0, "forward": 0}
        from console.transport import make_transport

        found = asyncio.run(
            look_once(
                f,
                10.0,
                factory=lambda n, h, hook: Counting(make_transport(n, h, on_command=hook), counts),
                routers=lambda h: router_config(f, h),
            )
        )
        assert look.routers_of(f, found)["lb"].phase == "running" and found.fallback == []
        assert counts == {"connect": 1, "run": 1, "stream": 0, "forward": 0}
        assert look.replica_of(f, found.state.servers, "lb", "http://127.0.0.1:31000") is None  # no replica runs

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        v = once()
        assert v.phase == "crashed" and v.error == f"port {router_http} is already in use on box", v

        (state / "pid").unlink()
        v = once()
        assert (v.phase, v.pid, v.log_path) == ("stopped", None, str(log))
    finally:
        metrics.shutdown()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_router_whose_host_is_down_says_so(tmp_path: Path) -> None:
    f = fleet_with_router(tmp_path, where=f'address = "127.0.0.1"\nport = {_free_port()}\nuser = "nobody"')
    found = asyncio.run(look_once(f, 2.0, routers=lambda h: router_config(f, h)))
    v = look.routers_of(f, found)["lb"]
    assert v.phase == "unknown" and v.error == "host box is not connected"
    assert found.state.hosts["box"].conn != "up"


def test_a_running_router_whose_health_is_not_200_is_starting_again() -> None:
    """As the manager's refresh always said: /health answering 503 is not running, whatever the router was."""
    v = RouterView("lb", "box", 30080, "round_robin", phase="running", pid=1)
    assert (look.not_ready(v, 503, 1.0).phase, look.not_ready(v, 503, 1.0).error) == ("starting", "/health HTTP 503")
    assert look.unanswered(v, "ConnectError", 1.0).phase == "running"  # a failed read alone keeps what it was
