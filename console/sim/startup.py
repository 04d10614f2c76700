"""The sim server's startup phases (docs/sglang.md §1.2): per-rank lines, tqdm bars, VRAM taken step by step.

`Startup.run()` walks init -> weights -> KV/Mamba pools -> CUDA graphs (-> draft model) and returns
the pool numbers; SGLang's failures (OOM, "Not enough memory", unbalanced memory, capture failed)
are sent to the ranks, which print `Scheduler hit an exception` and SIGQUIT the main process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.sim import logs, memory
from console.sim.args import ServerArgs, is_hybrid, load_model_config
from console.sim.hostdir import PACKAGE_PARENT
from console.sim.nvsmi import RESERVED_MIB
from console.sim.spec import SimHostSpec
from console.sim.state import gpu_totals

_SCHED = [
    ("sglang/srt/managers/scheduler.py", 3921, "run_scheduler_process", "scheduler = Scheduler("),
    ("sglang/srt/managers/scheduler.py", 437, "__init__", "self.init_model_worker()"),
    ("sglang/srt/managers/tp_worker.py", 262, "__init__", "self._init_model_runner()"),
    ("sglang/srt/model_executor/model_runner.py", 535, "__init__", "self.initialize(pre_model_load_memory)"),
]


class Failed(Exception):
    """A rank failed; the text is the traceback it prints."""


@dataclass
class Result:
    pools: memory.Pools
    max_total_num_tokens: int
    max_running_requests: int
    weight_gib: float
    graph_gib: float
    avail_gib: float


def title(tp: int, rank: int) -> str:
    """`sglang::scheduler` + `_TPn` when tp > 1 (scheduler.py configure_scheduler_process)."""
    return "sglang::scheduler" + logs.rank_prefix(tp, rank).replace(" ", "_")


class Ranks:
    """The TP rank child processes and their JSON command pipes."""

    def __init__(self, host_dir: Path, tp: int, gpus: list[int], name: str) -> None:
        self.gpus = gpus
        # A rank's argv[0] is its title, so its interpreter cannot find the venv it belongs to (Python finds one
        # from its program name) and starts bare: it gets the folder holding `console` (standard library only).
        path = [str(PACKAGE_PARENT), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
        env = {**os.environ, "PYTHONPATH": ":".join(path)}
        # argv[0] is the title SGLang's schedulers set (setproctitle): ps and nvidia-smi show it.
        self.procs = [
            subprocess.Popen(
                [title(tp, r), "-m", "console.sim.rank", str(host_dir), str(r), str(tp), str(g), title(tp, r)],
                executable=sys.executable,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for r, g in enumerate(gpus)
        ]
        self.mem = [0.0] * len(gpus)

    def send(self, cmd: dict[str, Any], ranks: list[int] | None = None) -> None:
        idx = range(len(self.procs)) if ranks is None else ranks
        for r in idx:
            self._write(r, cmd)
        for r in idx:
            self._ack(r)

    def _write(self, r: int, cmd: dict[str, Any]) -> None:
        p = self.procs[r]
        try:
            assert p.stdin is not None
            p.stdin.write(json.dumps(cmd) + "\n")
            p.stdin.flush()
        except (BrokenPipeError, OSError):
            self._dead(r)

    def _ack(self, r: int) -> None:
        p = self.procs[r]
        assert p.stdout is not None
        if not p.stdout.readline():
            self._dead(r)

    def _dead(self, r: int) -> None:
        code = self.procs[r].wait()
        raise RuntimeError(
            f"Rank {r} scheduler died during initialization (exit code: {code}). If exit code is -9 "
            "(SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
        )

    def log(self, msg: str | list[str], ranks: list[int] | None = None) -> None:
        self.send({"op": "log", "msgs": [msg] if isinstance(msg, str) else msg}, ranks)

    def take(self, gib: float, r: int) -> None:
        self.mem[r] += gib
        self.send({"op": "mem", "gib": self.mem[r]}, [r])

    def fail(self, text: str, ranks: list[int] | None = None) -> None:
        for r in range(len(self.procs)) if ranks is None else ranks:
            self._write(r, {"op": "fail", "text": text})
        time.sleep(30)

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()


class Startup:
    """Drives the phases; `sleep` polls the sim control file between steps."""

    def __init__(
        self,
        args: ServerArgs,
        spec: SimHostSpec,
        host_dir: Path,
        ranks: Ranks,
        scale: float,
        sleep: Callable[[float], None],
    ) -> None:
        self.a, self.spec, self.host_dir, self.ranks, self.scale = args, spec, host_dir, ranks, scale
        self._sleep = sleep
        self.tp = len(ranks.gpus)
        self.phase = "init"
        self.v23 = not spec.sglang_version.startswith("0.5.11")
        """init | weights | kv | capture | draft: where a `phase=`-targeted control command fires."""
        self.total = [spec.gpus[g].memory_mib / 1024 for g in ranks.gpus]

    def sleep(self, s: float) -> None:
        self._sleep(s * self.scale)

    def avail(self, r: int) -> float:
        g = self.ranks.gpus[r]
        used = gpu_totals(self.host_dir, len(self.spec.gpus))[g][0] + self.spec.gpus[g].base_used_mib
        return max(0.0, (self.spec.gpus[g].memory_mib - used - RESERVED_MIB) / 1024)

    def all_ranks(self) -> list[int]:
        return list(range(self.tp))

    def fail(self, exc: str, frames: list[tuple[str, int, str, str]], ranks: list[int] | None = None) -> None:
        self.ranks.fail(logs.traceback_text(_SCHED + frames, exc), ranks)
        raise Failed(exc)

    def run(self) -> Result:
        a = self.a
        self.init_distributed()
        model_bytes = sum(f.stat().st_size for f in Path(a.model_path).glob("*.safetensors"))
        w = memory.weights_gib(model_bytes, self.tp)
        shards = sorted(Path(a.model_path).glob("*.safetensors"))
        self.phase = "weights"
        self.load_weights(w, len(shards), type_name=(a.model_config.get("architectures") or ["Model"])[0])
        self.phase = "kv"
        res = self.pools()
        self.phase = "capture"
        g = self.capture(draft=False)
        if memory.piecewise_enabled(a):
            self.piecewise()
        elif a.disable_piecewise_cuda_graph:
            logs.line("Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set")
        if a.speculative_algorithm:
            self.phase = "draft"
            dw = memory.draft_weights_gib(a.model_config, model_bytes, self.tp)
            if a.speculative_algorithm == "DFLASH":
                dw = self._dflash_draft_gib()
            self.load_weights(dw, len(shards), type_name=self._draft_type(), draft=True)
            if a.speculative_algorithm == "DFLASH":
                self._dflash_runner()
            self.ranks.log(f"KV Cache is allocated. #tokens: {res.pools.kv_tokens}, K size: 0.01 GB, V size: 0.01 GB")
            self.ranks.log(f"Memory pool end. avail mem={self.avail(0):.2f} GB")
            g += self.capture(draft=True)
        avail = self.avail(0)
        self.ranks.log(
            f"max_total_num_tokens={res.max_total_num_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
            f"max_prefill_tokens={a.max_prefill_tokens}, max_running_requests={res.max_running_requests}, "
            f"context_len={a.context_length}, available_gpu_mem={avail:.2f} GB",
            [0],
        )
        res.graph_gib, res.weight_gib, res.avail_gib = g, w, avail
        return res

    def _dflash_draft_gib(self) -> float:
        """The DFlash drafter's own weights (its folder's shards), or the load's real failure when it is missing."""
        path = self.a.speculative_draft_model_path or ""
        try:
            self._draft_cfg = load_model_config(path)
        except OSError as e:
            self.fail(
                f"OSError: {e}",
                [("sglang/srt/speculative/dflash_worker.py", 92, "__init__", "self.draft_worker = TpModelWorker(")],
            )
        size = sum(f.stat().st_size for f in Path(path).expanduser().glob("*.safetensors"))
        return size / 2**30 / self.tp

    def _dflash_runner(self) -> None:
        """dflash_worker.py's lines once the draft runner exists (rank 0), with its warnings where they apply."""
        a = self.a
        backend = a.speculative_draft_attention_backend or a.attention_backend or "flashinfer"
        if backend == "trtllm_mha":
            self.ranks.log("DFLASH draft worker does not support 'trtllm_mha' yet; falling back to 'flashinfer'.", [0])
            backend = "flashinfer"
        elif backend not in ("flashinfer", "fa3"):
            self.ranks.log(
                "DFLASH draft worker only supports attention_backend in {'flashinfer', 'fa3'} for now, "
                f"but got {backend!r}. Falling back to 'flashinfer'.",
                [0],
            )
            backend = "flashinfer"
        block = a.speculative_num_draft_tokens
        model_block = getattr(self, "_draft_cfg", {}).get("block_size")
        if isinstance(model_block, int) and model_block != block:
            self.ranks.log(
                f"DFLASH block size mismatch: using speculative_num_draft_tokens={block} but draft config "
                f"block_size={model_block}.",
                [0],
            )
        arch = (getattr(self, "_draft_cfg", {}).get("architectures") or ["DFlashDraftModel"])[0]
        self.ranks.log(
            f"Initialized DFLASH draft runner. attention_backend={backend}, model={arch}, block_size={block}", [0]
        )
        self.ranks.log("DFLASH draft runner ready. mask_token=<|MASK|>, mask_token_id=248077", [0])

    def _draft_type(self) -> str:
        if self.a.speculative_algorithm == "DFLASH":
            return "DFlashDraftModel"
        arch = str((self.a.model_config.get("architectures") or ["Model"])[0])
        return arch.replace("ForConditionalGeneration", "ForCausalLMMTP").replace("ForCausalLM", "ForCausalLMEagle")

    def init_distributed(self) -> None:
        self.ranks.log("Init torch distributed begin.")
        t0 = time.perf_counter()
        before = [self.avail(r) for r in self.all_ranks()]
        self.sleep(0.8 + 0.3 * self.tp)
        for r in self.all_ranks():
            self.ranks.take(memory.CONTEXT_GIB + (memory.NCCL_GIB if self.tp > 1 else 0.0), r)
        after = [self.avail(r) for r in self.all_ranks()]
        if self.tp > 1:
            low = min(after)
            bad = [r for r in self.all_ranks() if low < after[r] * 0.9]
            if bad and _env_true("SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"):
                self.fail(
                    "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
                    f"processes. pre_model_load_memory={low:.2f}, local_gpu_memory={after[bad[0]]:.2f}, "
                    f"local_gpu_memory * 0.9={after[bad[0]] * 0.9:.2f}",
                    [
                        (
                            "sglang/srt/model_executor/model_runner.py",
                            1229,
                            "init_torch_distributed",
                            "raise RuntimeError(",
                        )
                    ],
                    bad,
                )
        el = time.perf_counter() - t0
        for r in self.all_ranks():
            self.ranks.log(
                f"Init torch distributed ends. elapsed={el:.2f} s, mem usage={before[r] - after[r]:.2f} GB", [r]
            )

    def load_weights(self, w: float, shards: int, type_name: str, draft: bool = False) -> None:
        for r in self.all_ranks():
            self.ranks.log(f"Load weight begin. avail mem={self.avail(r):.2f} GB", [r])
        t0 = time.perf_counter()
        before = [self.avail(r) for r in self.all_ranks()]
        desc = "Multi-thread loading shards"
        logs.raw("\r" + logs.shard_bar(desc, 0, shards, 0.0))
        per = w / shards
        for i in range(shards):
            self.sleep(0.55 * w / shards * (0.3 if draft else 1.0) + 0.02)
            for r in self.all_ranks():
                if self.avail(r) < per + 0.05:
                    total, free = self.total[r], self.avail(r)
                    logs.raw("\n")
                    self.fail(
                        memory.torch_oom(per, r, total, free, total - free),
                        [
                            (
                                "sglang/srt/model_loader/loader.py",
                                676,
                                "load_weights_and_postprocess",
                                "model.load_weights(weights)",
                            )
                        ],
                        [r],
                    )
                self.ranks.take(per, r)
            logs.raw("\r" + logs.shard_bar(desc, i + 1, shards, time.perf_counter() - t0))
        logs.raw("\n")
        el = time.perf_counter() - t0
        for r in self.all_ranks():
            after = self.avail(r)
            self.ranks.log(
                f"Load weight end. elapsed={el:.2f} s, type={type_name}, avail mem={after:.2f} GB, "
                f"mem usage={before[r] - after:.2f} GB.",
                [r],
            )

    def pools(self) -> Result:
        a = self.a
        rest = self.avail(0) - self.total[0] * (1 - (a.mem_fraction_static or 0.88))
        if rest <= 0:
            self.fail(
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                [("sglang/srt/model_executor/pool_configurator.py", 41, "configure", "raise RuntimeError(")],
            )
        pools = memory.plan_pools(a, rest, self.tp)
        self.ranks.log("Using KV cache dtype: torch.bfloat16", [0])
        self.sleep(0.6)
        for r in self.all_ranks():
            self.ranks.take(pools.total_gib, r)
        dtype = "dtype: torch.bfloat16, " if self.v23 else ""
        self.ranks.log(
            f"KV Cache is allocated. {dtype}#tokens: {pools.kv_tokens}, K size: {pools.k_gib:.2f} GB, "
            f"V size: {pools.k_gib:.2f} GB"
        )
        if is_hybrid(a.model_config):
            extra = ""
            if a.speculative_algorithm:
                extra = (
                    f"intermediate_ssm_state_cache size: {pools.ssm_gib * 0.05:.2f}GB "
                    f"intermediate_conv_window_cache size: {pools.conv_gib * 0.05:.2f}GB "
                )
            self.ranks.log(
                f"Mamba Cache is allocated. max_mamba_cache_size: {pools.mamba_slots}, conv_state size: "
                f"{pools.conv_gib:.2f}GB, ssm_state size: {pools.ssm_gib:.2f}GB {extra}"
            )
        for r in self.all_ranks():
            self.ranks.log(f"Memory pool end. avail mem={self.avail(r):.2f} GB", [r])
        mrr = a.max_running_requests or memory.auto_max_running(pools.kv_tokens, a.context_length or 4096)
        return Result(pools, pools.kv_tokens, mrr, 0.0, 0.0, 0.0)

    def capture(self, draft: bool) -> float:
        a = self.a
        if a.disable_cuda_graph:
            return 0.0
        what = "draft cuda graph" if draft else "cuda graph"
        g = memory.graph_gib(a) * (0.4 if draft else 1.0)
        before = [self.avail(r) for r in self.all_ranks()]
        bs = memory.capture_bs(a)
        v23_name = "draft decode" if draft else "target decode"
        for r in self.all_ranks():
            if self.v23:
                n = a.speculative_num_draft_tokens if a.speculative_algorithm and not draft else 1
                self.ranks.log(
                    f"Capture {v23_name} CUDA graph begin. backend={a.attention_backend}, "
                    f"num_tokens_per_req={n}, avail mem={before[r]:.2f} GB",
                    [r],
                )
            else:
                self.ranks.log(
                    f"Capture {what} begin. This can take up to several minutes. avail mem={before[r]:.2f} GB", [r]
                )
        if not draft and not self.v23:
            self.ranks.log(f"Capture cuda graph bs {bs}", [0])
        t0 = time.perf_counter()
        order = list(reversed(bs))
        step = g / len(order)
        for i, b in enumerate(order):
            logs.raw(
                "\r"
                + logs.tqdm_bar(
                    f"Capturing batches (bs={b} avail_mem={self.avail(0):.2f} GB)",
                    i,
                    len(order),
                    time.perf_counter() - t0,
                )
            )
            self.sleep((1.5 if draft else 4.0) / len(order))
            for r in self.all_ranks():
                if self.avail(r) < step + 0.02:
                    logs.raw("\n")
                    total, free = self.total[r], self.avail(r)
                    err = memory.torch_oom(step, r, total, free, total - free).split(": ", 1)[1]
                    self.fail(
                        f"Exception: Capture cuda graph failed: {err}\n{memory.CAPTURE_FAILED_MSG}",
                        [("sglang/srt/model_executor/cuda_graph_runner.py", 716, "__init__", "raise Exception(")],
                        [r],
                    )
                self.ranks.take(step, r)
        logs.raw(
            "\r"
            + logs.tqdm_bar(
                f"Capturing batches (bs={order[-1]} avail_mem={self.avail(0):.2f} GB)",
                len(order),
                len(order),
                time.perf_counter() - t0,
            )
            + "\n"
        )
        el = time.perf_counter() - t0
        for r in self.all_ranks():
            used, av = before[r] - self.avail(r), self.avail(r)
            if self.v23:
                self.ranks.log(
                    f"Capture {v23_name} CUDA graph end. bs={bs}, elapsed={el:.2f} s, mem usage={used:.2f} GB, "
                    f"avail mem={av:.2f} GB.",
                    [r],
                )
            else:
                self.ranks.log(
                    f"Capture {what} end. Time elapsed: {el:.2f} s. mem usage={used:.2f} GB. avail mem={av:.2f} GB.",
                    [r],
                )
        if draft and not self.v23:
            self.ranks.log(
                f"Capture draft extend cuda graph begin. This can take up to several minutes. avail "
                f"mem={self.avail(0):.2f} GB"
            )
            self.sleep(0.5)
            self.ranks.log(
                f"Capture draft extend cuda graph end. Time elapsed: {0.5 * self.scale:.2f} s. mem "
                f"usage=0.00 GB. avail mem={self.avail(0):.2f} GB."
            )
        return g

    def piecewise(self) -> None:
        toks = memory.piecewise_tokens(self.a)
        for r in self.all_ranks():
            if self.v23:
                self.ranks.log(
                    f"Capture target prefill CUDA graph begin. backend={self.a.attention_backend}, "
                    f"num_tokens={toks}, avail mem={self.avail(r):.2f} GB",
                    [r],
                )
            else:
                self.ranks.log(f"Capture piecewise CUDA graph begin. avail mem={self.avail(r):.2f} GB", [r])
        if not self.v23:
            self.ranks.log(f"Capture cuda graph num tokens {toks}", [0])
        t0 = time.perf_counter()
        order = list(reversed(toks))
        for label in ("Compiling num tokens", "Capturing num tokens"):
            for i, n in enumerate(order):
                extra = f" avail_mem={self.avail(0):.2f} GB" if label.startswith("Capturing") else ""
                logs.raw(
                    "\r" + logs.tqdm_bar(f"{label} (num_tokens={n}{extra})", i, len(order), time.perf_counter() - t0)
                )
                self.sleep(0.8 / len(order))
            logs.raw(
                "\r"
                + logs.tqdm_bar(f"{label} (num_tokens={order[-1]})", len(order), len(order), time.perf_counter() - t0)
                + "\n"
            )
        for r in self.all_ranks():
            self.ranks.take(0.05, r)
        el = time.perf_counter() - t0
        for r in self.all_ranks():
            if self.v23:
                self.ranks.log(
                    f"Capture target prefill CUDA graph end. elapsed={el:.2f} s, mem usage=0.05 GB, "
                    f"avail mem={self.avail(r):.2f} GB.",
                    [r],
                )
            else:
                self.ranks.log(
                    f"Capture piecewise CUDA graph end. Time elapsed: {el:.2f} s. mem usage=0.05 GB. "
                    f"avail mem={self.avail(r):.2f} GB.",
                    [r],
                )


def _env_true(name: str, default: bool = True) -> bool:
    import os

    v = os.environ.get(name)
    return default if v is None else v.lower() not in ("0", "false", "no")
