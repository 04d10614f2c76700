"""A stand-in `python -m sglang.launch_server` for a real GPU box: real VRAM, real rank processes, SGLang's log lines.

Put `tests/device/standin` first on PYTHONPATH (tests/device/run_check.sh sets it in hosts.toml's host `env`)
and the console launches this instead of SGLang. It needs python3 with torch and CUDA; without them it exits 1
at once, saying so (no model, no SGLang install, no network needed). What it does, as SGLang does it:

- the main process parses the flags the console passes (`--model-path`, `--port`, `--host`, `--tp-size`,
  `--mem-fraction-static`, `--api-key`, `--served-model-name`, `--enable-metrics`; others are accepted and
  ignored), prints `server_args=...` and starts one process per TP rank, in its own session, named as SGLang
  names its schedulers (`sglang::scheduler` with TP=1, `sglang::scheduler_TP0`, `_TP1`, ... otherwise: argv[0],
  setproctitle when installed, and PR_SET_NAME), each dying with the main process (PR_SET_PDEATHSIG);
- each rank takes CUDA device `rank` of CUDA_VISIBLE_DEVICES and allocates real memory with torch in SGLang's
  order and arithmetic: a CUDA context, the weights (`DFC_STANDIN_WEIGHTS_GIB`, default 2), then the KV pool
  `avail - total * (1 - mem_fraction_static)` (<= 0: SGLang's `Not enough memory` error), then a CUDA-graph
  pool; it logs SGLang's lines for each (`Load weight begin. avail mem=... GB`, `KV Cache is allocated. ...`,
  `Capture cuda graph end. ...`, `max_total_num_tokens=...`) with the rank prefix SGLang uses (console.sim.logs);
- the main process then serves SGLang's HTTP API (/health, /model_info, /v1/chat/completions, /generate,
  /metrics, ...) with the simulated fleet's app and engine (console.sim.http, console.sim.serve: uvicorn with
  SGLang's log format, warmup, `The server is fired up and ready to roll!`, SIGTERM drain, and SGLang's
  watchdog line when a rank dies);
- told to, one rank raises a real CUDA out-of-memory error (it asks torch for more than the GPU has) and dies as
  an SGLang scheduler does: `Scheduler hit an exception: Traceback ... torch.OutOfMemoryError: CUDA out of
  memory. ...`, then SIGQUIT to the main process, which ends every rank. Tell it with
  `console.sim.control.inject(DFC_STANDIN_DIR, PORT, "crash", kind="oom", rank=N)` (`DFC_STANDIN_DIR` defaults to
  `/tmp/dfc-standin`; kind "sigkill" kills the main process instead).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.sim import control, logs
from console.sim.server import _frame
from console.sim.startup import title

GIB = 1 << 30
DEFAULT_WEIGHTS_GIB = 2.0
GRAPH_GIB = 0.1
KV_BYTES_PER_TOKEN = 2 * 28 * 8 * 128 * 2
"""K and V, 28 layers, 8 KV heads of 128, bf16: a Qwen3-8B-sized token."""
NO_TORCH = (
    "sglang stand-in (tests/device): torch with CUDA is needed to hold real VRAM, and {why}; "
    "run it on a GPU box with python3 + torch"
)


def control_dir() -> str:
    return os.environ.get("DFC_STANDIN_DIR") or os.path.join(tempfile.gettempdir(), "dfc-standin")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags the stand-in uses; every other SGLang flag is accepted and ignored."""
    p = argparse.ArgumentParser(prog="sglang.launch_server", add_help=False)
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--mem-fraction-static", dest="mem_fraction_static", type=float, default=None)
    p.add_argument("--api-key", dest="api_key", default=None)
    p.add_argument("--served-model-name", dest="served_model_name", default=None)
    p.add_argument("--context-length", dest="context_length", type=int, default=None)
    p.add_argument("--enable-metrics", dest="enable_metrics", action="store_true")
    p.add_argument("--skip-server-warmup", dest="skip_server_warmup", action="store_true")
    p.add_argument("--decode-log-interval", dest="decode_log_interval", type=int, default=40)
    p.add_argument("--log-level", dest="log_level", default="info")
    p.add_argument("--log-level-http", dest="log_level_http", default=None)
    p.add_argument("--standin-rank", dest="standin_rank", type=int, default=None, help=argparse.SUPPRESS)
    a, _unknown = p.parse_known_args(argv)
    a.served_model_name = a.served_model_name or a.model_path
    a.mem_fraction_static = a.mem_fraction_static or 0.88
    return a


def model_config(path: str) -> dict[str, Any]:
    try:
        cfg = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def server_args(a: argparse.Namespace, cfg: dict[str, Any]) -> SimpleNamespace:
    """What the sim's HTTP app and serve loop read of SGLang's ServerArgs (everything else is None)."""
    ns = SimpleNamespace(
        **{k: v for k, v in vars(a).items() if k not in ("standin_rank", "context_length")},
        model_config=cfg,
        tokenizer_path=a.model_path,
        context_length=a.context_length or int(cfg.get("max_position_embeddings") or 32768),
        load_format="auto",
        reasoning_parser=None,
        tool_call_parser=None,
        speculative_algorithm=None,
        speculative_num_draft_tokens=None,
        chunked_prefill_size=8192,
        max_prefill_tokens=16384,
    )
    return ns


