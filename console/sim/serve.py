"""The serving phase of a sim server: uvicorn with SGLang's log config, warmup, SIGTERM drain, child watchdog.

uvicorn is used as SGLang uses it, so `Uvicorn running on`, access lines and the bind error
(`[Errno 98] error while attempting to bind on address ...`, exit 3) are uvicorn's own text.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import os
import signal
import sys
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn
from uvicorn.config import LOGGING_CONFIG

from console.sim import logs, state
from console.sim.args import is_hybrid
from console.sim.engine import SPEC_ACCEPT_P, Engine, geometric_accept
from console.sim.http import App

if TYPE_CHECKING:
    from console.sim.server import Server
    from console.sim.startup import Result


def logging_config() -> dict[str, Any]:
    """SGLang's set_uvicorn_logging_configs (docs/sglang.md §1.1)."""
    cfg = copy.deepcopy(LOGGING_CONFIG)
    cfg["formatters"]["default"]["fmt"] = "[%(asctime)s] %(levelprefix)s %(message)s"
    cfg["formatters"]["default"]["datefmt"] = "%Y-%m-%d %H:%M:%S"
    cfg["formatters"]["access"]["fmt"] = (
        '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    )
    cfg["formatters"]["access"]["datefmt"] = "%Y-%m-%d %H:%M:%S"
    return cfg


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: SGLang installs its own SIGTERM/SIGQUIT handling."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _accept_len(a: Any) -> tuple[float, int]:
    """(greedy accept length, verify width) of the server's speculative decoding ((1.0, 1) without)."""
    if not a.speculative_algorithm:
        return 1.0, 1
    d = int(a.speculative_num_draft_tokens or 2)
    return geometric_accept(SPEC_ACCEPT_P.get(a.speculative_algorithm, 0.6), d), d


def serve(srv: Server, res: Result) -> int:
    a, spec = srv.a, srv.spec
    rate_env = os.environ.get("DFLASH_SIM_TOKEN_RATE")
    peak = float(rate_env) if rate_env else spec.token_rate_per_gpu
    acc, draft = _accept_len(a)
    engine = Engine(
        peak_per_gpu=peak,
        tp=a.tp_size,
        half=spec.half_concurrency,
        max_running=res.max_running_requests,
        max_tokens=res.max_total_num_tokens,
        prefix=logs.rank_prefix(a.tp_size, 0),
        hybrid=is_hybrid(a.model_config),
        mamba_slots=res.pools.mamba_slots,
        accept_len=acc,
        draft_tokens=draft,
        algorithm=a.speculative_algorithm,
        log_interval=a.decode_log_interval,
    )
    engine.slow = 1.0
    info = {
        "version": spec.sglang_version,
        "startup_time": srv.t0,
        "launch_command": " ".join(sys.argv),
        "memory_usage": {
            "weight": round(res.weight_gib, 2),
            "kvcache": round(res.pools.total_gib, 2),
            "token_capacity": res.max_total_num_tokens,
            "graph": round(res.graph_gib, 2),
        },
    }
    model = spec.model(os.path.basename(a.model_path.rstrip("/")))
    app = App(a, engine, info, reasoning_model=bool(model and model.reasoning))
    srv.app = app
    try:
        return asyncio.run(_main(srv, app, engine))
    except SystemExit as e:
        if srv.ranks:
            srv.ranks.kill()
        return int(e.code or 0)


async def _main(srv: Server, app: App, engine: Engine) -> int:
    a = srv.a
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[Any]] = []

    async def startup() -> None:
        srv.phase = "serving"
        tasks.append(asyncio.create_task(engine.run()))
        tasks.append(asyncio.create_task(_housekeeping(srv, engine)))
        tasks.append(asyncio.create_task(_warmup(srv, app)))

    async def shutdown() -> None:
        for t in tasks:
            t.cancel()

    app.on_startup, app.on_shutdown = startup, shutdown
    loop.add_signal_handler(signal.SIGTERM, lambda: tasks.append(asyncio.create_task(_sigterm(srv, app, engine))))
    config = uvicorn.Config(
        app,
        host=a.host,
        port=a.port,
        log_config=logging_config(),
        lifespan="on",
        log_level=(a.log_level_http or a.log_level),
        timeout_keep_alive=5,
        loop="asyncio",
        http="h11",
        ws="none",
    )
    await _Uvicorn(config).serve()
    return 0


async def _warmup(srv: Server, app: App) -> None:
    a = srv.a
    if a.skip_server_warmup:
        app.status = "Up"
        logs.line("The server is fired up and ready to roll!")
        return
    host = "127.0.0.1" if a.host in ("0.0.0.0", "::") else a.host
    url = f"http://{host}:{a.port}"
    headers = {"Authorization": f"Bearer {a.api_key}"} if a.api_key else {}
    async with httpx.AsyncClient(trust_env=False, timeout=5, headers=headers) as c:
        for _ in range(120):
            await asyncio.sleep(min(1.0, max(0.05, srv.scale)))
            try:
                r = await c.get(f"{url}/model_info")
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                continue
        try:
            await c.post(
                f"{url}/generate",
                json={
                    "text": "The capital city of France is",
                    "sampling_params": {"temperature": 0, "max_new_tokens": 8},
                },
                timeout=600,
            )
        except httpx.HTTPError as e:
            logs.line(f"Initialization failed. warmup error: {e!r}")
            srv.kill_tree()
    app.status = "Up"
    logs.line("The server is fired up and ready to roll!")


async def _housekeeping(srv: Server, engine: Engine) -> None:
    """Control file, GPU utilisation in the state file, and the child watchdog."""
    last: float | None = None
    while True:
        srv.poll_control()
        busy = engine.busy()
        if busy != last:
            state.register(srv.host_dir, util={g: busy for g in srv.gpus})
            last = busy
        assert srv.ranks is not None
        for i, p in enumerate(srv.ranks.procs):
            code = p.poll()
            if code is not None:
                logs.line(
                    f"Subprocess scheduler_{i} (pid={p.pid}) crashed with exit code {code}. Triggering SIGQUIT "
                    "for cleanup..."
                )
                os.kill(os.getpid(), signal.SIGQUIT)
                await asyncio.sleep(5)
        await asyncio.sleep(0.1)


async def _sigterm(srv: Server, app: App, engine: Engine) -> None:
    if app.status == "Starting":
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if srv.ranks:
            srv.ranks.kill()
        os.kill(os.getpid(), signal.SIGTERM)
        return
    frame = sys._getframe()
    logs.line(
        f"SIGTERM received. signum={signal.SIGTERM.value} frame=<frame at 0x{id(frame):x}, file "
        f"'{logs.site_packages()}/uvicorn/server.py', line 70, code serve>. Draining requests and shutting down..."
    )
    app.status = "Draining"
    interval = 5.0 if math.isinf(srv.scale) else max(0.2, min(5.0, 5.0 * srv.scale))
    while True:
        reqs = engine.running + engine.waiting
        if not reqs:
            break
        rids = [r.rid for r in reqs]
        logs.line(
            f"Gracefully exiting... Remaining number of requests {len(reqs)}. Remaining requests remaining_rids={rids}."
        )
        await asyncio.sleep(interval)
    srv.kill_tree()
