"""Re-attach: on connect, find managed servers from `{run_dir}/servers/*/meta.json` plus a live session.

meta.json is the console's record of a launch (written by actions.launch, removed by a clean stop),
so a console restart neither loses a running server nor launches it twice. A meta whose session
is gone is a server that died while nobody watched: it is shown crashed, with its log.
"""

from __future__ import annotations

import json
import re
from typing import Any

from console import hostjson
from console.config import Host
from console.fleet.events import ProcInfo, ServerMeta
from console.fleet.monitor import SGLANG_RE, parse_ps
from console.sglang.command import shell_path

_SGLANG = re.compile(SGLANG_RE)
META_NAME = "meta.json"
META_MAX_BYTES = 262_144
"""A meta.json is a few KiB (argv, env, command); reading more of one from a host is refused by truncation
(the cut document is then not JSON and skips only its own server)."""


def safe_name(name: str) -> str:
    """A replica name as a directory name: `qwen@gpu1:gpu0-1` -> `qwen@gpu1_gpu0-1`."""
    return re.sub(r"[^A-Za-z0-9._@-]", "_", name).strip(".") or "server"


def servers_dir(host: Host) -> str:
    return f"{host.run_dir.rstrip('/')}/servers"


def meta_dir(host: Host, name: str) -> str:
    return f"{servers_dir(host)}/{safe_name(name)}"


def list_command(host: Host) -> str:
    """Every meta.json (one JSON line after `==> meta`), its last launches (`==> hist`), then ps."""
    d = shell_path(servers_dir(host))
    return (
        f'for m in {d}/*/{META_NAME}; do [ -f "$m" ] || continue; echo "==> meta"; '
        f'head -c {META_MAX_BYTES} "$m" | tr -d "\\n"; echo; '
        'h="${m%/*}/history.jsonl"; [ -f "$h" ] && { echo "==> hist"; tail -n 20 "$h" | '
        f"head -c {20 * META_MAX_BYTES}; echo; }}; done; "
        'echo "==> ps"; ps -ww -eo pid=,ppid=,sid=,args='
    )


def meta_to_json(m: ServerMeta, extra: dict[str, Any] | None = None) -> str:
    d = {
        "name": m.name,
        "host": m.host,
        "preset": m.preset,
        "gpus": list(m.gpus),
        "port": m.port,
        "bind": m.bind,
        "pid": m.pid,
        "sid": m.sid,
        "log_path": m.log_path,
        "argv": list(m.argv),
        "env": dict(m.env),
        "started_at": m.started_at,
        "command": m.command,
        "launch_id": m.launch_id,
    }
    d.update(extra or {})
    return json.dumps(d, ensure_ascii=False)


def meta_from_json(d: dict[str, Any], host_name: str) -> ServerMeta | None:
    try:
        return ServerMeta(
            name=str(d["name"]),
            host=host_name,
            gpus=tuple(int(g) for g in d.get("gpus", ())),
            port=int(d["port"]) if d.get("port") is not None else None,
            preset=d.get("preset"),
            managed=True,
            pid=int(d["pid"]) if d.get("pid") is not None else None,
            sid=int(d["sid"]) if d.get("sid") is not None else None,
            log_path=d.get("log_path"),
            argv=tuple(d.get("argv", ())),
            env=tuple(sorted((str(k), str(v)) for k, v in dict(d.get("env", {})).items())),
            started_at=d.get("started_at"),
            command=str(d.get("command", "")),
            launch_id=str(d.get("launch_id", "")),
            bind=str(d.get("bind", "127.0.0.1")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def parse_listing(text: str, host_name: str) -> tuple[list[ServerMeta], list[ProcInfo]]:
    metas, _, procs = parse_listing_full(text, host_name)
    return metas, procs


def parse_listing_full(text: str, host_name: str) -> tuple[list[ServerMeta], dict[str, list[str]], list[ProcInfo]]:
    """(metas, name -> older log paths oldest first, process table)."""
    head, _, ps = text.partition("==> ps\n")
    metas: list[ServerMeta] = []
    history: dict[str, list[str]] = {}
    section = "meta"
    for ln in head.splitlines():
        ln = ln.strip()
        if ln in ("==> meta", "==> hist"):
            section = ln[4:]
            continue
        if not ln:
            continue
        try:  # one unreadable meta.json (not JSON, nested too deep) costs only its own server, never the listing
            d = hostjson.loads(ln, f"meta.json on {host_name}")
        except hostjson.HostJsonError:
            continue
        if section == "meta":
            m = meta_from_json(d, host_name)
            if m is not None:
                metas.append(m)
        elif metas and isinstance(d, dict) and d.get("log_path"):
            old = history.setdefault(metas[-1].name, [])
            if d["log_path"] != metas[-1].log_path and d["log_path"] not in old:
                old.append(str(d["log_path"]))
    return metas, history, parse_ps(ps)


def is_alive(m: ServerMeta, procs: list[ProcInfo]) -> bool:
    """Its session still holds an SGLang process (a recycled pid running something else is not it)."""
    for p in procs:
        if (m.sid is not None and p.sid == m.sid) or (m.pid is not None and p.pid == m.pid):
            if _SGLANG.search(p.args):
                return True
    return False
