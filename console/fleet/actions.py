"""Server lifecycle on a host: pre-checks, detached launch + meta.json, wait-ready, stop, restart.

Pre-checks are one remote command (GPUs, compute apps, ps, listening ports, model path, the
host's meta.json records), so a refusal names the owner of a busy GPU or port from fresh data.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from console import __version__
from console.config import Host
from console.fleet import discovery
from console.fleet.api import ActionOutcome, LaunchPreview, PreCheck
from console.fleet.events import ComputeApp, ProcInfo, ServerAction, ServerMeta, ServerSeen
from console.fleet.journal import mask, mask_argv, mask_env, remember_secrets
from console.fleet.monitor import parse_ps
from console.gpu import nvsmi
from console.sglang.command import LaunchPlan, plan_launch, shell_path
from console.sglang.lint import lint_preset
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.fleet.controller import FleetController

GPU_BUSY_MIB = 1024
"""A GPU using more than this (with no compute app listed) is not free."""
LOG_DISK_MIN_KIB = 64 * 1024
"""Below this much free space in the log dir a launch is refused (the server could not even log its crash)."""
LOG_DISK_WARN_KIB = 1024 * 1024
STOP_DRAIN_S = 30.0
STOP_KILL_WAIT_S = 10.0
GPU_RELEASE_WAIT_S = 20.0


@dataclass
class HostFacts:
    """Fresh facts for the pre-checks, from one remote command."""

    gpus: list[tuple[int, str, int | None]] = field(default_factory=list)
    gpu_error: str | None = None
    apps: list[ComputeApp] = field(default_factory=list)
    procs: list[ProcInfo] = field(default_factory=list)
    listen: dict[int, int | None] = field(default_factory=dict)
    """Listening TCP port -> owning pid (when ss shows it)."""
    ports_known: bool = True
    model_present: bool | None = None
    model_config: dict | None = None
    metas: list[ServerMeta] = field(default_factory=list)
    log_free_kib: int | None = None
    log_mount: str = ""


def facts_command(fleet_host: Host, model: str, log_dir: str | None = None) -> str:
    """One remote command printing every fact the pre-checks need, in `==> NAME` sections."""
    ld = shell_path(log_dir or fleet_host.effective_log_dir)
    disk = (f'd={ld}; while [ ! -d "$d" ] && [ "$d" != / ] && [ "$d" != . ]; do d=$(dirname "$d"); done; '
            'df -Pk "$d" 2>/dev/null | tail -n 1')
    gpu_q = shlex.join(["nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"])
    m = shell_path(model)
    return "; ".join([
        'echo "==> gpus"', f"{gpu_q} 2>&1",
        'echo "==> apps"', f"{nvsmi.query_apps_command()} 2>&1",
        'echo "==> ps"', "ps -ww -eo pid=,ppid=,sid=,args=",
        'echo "==> ports"', "(ss -ltnpH 2>/dev/null || ss -ltnH 2>/dev/null || echo '==> noports')",
        'echo "==> model"', f"if [ -e {m} ]; then echo present; head -c 300000 {m}/config.json 2>/dev/null; else echo missing; fi",
        'echo "==> disk"', disk,
        'echo "==> metas"', discovery.list_command(fleet_host).split('; echo "==> ps"')[0],
        'echo "==> end"',
    ])


def parse_facts(text: str, host_name: str) -> HostFacts:
    sections: dict[str, list[str]] = {}
    cur = None
    f = HostFacts()
    for ln in text.splitlines():
        if ln.startswith("==> ") and not (cur == "metas" and ln.strip() in ("==> meta", "==> hist")):
            cur = ln[4:].strip()
            if cur == "noports":
                f.ports_known = False
                cur = "ports"
            sections.setdefault(cur, [])
            continue
        if cur is not None:
            sections[cur].append(ln)
    gtext = "\n".join(sections.get("gpus", []))
    try:
        f.gpus = [(r.index, r.uuid, r.memory_used_mib)
                  for r in nvsmi.parse_gpu_csv(gtext, ("index", "uuid", "memory.used"))]
    except nvsmi.NvsmiParseError:
        f.gpu_error = nvsmi.error_text(gtext) or (gtext.strip()[:200] or "no output")
    if not f.gpus and f.gpu_error is None:
        f.gpu_error = nvsmi.error_text(gtext) or "nvidia-smi listed no GPUs"
    try:
        f.apps = nvsmi.parse_apps_csv("\n".join(sections.get("apps", [])))
    except nvsmi.NvsmiParseError:
        f.apps = []
    f.procs = parse_ps("\n".join(sections.get("ps", [])))
    for ln in sections.get("ports", []):
        toks = ln.split()
        local = next((t for t in toks[3:5] if ":" in t), None) if len(toks) >= 4 else None
        if local is None:
            continue
        port_s = local.rsplit(":", 1)[-1]
        if port_s.isdigit():
            pm = re.search(r"pid=(\d+)", ln)
            f.listen[int(port_s)] = int(pm.group(1)) if pm else f.listen.get(int(port_s))
    model = sections.get("model", [])
    if model:
        f.model_present = model[0].strip() == "present"
        if f.model_present and len(model) > 1:
            try:
                f.model_config = json.loads("\n".join(model[1:]))
            except ValueError:
                f.model_config = None
    disk = [ln.split() for ln in sections.get("disk", []) if ln.strip()]
    if disk and len(disk[-1]) >= 6 and disk[-1][3].isdigit():
        f.log_free_kib, f.log_mount = int(disk[-1][3]), disk[-1][5]
    f.metas, _ = discovery.parse_listing("\n".join(sections.get("metas", [])), host_name)
    return f


def describe_pid(ctl: FleetController, host: str, pid: int, procs: list[ProcInfo]) -> str:
    """`pid 4242 `python -m sglang...` (preset qwen36-gen)` — who holds a GPU or port."""
    by_pid = {p.pid: p for p in procs}
    p = by_pid.get(pid)
    args = mask(p.args) if p else "?"
    if len(args) > 90:
        args = args[:87] + "..."
    owner = ""
    sid = p.sid if p else None
    for s in ctl.state.servers_on(host):
        if s.alive and (s.meta.pid == pid or (sid is not None and s.meta.sid == sid)):
            owner = f" (preset {s.meta.preset})" if s.meta.preset else f" ({s.name})"
            break
    return f"pid {pid} `{args}`{owner}"


def run_checks(ctl: FleetController, preset_name: str, plans: list[LaunchPlan], f: HostFacts) -> list[PreCheck]:
    preset = ctl.fleet.presets[preset_name]
    host = preset.host
    checks: list[PreCheck] = []
    live_metas = [m for m in f.metas if discovery.is_alive(m, f.procs)]
    live = {s.name: s.meta for s in ctl.state.servers_on(host) if s.alive and s.meta.managed}
    for m in live_metas:
        live.setdefault(m.name, m)
    uuid_of = {i: u for i, u, _ in f.gpus}
    used_of = {i: used for i, _, used in f.gpus}
    for plan in plans:
        r = plan.replica
        dup = live.get(r.name)
        if dup is not None:
            checks.append(PreCheck("not running", False, f"{r.name} is already running (pid {dup.pid}); "
                                   f"stop it first or use restart"))
            continue
        overlap = [m for m in live.values() if set(m.gpus) & set(r.gpus)]
        for m in overlap:
            checks.append(PreCheck("gpus free", False, f"GPU {','.join(map(str, sorted(set(m.gpus) & set(r.gpus))))} "
                                   f"is used by {m.name} (pid {m.pid}, preset {m.preset})"))
        if f.gpu_error:
            checks.append(PreCheck("gpus free", False, f"cannot check GPUs on {host}: {f.gpu_error}"))
        else:
            for g in r.gpus:
                if g not in uuid_of:
                    checks.append(PreCheck("gpus free", False, f"GPU {g} does not exist on {host} "
                                           f"(it has {', '.join(map(str, sorted(uuid_of))) or 'none'})"))
                    continue
                apps = [a for a in f.apps if a.gpu_uuid == uuid_of[g]]
                if apps:
                    who = "; ".join(describe_pid(ctl, host, a.pid, f.procs) for a in apps[:3])
                    checks.append(PreCheck("gpus free", False, f"GPU {g} is used by {who}"))
                elif (used_of.get(g) or 0) > GPU_BUSY_MIB:
                    checks.append(PreCheck("gpus free", False, f"GPU {g} has {used_of[g]} MiB in use "
                                           f"(> {GPU_BUSY_MIB} MiB) by no listed process"))
        if r.port in f.listen:
            pid = f.listen[r.port]
            who = describe_pid(ctl, host, pid, f.procs) if pid else "another process"
            checks.append(PreCheck("port free", False, f"port {r.port} on {host} is in use by {who}"))
        elif not f.ports_known:
            checks.append(PreCheck("port free", False, f"cannot list listening ports on {host} (no ss)", blocking=False))
    if f.log_free_kib is not None and f.log_free_kib < LOG_DISK_MIN_KIB:
        checks.append(PreCheck("log disk", False, f"no space for the server log on {host}: "
                               f"{f.log_free_kib // 1024} MiB free on {f.log_mount} (log dir "
                               f"{plans[0].log_path.rsplit('/', 1)[0] if plans else '?'}; disk full?)"))
    elif f.log_free_kib is not None and f.log_free_kib < LOG_DISK_WARN_KIB:
        checks.append(PreCheck("log disk", False, f"only {f.log_free_kib // 1024} MiB free for logs on {host} "
                               f"({f.log_mount})", blocking=False))
    if f.model_present is False:
        checks.append(PreCheck("model present", False, f"model path {preset.model} does not exist on {host}"))
    if not any(not c.ok and c.blocking for c in checks):
        checks.append(PreCheck("pre-checks", True, f"GPUs {', '.join(','.join(map(str, p.replica.gpus)) for p in plans)}"
                               f" free, port(s) {', '.join(str(p.replica.port) for p in plans)} free, model present"))
    return checks


def new_stamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]


async def preview(ctl: FleetController, preset_name: str, gpus: list[int] | None = None,
                  only: str | None = None) -> LaunchPreview:
    """Plans, lint findings and fresh pre-checks; `only` keeps one replica (restart)."""
    if preset_name not in ctl.fleet.presets:
        raise KeyError(f"unknown preset '{preset_name}'")
    preset = ctl.fleet.presets[preset_name]
    plans = [p for p in plan_launch(ctl.fleet, preset_name, new_stamp(), gpus) if only in (None, p.replica.name)]
    link = ctl.links[preset.host]
    try:
        log_dir = plans[0].log_path.rsplit("/", 1)[0] if plans and "/" in plans[0].log_path else None
        r = await link.run(facts_command(ctl.fleet.hosts[preset.host], preset.model, log_dir), timeout=30)
    except TransportError as e:
        return LaunchPreview(preset_name, plans, lint_preset(ctl.fleet, preset_name),
                             [PreCheck("host reachable", False, str(e))])
    facts = parse_facts(r.stdout, preset.host)
    findings = lint_preset(ctl.fleet, preset_name, facts.model_config)
    return LaunchPreview(preset_name, plans, findings, run_checks(ctl, preset_name, plans, facts))


def refusal(pv: LaunchPreview) -> str:
    errs = [f"{f.message}" for f in pv.findings if f.severity == "error"]
    errs += [c.message for c in pv.checks if c.blocking and not c.ok]
    return "refused: " + "; ".join(errs)


async def launch(ctl: FleetController, preset_name: str, gpus: list[int] | None = None, *, wait: bool = False,
                 only: str | None = None) -> ActionOutcome:
    """Pre-check, then start every replica detached; `only` restricts to one replica name (restart)."""
    if ctl.read_only:
        return ActionOutcome(False, "read-only console: launch refused")
    if preset_name not in ctl.fleet.presets:
        return ActionOutcome(False, f"unknown preset '{preset_name}'")
    preset = ctl.fleet.presets[preset_name]
    async with ctl.host_lock(preset.host):
        pv = await preview(ctl, preset_name, gpus, only)
        plans = pv.plans
        if not plans:
            return ActionOutcome(False, f"preset {preset_name} has no replica named {only}")
        if pv.blocked:
            msg = refusal(pv)
            for p in plans or pv.plans:
                ctl.emit([ServerAction(p.replica.name, time.time(), "launch", False, msg)])
            return ActionOutcome(False, msg, [p.replica.name for p in plans])
        started = []
        for plan in plans:
            ok, msg = await _start(ctl, plan)
            if not ok:
                return ActionOutcome(False, msg, started)
            started.append(plan.replica.name)
    if wait:
        results = await asyncio.gather(*(wait_ready(ctl, n, preset.ready_timeout) for n in started))
        bad = [m for ok, m in results if not ok]
        if bad:
            return ActionOutcome(False, "; ".join(bad), started)
        return ActionOutcome(True, "; ".join(m for _, m in results), started)
    return ActionOutcome(True, f"launched {', '.join(started)}", started)


async def _start(ctl: FleetController, plan: LaunchPlan) -> tuple[bool, str]:
    r = plan.replica
    link = ctl.links[r.host]
    remember_secrets(plan.argv, plan.env)
    try:
        # the host's clock right after the fork: a process sample taken later must show the pid
        res = await link.run(f"{plan.command}; date +%s.%N", timeout=30)
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
    meta = ServerMeta(
        name=r.name, host=r.host, gpus=r.gpus, port=r.port, preset=r.preset, managed=True, pid=pid, sid=pid,
        log_path=plan.log_path, argv=tuple(mask_argv(plan.argv)), env=tuple(sorted(mask_env(plan.env).items())),
        started_at=now, command=mask(plan.command), launch_id=f"{pid}-{int(now * 1000)}", bind=plan.bind,
    )
    ctl.note_launched(meta, remote_t)
    ctl.emit([ServerSeen(meta, now), ServerAction(r.name, now, "launch", True, f"pid {pid}, log {plan.log_path}")])
    await _write_meta(ctl, meta)
    return True, f"launched {r.name} (pid {pid})"


async def _write_meta(ctl: FleetController, meta: ServerMeta) -> None:
    host = ctl.fleet.hosts[meta.host]
    d = shell_path(discovery.meta_dir(host, meta.name))
    doc = discovery.meta_to_json(meta, {"console_version": __version__, "python": meta.argv[0] if meta.argv else ""})
    cmd = (f"mkdir -p {d} && cat > {d}/meta.json.tmp && mv -f {d}/meta.json.tmp {d}/meta.json && "
           f"cat {d}/meta.json >> {d}/history.jsonl")
    try:
        res = await ctl.links[meta.host].run(cmd, input=doc + "\n", timeout=20)
        if not res.ok:
            ctl.emit([ServerAction(meta.name, time.time(), "meta", False, f"cannot write meta.json: {res.stderr.strip()}")])
    except TransportError as e:
        ctl.emit([ServerAction(meta.name, time.time(), "meta", False, f"cannot write meta.json: {e}")])


async def wait_ready(ctl: FleetController, name: str, timeout: float) -> tuple[bool, str]:
    """Ready = the log says so and /health answered 200; fails fast on a crash."""
    deadline = time.monotonic() + timeout
    s0 = ctl.state.servers.get(name)
    launch_id = s0.meta.launch_id if s0 else ""
    while time.monotonic() < deadline:
        s = ctl.state.servers.get(name)
        if s is not None and s.meta.launch_id == launch_id:
            if not s.alive or s.phase == "crashed":
                d = s.log.diagnosis
                return False, f"{name} crashed" + (f": {d.summary}" if d else "")
            if s.phase in ("ready", "serving") and s.health == "ok":
                return True, f"{name} is ready on port {s.meta.port}"
        await asyncio.sleep(0.2)
    return False, f"{name} not ready after {timeout:g} s"


async def stop(ctl: FleetController, name: str) -> ActionOutcome:
    if ctl.read_only:
        return ActionOutcome(False, "read-only console: stop refused")
    s = ctl.state.servers.get(name)
    if s is None:
        return ActionOutcome(False, f"no server named '{name}'")
    if not s.meta.managed:
        return ActionOutcome(False, f"{name} was not started by the console (external, read-only; adopt is not "
                             "implemented yet)", [name])
    link = ctl.links[s.meta.host]
    sid = s.meta.sid or s.meta.pid
    if s.alive and sid:
        ctl.emit([ServerAction(name, time.time(), "stop", True, f"SIGTERM to session {sid}")])
        try:
            await link.run(f"kill -TERM -- -{sid} 2>/dev/null || kill -TERM {int(s.meta.pid or sid)}", timeout=15)
            if not await ctl.wait_gone(name, STOP_DRAIN_S):
                ctl.emit([ServerAction(name, time.time(), "kill", True, f"still alive after {STOP_DRAIN_S:g} s: SIGKILL")])
                await link.run(f"kill -KILL -- -{sid} 2>/dev/null || kill -KILL {int(s.meta.pid or sid)}", timeout=15)
                if not await ctl.wait_gone(name, STOP_KILL_WAIT_S):
                    return ActionOutcome(False, f"{name} survived SIGKILL", [name])
        except TransportError as e:
            return ActionOutcome(False, str(e), [name])
    host = ctl.fleet.hosts[s.meta.host]
    d = shell_path(discovery.meta_dir(host, name))
    try:
        await link.run(f"rm -f {d}/meta.json", timeout=15)
        free, msg = await confirm_gpus_free(ctl, s.meta)
    except TransportError as e:
        return ActionOutcome(False, str(e), [name])
    ctl.emit([ServerAction(name, time.time(), "stopped", free, msg)])
    return ActionOutcome(free, f"stopped {name}; {msg}", [name])


async def confirm_gpus_free(ctl: FleetController, meta: ServerMeta) -> tuple[bool, str]:
    link = ctl.links[meta.host]
    gpu_q = shlex.join(["nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"])
    cmd = f'{gpu_q}; echo "==> apps"; {nvsmi.query_apps_command()}'
    deadline = time.monotonic() + GPU_RELEASE_WAIT_S
    last = ""
    while True:
        res = await link.run(cmd, timeout=15)
        gtext, _, atext = res.stdout.partition("==> apps\n")
        try:
            gpus = {r.index: r for r in nvsmi.parse_gpu_csv(gtext, ("index", "uuid", "memory.used"))}
            apps = nvsmi.parse_apps_csv(atext)
        except nvsmi.NvsmiParseError:
            return False, f"cannot confirm GPUs {','.join(map(str, meta.gpus))} are free: nvidia-smi unreadable"
        busy = []
        for g in meta.gpus:
            r = gpus.get(g)
            if r is None:
                continue
            held = [a for a in apps if a.gpu_uuid == r.uuid]
            if held or (r.memory_used_mib or 0) > GPU_BUSY_MIB:
                busy.append(f"GPU {g}: {r.memory_used_mib} MiB, {len(held)} process(es)")
        if not busy:
            used = ", ".join(f"GPU {g} {gpus[g].memory_used_mib} MiB" for g in meta.gpus if g in gpus)
            return True, f"GPUs released ({used})"
        last = "; ".join(busy)
        if time.monotonic() > deadline:
            return False, f"GPU memory not released after {GPU_RELEASE_WAIT_S:g} s: {last}"
        await asyncio.sleep(1)


async def restart(ctl: FleetController, name: str) -> ActionOutcome:
    """Stop if running, then launch the same preset on the same GPUs (the old log is kept)."""
    if ctl.read_only:
        return ActionOutcome(False, "read-only console: restart refused")
    s = ctl.state.servers.get(name)
    if s is None or not s.meta.managed or not s.meta.preset:
        return ActionOutcome(False, f"no managed server named '{name}'")
    if s.meta.preset not in ctl.fleet.presets:
        return ActionOutcome(False, f"preset '{s.meta.preset}' of {name} is no longer in hosts.toml")
    if s.alive:
        out = await stop(ctl, name)
        if not out.ok:
            return ActionOutcome(False, f"restart: {out.message}", [name])
    # a replica of the preset's own GPU set keeps its port; a `--gpus` launch re-plans on its GPUs
    own = any(p.replica.name == name for p in plan_launch(ctl.fleet, s.meta.preset, "x"))
    return await launch(ctl, s.meta.preset, None if own else list(s.meta.gpus), only=name)
