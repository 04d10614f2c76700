"""Crash diagnosis: a parsed log (plus optional process facts) -> cause slug, one-line summary, fix hint, error line.

The crash's own traceback decides first, then where it was raised, then the errors printed before
it (diagrules.py holds the rules). When the decisive exception is not in the log the answer is
`unknown` with the best error line, never a confident wrong cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.sglang.diagrules import CODE, OOM, Ctx, Diagnosis, by_location, by_rules, classify_oom
from console.sglang.logparse import LogParser, signal_number
from console.sglang.logstate import CrashInfo, LogSummary
from console.sglang.phase import Phase

__all__ = ["CAUSES", "Diagnosis", "ProcessFacts", "diagnose", "diagnose_text", "finish"]

CAUSES: tuple[str, ...] = (
    "cuda_oom_kv_cache",
    "cuda_oom_cuda_graph",
    "cuda_oom_weights",
    "cuda_oom_runtime",
    "memory_imbalance",
    "port_in_use",
    "invalid_port_config",
    "missing_shared_library",
    "cuda_driver_incompatible",
    "unsupported_gpu_arch",
    "kernel_missing",
    "kernel_compile_error",
    "nccl_error",
    "distributed_comm_error",
    "multinode_rank_load_failure",
    "cuda_device_assert",
    "spec_args_invalid",
    "mamba_radix_cache_incompatible",
    "mamba_radix_tree_corruption",
    "model_not_found",
    "unsupported_model_arch",
    "trust_remote_code_required",
    "invalid_argument",
    "checkpoint_weight_mismatch",
    "warmup_failed",
    "killed_oom_killer",
    "unknown",
)


@dataclass(frozen=True)
class ProcessFacts:
    """What the caller knows about the process's end (from the transport / meta.json / dmesg)."""

    exit_status: int | None = None
    signal: int | str | None = None
    stop_requested: bool = False
    oom_killed: bool | None = None
    """True when the kernel log / cgroup says the OOM killer took it."""

    @property
    def signal_number(self) -> int | None:
        if self.signal is None:
            return 9 if self.exit_status in (137, -9) else None
        return signal_number(self.signal)


def diagnose(summary: LogSummary, process: ProcessFacts | None = None, gpus: tuple[int, ...] = ()) -> Diagnosis | None:
    """None when the log shows no crash (and the process facts show none either).

    Evidence in order: the crash's own traceback (every exception of it, chained ones too, and the crash
    markers), where it happened (frames and phase), then the error lines printed before it since the
    last progress (an assert, a build error). What none of them explains is `unknown` with the best line.
    `gpus` (the process's CUDA_VISIBLE_DEVICES) turns torch's device index into the physical GPU.
    """
    crash = summary.crash
    if crash is None:
        return _from_process(summary, process)
    lines = list(crash.block) or [crash.marker]
    for mk in crash.markers or [crash.marker]:
        if mk not in lines:
            lines.append(mk)
    ctx = Ctx(crash, summary, lines, "\n".join(lines), gpus)
    excs = crash.exception_lines
    if excs and crash.final_exception_missing:
        found = by_rules(ctx, excs) or by_location(ctx) or by_rules(ctx, crash.context)
        if found is not None:
            return found
        return Diagnosis(
            "unknown",
            f"crashed{_where(crash)}; the final exception is not in the log (last error: {excs[-1][:140]})",
            "open the full log (the traceback is cut off); the cause is in the lines that follow",
            excs[-1],
        )
    cands = list(dict.fromkeys([*excs, *(x for x in lines if x and not CODE.match(x))]))
    found = by_rules(ctx, cands) or by_location(ctx)
    if found is not None:
        return found
    for line in cands:
        if OOM.search(line):
            cause, s, h = classify_oom(ctx, line)
            return Diagnosis(cause, s, h, line.strip())
    if excs:
        last = excs[-1]
        if last.startswith(("AssertionError", "ValueError", "TypeError")) and "server_args.py" in ctx.text:
            what = "speculative-decoding" if "speculative" in ctx.text else "server"
            cause = "spec_args_invalid" if what == "speculative-decoding" else "invalid_argument"
            return Diagnosis(
                cause,
                f"{what} argument validation failed: {last[:140]}",
                "give all of --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens, or none"
                if cause == "spec_args_invalid"
                else "fix the flag named in the error (dflash-console check --remote runs SGLang's own validation)",
                last,
            )
    found = by_rules(ctx, crash.context)
    if found is not None:
        return found
    if process is not None and process.signal_number == 9 and not process.stop_requested and not excs:
        return _oom_killer(summary, process, crash.marker)
    if (
        not excs
        and process is not None
        and process.exit_status is None
        and process.signal is None
        and crash.marker.startswith("process ended")
    ):
        return Diagnosis(
            "unknown",
            f"the process vanished{_where(crash)} with no exit status and no error in its "
            "log: most likely killed by a signal (SIGKILL, the OOM killer) or its host restarted",
            "check `dmesg -T | grep -i -e oom -e kill` on the host and who else stops processes there; `r` relaunches",
            crash.marker.strip(),
        )
    if not excs:
        last = crash.marker.strip()
        return Diagnosis(
            "unknown",
            f"crashed{_where(crash)}, but the exception text is not in the log (last error line: {last[:140]})",
            "the log was cut before the traceback's end: read the full log file on the host, or relaunch to reproduce",
            last,
        )
    error = excs[-1].strip()
    return Diagnosis(
        "unknown",
        f"crashed{_where(crash)} with an error the console does not know: {error[:140]}",
        "read the traceback in the log; the decisive line is shown below",
        error,
    )


