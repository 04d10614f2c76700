"""Test doubles for the UI: a FleetApi fed with fixed events, a scripted log model and a chat backend."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import AsyncIterator
from typing import Any

from console.config import Fleet, Host, Preset
from console.fleet.api import ActionOutcome, LaunchPreview, PreCheck
from console.fleet.changes import Changes
from console.fleet.events import (
    Event,
    GpuSample,
    HealthResult,
    HostUp,
    ProcessSample,
    ServerGone,
    ServerMeta,
    ServerSeen,
)
from console.fleet.logmodel import Diagnosis
from console.fleet.state import FleetState
from console.gpu.readings import ComputeApp, GpuReading
from console.sglang.command import plan_launch
from console.sglang.lint import Finding
from console.sglang.phase import Phase
from console.ui.backend import ChatDelta, ChatRequest, ProbeReport, fallback_curl

NOW = 1_780_000_000.0
A6000 = "NVIDIA RTX A6000"
PRO6000 = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


class ScriptedLog:
    """Duck-typed LogModel with its parser view set directly, so snapshots never depend on the parser."""

    def __init__(self, phase: str = "launching", lines: list[str] | None = None, **kw: Any) -> None:
        self.lines: deque[str] = deque(lines or [], maxlen=20_000)
        self.line_count = len(self.lines)
        self.batch_lines = 0
        self.gaps = 0
        self.phase = Phase(phase)
        self.shards: tuple[int, int] | None = None
        self.graphs: tuple[int, int] | None = None
        self.gen_throughput: float | None = None
        self.running: int | None = None
        self.queued: int | None = None
        self.token_usage: float | None = None
        self.stats_changed = False
        self.timeline: dict[str, float] = {}
        self.diagnosis: Diagnosis | None = None
        self.crash_in_log: str | None = None
        self.facts: dict[str, object] = {}
        for k, v in kw.items():
            setattr(self, k, v)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)
        self.line_count += len(lines)

    def feed(self, data: bytes) -> list[str]:
        out = data.decode("utf-8", "replace").splitlines()
        self.add(*out)
        return out

    def note_gap(self, nbytes: int) -> None:
        self.gaps += 1

    def finish(self, exit_status: int | None, signal: str | int | None, stop_requested: bool = False) -> None:
        if stop_requested:
            self.phase = Phase.STOPPED
        elif self.phase != "stopped":
            self.phase = Phase.CRASHED


def demo_fleet() -> Fleet:
    hosts = {
        "ct129": Host(transport="local", python="/opt/venv/bin/python"),
        "blackwell": Host(transport="local", python="/opt/venv/bin/python"),
    }
    presets = {
        "qwen3-8b": Preset(
            host="ct129", gpus=[0, 1], model="/models/Qwen3-8B", port=30000, args=["--reasoning-parser", "qwen3"]
        ),
        "qwen36-gen": Preset(
            host="blackwell",
            gpus=[0],
            model="/models/Qwen3.6-35B-A3B",
            port=30001,
            args=["--mem-fraction-static", "0.85"],
            api_key_env="DFC_TEST_KEY",
        ),
        "glm-air": Preset(host="blackwell", gpus=[1], model="/models/GLM-4.5-Air-FP8", port=30002),
        "small": Preset(host="blackwell", gpus=[3], model="/models/Qwen2.5-0.5B", port=30003),
    }
    return Fleet(hosts=hosts, presets=presets)


def gpu(i: int, name: str, used: int, total: int, util: int, temp: int, power: float, limit: float) -> GpuReading:
    return GpuReading(
        index=i,
        uuid=f"GPU-{name[-6:]}-{i}",
        name=name,
        memory_used_mib=used,
        memory_total_mib=total,
        utilization_pct=util,
        temperature_c=temp,
        power_w=power,
        power_limit_w=limit,
    )


def meta(preset: str, host: str, gpus: tuple[int, ...], port: int, **kw: Any) -> ServerMeta:
    from console.sglang.command import replica_name

    name = kw.pop("name", None) or replica_name(preset, host, gpus)
    return ServerMeta(
        name=name,
        host=host,
        gpus=gpus,
        port=port,
        preset=preset,
        started_at=NOW - 300,
        log_path=f"/runs/{name}.log",
        command=f"setsid nohup env CUDA_VISIBLE_DEVICES="
        f"{','.join(map(str, gpus))} /opt/venv/bin/python -m sglang.launch_server --model-path "
        f"/models/{preset} --port {port} > /runs/{name}.log 2>&1 < /dev/null &",
        **kw,
    )


SERVING_LOG = [
    "[2026-12-01 14:00:01] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=2, port=30000)",
    "[2026-12-01 14:00:09 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, mem usage=7.7 GB.",
    "[2026-12-01 14:00:10 TP0] KV Cache is allocated. #tokens: 412345, K size: 14.2 GB, V size: 14.2 GB",
    "[2026-12-01 14:00:19 TP0] Capture cuda graph end. Time elapsed: 8.9 s. mem usage=1.1 GB.",
    "[2026-12-01 14:00:20] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "[2026-12-01 14:00:21] The server is fired up and ready to roll!",
    "[2026-12-01 14:02:00 TP0] WARNING: request [req-1] exceeded [/max] budget [bold",
    *[
        f"[2026-12-01 14:03:{i:02d} TP0] Decode batch. #running-req: 3, #token: 2210, token usage: 0.42, "
        f"gen throughput (token/s): {180 + i * 3:.2f}, #queue-req: 0"
        for i in range(30)
    ],
]

CRASH_LOG = [
    "[2026-12-01 14:05:01] server_args=ServerArgs(model_path='/models/GLM-4.5-Air-FP8', port=30002)",
    "[2026-12-01 14:05:04] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.12/site-packages/torchcodec/_core/ops.py", line 57, in load_torchcodec_shared_libraries',
    "    torch.ops.load_library(core_library_path)",
    "OSError: libavutil.so.58: cannot open shared object file: No such file or directory",
    "[2026-12-01 14:05:05] Received sigquit from a child process. It usually means the child failed.",
]


def scenario(*, crashed: bool = True, stale_host: str | None = None, eight: bool = False) -> FleetState:
    """The fixed fleet every snapshot renders: one serving TP2 server, one loading, one crashed, one external."""
    st = FleetState(["ct129", "blackwell"])
    evs: list[Event] = [HostUp("ct129", NOW - 600), HostUp("blackwell", NOW - 600)]
    a = (gpu(0, A6000, 44_210, 49_140, 87, 71, 231.4, 300), gpu(1, A6000, 44_198, 49_140, 85, 68, 224.9, 300))
    n = 8 if eight else 4
    b = [
        gpu(0, PRO6000, 31_004, 97_887, 35, 52, 180.0, 600),
        gpu(1, PRO6000, 2_310, 97_887, 0, 38, 61.2, 600),
        gpu(2, PRO6000, 88_512, 97_887, 96, 83, 571.0, 600),
        gpu(3, PRO6000, 556, 97_887, 0, 31, 22.0, 600),
    ]
    b += [gpu(i, PRO6000, 556, 97_887, 0, 30, 21.0, 600) for i in range(4, n)]
    evs += [
        GpuSample("ct129", NOW - (14 if stale_host == "ct129" else 1), a),
        GpuSample("blackwell", NOW - 1, tuple(b)),
    ]
    serving = meta("qwen3-8b", "ct129", (0, 1), 30000, pid=4101, sid=4101)
    loading = meta("qwen36-gen", "blackwell", (0,), 30001, pid=5101, sid=5101)
    glm = meta("glm-air", "blackwell", (1,), 30002, pid=5201, sid=5201)
    ext = ServerMeta(
        name="external@blackwell:30010",
        host="blackwell",
        gpus=(2,),
        port=30010,
        managed=False,
        pid=6001,
        sid=6001,
        command="python -m sglang.launch_server --model-path /data/llama --port 30010",
    )
    evs += [ServerSeen(serving, NOW - 300), ServerSeen(loading, NOW - 40), ServerSeen(ext, NOW - 900)]
    if crashed:
        evs.append(ServerSeen(glm, NOW - 60))
    evs += [ProcessSample("blackwell", NOW - 1, (ComputeApp(6001, b[2].uuid, "python", 87_900),), ())]
    for ev in evs:
        st.apply(ev)
    _history(st, "ct129", a, busy={0: 87, 1: 85})
    _history(st, "blackwell", tuple(b), busy={0: 35, 2: 96}, loading={0})
    st.servers[serving.name].log = ScriptedLog(
        "serving",
        SERVING_LOG,
        gen_throughput=267.0,
        running=3,
        queued=0,
        token_usage=0.42,
        timeline={"launching": 3.1, "loading_weights": 8.4, "kv_cache": 1.2, "cuda_graph": 8.9, "warming": 1.0},
    )
    st.servers[serving.name].previous_timeline = {
        "launching": 3.0,
        "loading_weights": 11.9,
        "kv_cache": 1.3,
        "cuda_graph": 9.4,
        "warming": 1.1,
    }
    ramp = [0, 40, 120, 180, 210, 190, 230, 260, 250, 240, 262, 267, 255, 270, 266, 267]
    steady = [240 + (i * 37) % 45 - (30 if i % 11 == 0 else 0) for i in range(44)]
    st.servers[serving.name].throughput_history.extend([*ramp, *steady, 267])
    st.apply(HealthResult(serving.name, NOW - 2, "ok"))
    st.servers[loading.name].log = ScriptedLog(
        "loading_weights", SERVING_LOG[:1], shards=(7, 15), timeline={"launching": 4.2}
    )
    st.servers[ext.name].log = ScriptedLog("serving")
    st.apply(HealthResult(ext.name, NOW - 3, "ok"))
    if crashed:
        st.servers[glm.name].log = ScriptedLog("loading_weights", CRASH_LOG, crash_in_log="traceback")
        diag = Diagnosis(
            "missing-shared-library",
            "missing shared library libavutil.so.58, needed by torchcodec",
            "install FFmpeg 6 (libavutil.so.58) on the host, or pip uninstall torchcodec",
            CRASH_LOG[4],
        )
        st.servers[glm.name].log.diagnosis = diag
        st.apply(ServerGone(glm.name, NOW - 50, exit_status=1))
    return st


def _history(
    st: FleetState, host: str, readings: tuple[GpuReading, ...], busy: dict[int, int], loading: set[int] = frozenset()
) -> None:  # type: ignore[assignment]
    """Three minutes of deterministic 1 Hz samples before the current one, for the panes' history graphs."""
    from console.fleet.state import GpuPoint

    for r in readings:
        g = st.host(host).gpus[r.index]
        last = g.history.pop()
        used, util = r.memory_used_mib or 0, busy.get(r.index, 0)
        for i in range(180):
            at = last.at - (180 - i)
            if r.index in loading:  # weights arriving: VRAM climbs, the GPU barely works
                pts = GpuPoint(at, int(used * i / 180), (i * 7) % 20)
            elif util:
                dip = 30 if i % 23 == 0 else 0
                pts = GpuPoint(at, used if i > 20 else int(used * i / 20), max(0, util - (i * 13) % 17 - dip))
            else:
                pts = GpuPoint(at, used, 0)
            g.history.append(pts)
        g.history.append(last)


