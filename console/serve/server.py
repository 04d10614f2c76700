"""textual-serve's Server behind a token gate, with URLs built from each request and a clean shutdown.

What changes from textual-serve's own `Server`:
- every request passes the gate (console/serve/auth.py) first; a websocket also passes an Origin check;
- the page's static and websocket URLs come from the request's Host, so an SSH tunnel to another local
  port (`ssh -L 9000:127.0.0.1:8000`) works (textual-serve writes `http://HOST:PORT` of its bind address);
- no access log (the first request's URL carries the token) and the start banner prints the URL to open;
- the page asks no third party for anything (its own template, without textual-serve's Google Fonts link);
- sessions run under console/serve/web_driver.py (Escape without the input poll's 100 ms);
- sessions are counted (at most MAX_SESSIONS console processes) and quit on shutdown, each within
  QUIT_GRACE_S before SIGTERM (then SIGKILL), so Ctrl+C never leaves a console (or a demo's sim fleet) behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from console.serve.auth import TokenGate, Verdict, same_origin
from console.serve.web_driver import DRIVER

log = logging.getLogger("dflash-console.serve")

TEMPLATES = Path(__file__).parent / "templates"
"""textual-serve's page without its Google Fonts link (the terminal falls back to the system's monospace)."""

MAX_SESSIONS = 8
"""Browser sessions at once: each is a console process with its own SSH connections to every host."""

QUIT_GRACE_S = 8.0
"""On shutdown each session's console gets this long to quit (a demo stops its sim servers) before SIGTERM."""

TERM_GRACE_S = 5.0
"""After SIGTERM, this long before SIGKILL."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

REFUSED_MISSING = (
    "401: this console needs its token. Open the URL that `dflash-console serve` printed "
    "(http://HOST:PORT/?token=...), or send 'Authorization: Bearer TOKEN'.\n"
)
REFUSED_WRONG = "403: wrong token (after a restart, `dflash-console serve` prints a new URL; open that one).\n"
REFUSED_ORIGIN = "403: a websocket opened from another site's page is refused.\n"
REFUSED_FULL = "503: {n} browser sessions are open already; close one first.\n"

SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # no framing: a page cannot overlay the console and steer its keys
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


DRIVER_ENV = "DFC_SERVE_DRIVER"
"""`module:Class` of the sessions' Textual driver instead of ours (`textual.drivers.web_driver:WebDriver`:
Textual's own, for an A/B in benchmarks/bench_serve_browser.py, or if a future Textual breaks ours)."""


class SessionService(AppService):
    """textual-serve's session process, under the console's own WebDriver (prompt Escape)."""

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        env = super()._build_environment(width=width, height=height)
        env["TEXTUAL_DRIVER"] = env.pop(DRIVER_ENV, "") or DRIVER
        return env


