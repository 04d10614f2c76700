"""`python -m sglang.launch_server` on a sim host: args, startup phases, uvicorn, signals, crashes.

Exit codes as SGLang (docs/sglang.md §6): 2 bad flags, 1 argument/validation error or a rank dying in
init, 137 after a child's SIGQUIT or a SIGTERM drain, 3 when uvicorn cannot bind the port.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from console.sim import control, logs, memory, state
from console.sim.args import ServerArgs, is_hybrid, prepare_server_args, visible_gpus
from console.sim.spec import SimHostSpec, load_spec
from console.sim.startup import Failed, Ranks, Startup

_RUN_FRAMES = [
    ("sglang/srt/managers/scheduler.py", 3938, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("sglang/srt/managers/scheduler.py", 1182, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    ("sglang/srt/model_executor/model_runner.py", 2741, "forward", "output = self._forward_raw("),
]
_CUDA_ASSERT = (
    "torch.AcceleratorError: CUDA error: device-side assert triggered\nSearch for `cudaErrorAssert' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with "
    "`TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
_NCCL = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"


def crash_text(kind: str, total_gib: float) -> str:
    if kind == "cuda-assert":
        logs.raw(
            "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:94: operator(): block: [0,0,0], thread: [0,0,0] "
            'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n'
        )
        return logs.traceback_text(_RUN_FRAMES, _CUDA_ASSERT)
    if kind == "nccl":
        return logs.traceback_text(_RUN_FRAMES, _NCCL)
    return logs.traceback_text(_RUN_FRAMES, memory.torch_oom(2.0, 0, total_gib, 0.3, total_gib - 0.3))


class Server:
    """One sim SGLang server process (the HTTP/tokenizer main process)."""

    def __init__(self, host_dir: Path, spec: SimHostSpec, a: ServerArgs) -> None:
        self.host_dir, self.spec, self.a = host_dir, spec, a
        env_scale = os.environ.get("DFLASH_SIM_TIME_SCALE")
        self.scale = float(env_scale) if env_scale else spec.time_scale
        self.phase = "launch"
        self.ranks: Ranks | None = None
        self.startup: Startup | None = None
        self.app: Any = None
        self.gpus: list[int] = []
        self.pending: list[dict[str, Any]] = []
        self.t0 = time.time()

    # -- signals ---------------------------------------------------------------------------------
    def kill_tree(self) -> None:
        if self.ranks:
            self.ranks.kill()
        os.kill(os.getpid(), signal.SIGKILL)

    def on_sigquit(self, signum: int, frame: Any) -> None:
        if self.phase == "launch":
            logs.line("Received sigquit from a child process. It usually means the child failed.")
        else:
            logs.line(f"SIGQUIT received. signum={signum}, frame={_frame(frame)}. It usually means one child failed.")
        self.kill_tree()

    # -- control ---------------------------------------------------------------------------------
    def poll_control(self) -> None:
        self.pending += control.take(self.host_dir, [self.a.port, os.getpid()])
        now = self.startup.phase if self.startup and self.phase == "launch" else self.phase
        due = [c for c in self.pending if c.get("phase") in (None, now)]
        self.pending = [c for c in self.pending if c not in due]
        for cmd in due:
            act = cmd.get("action")
            if act == "slow":
                self.scale *= float(cmd.get("factor", 2.0))
                if self.app:
                    self.app.engine.slow *= float(cmd.get("factor", 2.0))
            elif act == "rate" and self.app:
                self.app.engine.peak_per_gpu = float(cmd.get("tok_s", "inf"))
            elif act == "accept" and self.app:
                p = cmd.get("p")
                self.app.engine.set_accept_p(None if p is None else float(p))
            elif act == "crash":
                self.crash(str(cmd.get("kind", "sigkill")))

    def crash(self, kind: str) -> None:
        assert self.ranks is not None
        if kind == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "rank-sigkill":
            self.ranks._write(0, {"op": "die"})
            return
        total = self.spec.gpus[self.gpus[0]].memory_mib / 1024
        self.ranks._write(0, {"op": "fail", "text": crash_text(kind, total)})

    def sleep(self, s: float) -> None:
        end = time.monotonic() + s
        while True:
            self.poll_control()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.05, left))

    # -- run -------------------------------------------------------------------------------------
    def run(self) -> int:
        a = self.a
        signal.signal(signal.SIGQUIT, self.on_sigquit)
        visible = visible_gpus(len(self.spec.gpus))
        self.gpus = visible[: a.tp_size]
        name = os.environ.get("DFLASH_SIM_PYTHON") or self.spec.python_name
        state.register(self.host_dir, name=name, port=a.port, role="main")
        self.ranks = Ranks(self.host_dir, a.tp_size, self.gpus, name)
        try:
            if len(self.gpus) < a.tp_size:
                self.ranks = Ranks(self.host_dir, a.tp_size, visible or [0], name) if not visible else self.ranks
                self.ranks.fail(
                    logs.traceback_text(
                        _RUN_FRAMES[:1],
                        "torch.AcceleratorError: CUDA error: invalid "
                        "device ordinal\nGPU device may be out of range, do you have enough "
                        "GPUs?\n",
                    ),
                    [len(self.ranks.procs) - 1],
                )
            self.startup = Startup(a, self.spec, self.host_dir, self.ranks, self.scale, self.sleep)
            res = self.startup.run()
        except Failed:
            time.sleep(30)
            return 1
        except RuntimeError as e:
            logs.raw(
                logs.traceback_text(
                    [
                        ("sglang/launch_server.py", 79, "<module>", "run_server(server_args)"),
                        ("sglang/srt/entrypoints/engine.py", 1227, "_wait_for_scheduler_ready", "raise RuntimeError("),
                    ],
                    f"RuntimeError: {e}",
                )
                + "\n"
            )
            self.ranks.kill()
            return 1
        logs.line("Using default HuggingFace chat template with detected content format: string")
        from console.sim.serve import serve

        return serve(self, res)


def _frame(frame: Any) -> str:
    if frame is None:
        return "None"
    return f"<frame at 0x{id(frame):x}, file '{frame.f_code.co_filename}', line {frame.f_lineno}, code {frame.f_code.co_name}>"


_LIBAV = [
    ("sglang/launch_server.py", 7, "<module>", "from sglang.srt.server_args import prepare_server_args"),
    ("sglang/srt/server_args.py", 33, "<module>", "from sglang.srt.utils.hf_transformers_utils import check_gguf_file"),
    ("sglang/srt/utils/hf_transformers_utils.py", 42, "<module>", "from transformers import ("),
    ("transformers/video_utils.py", 51, "<module>", "import torchcodec"),
    ("torchcodec/__init__.py", 10, "<module>", "from . import decoders, samplers  # noqa"),
    ("torchcodec/_core/ops.py", 69, "load_torchcodec_shared_libraries", "torch.ops.load_library(core_library_path)"),
    ("torch/_ops.py", 1478, "load_library", "ctypes.CDLL(path)"),
    ("/usr/lib/python3.11/ctypes/__init__.py", 376, "__init__", "self._handle = _dlopen(self._name, mode)"),
]


def _exc_line(e: BaseException) -> str:
    name = type(e).__name__
    return f"{name}: {e}" if str(e) else name


def main(launch_file: str) -> None:
    host = os.environ.get("DFLASH_SIM_HOST_DIR")
    if not host:
        sys.exit("console.sim: DFLASH_SIM_HOST_DIR is not set (run through a sim host's venv/bin/python)")
    host_dir = Path(host)
    spec = load_spec(host_dir)
    line_no = 54 if spec.sglang_version.startswith("0.5.11") else 71
    logs.raw(
        f"{launch_file}:{line_no}: UserWarning: 'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n  Example: sglang serve --model-path <model> [options]\n"
        "  warnings.warn(\n"
    )
    if "lacks-libavutil" in spec.faults:
        logs.raw(
            logs.traceback_text(
                _LIBAV, "OSError: libavutil.so.58: cannot open shared object file: No such file or directory"
            )
            + "\n"
        )
        sys.exit(1)
    try:
        a = prepare_server_args(sys.argv[1:])
        a.resolve_once()
        a.check_server_args()
    except (ValueError, AssertionError, OSError, RuntimeError, TypeError) as e:
        frames = [
            ("sglang/launch_server.py", 73, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
            ("sglang/srt/server_args.py", 7292, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)"),
            ("sglang/srt/server_args.py", 782, "__post_init__", "self._handle_speculative_decoding()"),
        ]
        logs.raw(logs.traceback_text(frames, _exc_line(e)) + "\n")
        sys.exit(1)
    for note in a.notes:
        logs.line(note)
    if spec.sglang_version.startswith("0.5.11"):
        logs.line(f"server_args={a!r}")
    else:
        logs.line(
            "server_args="
            + repr(
                {
                    k: v
                    for k, v in vars(copy.copy(a)).items()
                    if k not in ("notes", "model_config", "gpu_mem_mib", "resolved")
                }
            )
        )
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(Server(host_dir, spec, a).run())
    sys.exit(130)


__all__ = ["Server", "is_hybrid", "main"]
