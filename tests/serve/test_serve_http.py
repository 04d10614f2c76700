"""`dflash-console serve` as a real process, over real HTTP (httpx): the gate, the page's URLs, the CLI's errors.

The browser itself (a session, its panes, keys) is tests/browser/; here no session is started.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import httpx
import pytest

from tests.patience import patient
from tests.serve.served import ROOT, serve

WS_HEADERS = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


@pytest.fixture(scope="module")
def served():
    with serve("--demo") as s:
        yield s


def client() -> httpx.Client:
    return httpx.Client(follow_redirects=False, trust_env=False, timeout=patient(5))


def test_banner_prints_the_whole_token_and_the_tunnel_recipe(served) -> None:
    assert len(served.token) >= 32 and "*" not in served.token  # past the CLI's secret masking, on purpose
    text = "\n".join(served.banner)
    port = served.base.rsplit(":", 1)[1]
    assert f"ssh -N -L {port}:127.0.0.1:{port} " in text
    assert "read-only" in text and "demo" in text


def test_bound_to_loopback_only(served) -> None:
    port = int(served.base.rsplit(":", 1)[1])
    listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{port}"]


@pytest.mark.parametrize("path", ["/", "/ws", "/static/js/textual.js", "/download/x"])
def test_nothing_is_served_without_the_token(served, path: str) -> None:
    with client() as c:
        r = c.get(served.base + path)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert "token" in r.text and "Set-Cookie" not in r.headers


def test_a_wrong_token_is_refused_everywhere(served) -> None:
    with client() as c:
        assert c.get(served.base + "/?token=" + "x" * 32).status_code == 403
        assert c.get(served.base + "/", headers={"Authorization": "Bearer nope"}).status_code == 403
        c.cookies.set(_cookie_name(served), "nope")
        r = c.get(served.base + "/")
    assert r.status_code == 403 and "wrong token" in r.text


def _cookie_name(served) -> str:
    from console.serve.auth import TokenGate

    return TokenGate(served.token).cookie_name


def test_token_in_url_becomes_a_strict_httponly_cookie_and_leaves_the_address_bar(served) -> None:
    with client() as c:
        r = c.get(served.url + "&fontsize=14")
        assert r.status_code == 303
        assert r.headers["Location"] == "/?fontsize=14"
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        page = c.get(served.base + r.headers["Location"])  # httpx keeps the cookie
    assert page.status_code == 200 and "textual.js" in page.text
    assert served.token not in page.text
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Cache-Control"] == "no-store"


def test_page_urls_follow_the_host_the_browser_used(served) -> None:
    """Through `ssh -L 9000:127.0.0.1:PORT` the browser's Host is localhost:9000: the page must point there."""
    with client() as c:
        r = c.get(served.base + "/", headers={"Authorization": f"Bearer {served.token}", "Host": "localhost:9000"})
    assert r.status_code == 200
    assert 'data-session-websocket-url="ws://localhost:9000/ws"' in r.text
    assert 'src="http://localhost:9000/static/js/textual.js"' in r.text


def test_websocket_from_another_origin_is_refused_even_with_the_cookie(served) -> None:
    with client() as c:
        c.cookies.set(_cookie_name(served), served.token)
        host = served.base.split("//", 1)[1]
        r = c.get(served.base + "/ws", headers={**WS_HEADERS, "Origin": "http://127.0.0.1:1"})
        assert r.status_code == 403 and "another site" in r.text
        bad = c.get(served.base + "/ws", headers={**WS_HEADERS, "Origin": f"http://{host}", "Cookie": "x=y"})
    assert bad.status_code == 401
    assert served.children() == set()  # no session console was started for any of them


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=patient(20),
        env={**os.environ, **(env or {})},
    )


def test_a_short_token_from_the_environment_is_refused() -> None:
    r = run_cli("serve", "--demo", "--port", "0", env={"DFLASH_SERVE_TOKEN": "abc"})
    assert r.returncode == 2 and "DFLASH_SERVE_TOKEN must be at least" in r.stderr


def test_the_environment_token_is_used() -> None:
    """(That a session's console does not inherit it is checked in tests/browser, on its /proc/PID/environ.)"""
    token = "fixed-token-for-a-bookmark-0123456789"
    with serve("--demo", env={"DFLASH_SERVE_TOKEN": token}) as s, client() as c:
        assert s.token == token
        assert c.get(s.base + "/", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_port_in_use_is_an_error_not_a_traceback() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = run_cli("serve", "--demo", "--port", str(port))
    assert r.returncode == 3 and f"cannot serve on 127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_bad_hosts_file_is_reported_once_before_serving(tmp_path) -> None:
    bad = tmp_path / "hosts.toml"
    bad.write_text("[hosts.a]\naddress = 1\n")
    r = run_cli("serve", "--hosts", str(bad), "--port", "0")
    assert r.returncode == 2 and f"{bad}:2:" in r.stderr and "Traceback" not in r.stderr