def _where(crash: CrashInfo) -> str:
    parts = []
    if crash.rank:
        parts.append(f"on {crash.rank}")
    if crash.phase_at_crash and not crash.phase_at_crash.terminal and crash.phase_at_crash is not Phase.LAUNCHING:
        parts.append(f"during {crash.phase_at_crash.value}")
    return (" " + " ".join(parts)) if parts else ""


def _from_process(summary: LogSummary, process: ProcessFacts | None) -> Diagnosis | None:
    if process is None or process.stop_requested:
        return None
    sig = process.signal_number
    last = summary.errors[-1] if summary.errors else (summary.tail[-1] if summary.tail else "")
    if sig == 9 or process.oom_killed:
        return _oom_killer(summary, process, last)
    if process.exit_status not in (None, 0) or sig not in (None, 15, 2):
        what = f"signal {process.signal}" if process.signal is not None else f"exit status {process.exit_status}"
        return Diagnosis(
            "unknown",
            f"the process ended ({what}) in {summary.phase.value} with no error in the log",
            "check the host's kernel log (dmesg) and the lines before the end of the log",
            last,
        )
    return None


def _oom_killer(summary: LogSummary, process: ProcessFacts | None, line: str) -> Diagnosis:
    return Diagnosis(
        "killed_oom_killer",
        f"the server was SIGKILLed during {summary.phase.value} with no error in its log: most likely the OS OOM killer (host RAM)",
        "check `dmesg -T | grep -i oom`; loading needs host RAM for the weights: fewer servers loading at once, "
        "more RAM/swap, or a smaller --model-loader-extra-config num_threads",
        line,
    )


def finish(
    parser: LogParser, process: ProcessFacts | None = None, gpus: tuple[int, ...] = ()
) -> tuple[LogSummary, Diagnosis | None]:
    """The process ended (or the file is complete): settle the parser's phase and diagnose (the fleet's call);
    `gpus`: the process's physical GPUs in CUDA_VISIBLE_DEVICES order, when known."""
    parser.close()
    if process is not None and (
        process.exit_status is not None or process.signal is not None or process.stop_requested
    ):
        parser.mark_exit(process.exit_status, process.signal_number, stop_requested=process.stop_requested)
    s = parser.snapshot()
    return s, diagnose(s, process, gpus)


def diagnose_text(
    text: str | bytes, process: ProcessFacts | None = None, gpus: tuple[int, ...] = ()
) -> tuple[LogSummary, Diagnosis | None]:
    """Parse a whole log and diagnose it (`gpus` as finish's)."""
    p = LogParser()
    p.feed(text)
    return finish(p, process, gpus)
