"""The sim server's HTTP API as a plain ASGI app (docs/sglang.md §3): health, info, OpenAI chat, generate, metrics.

Auth like SGLang: with --api-key every path except /health* and /metrics* needs `Authorization:
Bearer KEY` (scheme case-insensitive), else 401 {"error":"Unauthorized"}.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from console.sim import logs
from console.sim.engine import Engine, Request

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800, 1200, 2400)


def count_tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode()) / 4))


class App:
    """ASGI app; `status` is "Starting" until warmup, then "Up"; "Draining" after SIGTERM."""

    def __init__(self, args: Any, engine: Engine, info: dict[str, Any], reasoning_model: bool) -> None:
        self.a, self.engine, self.info, self.reasoning_model = args, engine, info, reasoning_model
        self.default_temperature = _model_temperature(getattr(args, "model_path", ""))
        """SGLang samples with the model's generation_config.json defaults when a request names no temperature."""
        self.status = "Starting"
        self.on_startup: Callable[[], Awaitable[None]] | None = None
        self.on_shutdown: Callable[[], Awaitable[None]] | None = None
        self.active = 0
        self.v23 = not str(info.get("version", "0.5.11")).startswith("0.5.11")

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        path, method = scope["path"], scope["method"]
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        if self.a.api_key and not path.startswith(("/health", "/metrics")):
            scheme, _, token = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or token.strip() != self.a.api_key:
                await _json(send, 401, {"error": "Unauthorized"})
                return
        self.active += 1
        try:
            await self._route(path, method, body, scope, send)
        finally:
            self.active -= 1

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                if self.on_startup:
                    await self.on_startup()
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                if self.on_shutdown:
                    await self.on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _route(self, path: str, method: str, body: bytes, scope: dict[str, Any], send: Send) -> None:
        if path in ("/health", "/health_generate"):
            if self.status != "Up":
                await _raw(send, 503, b"")
                return
            if not self.engine.running and not self.engine.waiting:
                req = Request(prompt_tokens=1, max_new_tokens=1)
                self.engine.submit(req)
                while await req.out.get() is not None:
                    pass
            await _raw(send, 200, b"")
        elif path == "/ready" and self.v23:
            await _raw(send, 200 if self.status == "Up" else 503, b"")
        elif path == "/ping":
            await _raw(send, 200, b"")
        elif path in ("/model_info", "/get_model_info"):
            if path == "/get_model_info":
                logs.line(
                    "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                    "Please use '/model_info' instead."
                )
            await _json(send, 200, self.model_info())
        elif path in ("/server_info", "/get_server_info"):
            if path == "/get_server_info":
                logs.line(
                    "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                    "Please use '/server_info' instead."
                )
            await _json(send, 200, self.server_info())
        elif path == "/v1/models":
            await _json(
                send,
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.a.served_model_name,
                            "object": "model",
                            "created": int(time.time()),
                            "owned_by": "sglang",
                            "root": self.a.served_model_name,
                            "parent": None,
                            "max_model_len": self.a.context_length,
                        }
                    ],
                },
            )
        elif path == "/v1/loads":
            await _json(send, 200, self.loads())
        elif path == "/metrics" and self.a.enable_metrics:
            await _raw(send, 200, self.metrics().encode(), b"text/plain; version=0.0.4; charset=utf-8")
        elif path == "/flush_cache" and method in ("GET", "POST"):
            if self.engine.running or self.engine.waiting:
                logs.line(
                    f"Cache not flushed because there are pending requests. #queue-req: "
                    f"{len(self.engine.waiting)}, #running-req: {len(self.engine.running)}"
                )
                await _raw(send, 400, b"Flush cache failed.\n")
            else:
                logs.line("Cache flushed successfully!")
                await _raw(
                    send,
                    200,
                    b"Cache flushed.\nPlease check backend logs for more details. (When there are "
                    b"running or waiting requests, the operation will not be performed.)\n",
                )
        elif path == "/generate" and method in ("POST", "PUT"):
            await self.generate(_loads(body), send)
        elif path == "/v1/chat/completions" and method == "POST":
            await self.chat(_loads(body), send)
        else:
            await _json(send, 404, {"detail": "Not Found"})

    def model_info(self) -> dict[str, Any]:
        cfg = self.a.model_config
        extra = (
            {
                "served_model_name": self.a.served_model_name,
                "load_format": self.a.load_format,
                "reasoning_parser": self.a.reasoning_parser,
                "tool_call_parser": self.a.tool_call_parser,
                "disaggregation_mode": "null",
            }
            if self.v23
            else {}
        )
        return {
            **extra,
            "model_path": self.a.model_path,
            "tokenizer_path": self.a.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": cfg.get("model_type"),
            "architectures": cfg.get("architectures"),
        }

    def server_info(self) -> dict[str, Any]:
        sa = {
            k: v
            for k, v in dataclasses.asdict(self.a).items()
            if k not in ("notes", "model_config", "gpu_mem_mib", "resolved")
        }
        state = {
            **sa,
            "last_gen_throughput": self.engine.last_gen_throughput,
            "memory_usage": self.info["memory_usage"],
            "effective_max_running_requests_per_dp": self.engine.max_running,
        }
        if self.engine.draft_tokens > 1:
            state["avg_spec_accept_length"] = self.engine.avg_accept_len
        if self.v23:
            sa = {
                **sa,
                "startup_time": self.info.get("startup_time"),
                "launch_command": self.info.get("launch_command"),
                "frontend": "python",
            }
        return {
            **sa,
            "status": "ready",
            "max_total_num_tokens": self.engine.max_tokens,
            "max_req_input_len": self.engine.max_tokens - 1,
            "internal_states": [state],
            "version": self.info["version"],
        }

    def loads(self) -> dict[str, Any]:
        """/v1/loads (docs/sglang.md §3): throughput/utilisation read 0 without --enable-metrics, as in SGLang."""
        e, m = self.engine, self.a.enable_metrics
        used = e.used_tokens()
        load = {
            "num_running_reqs": len(e.running),
            "num_waiting_reqs": len(e.waiting),
            "num_used_tokens": used,
            "num_total_tokens": used,
            "max_total_num_tokens": e.max_tokens,
            "token_usage": round(used / e.max_tokens, 2),
            "gen_throughput": e.last_gen_throughput if m else 0.0,
            "cache_hit_rate": 0.0,
            "utilization": e.busy() / 100 if m else 0.0,
            "max_running_requests": e.max_running,
            "num_total_reqs": len(e.running) + len(e.waiting),
        }
        return {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
            "version": self.info["version"],
            "dp_rank_count": 1,
            "loads": [load],
            "aggregate": {
                "total_running_reqs": load["num_running_reqs"],
                "total_waiting_reqs": load["num_waiting_reqs"],
                "total_reqs": load["num_total_reqs"],
                "total_used_tokens": used,
                "total_tokens": e.max_tokens,
                "avg_token_usage": load["token_usage"],
                "avg_throughput": load["gen_throughput"],
                "avg_utilization": load["utilization"],
            },
        }

    def _new_request(self, prompt_tokens: int, sp: dict[str, Any], reasoning: bool) -> Request:
        max_new = sp.get("max_new_tokens") or sp.get("max_tokens") or 128
        req = Request(
            prompt_tokens=prompt_tokens,
            max_new_tokens=int(max_new),
            ignore_eos=bool(sp.get("ignore_eos")),
            reasoning=reasoning,
            temperature=_temperature(sp.get("temperature"), self.default_temperature),
        )
        self.engine.submit(req)
        return req

    async def generate(self, body: dict[str, Any], send: Send) -> None:
        text = body.get("text") or ""
        ids = body.get("input_ids")
        prompt = len(ids) if ids else count_tokens(text if isinstance(text, str) else " ".join(text))
        req = self._new_request(prompt, body.get("sampling_params") or {}, False)
        t0 = time.perf_counter()
        out, ids_out = "", list[int]()

        def payload() -> dict[str, Any]:
            fin = (
                None
                if req.finish is None
                else (
                    {"type": "length", "length": req.generated}
                    if req.finish == "length"
                    else {"type": "stop", "matched": 151645}
                )
            )
            meta: dict[str, object] = {
                "id": req.rid,
                "finish_reason": fin,
                "prompt_tokens": prompt,
                "weight_version": "default",
                "total_retractions": 0,
                "reasoning_tokens": 0,
                "completion_tokens": req.generated,
                "cached_tokens": 0,
            }
            if req.finish:
                meta["e2e_latency"] = time.perf_counter() - t0
            return {"text": out, "output_ids": ids_out, "meta_info": meta}

        if body.get("stream"):
            await _sse_start(send)
            while (item := await req.out.get()) is not None:
                out += item[0]
                ids_out.append(1000 + len(ids_out))
                await _sse(send, payload())
            await _sse(send, payload())
            await _sse_end(send)
            return
        while (item := await req.out.get()) is not None:
            out += item[0]
            ids_out.append(1000 + len(ids_out))
        await _json(send, 200, payload())

    async def chat(self, body: dict[str, Any], send: Send) -> None:
        msgs = body.get("messages") or []
        text = "".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
        prompt = count_tokens(text) + 4 * len(msgs) + 3
        kw = body.get("chat_template_kwargs") or {}
        think = self.reasoning_model and kw.get("enable_thinking", True) is not False
        sp = {
            "max_new_tokens": body.get("max_completion_tokens") or body.get("max_tokens"),
            "ignore_eos": body.get("ignore_eos"),
            "temperature": body.get("temperature"),
        }
        req = self._new_request(prompt, sp, think)
        separate = bool(self.a.reasoning_parser) and body.get("separate_reasoning", True)
        rid, created, model = req.rid, int(time.time()), body.get("model") or self.a.served_model_name
        opts = body.get("stream_options") or {}
        usage_on = opts.get("include_usage") or self.a.stream_response_default_include_usage

        def usage() -> dict[str, Any]:
            return {
                "prompt_tokens": prompt,
                "total_tokens": prompt + req.generated,
                "completion_tokens": req.generated,
                "prompt_tokens_details": None,
                "reasoning_tokens": req.reasoning_tokens,
            }

        def chunk(delta: dict[str, Any], finish: str | None = None, matched: Any = None) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
                ],
            }

        if body.get("stream"):
            await _sse_start(send)
            await _sse(send, chunk({"reasoning_content": None, "role": "assistant", "content": ""}))
            inline = _Inline()
            while (item := await req.out.get()) is not None:
                piece, thinking = item
                if thinking and separate:
                    await _sse(send, chunk({"reasoning_content": piece}))
                    continue
                await _sse(send, chunk({"reasoning_content": None, "content": inline.text(piece, thinking)}))
            await _sse(send, chunk({"reasoning_content": None}, req.finish, 151645 if req.finish == "stop" else None))
            if usage_on:
                await _sse(
                    send,
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage(),
                    },
                )
            await _sse_end(send)
            return
        content, reasoning, inline = "", "", _Inline()
        while (item := await req.out.get()) is not None:
            if item[1] and separate:
                reasoning += item[0]
            else:
                content += inline.text(*item)
        await _json(
            send,
            200,
            {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": content,
                            "reasoning_content": reasoning or None,
                            "tool_calls": None,
                        },
                        "logprobs": None,
                        "finish_reason": req.finish,
                        "matched_stop": 151645 if req.finish == "stop" else None,
                    }
                ],
                "usage": usage(),
            },
        )

    def metrics(self) -> str:
        e = self.engine
        sched = f'engine_type="unified",model_name="{self.a.served_model_name}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        tok = f'engine_type="unified",model_name="{self.a.served_model_name}"'
        used = e.used_tokens()
        gauges = {
            "num_running_reqs": len(e.running),
            "num_queue_reqs": len(e.waiting),
            "num_grammar_queue_reqs": 0,
            "gen_throughput": e.last_gen_throughput,
            "token_usage": round(used / e.max_tokens, 2),
            "num_used_tokens": used,
            "kv_available_tokens": e.max_tokens - used,
            "cache_hit_rate": 0.0,
            "max_total_num_tokens": e.max_tokens,
            "context_len": self.a.context_length,
            "is_cuda_graph": 1.0,
            "utilization": e.busy() / 100,
        }
        if e.draft_tokens > 1:
            acc = e.last_accept_len
            gauges["spec_accept_length"] = acc
            gauges["spec_accept_rate"] = (acc - 1) / (e.draft_tokens - 1)
        out: list[str] = []
        for name, v in gauges.items():
            out += [
                f"# HELP sglang:{name} {name.replace('_', ' ')}.",
                f"# TYPE sglang:{name} gauge",
                f"sglang:{name}{{{sched}}} {float(v)}",
            ]
        for name, key in (
            ("prompt_tokens_total", "prompt_tokens"),
            ("generation_tokens_total", "generation_tokens"),
            ("num_requests_total", "num_requests"),
        ):
            base = name.removesuffix("_total")
            out += [
                f"# HELP sglang:{base} {base.replace('_', ' ')}.",
                f"# TYPE sglang:{base} counter",
                f"sglang:{name}{{{tok}}} {float(e.counters[key])}",
            ]
        for name, vals, buckets in (
            ("time_to_first_token_seconds", e.ttfts, TTFT_BUCKETS),
            ("e2e_request_latency_seconds", e.e2es, E2E_BUCKETS),
        ):
            out += [f"# HELP sglang:{name} {name.replace('_', ' ')}.", f"# TYPE sglang:{name} histogram"]
            for b in (*buckets, math.inf):
                le = "+Inf" if math.isinf(b) else str(float(b))
                out.append(f'sglang:{name}_bucket{{{tok},le="{le}"}} {float(sum(v <= b for v in vals))}')
            out += [
                f"sglang:{name}_sum{{{tok}}} {float(sum(vals))}",
                f"sglang:{name}_count{{{tok}}} {float(len(vals))}",
            ]
        return "\n".join(out) + "\n"


