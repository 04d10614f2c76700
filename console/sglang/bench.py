"""The built-in load generator: a concurrency sweep of streaming chat requests, and the bench.jsonl history.

The client is aiohttp, the one `sglang.bench_serving` uses: its C HTTP parser hands over every
socket read's body at once, where httpx/h11 made one Python event per HTTP chunk (one per token:
~50 µs of a token's ~60). The hot loop timestamps once per read and decodes only the SSE events,
so one core drives tens of thousands of tokens a second arriving one per packet
(benchmarks/bench_loadgen_ceiling.py).
Statistics live in `benchstats` (pure); the sglang engine's summary parser in `bench_serving_parse`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console import hostjson
from console.sglang.benchstats import LevelResult, RequestSample, aggregate, default_num_prompts
from console.sglang.httpbound import JSON_MAX_BYTES, SSE_LINE_MAX_BYTES

if TYPE_CHECKING:  # imported where used: aiohttp takes ~0.1-0.3 s to import, and the TUI imports this module
    import aiohttp

Progress = Callable[[int, int, int], None]
"""progress(concurrency, requests_done, requests_total), called after each finished request."""

_WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book "
    "eye job word business issue side kind head house service friend father power hour game line "
    "end member law car city community name president team minute idea kid body information back "
    "parent face others level office door health person art war history party result change morning "
    "reason research girl guy moment air teacher force education"
).split()
SERVER_INFO_KEYS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "mem_fraction_static",
    "max_running_requests",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "context_length",
    "speculative_algorithm",
    "attention_backend",
    "kv_cache_dtype",
    "quantization",
    "schedule_policy",
    "version",
)


@dataclass
class BenchTarget:
    """What a NAME resolved to: the server, its preset and host (none for a bare URL), and how to reach it."""

    server: str
    preset: str | None = None
    host: str | None = None
    port: int | None = None
    url: str | None = None
    gpus: tuple[int, ...] = ()
    server_args: list[str] = field(default_factory=list)
    gpu_model: str | None = None
    api_key: str | None = None
    python: str | None = None
    model_path: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchSpec:
    """What to run: the server's base URL, the levels and the request shape."""

    url: str
    concurrency: tuple[int, ...] = (1, 32, 64, 128)
    input_len: int = 1024
    output_len: int = 256
    num_prompts: int | None = None
    """Requests per level; at least 5 × concurrency whatever is asked."""
    model: str | None = None
    """The `model` field; default: the first id of /v1/models."""
    api_key: str | None = None
    timeout_s: float = 600.0
    seed: int = 0
    warmup: bool = True


@dataclass
class SweepResult:
    """A finished sweep: per-level figures plus what was learned about the server on the way."""

    levels: list[LevelResult]
    model: str
    fixed_output_len: bool
    """True when the server honoured `ignore_eos` (every request produced exactly output_len tokens)."""
    server_info: dict[str, Any] = field(default_factory=dict)


def make_prompts(n: int, input_len: int, seed: int = 0) -> list[str]:
    """n distinct prompts of about input_len words (≈ tokens): a unique head defeats the prefix cache."""
    rng = random.Random(seed)
    pool = [rng.choice(_WORDS) for _ in range(max(input_len, 1) + 4096)]
    out = []
    for i in range(n):
        off = rng.randrange(0, 4096)
        body = " ".join(pool[off : off + max(input_len - 2, 0)])
        out.append(f"{i} {rng.randrange(10**9)} {body}")
    return out


async def _read_upto(r: aiohttp.ClientResponse, limit: int) -> bytes:
    """At most `limit` bytes of the body (a larger one is cut there, never buffered whole)."""
    buf = bytearray()
    while len(buf) < limit:
        part = await r.content.read(limit - len(buf))
        if not part:
            break
        buf += part
    return bytes(buf)


def _error_text(e: BaseException) -> str:
    """`ConnectError: ...` for a refused or unresolvable server (the words `bench` has always printed)."""
    import aiohttp

    name = "ConnectError" if isinstance(e, aiohttp.ClientConnectorError) else type(e).__name__
    return f"{name}: {e}"[:300]


