"""Server lifecycle on a host: pre-checks, detached launch + meta.json, wait-ready, stop, restart.

Pre-checks (console.fleet.prechecks) are one remote command of fresh facts, so a refusal names
the owner of a busy GPU or port as it is now.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import shlex
import time

from console import version
from console.fleet import discovery, gpuowners, hostlock
from console.fleet.api import ActionOutcome, LaunchPreview, PreCheck
from console.fleet.events import ServerAction, ServerMeta, ServerSeen
from console.fleet.hostops import HostOps
from console.fleet.journal import mask, mask_argv, mask_env, remember_secrets
from console.fleet.monitor import parse_ps
from console.fleet.prechecks import (
    GPU_BUSY_MIB,
    GPU_QUERY,
    choose_ports,
    draft_model_path,
    facts_command,
    parse_facts,
    port_owners,
    run_checks,
)
from console.gpu import nvsmi
from console.sglang import launchscript
from console.sglang.command import LaunchPlan, plan_launch, shell_path
from console.sglang.lint import lint_preset
from console.sglang.phase import Phase
from console.transport.base import TransportError

STOP_DRAIN_S = 30.0
STOP_KILL_WAIT_S = 10.0
GPU_RELEASE_WAIT_S = 20.0
CRASH_EXIT_GRACE_S = 10.0
"""A log that says crashed while the process lives: wait this long for the exit before telling the cause."""


def new_stamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]


async def preview(
    ctl: HostOps,
    preset_name: str,
    gpus: list[int] | None = None,
    only: str | None = None,
    stamp: str | None = None,
    *,
    leaving: ServerMeta | None = None,
    force: bool = False,
) -> LaunchPreview:
    """Plans, lint findings and fresh pre-checks; `only` keeps one replica (restart); `stamp`: an earlier
    preview's, so the plans are the commands it showed (their log names included); `leaving` is the running
    server a restart stops first, `force` lets other processes' VRAM pass (see prechecks.run_checks)."""
    if preset_name not in ctl.fleet.presets:
        raise KeyError(f"unknown preset '{preset_name}'")
    preset = ctl.fleet.presets[preset_name]
    stamp = stamp or new_stamp()
    plans = [p for p in plan_launch(ctl.fleet, preset_name, stamp, gpus) if only in (None, p.replica.name)]
    link = ctl.links[preset.host]
    try:
        log_dir = plans[0].log_path.rsplit("/", 1)[0] if plans and "/" in plans[0].log_path else None
        draft = draft_model_path(preset.args)
        r = await link.run(facts_command(ctl.fleet.hosts[preset.host], preset.model, log_dir, draft), timeout=30)
    except TransportError as e:
        return LaunchPreview(
            preset_name,
            plans,
            lint_preset(ctl.fleet, preset_name),
            [PreCheck("host reachable", False, str(e))],
            stamp,
        )
    facts = parse_facts(r.stdout, preset.host)
    if gpus is not None and plans:  # re-planned GPUs: ports from the preset's first one up, skipping taken ones
        live = [m for m in facts.metas if discovery.is_alive(m, facts.procs)]
        taken = set(facts.listen) | set(port_owners(ctl, preset.host, live))
        first = preset.port if isinstance(preset.port, int) else preset.port[0]
        every = plan_launch(ctl.fleet, preset_name, stamp, gpus)
        ports = choose_ports(first, len(every), taken)
        if len(ports) == len(every):
            plans = [
                p for p in plan_launch(ctl.fleet, preset_name, stamp, gpus, ports) if only in (None, p.replica.name)
            ]
    findings = lint_preset(ctl.fleet, preset_name, facts.model_config)
    checks = run_checks(ctl, preset_name, plans, facts, leaving=leaving, force=force)
    if preset.api_key_env and plans and not any(_secret_args(p).get("api-key") for p in plans):
        checks.append(
            PreCheck(
                "api key",
                False,
                f"api_key_env {preset.api_key_env} is not set here: the server "
                "will start without an API key (anyone who reaches its port can use it)",
                blocking=False,
            )
        )
    return LaunchPreview(preset_name, plans, findings, checks, stamp)


def refusal(pv: LaunchPreview) -> str:
    errs = [f"{f.message}" for f in pv.findings if f.severity == "error"]
    errs += [c.message for c in pv.checks if c.blocking and not c.ok]
    return "refused: " + "; ".join(errs)


