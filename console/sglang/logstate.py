"""What the log parser knows about a server, as plain dataclasses the fleet state and UI can read."""

from __future__ import annotations

from dataclasses import dataclass, field

from console.sglang.phase import Phase


@dataclass
class RankState:
    """One scheduler process (a TP rank, within its DP/PP group)."""

    label: str
    """As printed in the log header, e.g. "TP3" or "DP0 TP3"; "TP0" when the log has no prefix (TP=1)."""
    phase: Phase = Phase.LAUNCHING
    draft: bool = False
    """True while this rank is loading/allocating/capturing the speculative draft model."""
    weight_gib: float | None = None
    avail_gib: float | None = None
    """Free GPU memory at the rank's latest report (SGLang's "avail mem", GiB)."""
    kv_tokens: int | None = None
    graphs_done: bool = False
    ready: bool = False
    """The scheduler printed max_total_num_tokens (initialisation finished)."""

    @property
    def key(self) -> tuple[int, int, int]:
        """Progress order: (draft stage, phase order, ready)."""
        return (1 if self.draft else 0, self.phase.order, 1 if self.ready else 0)


@dataclass
class Facts:
    """What the server told us about itself on the way up."""

    sglang_version: str | None = None
    model_path: str | None = None
    served_model_name: str | None = None
    model_class: str | None = None
    draft_model_class: str | None = None
    dtype: str | None = None
    quant: str | None = None
    kv_cache_dtype: str | None = None
    tp_size: int | None = None
    tp_size_at_least: bool = False
    """True when tp_size comes from the highest `TPn` seen (the server_args dump was not in the log)."""
    dp_size: int | None = None
    pp_size: int | None = None
    speculative_algorithm: str | None = None
    weight_gib: float | None = None
    """Weights per rank (GiB, "mem usage" of Load weight end), target model."""
    draft_weight_gib: float | None = None
    avail_gib_before_load: float | None = None
    kv_tokens: int | None = None
    kv_size_gib: float | None = None
    """K+V (or MLA KV) size per rank, GiB."""
    mamba_cache: str | None = None
    swa_tokens: str | None = None
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    max_prefill_tokens: int | None = None
    chunked_prefill_size: int | None = None
    context_len: int | None = None
    available_gpu_mem_gib: float | None = None
    capture_bs: list[int] | None = None
    graph_mem_gib: float | None = None
    attention_backend: str | None = None
    listen_url: str | None = None
    pid: int | None = None
    args: dict[str, str] = field(default_factory=dict)
    """Selected server_args from the startup dump (secrets removed)."""


@dataclass
class Stats:
    """Runtime numbers from Prefill/Decode batch lines (latest values; None = never seen)."""

    gen_throughput: float | None = None
    gen_throughput_avg: float | None = None
    """Mean of the last `window` decode lines."""
    input_throughput: float | None = None
    running_reqs: int | None = None
    queue_reqs: int | None = None
    token_usage: float | None = None
    """Highest of the pool usages on the latest batch line (plain, full, SWA, Mamba)."""
    usage: dict[str, float] = field(default_factory=dict)
    """Every `... usage` field of the latest batch line, e.g. {"full token usage": 0.25, "mamba usage": 0.19}."""
    num_tokens: int | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    cuda_graph: bool | None = None
    cache_hit_rate: float | None = None
    decode_lines: int = 0
    prefill_lines: int = 0
    new_tokens: int = 0
    cached_tokens: int = 0
    retractions: int = 0
    """Retraction lines ("KV cache pool is full. Retract requests." / "Decode out of memory happened"): recoverable."""
    retracted_reqs: int = 0
    health_check_failures: int = 0
    last_batch_ts: float | None = None
    last_decode_ts: float | None = None
    """The newest decode line's log timestamp (the gen throughput's)."""
    extra: dict[str, str] = field(default_factory=dict)
    """All pairs of the latest decode line, as printed."""


@dataclass
class Progress:
    done: int
    total: int
    label: str = ""

    def as_tuple(self) -> tuple[int, int]:
        return (self.done, self.total)


@dataclass
class LogEvent:
    """Something worth a line in an events list (phase change, warning, retraction, crash)."""

    ts: float | None
    kind: str
    text: str


@dataclass
class CrashInfo:
    """Why the parser thinks the server died, with the text diagnose() reads."""

    marker: str
    """The line that says it crashed (sigquit, exception, bind error...)."""
    ts: float | None
    rank: str | None = None
    exception_lines: list[str] = field(default_factory=list)
    """`SomeError: message` lines of the traceback(s), in order."""
    block: list[str] = field(default_factory=list)
    """The traceback/error block (bounded)."""
    phase_at_crash: Phase | None = None
    fatal: bool = True
    """False for tracebacks SGLang survives (e.g. uvicorn's "Exception in ASGI application")."""
    abort: bool = False
    """The block is a process abort (`terminate called ...`, `Fatal Python error`): fatal even without an exception line."""
    markers: list[str] = field(default_factory=list)
    """Every line that said the server died (sigquit, `Exit code: -9`, ...), in order."""
    context: list[str] = field(default_factory=list)
    """Error lines printed before the crash's own block since the last progress (an assert, a build error...)."""

    @property
    def final_exception_missing(self) -> bool:
        """A traceback started after the last exception line: the log stops before the real error."""
        last_tb = max((i for i, x in enumerate(self.block) if "Traceback (most recent call last)" in x), default=-1)
        last_exc = max((i for i, x in enumerate(self.block) if x in self.exception_lines), default=-1)
        return last_tb > last_exc


@dataclass
class LogSummary:
    """A snapshot of everything the parser knows, safe to hand to another thread or the UI."""

    phase: Phase
    draft: bool
    ranks: dict[str, RankState]
    shards: Progress | None
    draft_shards: Progress | None
    graphs: Progress | None
    graph_bs: int | None
    facts: Facts
    stats: Stats
    timeline: dict[str, float]
    """Seconds spent in each finished startup phase (from log timestamps)."""
    cold_start_s: float | None
    """First timestamp to "fired up"."""
    crashed: bool
    crash: CrashInfo | None
    stopped_reason: str | None
    errors: list[str]
    """Recent error-looking lines (bounded), whatever the phase."""
    events: list[LogEvent]
    lines: int
    first_ts: float | None
    last_ts: float | None
    tail: list[str]
    """The last meaningful lines (no batch/access/progress lines), for diagnosis."""
    sglang_lines: int = 0
    """Lines recognised as SGLang's (records, batch/access lines, tracebacks, crash markers); 0: not an SGLang log."""

    @property
    def tp_size(self) -> int | None:
        return self.facts.tp_size

    @property
    def ready(self) -> bool:
        return self.phase in (Phase.READY, Phase.SERVING)