class LoadGenerator:
    """One aiohttp session shared by every level; use as `async with LoadGenerator(spec) as g: await g.sweep()`.

    The session is made on first use, inside the running loop (aiohttp binds to it)."""

    def __init__(self, spec: BenchSpec) -> None:
        self.spec = spec
        self.base = spec.url.rstrip("/")
        self.fixed_output_len = True
        self.model = spec.model or ""
        cmax = max(spec.concurrency) if spec.concurrency else 1
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if spec.api_key:
            self._headers["Authorization"] = f"Bearer {spec.api_key}"
        self._limit = cmax + 2
        self._session: aiohttp.ClientSession | None = None

    @property
    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._limit, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=self.spec.timeout_s),
                trust_env=False,
                auto_decompress=False,
            )
        return self._session

    async def __aenter__(self) -> LoadGenerator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _get_json(self, path: str, what: str) -> Any:
        """A small GET (15 s in total); the body is read depth-limited by hostjson; None unless 200."""
        import aiohttp

        async with self._client.get(
            f"{self.base}{path}", headers=self._headers, timeout=aiohttp.ClientTimeout(total=15.0)
        ) as r:
            if r.status != 200:
                return None
            body = await _read_upto(r, JSON_MAX_BYTES + 1)
            if len(body) > JSON_MAX_BYTES:
                raise ValueError(f"{what} larger than {JSON_MAX_BYTES} bytes")
            return hostjson.loads(body, what)

    async def discover_model(self) -> str:
        """The `model` to send: the spec's, else /v1/models' first id, else "default"."""
        import aiohttp

        if self.model:
            return self.model
        try:
            doc = await self._get_json("/v1/models", "/v1/models")
            data = (doc.get("data") or []) if doc is not None else []
            self.model = str(data[0]["id"]) if data else "default"
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            self.model = "default"
        return self.model

    async def server_info(self) -> dict[str, Any]:
        """A few /server_info fields worth keeping with a run (never api_key); {} when unavailable."""
        import aiohttp

        try:
            info = await self._get_json("/server_info", "/server_info") or {}
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return {}
        return {k: info[k] for k in SERVER_INFO_KEYS if isinstance(info, dict) and k in info}

    async def lifetime_accept_len(self) -> float | None:
        """/server_info's `internal_states[0].avg_spec_accept_length` (the launch's lifetime mean); None if absent."""
        import aiohttp

        from console.sglang.specdec import sane_accept_len

        try:
            info = await self._get_json("/server_info", "/server_info")
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        states = info.get("internal_states") if isinstance(info, dict) else None
        first = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
        v = first.get("avg_spec_accept_length")
        return sane_accept_len(float(v)) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def body(self, prompt: str, ignore_eos: bool | None = None) -> bytes:
        """The request JSON: streaming with the usage chunk, fixed length via ignore_eos when supported."""
        d: dict[str, Any] = {
            "model": self.model or "default",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": self.spec.output_len,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.fixed_output_len if ignore_eos is None else ignore_eos:
            d["ignore_eos"] = True
        return json.dumps(d).encode()

    async def warmup(self) -> None:
        """One request first (as bench_serving does); a 4xx naming ignore_eos turns it off; RuntimeError if it fails."""
        await self.discover_model()
        s = await self.request(self.body("warmup " * 8, ignore_eos=True))
        if not s.ok and s.error and s.error.startswith("HTTP 4") and "ignore_eos" in s.error:
            self.fixed_output_len = False
            s = await self.request(self.body("warmup " * 8))
        if not s.ok:
            raise RuntimeError(f"warmup request to {self.base} failed: {s.error}")

    async def request(self, body: bytes) -> RequestSample:
        """One streaming chat request, timed: TTFT at the first content chunk, ITL between chunks."""
        import aiohttp

        url = f"{self.base}/v1/chat/completions"
        perf = time.perf_counter
        t0 = perf()
        first: float | None = None
        last = 0.0
        gaps: list[float] = []
        chunks = 0
        usage_tokens: int | None = None
        loads = json.loads
        try:
            async with self._client.post(url, data=body, headers=self._headers) as r:
                if r.status != 200:
                    text = (await _read_upto(r, 300)).decode("utf-8", "replace").strip()
                    return RequestSample(t0, perf(), False, error=f"HTTP {r.status}: {text}")
                buf = b""
                done = False
                async for data in r.content.iter_any():
                    now = perf()
                    if b"\r" in data:
                        data = data.replace(b"\r\n", b"\n")
                    buf += data
                    if b"\n\n" not in buf:
                        if len(buf) > SSE_LINE_MAX_BYTES:
                            return RequestSample(
                                t0, perf(), False, chunks, error=f"an SSE event larger than {SSE_LINE_MAX_BYTES} bytes"
                            )
                        continue
                    *events, buf = buf.split(b"\n\n")
                    for ev in events:
                        if not ev.startswith(b"data:"):
                            ev = next((ln for ln in ev.split(b"\n") if ln.startswith(b"data:")), b"")
                            if not ev:
                                continue
                        payload = ev[5:].strip()
                        if payload == b"[DONE]":
                            done = True
                            break
                        d = loads(payload)
                        if "error" in d and not d.get("choices"):
                            err = d["error"]
                            msg = err.get("message", err) if isinstance(err, dict) else err
                            return RequestSample(t0, perf(), False, chunks, error=f"stream error: {msg}")
                        for ch in d.get("choices") or ():
                            delta = ch.get("delta") or {}
                            if delta.get("content") or delta.get("reasoning_content"):
                                if first is None:
                                    first = now
                                else:
                                    gaps.append(now - last)
                                last = now
                                chunks += 1
                        u = d.get("usage")
                        if u and u.get("completion_tokens") is not None:
                            usage_tokens = int(u["completion_tokens"])
                    if done:
                        break
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, RecursionError, AttributeError, TypeError) as e:
            # a malformed event (not an object, nested past the recursion limit) fails this request, not the bench
            return RequestSample(t0, perf(), False, chunks, error=_error_text(e))
        end = perf()
        tokens = usage_tokens if usage_tokens is not None else chunks
        if not done:
            return RequestSample(t0, end, False, tokens, error="stream ended without [DONE]")
        return RequestSample(t0, end, True, tokens, None if first is None else first - t0, gaps)

    async def run_level(
        self, concurrency: int, num_prompts: int | None = None, progress: Progress | None = None
    ) -> LevelResult:
        """`num_prompts` requests with exactly `concurrency` in flight (closed loop)."""
        n = default_num_prompts(concurrency, num_prompts if num_prompts is not None else self.spec.num_prompts)
        bodies = [self.body(p) for p in make_prompts(n, self.spec.input_len, self.spec.seed + concurrency)]
        samples: list[RequestSample] = []
        it = iter(bodies)

        async def worker() -> None:
            for b in it:
                samples.append(await self.request(b))
                if progress is not None:
                    progress(concurrency, len(samples), n)

        t0 = time.perf_counter()
        if progress is not None:
            progress(concurrency, 0, n)
        await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
        return aggregate(concurrency, samples, time.perf_counter() - t0)

    async def sweep(
        self, progress: Progress | None = None, on_level: Callable[[LevelResult], None] | None = None
    ) -> SweepResult:
        """Warm up, then every level in order; on_level is told each level as it finishes."""
        info = await self.server_info()
        if self.spec.warmup:
            await self.warmup()
        else:
            await self.discover_model()
        levels = []
        for c in self.spec.concurrency:
            lv = await self.run_level(c, progress=progress)
            levels.append(lv)
            if on_level is not None:
                on_level(lv)
        return SweepResult(levels, self.model, self.fixed_output_len, info)


