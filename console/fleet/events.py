"""Typed events: everything monitors and actions learn lands in FleetState as one of these.

Monitors turn remote output into events; `FleetState.apply(event)` is the only writer of state.
Times are `time.time()` floats (wall clock), so ages survive a console restart's journal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from console.gpu.readings import ComputeApp, GpuReading

HostConn = Literal["connecting", "up", "down"]
HealthStatus = Literal["ok", "warming", "down", "unauthorized", "error"]
HEALTH_OF_CODE: dict[int, HealthStatus] = {200: "ok", 503: "warming", 401: "unauthorized"}
"""/health's HTTP status as the console reads it; any other code is "error"."""


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    sid: int
    args: str


@dataclass(frozen=True)
class ServerMeta:
    """What the console knows about a server it launched (meta.json) or discovered (ps)."""

    name: str
    host: str
    gpus: tuple[int, ...]
    port: int | None
    preset: str | None = None
    managed: bool = True
    pid: int | None = None
    sid: int | None = None
    log_path: str | None = None
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    started_at: float | None = None
    command: str = ""
    launch_id: str = ""
    bind: str = "127.0.0.1"
    """The server's --host: where a tunnel connects to on the remote side."""


# -- host link ------------------------------------------------------------------------------
@dataclass(frozen=True)
class HostConnecting:
    host: str
    at: float
    attempt: int = 1


@dataclass(frozen=True)
class HostUp:
    host: str
    at: float


@dataclass(frozen=True)
class HostDown:
    host: str
    at: float
    error: str
    retry_in_s: float | None = None


# -- telemetry ------------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuSample:
    host: str
    at: float
    gpus: tuple[GpuReading, ...]


@dataclass(frozen=True)
class TelemetryError:
    """nvidia-smi missing, hanging, or printing garbage: the GPU panes say so."""

    host: str
    at: float
    message: str


@dataclass(frozen=True)
class ProcessSample:
    """Compute apps and the process table, joined to servers by session id."""

    host: str
    at: float
    apps: tuple[ComputeApp, ...]
    procs: tuple[ProcInfo, ...]


# -- servers --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerSeen:
    """A server found on a host: launched now, re-attached from meta.json, or external (ps)."""

    meta: ServerMeta
    at: float
    alive: bool = True
    previous_logs: tuple[str, ...] = ()
    """Older launches' log paths (from the host's history.jsonl on re-attach)."""


@dataclass(frozen=True)
class ServerGone:
    """Its process is no longer alive: missed by two looks apart in time (and /health down), log read to its end."""

    server: str
    at: float
    exit_status: int | None = None
    signal: str | None = None
    found_ended: bool = False
    """Already dead when this console attached (meta.json, no process): each new console finds it again."""


@dataclass(frozen=True)
class ServerAlive:
    """A server called ended is in the process table again: it never ended (a sample had missed it)."""

    server: str
    at: float


@dataclass(frozen=True)
class ServerRemoved:
    server: str
    at: float


@dataclass(frozen=True)
class LogData:
    """Bytes read from a server's log, starting at byte `offset` of file `path`."""

    server: str
    at: float
    path: str
    offset: int
    data: bytes
    clock: float | None = None
    """The host's wall clock when it read these bytes, on the log timestamps' scale (local time read as UTC);
    None: unknown, the newest line's own stamp stands in (a live tail's lines are as new as they come)."""


@dataclass(frozen=True)
class LogError:
    server: str
    at: float
    message: str


@dataclass(frozen=True)
class HealthResult:
    server: str
    at: float
    status: HealthStatus
    detail: str = ""
    latency_ms: float | None = None


@dataclass(frozen=True)
class MetricsSample:
    server: str
    at: float
    values: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerAction:
    """A lifecycle step the console took (launch, stop, restart, refused ...), for the journal/UI."""

    server: str
    at: float
    action: str
    ok: bool
    message: str = ""


class NoticeKind(StrEnum):
    """What a Notice is about, so a front end reacts to the fact, never to the wording of its message."""

    READY = "ready"
    """A server came up: /health answered 200 or its log says it is ready."""
    CRASHED = "crashed"
    STOPPED = "stopped"
    """Ended after a stop the console asked for."""
    RUNNING_AGAIN = "running-again"
    """A server called ended is in the process table again (a sample had missed it)."""
    HOST_DOWN = "host-down"
    HOST_BACK = "host-back"
    TELEMETRY = "telemetry"
    """nvidia-smi missing, hanging or printing garbage on a host."""
    SPEC = "spec"
    """A speculative-decoding alarm: accept length collapsed (or back), or a DFLASH warning in the log."""
    ACTION = "action"
    """A lifecycle step the console took (launch, stop, restart, refused ...); its level says how it went."""
    OTHER = "other"


@dataclass(frozen=True)
class Notice:
    """Something a person should see (toast): server ready, crashed, host down/back."""

    at: float
    level: Literal["info", "warning", "error"]
    message: str
    server: str | None = None
    host: str | None = None
    kind: NoticeKind = NoticeKind.OTHER
    step: str = ""
    """An ACTION notice's step as the action named it (`launch`, `stop`, `kill`, `stopped`)."""


@dataclass(frozen=True)
class SpecCumulative:
    """/server_info's `avg_spec_accept_length`: the launch's lifetime mean accept length, as the server counts it."""

    server: str
    at: float
    accept_len: float


@dataclass(frozen=True)
class SpecLaunchRecord:
    """What one launch with speculative decoding gave (console/fleet/spechistory.py keeps them in the state dir)."""

    preset: str
    server: str
    launch_id: str
    algorithm: str
    shape: str
    draft_model: str
    args: tuple[str, ...]
    started_at: float | None
    ended_at: float | None
    figures: int
    accept_mean: float
    accept_p10: float
    accept_p90: float
    tok_s_mean: float | None

    def to_dict(self) -> dict[str, object]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> SpecLaunchRecord:
        """From a line of the file: every field checked, a wrong one raises (the line is then skipped)."""

        def num(k: str, opt: bool = False) -> float | None:
            v = d.get(k)
            if v is None and opt:
                return None
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise TypeError(k)
            return float(v)

        def text(k: str) -> str:
            v = d.get(k)
            if not isinstance(v, str):
                raise TypeError(k)
            return v

        args = d.get("args")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise TypeError("args")
        return cls(
            text("preset"),
            text("server"),
            text("launch_id"),
            text("algorithm"),
            text("shape"),
            text("draft_model"),
            tuple(args),
            num("started_at", True),
            num("ended_at", True),
            int(num("figures") or 0),
            num("accept_mean") or 0.0,
            num("accept_p10") or 0.0,
            num("accept_p90") or 0.0,
            num("tok_s_mean", True),
        )


Event = (
    HostConnecting
    | HostUp
    | HostDown
    | GpuSample
    | TelemetryError
    | ProcessSample
    | ServerSeen
    | ServerGone
    | ServerAlive
    | ServerRemoved
    | LogData
    | LogError
    | HealthResult
    | MetricsSample
    | ServerAction
    | Notice
    | SpecLaunchRecord
    | SpecCumulative
)