async def launch(
    ctl: HostOps,
    preset_name: str,
    gpus: list[int] | None = None,
    *,
    wait: bool = False,
    only: str | None = None,
    stamp: str | None = None,
    force: bool = False,
) -> ActionOutcome:
    """Pre-check, then start every replica detached; `only` restricts to one replica name (restart); `stamp`: the
    preview's the operator read, so the log files are the ones it named; `force` lets other processes' VRAM on
    its GPUs pass (said in the result, not refused)."""
    if ctl.read_only:
        return ActionOutcome(False, "read-only console: launch refused")
    if preset_name not in ctl.fleet.presets:
        return ActionOutcome(False, f"unknown preset '{preset_name}'")
    preset = ctl.fleet.presets[preset_name]
    link = ctl.links[preset.host]
    async with ctl.host_lock(preset.host):
        if not await link.wait_up(10):
            return ActionOutcome(False, f"{preset.host}: host unreachable ({link.last_error or 'not connected'})")
        try:
            # the host's own lock (another console's launch waits), held from the pre-checks until meta.json
            async with hostlock.hold(
                link.transport.stream, preset.host, ctl.fleet.hosts[preset.host], on_command=ctl.journal.stream
            ) as lock:
                refused = await _locked_launch(ctl, preset_name, gpus, only, lock, stamp, force)
        except hostlock.LockBusy as e:
            ctl.emit([ServerAction(preset_name, time.time(), "launch", False, str(e))])
            return ActionOutcome(False, f"refused: {e}")
    if not refused.ok:
        return refused
    started = refused.servers
    shared = f"; {refused.message}" if refused.message else ""
    if wait:
        results = await asyncio.gather(*(wait_ready(ctl, n, preset.ready_timeout) for n in started))
        bad = [m for ok, m in results if not ok]
        if bad:
            return ActionOutcome(False, "; ".join(bad) + shared, started)
        return ActionOutcome(True, "; ".join(m for _, m in results) + shared, started)
    return ActionOutcome(True, f"launched {', '.join(started)}{shared}", started)


async def _locked_launch(
    ctl: HostOps,
    preset_name: str,
    gpus: list[int] | None,
    only: str | None,
    lock: hostlock.HeldLock,
    stamp: str | None = None,
    force: bool = False,
) -> ActionOutcome:
    """Pre-checks then start every replica, under the host's lock; ok with the servers started."""
    pv = await preview(ctl, preset_name, gpus, only, stamp, force=force)
    plans = pv.plans
    if not plans:
        return ActionOutcome(False, f"preset {preset_name} has no replica named {only}")
    if pv.blocked:
        msg = refusal(pv)
        for p in plans:
            ctl.emit([ServerAction(p.replica.name, time.time(), "launch", False, msg)])
        return ActionOutcome(False, msg, [p.replica.name for p in plans], forcible=pv.forcible)
    started: list[str] = []
    for plan in plans:
        ok, msg = await _start(ctl, plan, lock)
        if not ok:
            return ActionOutcome(False, msg, started)
        started.append(plan.replica.name)
    shared = [c.message for c in pv.checks if c.name.startswith("gpus") and not c.ok and not c.blocking]
    return ActionOutcome(True, "; ".join(dict.fromkeys(shared)), started)


def _secret_args(plan: LaunchPlan) -> dict[str, str]:
    """The plan's secret SGLang flags, plus the preset's `api_key_env` key when args name none (local env)."""
    out = dict(plan.secret_args)
    key = os.environ.get(plan.api_key_env) if plan.api_key_env else None
    if key and "api-key" not in out:
        out["api-key"] = key
    return out


async def _start(ctl: HostOps, plan: LaunchPlan, lock: hostlock.HeldLock) -> tuple[bool, str]:
    """One remote command: secrets over stdin (0600 files), the gated server, then meta.json (see launchscript)."""
    secret_args = _secret_args(plan)
    plan = dataclasses.replace(plan, secret_args=secret_args)  # the script passes --config only for these
    r = plan.replica
    host = ctl.fleet.hosts[r.host]
    remember_secrets(plan.argv, plan.env)
    remember_secrets([a for k, v in secret_args.items() for a in (f"--{k}", v)])
    launch_id = f"{lock.token}-{r.index}"
    meta = ServerMeta(
        name=r.name,
        host=r.host,
        gpus=r.gpus,
        port=r.port,
        preset=r.preset,
        managed=True,
        pid=None,
        sid=None,
        log_path=plan.log_path,
        argv=tuple(mask_argv(plan.argv)),
        env=tuple(sorted(mask_env(plan.env).items())),
        started_at=time.time(),
        command=mask(plan.command),
        launch_id=launch_id,
        bind=plan.bind,
    )
    doc = discovery.meta_to_json(meta, {"console_version": version(), "python": plan.python})
    script = launchscript.launch_script(plan, discovery.meta_dir(host, r.name), lock.path, lock.token, launch_id)
    stdin = launchscript.launch_input(launchscript.meta_body(doc), secret_args, plan.secret_env)
    in_flight = ctl.launching.setdefault(r.host, set())
    in_flight.add(r.port)
    try:
        return await _run_launch(ctl, plan, script, stdin, meta)
    finally:
        in_flight.discard(r.port)


