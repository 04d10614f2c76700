"""Router spec -> the exact remote commands that start, check and stop SGLang's router (pure, shlex-quoted).

The router is started like a server: `setsid nohup … > LOG 2>&1 < /dev/null &`, in its own session so a
stop signals every process it has, with its pid and meta.json under `{run_dir}/routers/NAME/`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from console.config import Fleet, Host
from console.router.spec import RouterSpec
from console.sglang.command import expand_replicas, shell_path

ROUTER_MODULE = "sglang_router.launch_router"
STOP_GRACE_S = 10
_LOOPBACK_BINDS = ("0.0.0.0", "::", "", "localhost", "127.0.0.1")


@dataclass(frozen=True)
class RouterPlan:
    """One start of a router: its argv, log and state dir, and the command a person could paste."""

    name: str
    host: str
    port: int
    metrics_port: int
    workers: tuple[str, ...]
    argv: tuple[str, ...]
    log_path: str
    state_dir: str
    command: str
    """`mkdir -p … && setsid nohup PY -m sglang_router.launch_router … > LOG 2>&1 < /dev/null & echo $!`."""


def worker_url(bind: str, port: int) -> str:
    """How a router on the replica's own host reaches it: loopback unless the server is bound to one address."""
    addr = "127.0.0.1" if bind in _LOOPBACK_BINDS else bind
    return f"http://[{addr}]:{port}" if ":" in addr else f"http://{addr}:{port}"


def planned_workers(fleet: Fleet, name: str) -> list[str]:
    """The worker URLs of every replica the router's presets plan (what `check` prints)."""
    spec = fleet.routers[name]
    urls = [
        worker_url(fleet.presets[p].bind, r.port) for p in spec.presets for r in expand_replicas(p, fleet.presets[p])
    ]
    return list(dict.fromkeys(urls))  # presets sharing a port (one runs at a time) plan one worker


def state_dir(host: Host, name: str) -> str:
    return f"{host.run_dir.rstrip('/')}/routers/{name}"


def build_argv(spec: RouterSpec, host: Host, workers: list[str] | tuple[str, ...]) -> list[str]:
    argv = [
        spec.python or host.python,
        "-m",
        ROUTER_MODULE,
        "--host",
        spec.bind,
        "--port",
        str(spec.port),
        "--policy",
        spec.policy,
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        str(spec.prometheus_port),
    ]
    if workers:
        argv += ["--worker-urls", *workers]
    return argv + list(spec.args)


def _py(word: str) -> str:
    return shell_path(word) if word.startswith("~") else shlex.quote(word)


def plan_router(fleet: Fleet, name: str, stamp: str, workers: list[str] | None = None) -> RouterPlan:
    """The start of router `name` over `workers` (default: every planned replica), its log stamped `stamp`."""
    spec = fleet.routers[name]
    host = fleet.hosts[spec.host]
    ws = tuple(planned_workers(fleet, name) if workers is None else workers)
    argv = build_argv(spec, host, ws)
    log_dir = host.effective_log_dir.rstrip("/")
    log = f"{log_dir}/router-{name}_{stamp}.log"
    env = [f"{k}={v}" for k, v in host.env.items()]
    words = ["setsid", "nohup", *(["env", shlex.join(env)] if env else []), _py(argv[0]), shlex.join(argv[1:])]
    cmd = f"mkdir -p {shell_path(log_dir)} && {' '.join(words)} > {shell_path(log)} 2>&1 < /dev/null & echo $!"
    return RouterPlan(
        name, spec.host, spec.port, spec.prometheus_port, ws, tuple(argv), log, state_dir(host, name), cmd
    )


def start_script(plan: RouterPlan, started_at: float, env: dict[str, str] | None = None) -> str:
    """The launch: meta.json first (what runs, where it logs), then the router, whose session leader writes its
    own pid (`$$`) before it execs: `setsid` forks when it is a group leader, so `$!` need not be the session."""
    d = shell_path(plan.state_dir)
    meta = json.dumps(
        {
            "name": plan.name,
            "host": plan.host,
            "port": plan.port,
            "metrics_port": plan.metrics_port,
            "argv": list(plan.argv),
            "workers": list(plan.workers),
            "log_path": plan.log_path,
            "started_at": started_at,
        }
    )
    env_words = [f"{k}={v}" for k, v in (env or {}).items()]
    run = " ".join(
        [
            "exec",
            "nohup",
            *(["env", shlex.join(env_words)] if env_words else []),
            _py(plan.argv[0]),
            shlex.join(plan.argv[1:]),
        ]
    )
    inner = f"echo $$ > {d}/pid.tmp && mv {d}/pid.tmp {d}/pid && {run}"
    log_dir = plan.log_path.rsplit("/", 1)[0]
    return (
        f"mkdir -p {d} {shell_path(log_dir)} && printf '%s\\n' {shlex.quote(meta)} > {d}/meta.json.tmp && "
        f"mv {d}/meta.json.tmp {d}/meta.json && rm -f {d}/pid && "
        f"{{ setsid sh -c {shlex.quote(inner)} > {shell_path(plan.log_path)} 2>&1 < /dev/null & }}; "
        f"i=0; while [ ! -f {d}/pid ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; cat {d}/pid"
    )


