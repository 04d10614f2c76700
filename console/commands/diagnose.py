"""`dflash-console diagnose LOG...`: read SGLang logs offline and say what phase they reached and why they died."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.sglang.diagnose import Diagnosis
    from console.sglang.logstate import LogSummary

MAX_BYTES = 256 * 1024 * 1024


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diagnose", help="parse SGLang log files: phase, progress, crash cause and fix hint")
    p.add_argument("logs", nargs="+", metavar="LOG", help="server log file(s); - reads standard input")
    p.add_argument("--json", action="store_true", help="one JSON object per file (an array when several)")
    p.add_argument("--exit-status", type=int, metavar="N", help="the process's exit status, when known (e.g. 137)")
    p.add_argument("--signal", metavar="SIG", help="the signal that ended the process, when known (e.g. KILL or 9)")
    p.add_argument("--stopped", action="store_true", help="the process was stopped on purpose (not a crash)")
    p.add_argument(
        "--gpus",
        metavar="LIST",
        help="the process's CUDA_VISIBLE_DEVICES, e.g. 2,3: GPUs are then named by nvidia-smi's index, as `status` does",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.commands.launch import parse_gpus
    from console.sglang.diagnose import ProcessFacts, diagnose_text

    try:
        gpus = tuple(parse_gpus(args.gpus) or ())
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    unreadable = crashed = foreign = False
    process = None
    if args.exit_status is not None or args.signal is not None or args.stopped:
        process = ProcessFacts(exit_status=args.exit_status, signal=args.signal, stop_requested=args.stopped)
    for name in args.logs:
        try:
            data = _read(Path(name))
        except OSError as e:
            unreadable = True
            why = e.strerror or str(e)
            print(f"error: cannot read {name}: {why}", file=sys.stderr)
            results.append({"file": name, "error": f"cannot read: {why}"})
            continue
        summary, diag = diagnose_text(data, process, gpus)
        crashed = crashed or summary.crashed
        foreign = foreign or not summary.sglang_lines
        rec = to_record(name, summary, diag)
        results.append(rec)
        if not args.json:
            print(render(rec, summary))
    if args.json:
        print(json.dumps(results[0] if len(args.logs) == 1 else results, indent=2))
    if unreadable:
        return 2
    return 1 if crashed or foreign else 0


def _read(path: Path) -> bytes:
    if str(path) == "-":
        return sys.stdin.buffer.read(MAX_BYTES)
    if path.is_dir():
        raise IsADirectoryError(21, "is a directory")
    with path.open("rb") as f:
        return f.read(MAX_BYTES)


def to_record(name: str, s: LogSummary, d: Diagnosis | None) -> dict[str, Any]:
    """The stable JSON shape (documented in the README)."""
    f = s.facts
    sglang = s.sglang_lines > 0
    return {
        "file": name,
        "phase": s.phase.value if sglang else None,
        "draft": s.draft,
        "shards": {"done": s.shards.done, "total": s.shards.total} if s.shards else None,
        "cuda_graphs": {"done": s.graphs.done, "total": s.graphs.total} if s.graphs else None,
        "crashed": s.crashed,
        "cause": d.cause if d else None,
        "summary": d.summary
        if d
        else _ok_summary(s)
        if sglang
        else f"no SGLang log line in this file ({s.lines} lines read)",
        "hint": d.hint if d else None,
        "error_line": d.error_line if d else None,
        "gen_throughput": s.stats.gen_throughput,
        "running_reqs": s.stats.running_reqs,
        "queue_reqs": s.stats.queue_reqs,
        "tp_size": s.tp_size,
        "tp_size_at_least": s.facts.tp_size_at_least,
        "model_class": f.model_class,
        "max_total_num_tokens": f.max_total_num_tokens,
        "listen_url": f.listen_url,
        "timeline": dict(s.timeline),
        "cold_start_s": s.cold_start_s,
        "lines": s.lines,
        "sglang_log": sglang,
    }


def _ok_summary(s: LogSummary) -> str:
    from console.sglang.phase import LABELS

    if s.stopped_reason:
        return f"stopped: {s.stopped_reason}"
    return f"{LABELS[s.phase]}{' (draft model)' if s.draft else ''}"


def render(rec: dict[str, Any], s: LogSummary) -> str:
    """The text report: phases in the TUI's words (`loading weights`, `CUDA graphs`); JSON keeps machine names."""
    from console.sglang.phase import phase_words

    if not rec["sglang_log"]:
        return (
            f"{rec['file']}: no SGLang log line found ({rec['lines']} lines read): not an SGLang server log, "
            "or it is empty"
        )
    out = [f"{rec['file']}: {phase_words(rec['phase'])}{' (draft model)' if rec['draft'] else ''}"]
    prog = []
    if rec["shards"]:
        prog.append(f"shards {rec['shards']['done']}/{rec['shards']['total']}")
    if s.draft_shards:
        prog.append(f"draft shards {s.draft_shards.done}/{s.draft_shards.total}")
    if rec["cuda_graphs"]:
        prog.append(f"CUDA graphs {rec['cuda_graphs']['done']}/{rec['cuda_graphs']['total']}")
    if prog:
        out.append("  progress: " + ", ".join(prog))
    tp = f"{'>=' if s.facts.tp_size_at_least else ''}{rec['tp_size']}" if rec["tp_size"] else None
    facts = [
        f"{k} {v}"
        for k, v in (
            ("model", rec["model_class"]),
            ("tp", tp),
            ("kv tokens", rec["max_total_num_tokens"]),
            ("url", rec["listen_url"]),
        )
        if v
    ]
    if facts:
        out.append("  facts: " + ", ".join(facts))
    if rec["gen_throughput"] is not None:
        out.append(
            f"  last gen throughput: {rec['gen_throughput']:.1f} tok/s (running {rec['running_reqs']}, queued {rec['queue_reqs']})"
        )
    if rec["crashed"]:
        out.append(f"  cause: {rec['cause']}")
        out.append(f"  summary: {rec['summary']}")
        out.append(f"  hint: {rec['hint']}")
        err = rec["error_line"] or ""
        out.append(f"  error: {err[:240]}{'...' if len(err) > 240 else ''}")
    elif rec["summary"]:
        out.append(f"  summary: {rec['summary']}")
    if rec["timeline"]:
        from console.sglang.phase import STARTUP_PHASES

        order = [p.value for p in STARTUP_PHASES]
        keys = sorted(
            rec["timeline"],
            key=lambda k: (order.index(k.removeprefix("draft_")) if k.removeprefix("draft_") in order else 99, k),
        )
        parts = [f"{phase_words(k)} {rec['timeline'][k]:.1f}s" for k in keys]
        total = f" (cold start {rec['cold_start_s']:.1f}s)" if rec["cold_start_s"] is not None else ""
        out.append("  timeline: " + ", ".join(parts) + total)
    return "\n".join(out)