async def run_sweep(
    spec: BenchSpec, progress: Progress | None = None, on_level: Callable[[LevelResult], None] | None = None
) -> SweepResult:
    """Convenience: open a LoadGenerator, sweep, close."""
    async with LoadGenerator(spec) as g:
        return await g.sweep(progress, on_level)


# -- the run history (bench.jsonl) ------------------------------------------------------------
def history_path() -> Path:
    """`user_state_dir()/bench.jsonl` (DFLASH_STATE_DIR overrides the directory)."""
    from console.config import user_state_dir

    return user_state_dir() / "bench.jsonl"


def make_record(
    *,
    server: str,
    preset: str | None,
    url: str,
    engine: str,
    levels: Iterable[LevelResult],
    spec: BenchSpec,
    server_args: list[str] | None = None,
    gpu_model: str | None = None,
    server_info: dict[str, Any] | None = None,
    fixed_output_len: bool = True,
    model: str = "",
) -> dict[str, Any]:
    """One bench.jsonl line: what ran where, with which args, and every level's figures."""
    return {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "server": server,
        "preset": preset,
        "url": url,
        "engine": engine,
        "model": model,
        "gpu_model": gpu_model,
        "server_args": list(server_args or []),
        "server_info": server_info or {},
        "input_len": spec.input_len,
        "output_len": spec.output_len,
        "fixed_output_len": fixed_output_len,
        "levels": [lv.to_dict() for lv in levels],
    }


def append_record(record: dict[str, Any], path: Path | None = None) -> Path:
    """Append one JSON line (the directory is created); returns the file written."""
    p = path or history_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return p


def load_records(path: Path | None = None) -> list[dict[str, Any]]:
    """Every readable line of bench.jsonl (a torn or foreign line is skipped, never fatal)."""
    p = path or history_path()
    out: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict):
                out.append(r)
    return out
