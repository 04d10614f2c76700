"""A tiny SGLang-shaped ASGI app served by a real uvicorn on 127.0.0.1 (a free port), for client tests."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn

METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 3.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="m",tp_rank="0"} 2.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 0.25
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="m",tp_rank="0"} 0.5
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 1200.5
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 0.4
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",model_name="m"} 98765.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="0.1",model_name="m"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",le="+Inf",model_name="m"} 4.0
sglang:time_to_first_token_seconds_count{engine_type="unified",model_name="m"} 4.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",model_name="m"} 2.0
"""


@dataclass
class FakeState:
    health: int = 200
    api_key: str | None = None
    mode: str = "ok"
    """ok | malformed | error | slow | html"""
    token_delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {
        "id": "abc",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {"reasoning_content": None, **delta},
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": 151645 if finish else None,
            }
        ],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class FakeSGLang:
    def __init__(self, state: FakeState) -> None:
        self.s = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        self.s.requests.append({"path": path, "headers": headers, "body": body})
        if (
            self.s.api_key
            and not path.startswith(("/health", "/metrics"))
            and headers.get("authorization") != f"Bearer {self.s.api_key}"
        ):
            return await self._send(send, 401, b'{"error":"Unauthorized"}')
        if path == "/health":
            return await self._send(send, self.s.health, b"")
        if path == "/model_info":
            return await self._send(
                send, 200, json.dumps({"model_path": "/m/Qwen3-8B", "is_generation": True}).encode()
            )
        if path == "/server_info":
            info = {
                "model_path": "/m",
                "api_key": "sk-live-123",
                "admin_api_key": "sk-admin",
                "hf_token": "hf_x",
                "max_total_num_tokens": 400000,
                "tokenizer_path": "/m",
                "internal_states": [{"last_gen_throughput": 12.5, "api_key": "sk-live-123"}],
                "version": "0.5.11",
            }
            return await self._send(send, 200, json.dumps(info).encode())
        if path == "/metrics":
            return await self._send(send, 200, METRICS.encode(), b"text/plain; version=0.0.4")
        if path == "/v1/chat/completions":
            return await self._chat(send)
        return await self._send(send, 404, b'{"detail":"Not Found"}')

    async def _send(self, send: Any, status: int, body: bytes, ctype: bytes = b"application/json") -> None:
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype)]})
        await send({"type": "http.response.body", "body": body})

    async def _chat(self, send: Any) -> None:
        if self.s.mode == "html":
            return await self._send(send, 200, b"<html>hi</html>", b"text/html")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        parts = [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"reasoning_content": "think"}),
            _chunk({"content": "Hel"}),
            _chunk({"content": "lo"}),
        ]
        if self.s.mode == "malformed":
            parts.append(b"data: {not json\n\n")
        if self.s.mode == "error":
            parts.append(b'data: {"error": {"message": "boom", "code": 500}}\n\n')
        parts += [
            _chunk({}, "stop"),
            b'data: {"id":"abc","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
            b'"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"prompt_tokens_details":null,'
            b'"reasoning_tokens":1}}\n\n',
            b"data: [DONE]\n\n",
        ]
        if self.s.mode == "slow":
            await asyncio.sleep(2)
        for p in parts:
            if self.s.token_delay:
                await asyncio.sleep(self.s.token_delay)
            await send({"type": "http.response.body", "body": p, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@contextmanager
def serve(state: FakeState) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(FakeSGLang(state), log_level="error", lifespan="off", timeout_graceful_shutdown=1)
    )
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(5)
        sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