def kv_plan(avail_gib: float, total_gib: float, mem_fraction: float) -> float:
    """SGLang's KV pool size (GiB) after the weights: `avail - total * (1 - mem_fraction_static)`."""
    return avail_gib - total_gib * (1 - mem_fraction)


def _name_process(name: str) -> None:
    """SGLang's scheduler title, as far as this Python allows; and die with the main process."""
    with contextlib.suppress(ImportError):
        import setproctitle  # type: ignore[import-not-found]

        setproctitle.setproctitle(name)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(15, name.encode()[:15])  # PR_SET_NAME
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def torch_or_exit() -> Any:
    try:
        import torch
    except ImportError as e:
        sys.stderr.write(NO_TORCH.format(why=f"`import torch` failed ({e})") + "\n")
        sys.exit(1)
    if not torch.cuda.is_available():
        sys.stderr.write(NO_TORCH.format(why="torch.cuda.is_available() is False") + "\n")
        sys.exit(1)
    return torch


# -- a rank --------------------------------------------------------------------------------------------
def rank_main(a: argparse.Namespace) -> int:
    """One TP rank: real allocations in SGLang's order, its lines, then commands from the main process."""
    rank, tp = int(a.standin_rank), a.tp_size
    parent = os.getppid()
    _name_process(title(tp, rank))
    prefix = logs.rank_prefix(tp, rank)
    torch = torch_or_exit()
    held: list[Any] = []

    def avail() -> float:
        free, _total = torch.cuda.mem_get_info(rank)
        return free / GIB

    def fail(tb: str) -> int:
        logs.line("Scheduler hit an exception: " + tb.rstrip("\n"), prefix)
        os.kill(parent, signal.SIGQUIT)
        time.sleep(30)
        return 1

    try:
        torch.cuda.set_device(rank)
        total = torch.cuda.get_device_properties(rank).total_memory / GIB
        logs.line("Init torch distributed begin.", prefix)
        t0, before = time.perf_counter(), avail()
        held.append(torch.empty(1, device=f"cuda:{rank}"))  # the CUDA context
        logs.line(
            f"Init torch distributed ends. elapsed={time.perf_counter() - t0:.2f} s, "
            f"mem usage={before - avail():.2f} GB",
            prefix,
        )
        w = float(os.environ.get("DFC_STANDIN_WEIGHTS_GIB") or DEFAULT_WEIGHTS_GIB) / tp
        logs.line(f"Load weight begin. avail mem={avail():.2f} GB", prefix)
        t0, before = time.perf_counter(), avail()
        held.append(torch.empty(int(w * GIB), dtype=torch.uint8, device=f"cuda:{rank}"))
        arch = (model_config(a.model_path).get("architectures") or ["Qwen3ForCausalLM"])[0]
        logs.line(
            f"Load weight end. elapsed={time.perf_counter() - t0:.2f} s, type={arch}, avail mem={avail():.2f} GB, "
            f"mem usage={before - avail():.2f} GB.",
            prefix,
        )
        rest = kv_plan(avail(), total, a.mem_fraction_static)
        if rest <= 0:
            raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")
        held.append(torch.empty(int(rest * GIB), dtype=torch.uint8, device=f"cuda:{rank}"))
        tokens = int(rest * GIB / KV_BYTES_PER_TOKEN)
        if rank == 0:
            logs.line("Using KV cache dtype: torch.bfloat16", prefix)
        logs.line(
            f"KV Cache is allocated. #tokens: {tokens}, K size: {rest / 2:.2f} GB, V size: {rest / 2:.2f} GB",
            prefix,
        )
        logs.line(f"Memory pool end. avail mem={avail():.2f} GB", prefix)
        before = avail()
        logs.line(f"Capture cuda graph begin. This can take up to several minutes. avail mem={before:.2f} GB", prefix)
        t0 = time.perf_counter()
        held.append(torch.empty(int(GRAPH_GIB * GIB), dtype=torch.uint8, device=f"cuda:{rank}"))
        logs.line(
            f"Capture cuda graph end. Time elapsed: {time.perf_counter() - t0:.2f} s. mem usage="
            f"{before - avail():.2f} GB. avail mem={avail():.2f} GB.",
            prefix,
        )
        if rank == 0:
            logs.line(
                f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                f"max_running_requests={min(4096, max(1, tokens // 4096))}, context_len=32768, "
                f"available_gpu_mem={avail():.2f} GB",
                prefix,
            )
    except Exception:
        return fail(traceback.format_exc())
    sys.stdout.write(json.dumps({"ready": True, "tokens": tokens}) + "\n")
    sys.stdout.flush()
    for raw in sys.stdin:
        cmd = json.loads(raw)
        if cmd.get("op") == "oom":
            try:  # a real allocation the GPU cannot hold: torch's own OutOfMemoryError and text
                held.append(torch.empty(int(2 * total * GIB), dtype=torch.uint8, device=f"cuda:{rank}"))
            except Exception:
                return fail(traceback.format_exc())
    return 0


