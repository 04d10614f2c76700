"""Where a bench goes: a BenchTarget filled in from a live server's state (for the CLI's `bench` and the BenchScreen).

It lives in the fleet layer because it reads the fleet's config and state; the UI and the CLI both come here,
so neither imports the other.
"""

from __future__ import annotations

import os

from console.fleet.api import FleetApi
from console.fleet.state import ServerState
from console.sglang.bench import BenchTarget


async def target_from_state(api: FleetApi, server: str, preset: str | None, srv: ServerState) -> BenchTarget:
    """A BenchTarget from a live ServerState: its URL (through the tunnel), server args, GPU model, key and env."""
    fleet = api.fleet
    meta = srv.meta
    host = fleet.hosts.get(meta.host)
    p = fleet.presets.get(preset) if preset else None
    key_env = api.api_key_env(server)
    gpu_names: list[str] = []
    hs = api.state.hosts.get(meta.host)
    if hs is not None:
        gpu_names = [hs.gpus[g].reading.name for g in meta.gpus if g in hs.gpus and hs.gpus[g].reading.name]
    argv = list(meta.argv)
    if "-m" in argv:
        argv = argv[argv.index("-m") + 2 :]
    elif p is not None:
        argv = ["--tp-size", str(len(meta.gpus)), *p.args]
    env = dict(host.env) if host is not None else {}
    if p is not None:
        env.update(p.env)
    return BenchTarget(
        server=server,
        preset=preset,
        host=meta.host,
        port=meta.port,
        url=await api.server_url(server),
        gpus=tuple(meta.gpus),
        server_args=argv,
        gpu_model=(f"{len(gpu_names)}x {gpu_names[0]}" if len(set(gpu_names)) == 1 else ", ".join(gpu_names)) or None,
        api_key=os.environ.get(key_env) if key_env else None,
        python=(p.python if p is not None and p.python else host.python if host is not None else None),
        model_path=p.model if p is not None else None,
        env=env,
    )