class ConsoleServer(Server):
    """Serves one command per browser session (textual-serve's model) to token holders only."""

    def __init__(
        self,
        command: str,
        *,
        token: str,
        host: str = "127.0.0.1",
        port: int = 8000,
        title: str = "dflash-console",
        banner: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(command, host=host, port=port, title=title, templates_path=TEMPLATES)
        self.gate = TokenGate(token)
        self.banner = banner
        self.sessions: dict[AppService, web.WebSocketResponse] = {}
        self.bound_port: int | None = None
        self._stop = asyncio.Event()

    # -- the gate -------------------------------------------------------------------------------
    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        verdict = self.gate.check(
            query_token=request.query.get("token"),
            authorization=request.headers.get("Authorization"),
            cookie=request.cookies.get(self.gate.cookie_name),
        )
        if verdict is Verdict.MISSING:
            return _refuse(401, REFUSED_MISSING, challenge=True)
        if verdict is Verdict.WRONG:
            return _refuse(403, REFUSED_WRONG, challenge=True)
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        if upgrade and not same_origin(request.headers.get("Origin"), request.host):
            return _refuse(403, REFUSED_ORIGIN)
        if verdict is Verdict.OK_FROM_URL and not upgrade:
            # the token moves from the URL into an HttpOnly cookie; the address bar and history keep none
            query = request.rel_url.query.copy()
            query.popall("token")
            resp: web.StreamResponse = web.HTTPSeeOther(str(request.rel_url.with_query(query)))
        else:
            resp = await handler(request)
        if verdict is Verdict.OK_FROM_URL:
            resp.set_cookie(
                self.gate.cookie_name,
                self.gate.token,
                httponly=True,
                samesite="Strict",
                path="/",
                secure=request.secure,
            )
        resp.headers.update(SECURITY_HEADERS)
        return resp

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._gate)
        return app

    # -- pages and sessions ---------------------------------------------------------------------
    async def handle_index(self, request: web.Request) -> web.Response:
        """textual-serve's page, with URLs relative to the host the browser used."""
        base = f"{request.scheme}://{request.host}"
        ws = ("wss://" if request.secure else "ws://") + request.host + str(request.app.router["websocket"].url_for())
        context: dict[str, Any] = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": ws,
            "config": {
                "static": {"url": base + str(request.app.router["static"].url_for(filename="/")).rstrip("/") + "/"}
            },
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's handler, counting sessions so shutdown can quit each one."""
        if len(self.sessions) >= MAX_SESSIONS:
            raise web.HTTPServiceUnavailable(text=REFUSED_FULL.format(n=MAX_SESSIONS))
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)

        async def close() -> None:
            await websocket.close()

        service = SessionService(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
            debug=self.debug,
        )
        self.sessions[service] = websocket
        try:
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            pass
        except Exception as error:  # one session's failure is logged; the server and other sessions go on
            log.exception(error)
        finally:
            await _quit(service)
            self.sessions.pop(service, None)
            with contextlib.suppress(Exception):
                await websocket.close()
        return websocket

    async def on_startup(self, app: web.Application) -> None:
        """The banner is printed once the socket is bound (serve_async), not here."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Every session's console quits (or is killed) and its websocket closes before aiohttp waits on them."""
        services = list(self.sessions.items())
        await asyncio.gather(*(_quit(s) for s, _ in services), return_exceptions=True)
        for _, ws in services:
            with contextlib.suppress(Exception):
                await ws.close()

    # -- running --------------------------------------------------------------------------------
    def request_exit(self) -> None:
        self._stop.set()

    async def serve_async(self, *, signals: bool = True) -> None:
        """Binds, prints the banner, serves until SIGINT/SIGTERM (or request_exit), then shuts down."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM) if signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_exit)
        runner = web.AppRunner(
            await self._make_app(),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=QUIT_GRACE_S + TERM_GRACE_S + 3,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            self.bound_port = int(runner.addresses[0][1])
            if self.banner is not None:
                self.banner(self.url())
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def serve(self, debug: bool = False) -> None:
        self.debug = debug
        self.initialize_logging()
        asyncio.run(self.serve_async())

    def url(self) -> str:
        """The URL to open, token included (the host as bound; through a tunnel, the local end's)."""
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.bound_port or self.port}/?token={self.gate.token}"


def _refuse(status: int, text: str, *, challenge: bool = False) -> web.Response:
    resp = web.Response(status=status, text=text)
    if challenge:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="dflash-console"'
    resp.headers.update(SECURITY_HEADERS)
    return resp


async def _quit(service: AppService) -> None:
    """Asks the session's console to quit; a console still running after QUIT_GRACE_S gets SIGTERM (a demo
    still cleans up its sim fleet on it), then SIGKILL after TERM_GRACE_S (a hung app)."""
    try:
        await asyncio.wait_for(service.stop(), QUIT_GRACE_S)
    except Exception:  # TimeoutError, or a pipe already broken under it
        pass
    proc = getattr(service, "_process", None)  # textual-serve keeps it private; a hung one must still go
    if proc is None:
        return
    for send, grace in ((None, 0.5), (proc.terminate, TERM_GRACE_S), (proc.kill, 2.0)):
        if proc.returncode is not None:
            return
        if send is not None:
            with contextlib.suppress(ProcessLookupError):
                send()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), grace)