# -- the main process -------------------------------------------------------------------------------------
class Ranks:
    """The rank processes (what console.sim.serve's watchdog polls) and their command pipes."""

    def __init__(self, argv: list[str], tp: int) -> None:
        self.procs = [
            subprocess.Popen(
                [title(tp, r), "-m", "sglang.launch_server", *argv, "--standin-rank", str(r)],
                executable=sys.executable,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for r in range(tp)
        ]

    def wait_ready(self) -> list[int]:
        """Each rank's KV tokens once it is ready; raises when one ended first."""
        out = []
        for p in self.procs:
            assert p.stdout is not None
            ln = p.stdout.readline()
            if not ln:
                raise RuntimeError(f"rank pid {p.pid} ended during startup")
            out.append(int(json.loads(ln)["tokens"]))
        return out

    def send(self, rank: int, cmd: dict[str, Any]) -> None:
        p = self.procs[rank]
        with contextlib.suppress(OSError, ValueError):
            assert p.stdin is not None
            p.stdin.write(json.dumps(cmd) + "\n")
            p.stdin.flush()

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()


class StandinServer:
    """What console.sim.serve's loop uses of its Server: args, ranks, control polling, the kill."""

    def __init__(self, a: SimpleNamespace, ranks: Ranks) -> None:
        self.a, self.ranks = a, ranks
        self.phase = "launch"
        self.scale = 1.0
        self.gpus = list(range(a.tp_size))
        self.host_dir = Path(control_dir()) / f"state-{a.port}"
        self.app: Any = None

    def poll_control(self) -> None:
        for cmd in control.take(control_dir(), [self.a.port, os.getpid()]):
            kind = cmd.get("kind", "sigkill")
            if cmd.get("action") != "crash":
                continue
            if kind == "oom":
                self.ranks.send(int(cmd.get("rank", 0)), {"op": "oom"})
            else:
                os.kill(os.getpid(), signal.SIGKILL)

    def kill_tree(self) -> None:
        self.ranks.kill()
        os.kill(os.getpid(), signal.SIGKILL)

    def on_sigquit(self, signum: int, frame: Any) -> None:
        if self.phase == "launch":
            logs.line("Received sigquit from a child process. It usually means the child failed.")
        else:
            logs.line(f"SIGQUIT received. signum={signum}, frame={_frame(frame)}. It usually means one child failed.")
        self.kill_tree()


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    if a.standin_rank is not None:
        return rank_main(a)
    torch_or_exit()
    cfg = model_config(a.model_path)
    if not cfg:
        logs.raw(f"OSError: {a.model_path} does not appear to have a file named config.json.\n")
        return 1
    sa = server_args(a, cfg)
    logs.line(f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in vars(a).items() if k != 'standin_rank')})")
    ranks = Ranks(argv, a.tp_size)
    srv = StandinServer(sa, ranks)
    signal.signal(signal.SIGQUIT, srv.on_sigquit)
    watch = threading.Thread(target=_poll_during_startup, args=(srv,), daemon=True)
    watch.start()
    try:
        tokens = ranks.wait_ready()
    except RuntimeError:
        time.sleep(30)  # the failed rank's SIGQUIT ends us (as SGLang's launcher waits on its children)
        return 1
    srv.phase = "serving"
    return serve(srv, min(tokens))


def _poll_during_startup(srv: StandinServer) -> None:
    while srv.phase == "launch":
        srv.poll_control()
        time.sleep(0.2)


def serve(srv: StandinServer, tokens: int) -> int:
    """The sim fleet's HTTP app and engine under uvicorn, as console.sim.serve runs them."""
    import asyncio

    from console.sim import serve as sim_serve
    from console.sim.engine import Engine
    from console.sim.http import App

    a = srv.a
    engine = Engine(
        peak_per_gpu=2000.0,
        tp=a.tp_size,
        half=8.0,
        max_running=min(4096, max(1, tokens // 4096)),
        max_tokens=tokens,
        prefix=logs.rank_prefix(a.tp_size, 0),
        hybrid=False,
        mamba_slots=1,
        log_interval=a.decode_log_interval,
    )
    engine.slow = 1.0
    info = {"version": "0.5.11", "startup_time": time.time(), "launch_command": " ".join(sys.argv)}
    app = App(a, engine, info, reasoning_model=False)
    srv.app = app
    logs.line("Using default HuggingFace chat template with detected content format: string")
    try:
        return asyncio.run(sim_serve._main(srv, app, engine))  # type: ignore[arg-type]
    except SystemExit as e:
        srv.ranks.kill()
        return int(e.code or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