class FakeApi:
    """A FleetApi over a FleetState; actions emit the events a controller would, synchronously."""

    def __init__(self, state: FleetState | None = None, fleet: Fleet | None = None, read_only: bool = False) -> None:
        self.fleet = fleet or demo_fleet()
        self.state = state if state is not None else scenario()
        self.read_only = read_only
        self.listeners: list[Any] = []
        self.calls: list[tuple[str, Any]] = []
        self.watched: Counter[str] = Counter()
        self.restart_refusal: str | None = None
        """When set, a restart without force is refused with it (other processes hold the VRAM: forcible)."""
        """Log views open per server (`watch_log`)."""
        self.clock = lambda: NOW

    def subscribe(self, listener: Any) -> None:
        self.listeners.append(listener)

    def emit(self, *events: Event) -> Changes:
        changes = Changes.union([self.state.apply(ev) for ev in events])
        for fn in self.listeners:
            fn(list(events), changes)
        return changes

    async def start(self) -> None:
        self.calls.append(("start", None))

    async def close(self) -> None:
        self.calls.append(("close", None))

    def _stamp(self) -> str:
        """A new stamp per plan made, as the controller's clock gives one (the first is 20261201-140000)."""
        self.stamps_made = getattr(self, "stamps_made", 0) + 1
        return f"20261201-1400{self.stamps_made - 1:02d}"

    async def preview(self, preset: str, gpus: list[int] | None = None) -> LaunchPreview:
        stamp = self._stamp()
        plans = plan_launch(self.fleet, preset, stamp, gpus)
        findings = (
            [
                Finding(
                    "mem-fraction-high",
                    "warning",
                    preset,
                    "--mem-fraction-static 0.85 leaves little room for CUDA graphs [bs 48]",
                    fix="use 0.80",
                )
            ]
            if preset == "qwen36-gen"
            else []
        )
        busy = self.state.live_owner(self.fleet.presets[preset].host, (gpus or self.fleet.presets[preset].gpus)[0])
        checks = [
            PreCheck("gpu-free", busy is None, "GPUs free" if busy is None else f"GPU held by {busy.name}"),
            PreCheck("model", True, "model path exists"),
        ]
        return LaunchPreview(preset, plans, findings, checks, stamp)

    async def launch(
        self, preset: str, gpus: list[int] | None = None, *, wait: bool = False, stamp: str | None = None
    ) -> ActionOutcome:
        self.calls.append(("launch", (preset, gpus)))
        plan = plan_launch(self.fleet, preset, stamp or self._stamp(), gpus)[0]
        r = plan.replica
        m = ServerMeta(
            name=r.name,
            host=r.host,
            gpus=r.gpus,
            port=r.port,
            preset=preset,
            pid=7000,
            sid=7000,
            log_path=plan.log_path,
            command=plan.command,
            launch_id=f"L{len(self.calls)}",
            started_at=NOW,
        )
        from console.fleet.events import ServerAction

        self.emit(ServerSeen(m, NOW), ServerAction(r.name, NOW, "launch", True, "pid 7000"))  # as the controller does
        return ActionOutcome(True, f"launched {r.name}", [r.name])

    def make_ready(self, name: str) -> None:
        self.emit(HealthResult(name, NOW, "ok"))

    async def stop_server(self, name: str) -> ActionOutcome:
        self.calls.append(("stop", name))
        from console.fleet.events import ServerAction

        self.emit(  # the controller's steps (console.fleet.actions.stop)
            ServerAction(name, NOW, "stop", True, "SIGTERM to session 7000"),
            ServerGone(name, NOW, exit_status=0),
            ServerAction(name, NOW, "stopped", True, "GPUs released"),
        )
        return ActionOutcome(True, f"stopped {name}; GPUs released", [name])

    async def restart(self, name: str, *, force: bool = False) -> ActionOutcome:
        self.calls.append(("restart-force" if force else "restart", name))
        if self.restart_refusal is not None and not force:
            return ActionOutcome(False, self.restart_refusal, [name], forcible=True)
        s = self.state.servers[name]
        m = s.meta
        from dataclasses import replace

        self.emit(ServerSeen(replace(m, launch_id=f"R{len(self.calls)}", pid=8000, sid=8000), NOW))
        return ActionOutcome(True, f"relaunched {name}", [name])

    async def reconnect(self, host: str) -> None:
        self.calls.append(("reconnect", host))

    def watch_log(self, name: str, on: bool) -> None:
        self.watched[name] += 1 if on else -1

    async def server_url(self, name: str) -> str:
        return f"http://127.0.0.1:{41000 + (self.state.servers[name].meta.port or 0) % 1000}"

    def api_key_env(self, name: str) -> str | None:
        s = self.state.servers.get(name)
        p = self.fleet.presets.get(s.meta.preset or "") if s else None
        return p.api_key_env if p else None

    async def read_file(self, host: str, path: str, max_bytes: int = 4_000_000) -> bytes:
        return b""


class FakeBackend:
    """Streams a fixed reasoning + answer; records requests and keys it was given."""

    def __init__(self, answer: str = "Paris is the capital of France. [/b] [bold", delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.requests: list[tuple[str, ChatRequest, str | None]] = []

    async def stream_chat(self, base_url: str, req: ChatRequest, api_key: str | None) -> AsyncIterator[ChatDelta]:
        self.requests.append((base_url, req, api_key))
        if req.thinking:
            for part in ("The user asks ", "about [France]."):
                await asyncio.sleep(self.delay)
                yield ChatDelta("reasoning", part)
        for word in self.answer.split(" "):
            await asyncio.sleep(self.delay)
            yield ChatDelta("content", word + " ")
        yield ChatDelta("finish", finish_reason="stop")
        yield ChatDelta("usage", ttft_s=0.142, completion_tokens=24, tok_s=87.5)

    async def probe(self, base_url: str, api_key: str | None) -> ProbeReport:
        return ProbeReport(True, "health 200 · model Qwen3-8B · TTFT 120 ms · 88 tok/s", {"ttft_ms": 120})

    def curl(self, base_url: str, req: ChatRequest, api_key_env: str | None) -> str:
        return fallback_curl(base_url, req, api_key_env)
