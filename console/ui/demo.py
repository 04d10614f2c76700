"""`dflash-console --demo`: the real console on a temporary sim fleet — UI first, fleet brought up behind it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from console.config import Fleet
from console.fleet.api import FleetApi

SERVING_PRESET = "qwen36-mtp"
STARTING_PRESET = "qwen36-bench"
LOAD_EVERY_S = 1.5


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def with_free_ports(fleet: Fleet) -> Fleet:
    """Moves each preset to ports nobody on this machine holds (sim hosts share the local port space)."""
    taken: set[int] = set()
    presets = {}
    for name, p in fleet.presets.items():
        n = len(p.port) if isinstance(p.port, list) else max(1, len(p.gpus) // (p.tp or len(p.gpus)))
        base = p.port[0] if isinstance(p.port, list) else p.port
        while any(q in taken or not _port_free(q) for q in range(base, base + n)):
            base += 10
        taken.update(range(base, base + n))
        presets[name] = p.model_copy(update={"port": list(range(base, base + n)) if isinstance(p.port, list) else base})
    return fleet.model_copy(update={"presets": presets})


class DemoFleet:
    """Owns the temp sim dir: builds it, launches the opening servers, crashes on request, cleans up."""

    def __init__(self, *, time_scale: float = 0.25, read_only: bool = False, root: str | None = None,
                 autostart: bool = True) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="dfc-demo-"))
        self.time_scale = time_scale
        self.read_only = read_only
        self.autostart = autostart
        self.api: FleetApi | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    async def bring_up(self) -> FleetApi:
        """Builds the sim hosts (in a thread: file IO) and returns a controller over them."""
        from console.config import load_fleet
        from console.fleet.controller import FleetController
        from console.sim.fleet import sim_up

        path = await asyncio.to_thread(sim_up, self.root, ("ct129", "blackwell"), self.time_scale)
        fleet = with_free_ports(load_fleet(path))
        self.api = FleetController(fleet, read_only=self.read_only)
        return self.api

    async def after_start(self, api: FleetApi) -> None:
        """Opening scene: one server serving under light load, one starting."""
        if not self.autostart or self.read_only:
            return
        presets = api.fleet.presets
        if SERVING_PRESET in presets:
            out = await api.launch(SERVING_PRESET, wait=True)
            if not out.ok:
                raise RuntimeError(f"demo: {SERVING_PRESET} did not start: {out.message}")
            if out.servers:
                self._tasks.append(asyncio.create_task(self._light_load(api, out.servers[0])))
        if STARTING_PRESET in presets:
            await api.launch(STARTING_PRESET)

    async def _light_load(self, api: FleetApi, name: str) -> None:
        """A trickle of short requests so tok/s and the sparkline move."""
        import httpx

        async with httpx.AsyncClient(timeout=30) as client:
            while True:
                s = api.state.servers.get(name)
                if s is None or not s.alive:
                    await asyncio.sleep(LOAD_EVERY_S)
                    continue
                with contextlib.suppress(Exception):
                    url = await api.server_url(name)
                    await client.post(f"{url}/v1/chat/completions", json={
                        "messages": [{"role": "user", "content": "Say something about GPUs."}],
                        "max_tokens": 96, "stream": False})
                await asyncio.sleep(LOAD_EVERY_S)

    def host_dir(self, host: str) -> Path:
        return self.root / host

    async def crash(self, name: str) -> None:
        """Asks the sim server to die the way a CUDA assert kills SGLang (`sim: crash server`)."""
        from console.sim.control import inject

        if self.api is None or name not in self.api.state.servers:
            raise ValueError(f"no such server: {name}")
        m = self.api.state.servers[name].meta
        key = m.port or m.pid
        if key is None:
            raise ValueError(f"{name} has no port or pid to address")
        await asyncio.to_thread(inject, self.host_dir(m.host), key, "crash", kind="cuda-assert")

    def cleanup(self) -> None:
        """Stops every sim process and removes the temp tree."""
        for t in self._tasks:
            t.cancel()
        from console.sim.fleet import sim_down

        with contextlib.suppress(Exception):
            sim_down(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def run_demo(args: argparse.Namespace) -> int:
    """Opens the UI at once on an empty fleet; the sim comes up in a worker."""
    from console.ui.app import DflashApp

    scale = float(os.environ.get("DFC_DEMO_TIME_SCALE", "0.25"))
    demo = DemoFleet(read_only=bool(getattr(args, "read_only", False)), time_scale=scale)
    app = DflashApp(api_factory=demo.bring_up, demo=demo, read_only=demo.read_only,
                    theme=getattr(args, "theme", None))
    try:
        app.run()
    finally:
        demo.cleanup()
    return int(app.return_code or 0)
