"""The real sglang-router on a sim GPU host behind a real sshd (its own network namespace when root): started,
reached through the console's SSH tunnel, fed by the worker sync when a replica dies, and stopped (its process
gone on the host)."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.router.command import worker_url
from console.router.manager import RouterManager
from console.sglang.client import SGLangClient
from tests.faults.simfleet import build_sim_fleet, controller, isolate_env, preset_toml, scratch_root, wait_for
from tests.router.scenario import free_block

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None, reason="sglang-router is a dev dependency (uv sync)"
)


@pytest.fixture
def sim_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    isolate_env(tmp_path, monkeypatch)
    d = scratch_root()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


async def test_router_behind_sshd_up_sync_down(ssh_host_factory, sim_root: Path):
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["gpuhost"])
    h = sf.hosts["gpuhost"]
    base = free_block(4)
    presets = (
        preset_toml("gen", h, gpus="[0, 1]", port=base, extra="tp = 1")
        + f'[routers.lb]\nhost = "gpuhost"\npresets = ["gen"]\nport = {base + 2}\npolicy = "round_robin"\n'
    )
    async with controller(sf.fleet(presets)) as ctl:
        assert await ctl.wait_hosts(15)
        mgr = RouterManager(ctl)
        watch: asyncio.Task[None] | None = None
        try:
            out = await ctl.launch("gen", wait=True)
            assert out.ok, out.message
            await wait_for(lambda: len(mgr.ready_urls("lb")) == 2, 20, "2 replicas with /health 200")
            out = await mgr.up("lb")
            assert out.ok, out.message
            pid = mgr.views["lb"].pid
            assert pid and h.ssh.exec(f"ps -o args= -s {pid}").stdout.strip()  # the router runs on the host
            url = await ctl.server_url("router:lb")
            assert url.startswith("http://127.0.0.1:")  # through the SSH tunnel
            r = await SGLangClient(url).probe()
            assert r.error is None and r.text, r.error

            watch = asyncio.create_task(mgr.watch(every=0.5))
            victim = sorted(n for n, s in ctl.state.servers.items() if s.meta.preset == "gen")[0]
            port = ctl.state.servers[victim].meta.port
            assert port is not None
            h.crash(port)
            gone = worker_url("127.0.0.1", port)
            await wait_for(
                lambda: gone not in {w.url for w in mgr.views["lb"].workers} and len(mgr.views["lb"].workers) == 1,
                20,
                "the dead replica removed at the router",
            )
            r = await SGLangClient(url).probe()  # the endpoint still answers through the other replica
            assert r.error is None, r.error
        finally:
            if watch is not None:
                watch.cancel()
            out = await mgr.down("lb")
            await mgr.aclose()
        assert out.ok, out.message
        assert not h.ssh.exec(f"ps -o stat= -s {pid} | grep -v '^Z' || true").stdout.strip()