async def _run_launch(ctl: HostOps, plan: LaunchPlan, script: str, stdin: str, meta: ServerMeta) -> tuple[bool, str]:
    r = plan.replica
    link = ctl.links[r.host]
    try:
        # prints the pid, then the host's clock right after the fork: a later process sample must show the pid
        res = await link.run(script, input=stdin, timeout=30)
    except TransportError as e:
        ctl.emit([ServerAction(r.name, time.time(), "launch", False, str(e))])
        return False, str(e)
    out = res.stdout.split()
    pid_s = out[0] if out else ""
    remote_t: float | None = None
    if len(out) > 1:
        try:
            remote_t = float(out[1])
        except ValueError:
            remote_t = None
    if not res.ok or not pid_s.isdigit():
        msg = f"{r.host}: `{mask(plan.command)}` failed (exit {res.exit_status}): {mask(res.stderr.strip()[-300:])}"
        ctl.emit([ServerAction(r.name, time.time(), "launch", False, msg)])
        return False, msg
    pid = int(pid_s)
    now = time.time()
    meta = dataclasses.replace(meta, pid=pid, sid=pid, started_at=now)
    ctl.note_launched(meta, remote_t)
    ctl.emit([ServerSeen(meta, now), ServerAction(r.name, now, "launch", True, f"pid {pid}, log {plan.log_path}")])
    return True, f"launched {r.name} (pid {pid})"


async def wait_ready(ctl: HostOps, name: str, timeout: float) -> tuple[bool, str]:
    """Ready = the log says so and /health answered 200; fails fast on a crash."""
    deadline = time.monotonic() + timeout
    s0 = ctl.state.servers.get(name)
    launch_id = s0.meta.launch_id if s0 else ""
    crashed_at: float | None = None
    while time.monotonic() < deadline:
        s = ctl.state.servers.get(name)
        if s is not None and s.meta.launch_id == launch_id:
            if s.phase is Phase.CRASHED and crashed_at is None:
                crashed_at = time.monotonic()
            # the cause is told once the process ended and its log was read to the end (the pane's diagnosis),
            # not from a traceback still being written; a crashed process that lingers is told after a grace
            if not s.alive or (crashed_at is not None and time.monotonic() - crashed_at >= CRASH_EXIT_GRACE_S):
                d = s.log.diagnosis
                return False, f"{name} crashed" + (f": {d.summary}" if d else "")
            if s.phase.up and s.health == "ok":
                return True, f"{name} is ready on port {s.meta.port}"
        await asyncio.sleep(0.2)
    return False, f"{name} not ready after {timeout:g} s"


async def stop(ctl: HostOps, name: str) -> ActionOutcome:
    """SIGTERM to the server's session, SIGKILL after the drain; confirmed once its own processes (every rank) left
    the process table and the GPUs' compute apps. What else holds its GPUs is named, not a failure."""
    if ctl.read_only:
        return ActionOutcome(False, "read-only console: stop refused")
    s = ctl.state.servers.get(name)
    if s is None:
        return ActionOutcome(False, f"no server named '{name}'")
    if not s.meta.managed:
        return ActionOutcome(
            False, f"{name} was not started by the console (external, read-only; adopt is not implemented yet)", [name]
        )
    link = ctl.links[s.meta.host]
    sid = s.meta.sid or s.meta.pid
    own = known_pids(ctl, name)
    if s.alive and sid:
        ctl.emit([ServerAction(name, time.time(), "stop", True, f"SIGTERM to session {sid}")])
        try:
            await link.run(f"kill -TERM -- -{sid} 2>/dev/null || kill -TERM {int(s.meta.pid or sid)}", timeout=15)
            if not await ctl.wait_gone(name, STOP_DRAIN_S):
                ctl.emit(
                    [ServerAction(name, time.time(), "kill", True, f"still alive after {STOP_DRAIN_S:g} s: SIGKILL")]
                )
                await link.run(f"kill -KILL -- -{sid} 2>/dev/null || kill -KILL {int(s.meta.pid or sid)}", timeout=15)
                if not await ctl.wait_gone(name, STOP_KILL_WAIT_S):
                    return ActionOutcome(False, f"{name} survived SIGKILL", [name])
        except TransportError as e:
            return ActionOutcome(False, str(e), [name])
    host = ctl.fleet.hosts[s.meta.host]
    d = shell_path(discovery.meta_dir(host, name))
    try:
        await link.run(f"rm -f {d}/meta.json {d}/{launchscript.SECRET_CONFIG_FILE}", timeout=15)  # and its key file
        free, msg = await confirm_released(ctl, s.meta, own)
    except TransportError as e:
        return ActionOutcome(False, str(e), [name])
    ctl.emit([ServerAction(name, time.time(), "stopped", free, msg)])
    return ActionOutcome(free, f"stopped {name}; {msg}", [name])


