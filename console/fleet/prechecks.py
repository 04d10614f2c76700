"""Launch pre-checks from one remote command: GPUs, compute apps, ps, listening ports, model, log disk, metas.

Fresh facts, not the monitor's last sample, so a refusal names the owner of a busy GPU or port as
it is now ("GPU 1 is used by pid 4242 `python -m sglang.launch_server ...` (preset qwen36-gen)").
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from console import hostjson
from console.config import Host
from console.fleet import discovery, gpuowners
from console.fleet.api import PreCheck
from console.fleet.events import ProcInfo, ServerMeta
from console.fleet.hostops import FleetView
from console.fleet.journal import mask
from console.fleet.monitor import parse_ps
from console.gpu import nvsmi
from console.gpu.readings import ComputeApp, GpuReading
from console.sglang.command import LaunchPlan, shell_path
from console.sglang.specdec import spec_config

GPU_BUSY_MIB = 1024
"""A GPU using more than this (with no compute app listed) is not free."""
LOG_DISK_MIN_KIB = 64 * 1024
"""Below this much free space in the log dir a launch is refused (the server could not even log its crash)."""
LOG_DISK_WARN_KIB = 1024 * 1024
GPU_QUERY = ("index", "uuid", "memory.used", "memory.total")
"""The pre-check's and the stop's `--query-gpu` fields."""
RUN_DISK_MIN_KIB = 1024
"""Below this much free space in run_dir a launch is refused: meta.json (the console's record of the server)
and the secrets files must be written before the server may start."""


@dataclass
class HostFacts:
    """Fresh facts for the pre-checks, from one remote command."""

    gpus: list[GpuReading] = field(default_factory=list)
    gpu_error: str | None = None
    apps: list[ComputeApp] = field(default_factory=list)
    procs: list[ProcInfo] = field(default_factory=list)
    listen: dict[int, int | None] = field(default_factory=dict)
    """Listening TCP port -> owning pid (when ss shows it)."""
    ports_known: bool = True
    model_present: bool | None = None
    draft_present: bool | None = None
    """The speculative draft model's path exists (None: no draft path to check)."""
    model_config: dict[str, Any] | None = None
    model_config_error: str | None = None
    """config.json is there but nested too deep to read (the lint rules that need it are skipped)."""
    metas: list[ServerMeta] = field(default_factory=list)
    log_free_kib: int | None = None
    log_mount: str = ""
    run_free_kib: int | None = None
    run_mount: str = ""


PORTS_COMMAND = (
    "(ss -ltnpH 2>/dev/null || ss -ltnH 2>/dev/null || "
    "{ echo '==> proctcp'; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; })"
)
"""Listening TCP ports: `ss` (with pids when allowed), else the kernel's own tables (a host without iproute2)."""
TCP_LISTEN = "0A"
"""The `st` column of /proc/net/tcp for a listening socket."""


def parse_proc_net_tcp(text: str) -> set[int]:
    """Listening ports from /proc/net/tcp and tcp6 (`sl local_address rem_address st ...`, hex ports)."""
    ports = set()
    for ln in text.splitlines():
        toks = ln.split()
        if len(toks) < 4 or toks[3] != TCP_LISTEN or ":" not in toks[1]:
            continue
        try:
            ports.add(int(toks[1].rsplit(":", 1)[1], 16))
        except ValueError:
            continue
    return ports


def port_owners(ctl: FleetView, host: str, metas: list[ServerMeta]) -> dict[int, str]:
    """Port -> server, for every live server known on the host (loading ones included, which may not
    listen yet, and external ones): a port is taken from its launch on, not from its bind."""
    owners = {m.port: m.name for m in metas if m.port is not None}
    for s in ctl.state.servers_on(host):
        if s.alive and s.meta.port is not None:
            owners.setdefault(s.meta.port, s.name)
    return owners


def choose_ports(first: int, n: int, taken: set[int]) -> list[int]:
    """`n` ports from `first` upward, skipping taken ones (a `--gpus` launch beside a running replica)."""
    out: list[int] = []
    p = first
    while len(out) < n and p <= 65535:
        if p not in taken:
            out.append(p)
        p += 1
    return out


def draft_model_path(args: list[str] | tuple[str, ...]) -> str | None:
    """The preset's `--speculative-draft-model-path` (or its alias), checked on the host like the model."""
    cfg = spec_config(list(args))
    return cfg.draft_model if cfg is not None else None


def facts_command(fleet_host: Host, model: str, log_dir: str | None = None, draft: str | None = None) -> str:
    """One remote command printing every fact the pre-checks need, in `==> NAME` sections (`draft`: the
    speculative draft model's path, checked like the model's)."""
    ld = shell_path(log_dir or fleet_host.effective_log_dir)
    disk = (
        f'd={ld}; while [ ! -d "$d" ] && [ "$d" != / ] && [ "$d" != . ]; do d=$(dirname "$d"); done; '
        'df -Pk "$d" 2>/dev/null | tail -n 1'
    )
    run_disk = disk.replace(f"d={ld};", f"d={shell_path(fleet_host.run_dir)};", 1)
    gpu_q = shlex.join(["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY)}", "--format=csv,noheader,nounits"])
    m = shell_path(model)
    return "; ".join(
        [
            'echo "==> gpus"',
            f"{gpu_q} 2>&1",
            'echo "==> apps"',
            f"{nvsmi.query_apps_command()} 2>&1",
            'echo "==> ps"',
            "ps -ww -eo pid=,ppid=,sid=,args=",
            'echo "==> ports"',
            PORTS_COMMAND,
            'echo "==> model"',
            f"if [ -e {m} ]; then echo present; head -c 300000 {m}/config.json 2>/dev/null; else echo missing; fi",
            *(
                ['echo "==> draft"', f"if [ -e {shell_path(draft)} ]; then echo present; else echo missing; fi"]
                if draft
                else []
            ),
            'echo "==> disk"',
            disk,
            'echo "==> rundisk"',
            run_disk,
            'echo "==> metas"',
            discovery.list_command(fleet_host).split('; echo "==> ps"')[0],
            'echo "==> end"',
        ]
    )


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
        f.gpus = nvsmi.parse_gpu_csv(gtext, GPU_QUERY)
    except nvsmi.NvsmiParseError:
        f.gpu_error = nvsmi.error_text(gtext) or (gtext.strip()[:200] or "no output")
    if not f.gpus and f.gpu_error is None:
        f.gpu_error = nvsmi.error_text(gtext) or "nvidia-smi listed no GPUs"
    try:
        f.apps = nvsmi.parse_apps_csv("\n".join(sections.get("apps", [])))
    except nvsmi.NvsmiParseError:
        f.apps = []
    f.procs = parse_ps("\n".join(sections.get("ps", [])))
    if "proctcp" in sections:
        f.listen.update(dict.fromkeys(parse_proc_net_tcp("\n".join(sections["proctcp"]))))
        f.ports_known = bool(sections["proctcp"])
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
                cfg = hostjson.loads("\n".join(model[1:]), "config.json")
                f.model_config = cfg if isinstance(cfg, dict) else None
            except hostjson.HostJsonError as e:
                f.model_config = None
                f.model_config_error = e.detail if e.too_deep else None
    draft = sections.get("draft", [])
    if draft:
        f.draft_present = draft[0].strip() == "present"
    disk = [ln.split() for ln in sections.get("disk", []) if ln.strip()]
    if disk and len(disk[-1]) >= 6 and disk[-1][3].isdigit():
        f.log_free_kib, f.log_mount = int(disk[-1][3]), disk[-1][5]
    run = [ln.split() for ln in sections.get("rundisk", []) if ln.strip()]
    if run and len(run[-1]) >= 6 and run[-1][3].isdigit():
        f.run_free_kib, f.run_mount = int(run[-1][3]), run[-1][5]
    f.metas, _ = discovery.parse_listing("\n".join(sections.get("metas", [])), host_name)
    return f


def describe_pid(ctl: FleetView, host: str, pid: int, procs: list[ProcInfo]) -> str:
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


def _is_leaving(pid: int | None, leaving: ServerMeta | None, procs: list[ProcInfo]) -> bool:
    """The pid is one of the server a restart stops first (its port is not in the way of its relaunch)."""
    if pid is None or leaving is None:
        return False
    return pid in gpuowners.session_pids(leaving, procs) or pid == leaving.pid


def gpu_checks(plan: LaunchPlan, f: HostFacts, hs: list[gpuowners.Holder], *, force: bool) -> list[PreCheck]:
    """One reason per owner of the replica's GPUs: a server refuses; other processes refuse beyond the
    headroom the preset leaves (total x (1 - --mem-fraction-static)), are named within it, or with `force`."""
    r = plan.replica
    host = r.host
    rows = {g.index: g for g in f.gpus}
    out: list[PreCheck] = []
    for g in r.gpus:
        if g not in rows:
            out.append(
                PreCheck(
                    "gpus free",
                    False,
                    f"GPU {g} does not exist on {host} (it has {', '.join(map(str, sorted(rows))) or 'none'})",
                )
            )
    mine = [g for g in r.gpus if g in rows]
    room = {g: gpuowners.headroom_mib(plan.argv, rows[g].memory_total_mib or 0) for g in mine}
    unlisted = {g: gpuowners.unlisted_mib(rows[g], f.apps) for g in mine}
    others = {g: sum(h.mib.get(g, 0) for h in hs if h.server is None) + unlisted[g] for g in mine}
    over = {g for g in mine if others[g] > room[g]}
    for h in hs:
        on = [g for g in mine if g in h.mib]
        if not on:
            continue
        span = ",".join(map(str, on))
        if h.server is not None:
            out.append(PreCheck("gpus free", False, f"GPU {span} is used by {h.label}"))
            continue
        held = gpuowners.gib(sum(h.mib[g] for g in on))
        bad = [g for g in on if g in over]
        if bad:
            g = bad[0]
            why = (
                f"GPU {span} is used by {h.label} ({held}; other processes hold {gpuowners.gib(others[g])} of GPU "
                f"{g}'s {gpuowners.gib(rows[g].memory_total_mib)}, more than the {gpuowners.gib(room[g])} the "
                "preset leaves them)"
            )
            out.append(
                PreCheck("gpus free", False, why + (" (forced)" if force else ""), blocking=not force, forcible=True)
            )
        else:
            out.append(
                PreCheck(
                    "gpus shared",
                    False,
                    f"GPU {span} is shared with {h.label} ({held}, within the "
                    f"{gpuowners.gib(min(room[g] for g in on))} the preset leaves to other processes)",
                    blocking=False,
                )
            )
    for g in mine:
        if unlisted[g] > GPU_BUSY_MIB and not any(g in h.mib and h.server is None for h in hs):
            beyond = g in over
            out.append(
                PreCheck(
                    "gpus free",
                    False,
                    f"GPU {g} has {unlisted[g]} MiB in use by no listed process"
                    + (
                        f" (more than the {gpuowners.gib(room[g])} the preset leaves to other processes)"
                        + (" (forced)" if force else "")
                        if beyond
                        else ""
                    ),
                    blocking=beyond and not force,
                    forcible=beyond,
                )
            )
    return out


def run_checks(
    ctl: FleetView,
    preset_name: str,
    plans: list[LaunchPlan],
    f: HostFacts,
    *,
    leaving: ServerMeta | None = None,
    force: bool = False,
) -> list[PreCheck]:
    """Every pre-check of a launch; `leaving`: the server a restart stops first (what it holds is not in the way);
    `force`: other processes' VRAM beyond the preset's headroom is said, not refused."""
    preset = ctl.fleet.presets[preset_name]
    host = preset.host
    checks: list[PreCheck] = []
    live_metas = [m for m in f.metas if discovery.is_alive(m, f.procs)]
    live = {s.name: s.meta for s in ctl.state.servers_on(host) if s.alive and s.meta.managed}
    for m in live_metas:
        live.setdefault(m.name, m)
    owners = port_owners(ctl, host, live_metas)
    known = list(live.values()) + [s.meta for s in ctl.state.servers_on(host) if s.alive and not s.meta.managed]
    in_ps = {p.pid for p in f.procs}
    describe = {a.pid: describe_pid(ctl, host, a.pid, f.procs) for a in f.apps if a.pid in in_ps}
    hs = gpuowners.holders(
        known, f.procs, f.apps, {r.uuid: r.index for r in f.gpus}, leaving=leaving, describe=describe
    )
    for plan in plans:
        r = plan.replica
        dup = live.get(r.name)
        if dup is not None and (leaving is None or dup.name != leaving.name):
            checks.append(
                PreCheck(
                    "not running", False, f"{r.name} is already running (pid {dup.pid}); stop it first or use restart"
                )
            )
            continue
        if f.gpu_error:
            checks.append(PreCheck("gpus free", False, f"cannot check GPUs on {host}: {f.gpu_error}"))
        else:
            checks += gpu_checks(plan, f, hs, force=force)
        owner = owners.get(r.port) if owners.get(r.port) != r.name else None
        if r.port in f.listen and not _is_leaving(f.listen[r.port], leaving, f.procs):
            pid = f.listen[r.port]
            who = describe_pid(ctl, host, pid, f.procs) if pid else (owner or "another process")
            checks.append(PreCheck("port free", False, f"port {r.port} on {host} is in use by {who}"))
        elif owner is not None:
            om = live.get(owner)
            who = f"{owner}, {describe_pid(ctl, host, om.pid, f.procs)}" if om is not None and om.pid else owner
            s = ctl.state.servers.get(owner)
            why = (
                ""
                if s is not None and s.phase.up
                else ", which is still starting (a server listens once it has loaded)"
                if s is not None and s.meta.managed
                else ", which does not listen on it (yet, or any more)"
            )
            checks.append(PreCheck("port free", False, f"port {r.port} on {host} belongs to {who}{why}"))
        elif not f.ports_known:
            checks.append(
                PreCheck(
                    "port free",
                    False,
                    f"cannot list listening ports on {host} (no ss, no /proc/net/tcp)",
                    blocking=False,
                )
            )
    if f.log_free_kib is not None and f.log_free_kib < LOG_DISK_MIN_KIB:
        checks.append(
            PreCheck(
                "log disk",
                False,
                f"no space for the server log on {host}: "
                f"{f.log_free_kib // 1024} MiB free on {f.log_mount} (log dir "
                f"{plans[0].log_path.rsplit('/', 1)[0] if plans else '?'}; disk full?)",
            )
        )
    elif f.log_free_kib is not None and f.log_free_kib < LOG_DISK_WARN_KIB:
        checks.append(
            PreCheck(
                "log disk",
                False,
                f"only {f.log_free_kib // 1024} MiB free for logs on {host} ({f.log_mount})",
                blocking=False,
            )
        )
    if f.run_free_kib is not None and f.run_free_kib < RUN_DISK_MIN_KIB:
        checks.append(
            PreCheck(
                "run_dir disk",
                False,
                f"no space for meta.json in run_dir on {host}: "
                f"{f.run_free_kib} KiB free on {f.run_mount} (run_dir "
                f"{ctl.fleet.hosts[host].run_dir}; disk full?)",
            )
        )
    if f.model_present is False:
        checks.append(PreCheck("model present", False, f"model path {preset.model} does not exist on {host}"))
    if f.draft_present is False:
        draft = draft_model_path(preset.args)
        checks.append(
            PreCheck("draft model present", False, f"speculative draft model {draft} does not exist on {host}")
        )
    if f.model_config_error:
        checks.append(
            PreCheck(
                "model config",
                False,
                f"{preset.model}/config.json on {host}: {f.model_config_error}; lint rules that read it were skipped",
                blocking=False,
            )
        )
    if not any(not c.ok and c.blocking for c in checks):
        shared = any(c.name.startswith("gpus") for c in checks)
        checks.append(
            PreCheck(
                "pre-checks",
                True,
                f"GPUs {', '.join(','.join(map(str, p.replica.gpus)) for p in plans)}"
                f" {'usable (shared: see above)' if shared else 'free'}, port(s) {', '.join(str(p.replica.port) for p in plans)} free, model present",
            )
        )
    return checks
