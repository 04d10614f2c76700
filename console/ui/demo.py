"""`dflash-console --demo`: the real console on a temporary sim fleet — UI first, fleet brought up behind it.

The demo is its own: its journal, bench history and exports live in its temp dir (never the user's state
dir), its ports are claimed against every other demo on the machine, and closing the terminal (SIGHUP) or
SIGTERM cleans up as quitting does.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from console.config import Fleet
from console.fleet.api import FleetApi
from console.pids import pid_alive

SERVING_PRESET = "qwen36-mtp"
STARTING_PRESET = "qwen36-bench"
DFLASH_PRESET = "qwen36-dflash"
"""Serves beside the MTP preset from the start: the drafter the team trains against the stock MTP heads."""
LOAD_EVERY_S = 1.5


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def with_free_ports(fleet: Fleet, claimed: set[int] | None = None) -> Fleet:
    """Moves each preset to ports nobody on this machine holds or has claimed (sim hosts share the local port space)."""
    taken: set[int] = set(claimed or ())
    presets = {}
    for name, p in fleet.presets.items():
        n = len(p.port) if isinstance(p.port, list) else max(1, len(p.gpus) // (p.tp or len(p.gpus)))
        base = p.port[0] if isinstance(p.port, list) else p.port
        while any(q in taken or not _port_free(q) for q in range(base, base + n)):
            base += 10
        taken.update(range(base, base + n))
        presets[name] = p.model_copy(update={"port": list(range(base, base + n)) if isinstance(p.port, list) else base})
    routers = {}
    for name, r in fleet.routers.items():  # a router's port and its metrics port, moved the same way
        base = r.port
        while any(q in taken or not _port_free(q) for q in (base, base + 1)):
            base += 10
        taken.update((base, base + 1))
        routers[name] = r.model_copy(update={"port": base, "metrics_port": base + 1})
    return fleet.model_copy(update={"presets": presets, "routers": routers})


def fleet_ports(fleet: Fleet) -> set[int]:
    return {
        q
        for p in fleet.presets.values()
        for q in (
            p.port if isinstance(p.port, list) else range(p.port, p.port + max(1, len(p.gpus) // (p.tp or len(p.gpus))))
        )
    } | {q for r in fleet.routers.values() for q in (r.port, r.prometheus_port)}


class PortClaims:
    """Ports each running demo on this machine chose, in one JSON file under an flock.

    A bind test alone lets two demos started together pick the same ports (neither listens yet); a claim
    of a demo whose process is gone is free again."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or Path(tempfile.gettempdir()) / f"dflash-console-demo-ports-{os.getuid()}.json"
        self.key = f"{os.getpid()}:{id(self)}"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                claims = json.loads(self.path.read_text()) if self.path.exists() else {}
            except (OSError, ValueError):
                claims = {}
            claims = {k: v for k, v in claims.items() if isinstance(v, dict) and pid_alive(int(k.split(":")[0]))}
            yield claims
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(claims))
            os.replace(tmp, self.path)

    def claim(self, fleet: Fleet, root: Path) -> Fleet:
        """The fleet moved to ports free here and claimed by no other demo; the claim is recorded at once."""
        with self._locked() as claims:
            others = {int(q) for k, v in claims.items() if k != self.key for q in v.get("ports", ())}
            moved = with_free_ports(fleet, others)
            claims[self.key] = {"ports": sorted(fleet_ports(moved)), "root": str(root)}
        return moved

    def release(self) -> None:
        with contextlib.suppress(OSError), self._locked() as claims:
            claims.pop(self.key, None)


class DemoFleet:
    """Owns the temp sim dir: builds it, launches the opening servers, crashes on request, cleans up."""

    def __init__(
        self, *, time_scale: float = 0.25, read_only: bool = False, root: str | None = None, autostart: bool = True
    ) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="dfc-demo-"))
        self.state_dir = self.root / "state"
        """The demo's own state dir (journal, bench history, exports): never the user's."""
        self.claims = PortClaims()
        self._cleaned = False
        self.time_scale = time_scale
        self.read_only = read_only
        self.autostart = autostart
        self.api: FleetApi | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    async def bring_up(self) -> FleetApi:
        """Builds the sim hosts (in a thread: file IO) and returns a controller over them."""
        from console.config import load_fleet
        from console.fleet.controller import FleetController
        from console.fleet.journal import Journal
        from console.sim.fleet import sim_up

        path = await asyncio.to_thread(sim_up, self.root, ("ct129", "blackwell"), self.time_scale)
        fleet = await asyncio.to_thread(self.claims.claim, load_fleet(path), self.root)
        self.api = FleetController(fleet, read_only=self.read_only, journal=Journal(self.state_dir / "journal.jsonl"))
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
        if DFLASH_PRESET in presets:
            out = await api.launch(DFLASH_PRESET)
            if out.ok and out.servers:
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
                    await client.post(
                        f"{url}/v1/chat/completions",
                        json={
                            "messages": [{"role": "user", "content": "Say something about GPUs."}],
                            "max_tokens": 96,
                            "temperature": 0,  # greedy, as a drafter A/B is run: accept lengths comparable
                            "stream": False,
                        },
                    )
                await asyncio.sleep(LOAD_EVERY_S)

    def host_dir(self, host: str) -> Path:
        return self.root / host

    async def crash(self, name: str) -> None:
        """Asks the sim server to die the way a CUDA assert kills SGLang (`sim: crash server`)."""
        await self._inject(name, "crash", kind="cuda-assert")

    async def drafter(self, name: str, p: float | None) -> None:
        """Sets a sim server's draft acceptance (`sim: drafter collapse` 0.0; None: its algorithm's own again)."""
        await self._inject(name, "accept", p=p)

    async def _inject(self, name: str, action: str, **kw: Any) -> None:
        """One sim control command to a server, addressed by its port (else its pid) on its host."""
        from console.sim.control import inject

        if self.api is None or name not in self.api.state.servers:
            raise ValueError(f"no such server: {name}")
        m = self.api.state.servers[name].meta
        key = m.port or m.pid
        if key is None:
            raise ValueError(f"{name} has no port or pid to address")
        await asyncio.to_thread(inject, self.host_dir(m.host), key, action, **kw)

    def cleanup(self) -> None:
        """Stops every sim process, releases the ports and removes the temp tree (safe to call again)."""
        for t in self._tasks:
            t.cancel()
        from console.sim.fleet import sim_down

        with contextlib.suppress(Exception):
            sim_down(self.root)
        if not self._cleaned:
            self._cleaned = True
            self.claims.release()
        self.remove_tree()
        for _ in range(3):  # the console's own monitor and tail loops on the sim hosts, and one-shot children
            if not _kill_mentioning(self.root):  # forked while the others were being killed
                break
        self.remove_tree()  # again: what those loops' ends journaled meanwhile (the journal makes its directory)

    def remove_tree(self) -> None:
        """The temp tree alone, at a hard exit: whatever the console wrote there since cleanup() goes too."""
        shutil.rmtree(self.root, ignore_errors=True)


def _kill_mentioning(root: Path) -> int:
    """SIGKILL every process (but this one) whose argv names a path under the demo's root: all of them are the
    demo's (sim servers, and the monitor/tail loops the local transport started in their own sessions, which
    outlive a console killed by a signal). Returns how many there were."""
    marker = str(root.resolve()).encode() + b"/"
    n = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if marker not in (d / "cmdline").read_bytes():
                continue
            os.kill(int(d.name), signal.SIGKILL)
            n += 1
        except (OSError, ValueError):
            continue
    return n
