"""What the console knows of one router: phase, workers, requests/s, why it ended (pure; no IO, no clock)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from console.remote_text import for_terminal
from console.router.answers import RouterCounters, RouterWorker

RouterPhase = Literal["stopped", "starting", "running", "crashed", "unknown"]


@dataclass(frozen=True)
class RouterView:
    """One router as last seen. `running` means its /health answered 200."""

    name: str
    host: str
    port: int
    policy: str
    phase: RouterPhase = "unknown"
    pid: int | None = None
    started_at: float | None = None
    log_path: str | None = None
    workers: tuple[RouterWorker, ...] = ()
    rps: float | None = None
    """Requests/s through the router over the last two metrics reads."""
    worker_rps: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    """Why it crashed (from its log), or the last failure to reach it."""
    checked_at: float | None = None
    counters: RouterCounters | None = None
    counters_at: float | None = None
    last_change: str = ""
    """The last worker add/remove the console made, e.g. `removed http://127.0.0.1:31001 (crashed)`."""

    def with_counters(self, c: RouterCounters | None, at: float) -> RouterView:
        """Fold a metrics read in: requests/s from the previous one (None until there are two)."""
        if c is None:
            return self
        rps, per = self.rps, dict(self.worker_rps)
        if self.counters is not None and self.counters_at is not None and at > self.counters_at:
            dt = at - self.counters_at
            rps = max(0.0, (c.requests - self.counters.requests) / dt)
            per = {u: max(0.0, (v - self.counters.per_worker.get(u, 0.0)) / dt) for u, v in c.per_worker.items()}
        return replace(self, counters=c, counters_at=at, rps=rps, worker_rps=per)

    def after_change(self, note: str, removed: set[str]) -> RouterView:
        """The view after a sync: its note, and the workers it removed gone from the list (the band never counts
        `4/4 workers healthy` beside `removed http://...`; the next /workers read confirms it)."""
        return replace(self, last_change=note, workers=tuple(w for w in self.workers if w.url not in removed))

    @property
    def healthy_workers(self) -> int:
        return sum(w.healthy for w in self.workers)


def crash_cause(log_tail: str, python: str, host: str, port: int) -> str:
    """One line for why a router process ended, from the end of its log (sanitised: it is host text)."""
    text = for_terminal(log_tail)
    if "No module named sglang_router" in text or "No module named 'sglang_router'" in text:
        return f"sglang-router is not installed for {python} on {host}; install it there: pip install sglang-router"
    if "Address already in use" in text or "address already in use" in text.lower():
        return f"port {port} is already in use on {host}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "exited without a word in its log"
    bad = [
        ln for ln in lines if any(w in ln for w in (" ERROR ", "ERROR ", "panicked", "Traceback", "Error:", "error:"))
    ]
    if bad:
        return "exited: " + bad[-1][:200]
    return "ended without an error in its log (killed by a signal?); its last line: " + lines[-1][:160]
