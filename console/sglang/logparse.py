"""Incremental SGLang log parser: raw chunks in, phase / progress / facts / stats / crash evidence out.

Feed it bytes or text in any split (`feed`), read `snapshot()` whenever. It reads logs the way a person
who has debugged many launches does: per-rank phases (the server is as far as its slowest rank),
both tqdm bars, speculative draft stages, 0.5.11 and 0.5.23 wordings, tracebacks kept as evidence.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Iterable

from console.sglang import logfacts as lf
from console.sglang.logstate import CrashInfo, Facts, LogEvent, LogSummary, Progress, RankState, Stats
from console.sglang.logtext import (
    MAX_LINE,
    Header,
    LineSplitter,
    find_embedded_header,
    parse_header,
    parse_pairs,
    split_ranks,
    to_float,
    to_int,
)
from console.sglang.phase import STARTUP_PHASES, Phase

_EXC = re.compile(r"(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)(?:: |:$|\(|$)")
_ERRISH = re.compile(r"error|Error|ERROR|Traceback|exception|failed|FAILED|NCCL WARN|Killed|cannot |No such file")
_SHARDS = re.compile(r"([A-Za-z][\w -]*?): +\d+% Completed \| (\d+)/(\d+)")
_CAPTURE = re.compile(r"Capturing batches \(bs=(\d+)(?: avail_mem=([\d.]+) GB)?\):[^|]*\|[^|]*\| *(\d+)/(\d+)")
_NUM_TOKENS = re.compile(r"(Capturing|Compiling) num tokens \(num_tokens=(\d+)[^)]*\):[^|]*\|[^|]*\| *(\d+)/(\d+)")
_BARE_BAR = re.compile(r" *\d+%\|[^|]*\| *(\d+)/(\d+) \[")
_RETRACTED = re.compile(r"#retracted_reqs: (\d+)")
_ARGPARSE = re.compile(r"(?:[\w./-]+(?: serve)?: error: |Error: --model-path is required)")
_COMPOSE = re.compile(r"[\w.-]+\s*\| ?")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT[\d:.,]+(?:Z|[+-]\d\d:?\d\d)? ")
_EXITCODE = re.compile(r"exit ?code[=:] ?(-?\d+)")
_CRASH_MARKERS = ("Received sigquit", "SIGQUIT received", "Rank 0 scheduler is dead", "Exit code:")
_EXC_MARKERS = ("Scheduler hit an exception", "DetokenizerManager hit an exception",
                "DataParallelController hit an exception", "TokenizerManager hit an exception",
                "Initialization failed.")
_STOP_MARKERS = ("SIGTERM received", "Gracefully exiting")
BLOCK_LINES = 400
ERRORS_KEPT = 50
TAIL_LINES = 300


class LogParser:
    """One server's log. Not thread-safe; `snapshot()` returns a copy that is."""

    def __init__(self, *, max_line: int = MAX_LINE, max_events: int = 200, window: int = 20) -> None:
        self._splitter = LineSplitter(max_line)
        self.ranks: dict[str, RankState] = {}
        self.facts = Facts()
        self.stats = Stats()
        self.lines = 0
        self._http = Phase.LAUNCHING
        self._terminal: Phase | None = None
        self.phase = Phase.LAUNCHING
        self.draft = False
        self.shards: Progress | None = None
        self.draft_shards: Progress | None = None
        self.graphs: Progress | None = None
        self.graph_bs: int | None = None
        self.timeline: dict[str, float] = {}
        self._seg_name: str | None = Phase.LAUNCHING.value
        self._seg_start: float | None = None
        self.first_ts: float | None = None
        self.ts: float | None = None
        self.ready_ts: float | None = None
        self.errors: deque[str] = deque(maxlen=ERRORS_KEPT)
        self.events: deque[LogEvent] = deque(maxlen=max_events)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._gen: deque[float] = deque(maxlen=window)
        self._block: CrashInfo | None = None
        """The traceback being read (open until a header line)."""
        self._last_block: CrashInfo | None = None
        self._crash: CrashInfo | None = None
        self.stopped_reason: str | None = None
        self._bar_rank = "TP0"
        self.exit_status: int | None = None
        self.exit_signal: int | None = None
        self._labels: set[str] = set()
        self._last_decode: str | None = None
        self._last_prefill: str | None = None
        self._last_batch: str | None = None

    # --- input ------------------------------------------------------------------------------------

    def feed(self, chunk: bytes | str) -> list[str]:
        """Feed raw output; returns the complete cleaned lines it finished (for display)."""
        lines = self._splitter.feed(chunk)
        for line in lines:
            self._line(line)
        return lines

    def close(self) -> list[str]:
        """End of input: the last partial line counts."""
        lines = self._splitter.close()
        for line in lines:
            self._line(line)
        return lines

    def feed_lines(self, lines: Iterable[str]) -> None:
        """Already-split, already-clean lines (e.g. a file read with splitlines)."""
        for line in lines:
            self._line(line)

    def mark_exit(self, exit_status: int | None = None, signal: int | str | None = None, *, stop_requested: bool = False) -> None:
        """The process ended (from the caller's process facts): settle the phase. `signal`: 9, "KILL" or "SIGKILL"."""
        signal = signal_number(signal)
        self.exit_status, self.exit_signal = exit_status, signal
        if self._terminal is not None:
            return
        if self._crash is None and self._pending() is None and (stop_requested or exit_status == 0):
            self._set_terminal(Phase.STOPPED, "stop requested" if stop_requested else "exited with status 0")
        elif self._crash is None and self._pending() is None:
            what = f"signal {signal}" if signal is not None else f"exit status {exit_status}"
            self._crash = CrashInfo(f"process ended ({what})", self.ts, phase_at_crash=self.phase)
            self._set_terminal(Phase.CRASHED)
        else:
            self._set_terminal(Phase.CRASHED)

    # --- per line ---------------------------------------------------------------------------------

    def _line(self, line: str) -> None:
        self.lines += 1
        hdr = parse_header(line) if line[:1] == "[" or line.find("[", 0, 160) >= 0 else None
        if hdr is None:
            self._bare(line)
            return
        if hdr.start and ("%|" in line[:hdr.start] or "% Completed" in line[:hdr.start]):
            self._bar(line[:hdr.start])
        ts = hdr.ts
        self.ts = ts
        if self.first_ts is None:
            self.first_ts = ts
            if self._seg_start is None:
                self._seg_start = ts
        if self._block is not None:
            self._close_block()
        if hdr.ranks and hdr.ranks not in self._labels:
            self._new_label(hdr.ranks)
        msg = line[hdr.end:]
        if msg.startswith("Decode batch"):
            self._decode(msg)
        elif msg.startswith("Prefill batch"):
            self._prefill(msg)
        elif msg.startswith(("INFO:", "ERROR:", "WARNING:")):
            self._uvicorn(msg, line)
        else:
            self._record(hdr, msg, line)

    def _bare(self, line: str) -> None:
        s = line
        if len(s) > 20:
            if s[4] == "-" and s[10] == "T":
                m = _RFC3339.match(s)
                if m:
                    s = s[m.end():]
            if " | " in s[:48] or "  |" in s[:48]:
                m = _COMPOSE.match(s)
                if m:
                    s = s[m.end():]
            if s is not line and s[:1] == "[" and parse_header(s) is not None:
                self.lines -= 1
                self._line(s)
                return
        b = self._block
        if b is not None:
            self._block_add(s)
            return
        if "%|" in s or "% Completed" in s:
            i = find_embedded_header(s)
            if i > 0:
                self._bar(s[:i])
                self._line(s[i:])
                return
            self._bar(s)
            return
        st = s.lstrip()
        if st.startswith(("Traceback (most recent call last)", 'File "')) or _EXC.match(s):
            self._open_block(s, fatal=not s.startswith("KeyboardInterrupt"))
            return
        if _ARGPARSE.match(s):
            self._crash_marker(s, s, None)
            if self._crash is not None and not self._crash.exception_lines:
                self._crash.exception_lines.append(s)
            self.tail.append(s)
            return
        if s == "Killed":
            self._add_error(s)
            self.tail.append(s)
            return
        if s and _ERRISH.search(s):
            self._add_error(s)
        if s:
            self.tail.append(s)

    def _record(self, hdr: Header, msg: str, line: str) -> None:
        if msg.startswith("Load weight "):
            r = self._rank(hdr)
            if msg.startswith("Load weight begin"):
                if r.phase.order >= Phase.KV_CACHE.order and not r.draft:
                    r.draft = True
                    self._event("draft", f"{r.label}: loading the draft model")
                elif not r.draft and self.facts.avail_gib_before_load is None:
                    self.facts.avail_gib_before_load = lf.gib(lf._AVAIL, msg)
                self._rank_phase(r, Phase.LOADING_WEIGHTS)
            elif msg.startswith("Load weight end"):
                cls, dtype, quant, w, avail = lf.load_weight_end(msg)
                f = self.facts
                if r.draft:
                    f.draft_model_class = f.draft_model_class or cls
                    f.draft_weight_gib = f.draft_weight_gib if f.draft_weight_gib is not None else w
                else:
                    f.model_class = f.model_class or cls
                    f.dtype = f.dtype or dtype
                    f.quant = f.quant or quant
                    r.weight_gib = w
                    if f.weight_gib is None:
                        f.weight_gib = w
                r.avail_gib = avail
                self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith("KV Cache ") or (" KV Cache " in msg[:40] and ("allocated" in msg or "VA upper" in msg)):
            r = self._rank(hdr)
            tokens = lf.kv_allocated(msg, self.facts) if not r.draft else None
            if tokens is not None:
                r.kv_tokens = tokens
            self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith("Memory pool end"):
            r = self._rank(hdr)
            r.avail_gib = lf.gib(lf._AVAIL, msg)
            self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith(("Mamba Cache is allocated", "Use sliding window memory pool", "SWAKVPool")):
            r = self._rank(hdr)
            if msg.startswith("Mamba"):
                self.facts.mamba_cache = self.facts.mamba_cache or msg.strip()
            else:
                self.facts.swa_tokens = self.facts.swa_tokens or msg.strip()
            self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith("Capture "):
            self._capture(hdr, msg)
        elif msg.startswith("max_total_num_tokens="):
            r = self._rank(hdr)
            lf.scheduler_limits(msg, self.facts)
            r.ready = True
            self._update_phase()
        elif msg.startswith("Init torch distributed"):
            self._rank(hdr)
            self._update_phase()
        elif msg.startswith("The server is fired up"):
            self.ready_ts = self.ts
            self._progress()
            self._set_http(Phase.READY)
        elif msg.startswith(_EXC_MARKERS):
            self._crash_marker(msg, line, hdr)
            self._open_block(line, fatal=True, rank=hdr.ranks or None)
        elif msg.startswith(_CRASH_MARKERS) or ("crashed with exit code" in msg and msg.startswith("Subprocess")):
            self._crash_marker(msg, line, hdr)
        elif msg.startswith("Child process unexpectedly failed"):
            m = _EXITCODE.search(msg)
            code = int(m.group(1)) if m else None
            if code in (9, -9):
                self._event("killed", msg)
                self._set_terminal(Phase.STOPPED, "child processes were SIGKILLed (exit code 9)")
            else:
                self._crash_marker(msg, line, hdr)
        elif msg.startswith(_STOP_MARKERS):
            self._set_terminal(Phase.STOPPED, msg.split(".")[0])
        elif msg.startswith("server_args="):
            lf.server_args(msg, self.facts)
        elif msg.startswith("Using KV cache dtype:"):
            self.facts.kv_cache_dtype = msg.split(":", 1)[1].strip().removeprefix("torch.")
        elif "Retract requests" in msg or "retracted_reqs" in msg or msg.startswith("Decode out of memory happened"):
            st = self.stats
            st.retractions += 1
            m = _RETRACTED.search(msg)
            st.retracted_reqs += int(m.group(1)) if m else 0
            self._event("retraction", msg)
        elif msg.startswith("Health check failed"):
            self.stats.health_check_failures += 1
            self._event("health", msg)
            self._add_error(line)
        elif msg.startswith(("Start of pd disaggregation warmup", "Start of prefill", "Start of decode")):
            self._set_http(Phase.WARMING)
        else:
            if _ERRISH.search(msg):
                self._add_error(line)
            self.tail.append(line)
            return
        self.tail.append(line)

    def _capture(self, hdr: Header, msg: str) -> None:
        r = self._rank(hdr)
        head = msg[:60]
        if msg.startswith("Capture cuda graph bs"):
            bs = lf.capture_bs(msg)
            if bs:
                if not r.draft:
                    self.facts.capture_bs = bs
                self.graphs = Progress(0, len(bs), "draft" if r.draft else "decode")
        elif " begin" in head:
            if "draft" in head and not r.draft:
                r.draft = True
            r.avail_gib = lf.gib(lf._AVAIL, msg)
            self._rank_phase(r, Phase.CUDA_GRAPH)
        elif " end" in head:
            r.graphs_done = True
            r.avail_gib = lf.gib(lf._AVAIL, msg)
            if not r.draft and self.facts.graph_mem_gib is None and "piecewise" not in head and "prefill" not in head:
                self.facts.graph_mem_gib = lf.gib(lf._MEM_USAGE, msg)
            if self.graphs is not None and self.graphs.total:
                self.graphs = Progress(self.graphs.total, self.graphs.total, self.graphs.label)
            self._rank_phase(r, Phase.CUDA_GRAPH)

    def _bar(self, s: str) -> None:
        if "% Completed" in s:
            m = _SHARDS.search(s)
            if m is None:
                return
            r = self._rank_by_label(self._bar_rank)
            p = Progress(int(m.group(2)), int(m.group(3)), m.group(1).strip())
            if r.phase.order >= Phase.KV_CACHE.order and not r.draft:
                r.draft = True
                self._event("draft", "loading the draft model")
            if r.draft:
                self.draft_shards = p
            else:
                self.shards = p
            self._rank_phase(r, Phase.LOADING_WEIGHTS)
            return
        r = self._rank_by_label(self._bar_rank)
        m = _CAPTURE.search(s)
        if m is not None:
            self.graph_bs = int(m.group(1))
            self.graphs = Progress(int(m.group(3)), int(m.group(4)), "draft" if r.draft else "decode")
            self._rank_phase(r, Phase.CUDA_GRAPH)
            return
        m = _NUM_TOKENS.search(s)
        if m is not None:
            self.graphs = Progress(int(m.group(3)), int(m.group(4)), "piecewise")
            self._rank_phase(r, Phase.CUDA_GRAPH)
            return
        m = _BARE_BAR.match(s)
        if m is not None and r.phase is Phase.CUDA_GRAPH:
            self.graphs = Progress(int(m.group(1)), int(m.group(2)), "draft" if r.draft else "decode")

    def _uvicorn(self, msg: str, line: str) -> None:
        if msg.startswith("INFO:"):
            body = msg[5:].lstrip()
            if '"' in body and "HTTP/" in body:
                return
            if body.startswith("Uvicorn running on"):
                self.facts.listen_url = lf.listen_url(body)
                self._set_http(Phase.WARMING)
            elif body.startswith("Started server process"):
                self.facts.pid = lf.server_pid(body)
            elif body.startswith(("Shutting down", "Finished server process")) and self._terminal is None:
                self._set_terminal(Phase.STOPPED, body.rstrip("."))
            self.tail.append(line)
            return
        self.tail.append(line)
        if msg.startswith("ERROR:"):
            self._add_error(line)
            body = msg[6:].lstrip()
            if "Errno 98" in body or "address already in use" in body or "error while attempting to bind" in body:
                self._crash_marker(body, line, None)
                if self._crash is not None and not self._crash.exception_lines:
                    self._crash.exception_lines.append(body)
            elif body.startswith("Exception in ASGI application"):
                self._open_block(line, fatal=False)

    # --- runtime stats ----------------------------------------------------------------------------

    # Batch lines can arrive by the hundred per second: per line only counters, the serving transition and
    # the throughput window are updated (find + float); the full key: value parse of the latest lines runs
    # when a snapshot is taken.

    def _batch_seen(self) -> None:
        self.stats.last_batch_ts = self.ts
        if self._http is not Phase.SERVING and (self._http.order >= Phase.READY.order or (not self.ranks and self._http is Phase.LAUNCHING)):
            self._set_http(Phase.SERVING)
        if self._crash is None and self._last_block is not None:
            self._last_block = None

    def _decode(self, msg: str) -> None:
        self.stats.decode_lines += 1
        self._last_decode = self._last_batch = msg
        i = msg.find("gen throughput (token/s): ")
        if i >= 0:
            j = msg.find(",", i + 26)
            t = to_float(msg[i + 26:] if j < 0 else msg[i + 26:j])
            if t is not None:
                self._gen.append(t)
        self._batch_seen()

    def _prefill(self, msg: str) -> None:
        st = self.stats
        st.prefill_lines += 1
        self._last_prefill = self._last_batch = msg
        st.new_tokens += _field_int(msg, "#new-token: ")
        st.cached_tokens += _field_int(msg, "#cached-token: ")
        self._batch_seen()

    def _materialize(self) -> None:
        """Fill Stats from the latest batch lines (cheap: a few lines, once per snapshot)."""
        st = self.stats
        if self._last_prefill is not None:
            pp = parse_pairs(self._last_prefill)
            t = to_float(pp.get("input throughput (token/s)"))
            if t is not None:
                st.input_throughput = t
            h = pp.get("cache hit rate")
            if h is not None:
                st.cache_hit_rate = to_float(h)
        if self._last_decode is not None:
            dp = parse_pairs(self._last_decode)
            st.extra = dp
            st.gen_throughput = to_float(dp.get("gen throughput (token/s)"))
            if self._gen:
                st.gen_throughput_avg = round(sum(self._gen) / len(self._gen), 2)
            n = dp.get("#token") or dp.get("#full token")
            if n is not None:
                st.num_tokens = to_int(n)
            a = dp.get("accept len")
            if a is not None:
                st.accept_len = to_float(a)
                st.accept_rate = to_float(dp.get("accept rate"))
        if self._last_batch is not None:
            pairs = parse_pairs(self._last_batch)
            v = pairs.get("#running-req")
            if v is not None:
                st.running_reqs = to_int(v)
            v = pairs.get("#queue-req")
            if v is not None:
                st.queue_reqs = to_int(v)
            usage: dict[str, float] = {}
            for k, val in pairs.items():
                if k[-5:] == "usage":
                    f = to_float(val)
                    if f is not None:
                        usage[k] = f
            if usage:
                st.usage = usage
                real = [v for k, v in usage.items() if k != "pre-allocated usage"] or list(usage.values())
                st.token_usage = max(real)
            g = pairs.get("cuda graph")
            if g is not None:
                st.cuda_graph = g == "True"

    # --- phases -----------------------------------------------------------------------------------

    def _rank(self, hdr: Header) -> RankState:
        if not hdr.ranks and self.facts.tp_size is None:
            self.facts.tp_size = 1
        return self._rank_by_label(hdr.ranks or "TP0")

    def _rank_by_label(self, label: str) -> RankState:
        r = self.ranks.get(label)
        if r is None:
            r = self.ranks[label] = RankState(label)
            parts = split_ranks(label)
            if parts.get("TP") == 0 and self._bar_rank not in self.ranks:
                self._bar_rank = label
        return r

    def _new_label(self, label: str) -> None:
        self._labels.add(label)
        parts = split_ranks(label)
        f = self.facts
        for key, attr in (("TP", "tp_size"), ("DP", "dp_size"), ("PP", "pp_size")):
            if key in parts and f.args.get(attr) is None:
                setattr(f, attr, max(getattr(f, attr) or 1, parts[key] + 1))

    def _rank_phase(self, r: RankState, p: Phase) -> None:
        if p is not r.phase:
            r.phase = p
        self._progress()
        self._update_phase()

    def _progress(self) -> None:
        if self._crash is None:
            self._last_block = None

    def _set_http(self, p: Phase) -> None:
        if p.order > self._http.order:
            self._http = p
            self._update_phase()

    def _set_terminal(self, p: Phase, reason: str | None = None) -> None:
        if self._terminal is Phase.CRASHED:
            return
        self._terminal = p
        if p is Phase.STOPPED:
            self.stopped_reason = reason
        self._update_phase()

    def _update_phase(self) -> None:
        if self._terminal is not None:
            new, draft = self._terminal, False
        elif self._http is not Phase.LAUNCHING:
            new, draft = self._http, False
        elif self.ranks:
            slow = min(self.ranks.values(), key=lambda r: r.key)
            new, draft = slow.phase, slow.draft
        else:
            new, draft = Phase.LAUNCHING, False
        if new is self.phase and draft == self.draft:
            return
        self._event("phase", ("draft " if draft else "") + new.value)
        self._segment(new, draft)
        self.phase, self.draft = new, draft

    def _segment(self, new: Phase, draft: bool) -> None:
        ts = self.ts
        if self._seg_name is not None and self._seg_start is not None and ts is not None:
            self.timeline[self._seg_name] = round(self.timeline.get(self._seg_name, 0.0) + ts - self._seg_start, 3)
        if new in STARTUP_PHASES and new is not Phase.READY and self.ready_ts is None:
            self._seg_name = ("draft_" if draft else "") + new.value
            self._seg_start = ts
        else:
            self._seg_name = None

    # --- tracebacks and crashes -------------------------------------------------------------------

    def _open_block(self, line: str, *, fatal: bool, rank: str | None = None) -> None:
        if self._block is not None:
            self._close_block()
        self._block = CrashInfo(line, self.ts, rank=rank, phase_at_crash=self.phase, fatal=fatal)
        self._block_add(line)

    def _block_add(self, s: str) -> None:
        b = self._block
        assert b is not None
        if len(b.block) >= BLOCK_LINES:
            del b.block[40:41]
        b.block.append(s)
        if s[:1] not in " \t" and _EXC.match(s):
            if len(b.exception_lines) < 40:
                b.exception_lines.append(s)
            self._add_error(s)
            if s.startswith("KeyboardInterrupt"):
                self._set_terminal(Phase.STOPPED, "KeyboardInterrupt")

    def _close_block(self) -> None:
        b, self._block = self._block, None
        if b is None or not b.fatal:
            return
        if self._crash is not None:
            if not self._crash.block:
                self._crash.block, self._crash.exception_lines = b.block, b.exception_lines
            return
        if b.exception_lines or any("hit an exception" in x for x in b.block[:1]):
            self._last_block = b

    def _pending(self) -> CrashInfo | None:
        """A traceback that nothing after it contradicts: the log stopped on it."""
        b = self._block if self._block is not None and self._block.fatal else None
        if b is not None and b.exception_lines and not b.exception_lines[-1].startswith("KeyboardInterrupt"):
            return b
        lb = self._last_block
        if lb is not None and lb.exception_lines and lb.exception_lines[-1].startswith("KeyboardInterrupt"):
            return None
        return lb

    def _crash_marker(self, msg: str, line: str, hdr: Header | None) -> None:
        self._add_error(line)
        if self._crash is None:
            src = self._block if self._block is not None else self._last_block
            self._crash = CrashInfo(line, self.ts, rank=(hdr.ranks or None) if hdr else None, phase_at_crash=self.phase)
            if src is not None and src.fatal:
                self._crash.block, self._crash.exception_lines = src.block, src.exception_lines
                self._crash.phase_at_crash = src.phase_at_crash
                self._crash.rank = self._crash.rank or src.rank
            self._event("crash", line)
        self._set_terminal(Phase.CRASHED)

    def _add_error(self, line: str) -> None:
        if not self.errors or self.errors[-1] != line:
            self.errors.append(line)

    def _event(self, kind: str, text: str) -> None:
        self.events.append(LogEvent(self.ts, kind, text))

    # --- output -----------------------------------------------------------------------------------

    @property
    def crashed(self) -> bool:
        return self._crash is not None or (self._terminal is None and self._pending() is not None)

    def crash_info(self) -> CrashInfo | None:
        return self._crash if self._crash is not None else (self._pending() if self._terminal is None else None)

    def current_stats(self) -> Stats:
        """The live Stats object, brought up to date (no copy; cheaper than a snapshot)."""
        self._materialize()
        return self.stats

    def snapshot(self) -> LogSummary:
        """A deep copy of the current view."""
        self._materialize()
        crash = self.crash_info()
        phase = Phase.CRASHED if crash is not None else self.phase
        timeline = dict(self.timeline)
        if self._seg_name is not None and self._seg_start is not None and self.ts is not None and phase is self.phase:
            timeline[self._seg_name] = round(timeline.get(self._seg_name, 0.0) + self.ts - self._seg_start, 3)
        cold = round(self.ready_ts - self.first_ts, 3) if self.ready_ts is not None and self.first_ts is not None else None
        return LogSummary(
            phase=phase, draft=self.draft and crash is None, ranks=copy.deepcopy(self.ranks),
            shards=copy.copy(self.shards), draft_shards=copy.copy(self.draft_shards), graphs=copy.copy(self.graphs),
            graph_bs=self.graph_bs, facts=copy.deepcopy(self.facts), stats=copy.deepcopy(self.stats),
            timeline=timeline, cold_start_s=cold, crashed=crash is not None, crash=copy.deepcopy(crash),
            stopped_reason=self.stopped_reason if phase is Phase.STOPPED else None, errors=list(self.errors),
            events=list(self.events), lines=self.lines, first_ts=self.first_ts, last_ts=self.ts, tail=list(self.tail),
        )


_SIGNALS = {"KILL": 9, "TERM": 15, "INT": 2, "QUIT": 3, "ABRT": 6, "SEGV": 11, "HUP": 1, "BUS": 7}


def signal_number(sig: int | str | None) -> int | None:
    """9, "9", "KILL", "SIGKILL" -> 9."""
    if sig is None or isinstance(sig, int):
        return sig
    name = sig.strip().upper().removeprefix("SIG")
    return int(name) if name.isdigit() else _SIGNALS.get(name)


def _field_int(msg: str, key: str) -> int:
    i = msg.find(key)
    if i < 0:
        return 0
    i += len(key)
    j = msg.find(",", i)
    try:
        return int(msg[i:] if j < 0 else msg[i:j])
    except ValueError:
        return 0


def parse_text(text: str | bytes) -> LogSummary:
    """Parse a whole log at once."""
    p = LogParser()
    p.feed(text)
    p.close()
    return p.snapshot()
