"""The real SGLang router (sglang-router) in front of sim replicas on a local sim host, driven by the console:
up over the serving replicas, chat through it, a replica SIGKILLed under load (failed requests counted, the
crashed worker removed at the router, the relaunched one added back), down."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from console.fleet.controller import FleetController
from console.fleet.journal import Journal
from console.router.command import worker_url
from console.router.manager import RouterManager
from console.sglang.client import SGLangClient
from tests.patience import patient
from tests.router.scenario import PRESET, ROUTER, crash_under_load, open_rig, wait_until

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None, reason="sglang-router is a dev dependency (uv sync)"
)


def _router_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def root():
    d = Path(tempfile.mkdtemp(prefix="dfc-router-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


async def test_router_up_chat_crash_under_load_relaunch_down(root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DFLASH_STATE_DIR", str(root / "state"))
    monkeypatch.setenv("DFLASH_SIM_TOKEN_RATE", "400")
    rig = await open_rig(root, replicas=3)
    try:
        out = await rig.ctl.launch(PRESET, wait=True)
        assert out.ok, out.message
        await wait_until(lambda: len(rig.mgr.ready_urls(ROUTER)) == 3, patient(20), "3 replicas with /health 200")

        out = await rig.mgr.up(ROUTER, wait_s=patient(60))
        assert out.ok, out.message
        v = rig.mgr.views[ROUTER]
        assert v.phase == "running" and v.pid
        assert sorted(w.url for w in v.workers) == rig.mgr.ready_urls(ROUTER)
        again = await rig.mgr.up(ROUTER)
        assert not again.ok and "already running" in again.message

        # a second console opening now (nothing re-attached, no /health answer yet) leaves the workers alone
        fresh = FleetController(rig.ctl.fleet, journal=Journal(root / "journal2.jsonl"))
        await fresh.start()
        other = RouterManager(fresh)
        try:
            for _ in range(10):
                await other.refresh(ROUTER)
                assert not await other.sync(ROUTER)
                await asyncio.sleep(0.1)
            assert other.views[ROUTER].phase == "running"
        finally:
            await other.aclose()
            await fresh.close()
        assert len((await rig.mgr.refresh(ROUTER)).workers) == 3

        # chat through the router: one OpenAI endpoint for the three servers
        url = await rig.ctl.server_url(f"router:{ROUTER}")
        answer = await SGLangClient(url).probe()
        assert answer.error is None and answer.text, answer.error

        watch = asyncio.create_task(rig.mgr.watch(every=0.5))
        try:
            res = await crash_under_load(rig, concurrency=12, num_prompts=120)
            # the bench ran to its end; only requests in flight on the killed replica may fail
            assert res.requests == 120
            assert res.errors <= res.concurrency, res.error_examples
            assert res.requests - res.errors >= 120 - res.concurrency
            victim_url = worker_url("0.0.0.0", rig.port_of(res.killed))
            await wait_until(
                lambda: rig.ctl.state.servers[res.killed].phase == "crashed", patient(15), "the replica seen crashed"
            )
            await wait_until(
                lambda: victim_url not in {w.url for w in rig.mgr.views[ROUTER].workers},
                patient(15),
                "the crashed replica removed at the router",
            )
            assert "removed " + victim_url in rig.mgr.views[ROUTER].last_change

            # relaunched: added back at the router once it serves
            out = await rig.ctl.restart(res.killed)
            assert out.ok, out.message
            await wait_until(
                lambda: victim_url in {w.url for w in rig.mgr.views[ROUTER].workers if w.healthy},
                patient(40),
                "the relaunched replica added back",
            )
            assert len(rig.mgr.views[ROUTER].workers) == 3
        finally:
            watch.cancel()

        pid = rig.mgr.views[ROUTER].pid
        out = await rig.mgr.down(ROUTER)
        assert out.ok, out.message
        assert rig.mgr.views[ROUTER].phase == "stopped"
        assert pid and not _router_alive(pid), f"router pid {pid} still runs after down"
        assert (await rig.mgr.down(ROUTER)).message.endswith("already stopped")
    finally:
        await rig.close()


async def test_router_without_sglang_router_installed_is_a_named_crash(root: Path, monkeypatch: pytest.MonkeyPatch):
    """A host whose python lacks sglang-router: `up` fails with the install hint, not a timeout."""
    monkeypatch.setenv("DFLASH_STATE_DIR", str(root / "state"))
    rig = await open_rig(root, replicas=1)
    try:
        spec = rig.ctl.fleet.routers[ROUTER]
        bare = root / "bare-python"
        bare.write_text('#!/bin/sh\nexec /usr/bin/env -i /usr/bin/python3 -S "$@"\n')
        bare.chmod(0o755)
        routers = {ROUTER: spec.model_copy(update={"python": str(bare)})}
        rig.ctl.fleet = rig.mgr.fleet = rig.ctl.fleet.model_copy(update={"routers": routers})
        out = await rig.mgr.up(ROUTER, wait_s=patient(20))
        assert not out.ok
        assert "sglang-router is not installed" in out.message and "pip install sglang-router" in out.message
        assert rig.mgr.views[ROUTER].phase == "crashed"
    finally:
        await rig.close()


async def test_a_killed_router_is_crashed_and_starts_again(root: Path, monkeypatch: pytest.MonkeyPatch):
    """SIGKILL to the router: the next look says crashed (its pid file names no live router), `up` starts it again."""
    import signal

    monkeypatch.setenv("DFLASH_STATE_DIR", str(root / "state"))
    rig = await open_rig(root, replicas=1)
    try:
        assert (await rig.ctl.launch(PRESET, wait=True)).ok
        await wait_until(lambda: len(rig.mgr.ready_urls(ROUTER)) == 1, patient(20), "the replica serving")
        assert (await rig.mgr.up(ROUTER)).ok
        pid = rig.mgr.views[ROUTER].pid
        assert pid
        os.kill(pid, signal.SIGKILL)
        await wait_until(lambda: not _router_alive(pid), patient(10), "the router gone")
        v = await rig.mgr.refresh(ROUTER)
        assert v.phase == "crashed" and v.error and v.error.startswith("ended without an error in its log"), v
        out = await rig.mgr.up(ROUTER)
        assert out.ok, out.message
        assert rig.mgr.views[ROUTER].pid != pid and len(rig.mgr.views[ROUTER].workers) == 1
    finally:
        await rig.close()