def known_pids(ctl: HostOps, name: str) -> set[int]:
    """The server's pids the console has seen: its main pid, its session's processes in the last process sample,
    and the compute apps the monitor gave to it (every TP rank)."""
    s = ctl.state.servers[name]
    h = ctl.state.hosts.get(s.meta.host)
    own = {p for p in (s.meta.pid,) if p}
    if h is not None:
        if s.meta.sid is not None:
            own |= {pid for pid, sid in h.procs_by_pid.items() if sid == s.meta.sid}
        own |= {p.pid for g in h.gpus.values() for p in g.processes if p.server == name}
    return own


async def confirm_released(ctl: HostOps, meta: ServerMeta, own: set[int]) -> tuple[bool, str]:
    """Until none of the server's own pids is in `ps` or in the compute apps (GPU_RELEASE_WAIT_S at most)."""
    link = ctl.links[meta.host]
    gpu_q = shlex.join(["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY)}", "--format=csv,noheader,nounits"])
    cmd = f'{gpu_q}; echo "==> apps"; {nvsmi.query_apps_command()}; echo "==> ps"; ps -ww -eo pid=,ppid=,sid=,args='
    deadline = time.monotonic() + GPU_RELEASE_WAIT_S
    while True:
        res = await link.run(cmd, timeout=15)
        gtext, _, rest = res.stdout.partition("==> apps\n")
        atext, _, ptext = rest.partition("==> ps\n")
        try:
            rows = nvsmi.parse_gpu_csv(gtext, GPU_QUERY)
            apps = nvsmi.parse_apps_csv(atext)
        except nvsmi.NvsmiParseError:
            return False, f"cannot confirm GPUs {','.join(map(str, meta.gpus))} are released: nvidia-smi unreadable"
        procs = parse_ps(ptext)
        own |= gpuowners.session_pids(meta, procs)
        servers = [s.meta for s in ctl.state.servers_on(meta.host) if s.alive and s.name != meta.name]
        r = gpuowners.release(meta, own, procs, rows, apps, servers, GPU_BUSY_MIB)
        if not r.waiting:
            gpus = ",".join(map(str, meta.gpus))
            if not r.others:
                return True, f"GPUs released ({', '.join(r.free)})"
            return True, f"its processes left GPU {gpus}; " + "; ".join(r.others)
        if time.monotonic() > deadline:
            return False, f"GPU memory not released after {GPU_RELEASE_WAIT_S:g} s: {'; '.join(r.waiting)}"
        await asyncio.sleep(1)


async def restart(ctl: HostOps, name: str, *, force: bool = False) -> ActionOutcome:
    """Check that the relaunch could start, stop if running, then launch the same preset on the same GPUs (the old
    log is kept). Refused before the stop, with the owner named, when it could not; `force` lets other processes'
    VRAM pass."""
    if ctl.read_only:
        return ActionOutcome(False, "read-only console: restart refused")
    s = ctl.state.servers.get(name)
    if s is None or not s.meta.managed or not s.meta.preset:
        return ActionOutcome(False, f"no managed server named '{name}'")
    if s.meta.preset not in ctl.fleet.presets:
        return ActionOutcome(False, f"preset '{s.meta.preset}' of {name} is no longer in hosts.toml")
    # a replica of the preset's own plan (its GPUs and its port) relaunches as planned; one a `--gpus` or marked-GPU
    # launch re-planned (same name, another port: the plan's port may belong to a sibling replica now) re-plans on
    # its GPUs, where the pre-check picks a free port from the preset's first one up
    own = any(
        p.replica.name == name and p.replica.port == s.meta.port for p in plan_launch(ctl.fleet, s.meta.preset, "x")
    )
    gpus = None if own else list(s.meta.gpus)
    if s.alive:
        pv = await preview(ctl, s.meta.preset, gpus, only=name, leaving=s.meta, force=force)
        if pv.blocked:
            hint = "; `restart --force` stops it and relaunches anyway" if pv.forcible else ""
            return ActionOutcome(
                False,
                f"restart {refusal(pv)} ({name} was not stopped){hint}",
                [name],
                forcible=pv.forcible,
            )
    stopped = ""
    if s.alive:
        out = await stop(ctl, name)
        if not out.ok:
            return ActionOutcome(False, f"restart: {out.message}", [name])
        stopped = f"{out.message}; "
    out = await launch(ctl, s.meta.preset, gpus, only=name, force=force)
    hint = "; `restart --force` relaunches anyway" if out.forcible else ""
    return dataclasses.replace(out, message=f"{stopped}{out.message}{hint}")