class _Inline:
    """Without --reasoning-parser the thinking stays in `content`, wrapped in <think>...</think>."""

    def __init__(self) -> None:
        self.state = "before"

    def text(self, piece: str, thinking: bool) -> str:
        if thinking and self.state == "before":
            self.state = "thinking"
            return "<think>" + piece
        if not thinking and self.state == "thinking":
            self.state = "after"
            return "</think>\n\n" + piece.lstrip()
        return piece


def _loads(body: bytes) -> dict[str, Any]:
    try:
        v = json.loads(body or b"{}")
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


async def _raw(send: Send, status: int, body: bytes, ctype: bytes = b"text/plain; charset=utf-8") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, obj: Any) -> None:
    await _raw(send, status, json.dumps(obj, separators=(",", ":")).encode(), b"application/json")


async def _sse_start(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")],
        }
    )


async def _sse(send: Send, obj: Any) -> None:
    await send(
        {
            "type": "http.response.body",
            "body": b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n",
            "more_body": True,
        }
    )


async def _sse_end(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def new_rid() -> str:
    return uuid.uuid4().hex


def _model_temperature(model_path: str) -> float:
    try:
        cfg = json.loads((Path(model_path) / "generation_config.json").read_text())
        return float(cfg.get("temperature", 1.0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 1.0


def _temperature(v: Any, default: float) -> float:
    try:
        return max(0.0, float(v)) if v is not None else default
    except (TypeError, ValueError):
        return default