def status_script(dir_: str) -> str:
    """Prints `pid PID`, then `proc STAT ARGS` for each live (non-zombie) process of its session, then meta.json;
    `none` when the router was never started or was stopped (then meta.json of its last run, if any: its log).
    `-ww`: into a pipe, ps may cut a command line at 80 columns; a router started from a long venv path lost its
    `sglang_router` and read as crashed (seen in a fresh-clone CI run of the agent test)."""
    d = shell_path(dir_)
    return (
        f"[ -f {d}/pid ] || {{ echo none; echo meta; cat {d}/meta.json 2>/dev/null; exit 0; }}; "
        f'pid=$(cat {d}/pid); echo "pid $pid"; '
        f"ps -ww -o stat= -o args= -s \"$pid\" 2>/dev/null | sed 's/^/proc /'; echo meta; cat {d}/meta.json 2>/dev/null"
    )


def stop_script(dir_: str, grace_s: int = STOP_GRACE_S) -> str:
    """SIGTERM to the router's process group, SIGKILL after `grace_s`; prints `stopped PID` or `none`."""
    d = shell_path(dir_)
    alive = "ps -o stat= -s \"$pid\" 2>/dev/null | grep -qv '^Z'"
    # `kill -SIG -PGID`, never `kill -- -PGID`: dash's kill takes no `--` (it failed, and the router lived on)
    return (
        f'[ -f {d}/pid ] || {{ echo none; exit 0; }}; pid=$(cat {d}/pid); kill -TERM -"$pid" 2>/dev/null; '
        f"i=0; while {alive} && [ $i -lt {grace_s * 10} ]; do sleep 0.1; i=$((i+1)); done; "
        f'if {alive}; then kill -KILL -"$pid" 2>/dev/null; i=0; while {alive} && [ $i -lt 30 ]; do sleep 0.1; '
        f'i=$((i+1)); done; fi; if {alive}; then echo "alive $pid"; exit 1; fi; rm -f {d}/pid; echo "stopped $pid"'
    )


LOG_TAIL_BYTES = 8192
"""The end of a router's log read for why it ended."""


def log_tail_script(path: str, max_bytes: int = LOG_TAIL_BYTES) -> str:
    return f"tail -c {int(max_bytes)} {shell_path(path)} 2>/dev/null"


@dataclass(frozen=True)
class ProcessReport:
    """What status_script found: no pid file, or the pid and whether any non-zombie router process remains."""

    started: bool
    pid: int | None = None
    alive: bool = False
    meta: dict[str, Any] | None = None


def parse_status(out: str) -> ProcessReport:
    """Parse status_script's output (pure); a process counts only if it is the router (not a reused pid)."""
    lines = out.splitlines()
    if not lines:
        return ProcessReport(False)
    started = lines[0].strip() != "none"
    pid = None
    alive = False
    meta = None
    for i, ln in enumerate(lines):
        if ln.startswith("pid "):
            try:
                pid = int(ln[4:].strip())
            except ValueError:
                pid = None
        elif ln.startswith("proc "):
            stat, _, args = ln[5:].strip().partition(" ")
            if not stat.startswith("Z") and ("sglang::router" in args or "sglang_router" in args):
                alive = True
        elif ln == "meta":
            from console import hostjson

            try:
                m = hostjson.loads("\n".join(lines[i + 1 :]).encode()[:262144], "router meta.json")
                meta = m if isinstance(m, dict) else None
            except ValueError:
                meta = None
            break
    return ProcessReport(started, pid if started else None, alive and started, meta)


def print_router_plans(fleet: Fleet, stamp: str) -> None:
    """`check`: each router's exact start command over every planned replica (the console starts it over the
    replicas that serve at the time, and adds the rest as they come up)."""
    from console.fleet.journal import mask

    for name, spec in fleet.routers.items():
        plan = plan_router(fleet, name, stamp)
        print(
            f"\nrouter {name} (host {spec.host}, port {spec.port}, policy {spec.policy})"
            f"{': ' + spec.description if spec.description else ''}"
        )
        print(f"  workers: {', '.join(plan.workers) or 'none planned'} (replicas of {', '.join(spec.presets)})")
        print(f"    {mask(plan.command)}")
