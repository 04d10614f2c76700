"""Incremental SGLang log parser: raw chunks in, phase / progress / facts / stats / crash evidence out.

Feed it bytes or text in any split (`feed`), read `snapshot()` whenever. It reads logs the way a person
who has debugged many launches does: per-rank phases (the server is as far as its slowest rank),
both tqdm bars, speculative draft stages, every header style and wrapper prefix, serving evidence
(access and batch lines) over missed startup lines, tracebacks and aborts kept as evidence.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Iterable

from console.sglang import logfacts as lf
from console.sglang.logbare import ERRISH, BareLines
from console.sglang.logbatch import BatchStats
from console.sglang.logmarkers import ABORT, CRASH, FRAGMENT, classify
from console.sglang.logstartup import StartupLines
from console.sglang.logstate import CrashInfo, Facts, LogEvent, LogSummary, Progress, RankState, Stats
from console.sglang.logtext import (
    MAX_LINE,
    Header,
    LineSplitter,
    learn_prefix,
    parse_header,
    split_ranks,
)
from console.sglang.logtrace import Tracebacks, add_error
from console.sglang.phase import STARTUP_PHASES, Phase
from console.sglang.specdec import SpecNote, spec_note

_RETRACTED = re.compile(r"#retracted_reqs: (\d+)")
_EXITCODE = re.compile(r"exit ?code[=:] ?(-?\d+)")
_STOP_MARKERS = ("SIGTERM received", "Gracefully exiting")
_SIGNALS = {"KILL": 9, "TERM": 15, "INT": 2, "QUIT": 3, "ABRT": 6, "SEGV": 11, "HUP": 1, "BUS": 7}
ERRORS_KEPT = 50
TAIL_LINES = 300


_PD_REQUEST_FAILED = ("Decode transfer failed for request", "Prefill bootstrap failed for request")
"""A PD server's record of one request whose KV transfer or bootstrap failed (it timed out, the peer is away):
the scheduler is serving; the request fails, the server goes on."""


class LogParser(StartupLines, BareLines):
    """One server's log. Not thread-safe; `snapshot()` returns a copy that is."""

    def __init__(self, *, max_line: int = MAX_LINE, max_events: int = 200, window: int = 20) -> None:
        self._splitter = LineSplitter(max_line)
        self.ranks: dict[str, RankState] = {}
        self.facts = Facts()
        self.stats = Stats()
        self._batches = BatchStats(self.stats, window)
        self.lines = 0
        self.phase = Phase.LAUNCHING
        self.draft = False
        self._http = Phase.LAUNCHING
        self._terminal: Phase | None = None
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
        self._tb = Tracebacks(self.errors)
        self.stopped_reason: str | None = None
        self.exit_status: int | None = None
        self.exit_signal: int | None = None
        self._bar_rank = "TP0"
        self._labels: set[str] = set()
        self._draft_seen: dict[str, bool] = {}
        self._posts = 0
        """POST 2xx access lines while warming (more than the warmup's one: real requests)."""
        self._prefix: re.Pattern[str] | None = None
        """A wrapper's prefix learnt from a header printed after it; taken off the bare lines that carry it."""
        self.sglang_lines = 0
        self.spec_notes: dict[str, tuple[SpecNote, int, float | None]] = {}
        """Speculative-decoding alarms the log raised: kind -> (the note, how many times, when last)."""

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
        self._tb.eof = True
        return lines

    def feed_lines(self, lines: Iterable[str]) -> None:
        """Already-split, already-clean lines (e.g. a file read with splitlines)."""
        for line in lines:
            self._line(line)

    def mark_exit(
        self, exit_status: int | None = None, signal: int | str | None = None, *, stop_requested: bool = False
    ) -> None:
        """The process ended (from the caller's process facts): settle the phase. `signal`: 9, "KILL" or "SIGKILL"."""
        sig = signal_number(signal)
        self.exit_status, self.exit_signal = exit_status, sig
        if self._terminal is not None:
            return
        pending = self._tb.pending()
        if self._tb.crash is None and (stop_requested or (exit_status == 0 and pending is None)):
            self._set_terminal(Phase.STOPPED, "stop requested" if stop_requested else "exited with status 0")
            return
        if self._tb.crash is None:
            what = (
                f"signal {sig}"
                if sig is not None
                else f"exit status {exit_status}"
                if exit_status is not None
                else "no exit status"
            )  # never 'exit status None'
            self._tb.crash = pending or CrashInfo(f"process ended ({what})", self.ts, phase_at_crash=self.phase)
        self._set_terminal(Phase.CRASHED)

    # --- per line ---------------------------------------------------------------------------------

    def _line(self, line: str, hdr: Header | None = None) -> None:
        """One line; `hdr` given: a record whose header was printed some other way (a Python logging prefix)."""
        self.lines += 1
        if hdr is None:
            hdr = parse_header(line) if line[:1] == "[" or line.find("[", 0, 160) >= 0 else None
            if hdr is None:
                self._bare(line)
                return
            if hdr.start:
                pre = line[: hdr.start]
                if "%|" in pre or "% Completed" in pre:
                    self._bar(pre)
                elif self._prefix is None or not self._prefix.match(pre):
                    self._prefix = learn_prefix(pre)
        msg = line[hdr.end :]
        self.sglang_lines += 1
        if hdr.ts is not None:
            self.ts = hdr.ts
            if self.first_ts is None:
                self.first_ts = hdr.ts
                if self._seg_start is None:
                    self._seg_start = hdr.ts
        if self._tb.block is not None:
            self._tb.close()
        if hdr.ranks and hdr.ranks not in self._labels:
            self._new_label(hdr.ranks)
        if msg.startswith("Decode batch"):
            self._batches.decode(msg, self.ts)
            self._batch_seen(True)
        elif msg.startswith("Prefill batch"):
            self._batches.prefill(msg, self.ts)
            self._batch_seen(False)
        elif msg.startswith(("INFO:", "ERROR:", "WARNING:")):
            self._uvicorn(msg, line)
        else:
            if not self._startup(hdr, msg) and not self._record(hdr, msg, line):
                if ERRISH.search(msg):
                    add_error(self.errors, line)
                    self._tb.note(line, self.ts)
            self.tail.append(line)

    def _record(self, hdr: Header, msg: str, line: str) -> bool:
        """Lifecycle and runtime records (not startup facts); False when `msg` is none of them."""
        if msg.startswith("The server is fired up"):
            self.ready_ts = self.ts
            self._tb.progress()
            self._set_http(Phase.READY)
        elif msg.startswith("Child process unexpectedly failed"):
            m = _EXITCODE.search(msg)
            if m and int(m.group(1)) in (9, -9):
                self._event("killed", msg)
                self._set_terminal(Phase.STOPPED, "child processes were SIGKILLed (exit code 9)")
            else:
                self._crash_marker(line, hdr)
        elif msg.startswith(_STOP_MARKERS):
            self._set_terminal(Phase.STOPPED, msg.split(".")[0])
        elif "Retract requests" in msg or "retracted_reqs" in msg or msg.startswith("Decode out of memory happened"):
            self.stats.retractions += 1
            m = _RETRACTED.search(msg)
            self.stats.retracted_reqs += int(m.group(1)) if m else 0
            self._event("retraction", msg)
        elif msg.startswith("Health check failed"):
            self.stats.health_check_failures += 1
            self._event("health", msg)
            add_error(self.errors, line)
        elif msg.startswith(_PD_REQUEST_FAILED):
            self._event("pd_request", msg)  # one request's KV transfer failed: the scheduler loop runs requests
            add_error(self.errors, line)
            self._set_http(Phase.SERVING)
            self._tb.progress()
        elif msg.startswith(("Start of pd disaggregation warmup", "Start of prefill", "Start of decode")):
            self._set_http(Phase.WARMING)
        elif msg.startswith("Traceback (most recent call last)"):
            self._tb.open(line, self.ts, self.phase, fatal=True, rank=hdr.ranks or None)
        elif msg.startswith("DFLASH ") and self._spec_note(msg):
            pass
        else:
            k = classify(msg)
            if k is None or k is FRAGMENT:
                return False
            rank = hdr.ranks or None
            if k is CRASH:
                self._crash_marker(line, hdr)
            else:
                self._crash_marker(line, hdr, opens_block=True)
                self._tb.open(line, self.ts, self.phase, fatal=True, rank=rank)
                if k is ABORT and self._tb.block is not None:
                    self._tb.block.abort = True
        return True

    @property
    def accepts(self) -> deque[tuple[float | None, float]]:
        """(log time, accept len) of the decode lines that printed a sane one, oldest first."""
        return self._batches.accepts

    def _spec_note(self, msg: str) -> bool:
        """A speculative-decoding warning (also an exception line naming one): counted per kind, an event once."""
        note = spec_note(msg)
        if note is None:
            return False
        _, n, _ = self.spec_notes.get(note.kind, (note, 0, None))
        self.spec_notes[note.kind] = (note, n + 1, self.ts)
        if n == 0:
            self._event("spec", note.text)
        return True

    def _uvicorn(self, msg: str, line: str) -> None:
        if msg.startswith("INFO:"):
            body = msg[5:].lstrip()
            if '"' in body and "HTTP/" in body:
                if self._http is Phase.LAUNCHING or self._http is Phase.WARMING:
                    self._access(body)
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
            add_error(self.errors, line)
            body = msg[6:].lstrip()
            if "Errno 98" in body or "address already in use" in body or "error while attempting to bind" in body:
                self._crash_marker(line, None)
                if self._tb.crash is not None and not self._tb.crash.exception_lines:
                    self._tb.crash.exception_lines.append(body)
            elif body.startswith("Exception in ASGI application"):
                self._tb.open(line, self.ts, self.phase, fatal=False)

    def _access(self, body: str) -> None:
        """An HTTP access line: the HTTP server answers, whatever startup lines the log missed."""
        h = self._http
        if h is Phase.LAUNCHING:
            self._set_http(Phase.READY)
        elif h is Phase.WARMING and '"POST ' in body and '" 2' in body:
            self._posts += 1

    def _batch_seen(self, decode: bool) -> None:
        h = self._http
        if h is not Phase.SERVING and (
            h.order >= Phase.READY.order
            or (not self.ranks and h is Phase.LAUNCHING)
            or (h is Phase.WARMING and (decode or self._posts >= 2))
        ):
            self._set_http(Phase.SERVING)
        self._tb.progress()

    # --- phases -----------------------------------------------------------------------------------

    def _new_label(self, label: str) -> None:
        self._labels.add(label)
        parts = split_ranks(label)
        f = self.facts
        for key, attr in (("TP", "tp_size"), ("DP", "dp_size"), ("PP", "pp_size")):
            if key in parts and f.args.get(attr) is None:
                setattr(f, attr, max(getattr(f, attr) or 1, parts[key] + 1))
                if key == "TP":
                    f.tp_size_at_least = True

    def _rank_phase(self, r: RankState, p: Phase) -> None:
        self._tb.progress()
        if p is not r.phase or r.draft != self._draft_seen.get(r.label, False):
            r.phase = p
            self._draft_seen[r.label] = r.draft
            self._update_phase()

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
        ts = self.ts
        if self._seg_name is not None and self._seg_start is not None and ts is not None:
            self.timeline[self._seg_name] = round(self.timeline.get(self._seg_name, 0.0) + ts - self._seg_start, 3)
        if new in STARTUP_PHASES and new is not Phase.READY and self.ready_ts is None:
            self._seg_name, self._seg_start = ("draft_" if draft else "") + new.value, ts
        else:
            self._seg_name = None
        self.phase, self.draft = new, draft

    def _check_interrupt(self) -> None:
        if self._tb.interrupted and self._terminal is None:
            self._set_terminal(Phase.STOPPED, "KeyboardInterrupt")

    def _crash_marker(self, line: str, hdr: Header | None, *, opens_block: bool = False) -> None:
        if self._tb.mark(line, self.ts, (hdr.ranks or None) if hdr else None, self.phase, opens_block=opens_block):
            self._event("crash", line)
        self._set_terminal(Phase.CRASHED)

    def _event(self, kind: str, text: str) -> None:
        self.events.append(LogEvent(self.ts, kind, text))

    # --- output -----------------------------------------------------------------------------------

    @property
    def crashed(self) -> bool:
        return self.crash_info() is not None

    def crash_info(self) -> CrashInfo | None:
        return self._tb.current(terminal=self._terminal is not None, up=self._http.order >= Phase.READY.order)

    @property
    def last_gen_throughput(self) -> float | None:
        """The newest decode line's gen throughput without materialising the other stats (read per log chunk)."""
        return self._batches.last_gen

    def current_stats(self) -> Stats:
        """The live Stats object, brought up to date (no copy; cheaper than a snapshot)."""
        return self._batches.materialize()

    def snapshot(self) -> LogSummary:
        """A deep copy of the current view."""
        self._batches.materialize()
        crash = self.crash_info()
        phase = Phase.CRASHED if crash is not None else self.phase
        timeline = dict(self.timeline)
        if self._seg_name is not None and self._seg_start is not None and self.ts is not None and phase is self.phase:
            timeline[self._seg_name] = round(timeline.get(self._seg_name, 0.0) + self.ts - self._seg_start, 3)
        cold = (
            round(self.ready_ts - self.first_ts, 3) if self.ready_ts is not None and self.first_ts is not None else None
        )
        return LogSummary(
            phase=phase,
            draft=self.draft and crash is None,
            ranks=copy.deepcopy(self.ranks),
            shards=copy.copy(self.shards),
            draft_shards=copy.copy(self.draft_shards),
            graphs=copy.copy(self.graphs),
            graph_bs=self.graph_bs,
            facts=copy.deepcopy(self.facts),
            stats=copy.deepcopy(self.stats),
            timeline=timeline,
            cold_start_s=cold,
            crashed=crash is not None,
            crash=copy.deepcopy(crash),
            stopped_reason=self.stopped_reason if phase is Phase.STOPPED else None,
            errors=list(self.errors),
            events=list(self.events),
            lines=self.lines,
            first_ts=self.first_ts,
            last_ts=self.ts,
            tail=list(self.tail),
            sglang_lines=self.sglang_lines,
        )


def signal_number(sig: int | str | None) -> int | None:
    """9, "9", "KILL", "SIGKILL" -> 9."""
    if sig is None or isinstance(sig, int):
        return sig
    name = sig.strip().upper().removeprefix("SIG")
    return int(name) if name.isdigit() else _SIGNALS.get(name)


def parse_text(text: str | bytes) -> LogSummary:
    """Parse a whole log at once."""
    p = LogParser()
    p.feed(text)
    p.close()
    return p.snapshot()
