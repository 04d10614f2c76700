"""Who holds a host's GPUs, one entry per owner: a known server (all its ranks) or a bare process.

Pure: fresh `ps` rows, compute apps and the servers the console knows in, owners out. The launch
pre-check names each owner once (a server's main pid and its rank's compute app are one owner), and a
stop is confirmed by the stopped server's own pids leaving the process table and the compute apps,
whatever else shares the GPU (an Xorg, a notebook, another user's job), which is then named.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from console.fleet.events import ProcInfo, ServerMeta
from console.gpu.readings import ComputeApp, GpuReading

DEFAULT_MEM_FRACTION = 0.88
"""SGLang's --mem-fraction-static when it cannot size it (GPU memory unknown): the pre-check's assumption when a
preset sets none."""


@dataclass
class Holder:
    """One owner of VRAM on some GPUs: `server` is its name when it is a server the console knows."""

    key: str
    label: str
    """How a refusal names it: `qwen@h100:gpu0 (pid 530, preset qwen)`, `pid 698 `python3 hog.py``."""
    short: str
    """How a stop's result names it: `external@h100:30001 pid 698`, `python3 pid 698`."""
    server: str | None
    mib: dict[int, int] = field(default_factory=dict)
    """GPU index -> MiB it holds there (0: on the GPU by its meta, no compute app listed yet)."""


def gib(mib: int | float | None) -> str:
    """`23.3 GiB` from MiB (`? GiB` unknown)."""
    return "? GiB" if mib is None else f"{mib / 1024:.1f} GiB"


def flag_value(argv: Iterable[str], flag: str) -> str | None:
    """The value of `--flag V` or `--flag=V` in an argv (the last one wins, as argparse does)."""
    out = None
    args = list(argv)
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            out = args[i + 1]
        elif a.startswith(flag + "="):
            out = a.split("=", 1)[1]
    return out


def headroom_mib(argv: Iterable[str], total_mib: int) -> int:
    """VRAM a server of this argv leaves to other processes: total x (1 - --mem-fraction-static)."""
    v = flag_value(argv, "--mem-fraction-static")
    try:
        frac = float(v) if v is not None else DEFAULT_MEM_FRACTION
    except ValueError:
        frac = DEFAULT_MEM_FRACTION
    if not 0 < frac < 1:
        frac = DEFAULT_MEM_FRACTION
    return int(total_mib * (1 - frac))


def session_pids(meta: ServerMeta, procs: Iterable[ProcInfo]) -> set[int]:
    """The server's processes in a ps sample: its main pid and every process of its session (all TP ranks)."""
    return {p.pid for p in procs if (meta.sid is not None and p.sid == meta.sid) or p.pid == meta.pid}


def _server_of(pid: int, sid: int | None, servers: list[ServerMeta], leaving: ServerMeta | None) -> ServerMeta | None:
    for m in servers:
        if leaving is not None and m.name == leaving.name:
            continue
        if m.pid == pid or (sid is not None and m.sid is not None and m.sid == sid):
            return m
    return None


def server_label(m: ServerMeta) -> str:
    extra = f", preset {m.preset}" if m.preset and m.managed else ""
    return f"{m.name} (pid {m.pid}{extra})" if m.pid else m.name


def holders(
    servers: list[ServerMeta],
    procs: list[ProcInfo],
    apps: list[ComputeApp],
    index_of: dict[str, int],
    *,
    own: Collection[int] = (),
    leaving: ServerMeta | None = None,
    describe: dict[int, str] | None = None,
) -> list[Holder]:
    """Every owner of VRAM on the host, once each, in the order first met.

    `servers`: live servers known on the host (managed: their meta's GPUs count even before a compute app shows);
    `own`/`leaving`: the server being stopped or restarted, whose processes are nobody's here;
    `describe`: pid -> how a refusal shows a bare process (its args), else its compute-app name."""
    sid_of = {p.pid: p.sid for p in procs}
    out: dict[str, Holder] = {}
    for a in apps:
        g = index_of.get(a.gpu_uuid)
        if g is None or a.pid in own:
            continue
        sid = sid_of.get(a.pid)
        if leaving is not None and (a.pid == leaving.pid or (sid is not None and sid == leaving.sid)):
            continue
        m = _server_of(a.pid, sid, servers, leaving)
        if m is not None:
            h = out.setdefault(m.name, Holder(m.name, server_label(m), f"{m.name} pid {m.pid or a.pid}", m.name))
        else:
            name = a.process_name.rsplit("/", 1)[-1] or "process"
            what = (describe or {}).get(a.pid) or f"pid {a.pid} `{name}`"
            h = out.setdefault(f"pid {a.pid}", Holder(f"pid {a.pid}", what, f"{name} pid {a.pid}", None))
        h.mib[g] = h.mib.get(g, 0) + (a.used_mib or 0)
    for m in servers:
        if not m.managed or (leaving is not None and m.name == leaving.name):
            continue
        h = out.setdefault(m.name, Holder(m.name, server_label(m), f"{m.name} pid {m.pid}", m.name))
        for g in m.gpus:
            h.mib.setdefault(g, 0)
    return list(out.values())


def unlisted_mib(row: GpuReading, apps: list[ComputeApp]) -> int:
    """Memory in use on a GPU that no compute app accounts for (another container, a driver reservation)."""
    listed = sum(a.used_mib or 0 for a in apps if a.gpu_uuid == row.uuid)
    return max(0, (row.memory_used_mib or 0) - listed)


@dataclass(frozen=True)
class Release:
    """Where a stop stands: `waiting` says which of the server's own pids are still there (empty: confirmed);
    `others` names what else holds each of its GPUs."""

    waiting: list[str]
    others: list[str]
    free: list[str]


def release(
    meta: ServerMeta,
    own: set[int],
    procs: list[ProcInfo],
    rows: list[GpuReading],
    apps: list[ComputeApp],
    servers: list[ServerMeta],
    busy_mib: int,
) -> Release:
    """A stop is confirmed when none of `own` (the server's pids, every rank) is in `procs` or in `apps`."""
    by_uuid = {r.uuid: r.index for r in rows}
    waiting = [f"pid {p.pid} still running" for p in procs if p.pid in own]
    for a in apps:
        if a.pid in own:
            waiting.append(f"pid {a.pid} still holds {gib(a.used_mib)} on GPU {by_uuid.get(a.gpu_uuid, '?')}")
    others: list[str] = []
    free: list[str] = []
    hs = holders(servers, procs, apps, by_uuid, own=own, leaving=meta)
    rows_of = {r.index: r for r in rows}
    for g in meta.gpus:
        r = rows_of.get(g)
        if r is None:
            continue
        on = [h.short for h in hs if g in h.mib and h.mib[g] > 0]
        rest = unlisted_mib(r, [a for a in apps if a.pid not in own])
        if on:
            others.append(f"GPU {g} still holds {gib(r.memory_used_mib)}: {', '.join(on)}")
        elif rest > busy_mib and not waiting:
            others.append(f"GPU {g} still holds {gib(r.memory_used_mib)} (no process listed)")
        else:
            free.append(f"GPU {g} {r.memory_used_mib} MiB")
    return Release(waiting, others, free)
