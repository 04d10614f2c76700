"""Session bookkeeping of ConsoleServer, in-process over real sockets: the session limit, and a session whose
process ignores the quit (a real shell or `sleep` standing in for a hung console) gets SIGTERM, then SIGKILL,
never an endless wait."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from console.serve import server as srv
from console.serve.server import ConsoleServer
from tests.patience import patient

TOKEN = "session-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def started(command: str) -> tuple[ConsoleServer, asyncio.Task[None]]:
    server = ConsoleServer(command, token=TOKEN, port=0)
    task = asyncio.create_task(server.serve_async(signals=False))
    async with asyncio.timeout(patient(5)):
        while server.bound_port is None:
            await asyncio.sleep(0.02)
    return server, task


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def until(cond, timeout: float) -> None:
    async with asyncio.timeout(patient(timeout)):
        while not cond():
            await asyncio.sleep(0.05)


async def test_session_limit_then_a_hung_session_is_killed_on_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(srv, "MAX_SESSIONS", 1)
    monkeypatch.setattr(srv, "QUIT_GRACE_S", 0.3)
    monkeypatch.setattr(srv, "TERM_GRACE_S", 0.3)
    server, task = await started("trap '' TERM; exec sleep 300")  # deaf to the quit and to SIGTERM
    url = f"http://127.0.0.1:{server.bound_port}/ws"
    try:
        async with aiohttp.ClientSession() as http:
            first = await http.ws_connect(url, headers=AUTH)
            await until(lambda: any(getattr(s, "_process", None) for s in server.sessions), 5)
            (service,) = server.sessions
            pid = service._process.pid  # type: ignore[union-attr]
            assert alive(pid)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(url, headers=AUTH)
            assert refused.value.status == 503  # ("1 browser sessions are open already")
            await first.close()
            await until(lambda: not alive(pid), 5)  # killed after both graces
            await until(lambda: not server.sessions, 5)
            again = await http.ws_connect(url, headers=AUTH)  # the slot is free again
            await until(lambda: any(getattr(s, "_process", None) for s in server.sessions), 5)
            (service,) = server.sessions
            pid2 = service._process.pid  # type: ignore[union-attr]
            server.request_exit()  # shutdown with the session open: killed too, and the server returns
            await asyncio.wait_for(task, patient(5))
            assert not alive(pid2)
            await again.close()
    finally:
        server.request_exit()
        if not task.done():
            task.cancel()


async def test_a_session_that_ignores_quit_gets_sigterm_first(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A demo's console cleans up its sim fleet on SIGTERM, so that comes before SIGKILL."""
    monkeypatch.setattr(srv, "QUIT_GRACE_S", 0.3)
    monkeypatch.setattr(srv, "TERM_GRACE_S", patient(5))
    mark = tmp_path / "got-term"
    server, task = await started(f"trap 'echo term > {mark}; exit 0' TERM; while :; do sleep 0.05; done")
    try:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"http://127.0.0.1:{server.bound_port}/ws", headers=AUTH)
            await until(lambda: any(getattr(s, "_process", None) for s in server.sessions), 5)
            (service,) = server.sessions
            pid = service._process.pid  # type: ignore[union-attr]
            await ws.close()
            await until(lambda: not alive(pid), 10)
            assert mark.read_text() == "term\n"
    finally:
        server.request_exit()
        await asyncio.wait_for(task, patient(5))
