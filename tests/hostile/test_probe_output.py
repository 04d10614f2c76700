"""`probe` prints a server's words (model output, /model_info, an error body): a real HTTP server answers with the
hostile payload (every escape sequence, C1 controls, secrets) streamed in 7-character SSE deltas, so sequences
and secrets are split across events; a real `dflash-console probe` process must print none of them raw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.faults.simfleet import REPO
from tests.hostile.test_output_paths import API_KEY, _hosts, check_path, payload

PIECE = 7


class _Handler(BaseHTTPRequestHandler):
    chat_fails = False

    def log_message(self, *args: object) -> None:  # (quiet)
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/model_info":
            self._send(200, json.dumps({"model_path": "/m/" + payload("MODELINFO"), "is_generation": True}).encode())
        else:
            self._send(404, b"{}")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if type(self).chat_fails:
            self._send(500, ("Internal Server Error: " + payload("ERRBODY")).encode(), "text/plain")
            return
        text = payload("ANSWER")
        events = [
            {"choices": [{"index": 0, "delta": {"content": text[i : i + PIECE]}}]} for i in range(0, len(text), PIECE)
        ]
        events.append(
            {
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": len(events), "total_tokens": 5 + len(events)},
            }
        )
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        self._send(200, body, "text/event-stream")


@pytest.fixture
def server() -> Iterator[type[_Handler]]:
    handler = type("H", (_Handler,), {"chat_fails": False})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.url = f"http://127.0.0.1:{srv.server_address[1]}"  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield handler
    finally:
        srv.shutdown()
        srv.server_close()


def _probe(hosts: Path, url: str, *extra: str) -> tuple[int, str]:
    p = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(hosts), "probe", url, *extra],
        cwd=REPO,
        capture_output=True,
        timeout=120,
        env=dict(os.environ, DFC_OUT_KEY=API_KEY),
    )
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def test_probe_prints_no_host_text_raw(server: type[_Handler], tmp_path: Path) -> None:
    """Regression (issue 19.5): `probe URL` never loaded hosts.toml, so a secret the fleet names (a bare
    HF_TOKEN value in the answer and /model_info) was printed as is."""
    t0 = time.monotonic()
    hosts = _hosts(tmp_path)  # the fleet names the --api-key and HF_TOKEN, as a real hosts.toml would
    url = server.url  # type: ignore[attr-defined]
    outs: dict[str, tuple[str, str, bool]] = {}
    rc, text = _probe(hosts, url)
    outs["CLI probe (streamed answer)"] = (text, "ANSWER", rc == 0)
    rc, text = _probe(hosts, url, "--json")
    outs["CLI probe --json (answer, model info)"] = (text, "ANSWER", rc == 0 and "MODELINFO" in text)
    server.chat_fails = True
    rc, text = _probe(hosts, url)
    outs["CLI probe error (a 500's body)"] = (text, "ERRBODY", rc != 0)
    failed = {}
    for where, (text, tag, exit_ok) in outs.items():
        probs = check_path(where, text, tag, t0, whole=False)  # an error quotes a cut of the body
        if not exit_ok:
            probs.append(f"{where}: wrong exit status or field missing")
        if where.endswith("--json (answer, model info)"):
            try:
                json.loads(text)
            except ValueError:
                probs.append(f"{where}: not JSON after masking")
        if probs:
            failed[where] = (probs, text[:400])
    assert not failed, failed


def test_a_url_probe_without_hosts_toml_still_works(server: type[_Handler], tmp_path: Path) -> None:
    """Remembering the fleet's secrets is best effort: no hosts.toml is no error for a URL."""
    rc, text = _probe(tmp_path / "missing.toml", server.url)  # type: ignore[attr-defined]
    assert rc == 0 and "ANSWER" in text and "Traceback" not in text, text[-600:]
