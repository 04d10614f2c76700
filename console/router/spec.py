"""`[routers.NAME]` in hosts.toml: one SGLang router in front of the replicas of one or more presets.

The router is SGLang's (`python -m sglang_router.launch_router`); the console only starts, stops and
feeds it. Its workers are the live replicas of `presets`, which must run on the router's host (the
router reaches them on that host's loopback, as the console's own tunnels do).
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ROUTER_PREFIX = "router:"
"""A router's name wherever a server name goes (chat, probe, bench): `router:gen`."""
POLICIES = ("cache_aware", "round_robin", "power_of_two", "random")
ROUTER_OWNED_FLAGS = ("--host", "--port", "--policy", "--worker-urls", "--prometheus-port", "--prometheus-host")


class RouterSpec(BaseModel):
    """One router: where it listens, how it picks a worker, whose replicas are its workers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str
    """Name of a [hosts.NAME] table; the router runs there, in the host's (or `python`'s) venv."""
    presets: list[str] = Field(min_length=1)
    """Presets on that host whose replicas are the router's workers."""
    port: int = Field(default=30080, ge=1, le=65535)
    """The router's OpenAI endpoint port (`--port`)."""
    bind: str = "0.0.0.0"
    """The router's `--host`."""
    policy: Literal["cache_aware", "round_robin", "power_of_two", "random"] = "cache_aware"
    """`--policy`: cache_aware (prefix-cache affinity with load balancing), round_robin, power_of_two, random."""
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    """`--prometheus-port` (on 127.0.0.1); default `port + 1`."""
    args: list[str] = Field(default_factory=list)
    """More `launch_router` flags, one token per item (e.g. ["--retry-max-retries", "3"])."""
    python: str | None = None
    """Interpreter with `sglang-router` installed; default the host's."""
    description: str = ""

    @property
    def prometheus_port(self) -> int:
        return self.metrics_port or self.port + 1


def cross_check(data: dict[str, Any], add: Any) -> None:
    """Rules spanning tables: the host and presets exist, presets run on the router's host, ports are free of
    the presets' ports, console-owned flags stay out of `args`. `add(path, message)` records one error."""
    hosts = v if isinstance(v := data.get("hosts"), dict) else {}
    presets = v if isinstance(v := data.get("presets"), dict) else {}
    routers = v if isinstance(v := data.get("routers"), dict) else {}
    claimed: dict[tuple[str, int], str] = {}
    for pname, p in presets.items():
        if isinstance(p, dict) and isinstance(p.get("host"), str):
            for port in _preset_ports(p):
                claimed[(p["host"], port)] = f"preset {pname}"
    for name, r in routers.items():
        if not isinstance(r, dict):
            continue
        host = r.get("host")
        if isinstance(host, str) and host not in hosts:
            near = difflib.get_close_matches(host, list(hosts), n=1, cutoff=0.5)
            add(("routers", name, "host"), f"unknown host '{host}'" + (f" — did you mean '{near[0]}'?" if near else ""))
        for i, pn in enumerate(v if isinstance(v := r.get("presets"), list) else []):
            if not isinstance(pn, str):
                continue
            if pn not in presets:
                near = difflib.get_close_matches(pn, list(presets), n=1, cutoff=0.5)
                add(
                    ("routers", name, "presets", i),
                    f"unknown preset '{pn}'" + (f" — did you mean '{near[0]}'?" if near else ""),
                )
            elif isinstance(presets[pn], dict) and isinstance(host, str) and presets[pn].get("host") != host:
                add(
                    ("routers", name, "presets", i),
                    f"preset {pn} runs on host {presets[pn].get('host')}, "
                    f"not on the router's host {host}; a router's workers are on its own host",
                )
            elif isinstance(presets[pn], dict) and _keyed(presets[pn]):
                add(
                    ("routers", name, "presets", i),
                    f"preset {pn} requires an API key; a router in front of it "
                    "would need that key on its own argv (sglang-router takes --api-key only), so it is not supported",
                )
        port = r.get("port", 30080)
        mport = r.get("metrics_port")
        if isinstance(port, int) and not isinstance(port, bool) and isinstance(host, str):
            mport = mport if isinstance(mport, int) and not isinstance(mport, bool) else port + 1
            for key, pt in (("port", port), ("metrics_port", mport)):
                owner = claimed.get((host, pt))
                if owner is not None:
                    add(("routers", name, key), f"port {pt} is also used by {owner} on {host}")
                claimed[(host, pt)] = f"router {name}"
        args = r.get("args")
        for i, a in enumerate(args if isinstance(args, list) else []):
            if isinstance(a, str) and a.split("=", 1)[0] in ROUTER_OWNED_FLAGS:
                add(
                    ("routers", name, "args", i),
                    f"'{a.split('=', 1)[0]}' is set by the console from the router's "
                    "port/bind/policy/metrics_port and its presets' replicas; remove it from args",
                )


def _preset_ports(p: dict[str, Any]) -> list[int]:
    port = p.get("port", 30000)
    if isinstance(port, list):
        return [x for x in port if isinstance(x, int) and not isinstance(x, bool)]
    if not isinstance(port, int) or isinstance(port, bool):
        return []
    gpus = v if isinstance(v := p.get("gpus"), list) else []
    tp = p.get("tp") or len(gpus) or 1
    n = len(gpus) // tp if isinstance(tp, int) and tp > 0 and gpus else 1
    return [port + i for i in range(max(n, 1))]


def _keyed(p: dict[str, Any]) -> bool:
    raw = p.get("args")
    args: list[Any] = raw if isinstance(raw, list) else []
    return bool(p.get("api_key_env")) or any(isinstance(a, str) and a.split("=", 1)[0] == "--api-key" for a in args)
