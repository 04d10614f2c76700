"""The token gate and the session command, as pure functions (the live server is tests/serve/test_serve_http.py)."""

from __future__ import annotations

import shlex

import pytest

from console.serve.auth import MIN_TOKEN_LEN, TokenGate, Verdict, new_token, same_origin, valid_token
from console.serve.session import SessionOptions, session_argv, session_command

GATE = TokenGate("t" * 32)


def check(query: str | None = None, auth: str | None = None, cookie: str | None = None) -> Verdict:
    return GATE.check(query_token=query, authorization=auth, cookie=cookie)


def test_each_way_of_presenting_the_token() -> None:
    assert check(query="t" * 32) is Verdict.OK_FROM_URL
    assert check(auth="Bearer " + "t" * 32) is Verdict.OK
    assert check(auth="bearer   " + "t" * 32 + " ") is Verdict.OK
    assert check(cookie="t" * 32) is Verdict.OK
    assert check() is Verdict.MISSING


@pytest.mark.parametrize(
    "kw",
    [
        {"query": "t" * 31},
        {"query": ""},
        {"query": "t" * 33},
        {"auth": "Basic " + "t" * 32},
        {"auth": "Bearer"},
        {"auth": "t" * 32},
        {"cookie": "x"},
        # a wrong token in the URL is refused even beside a good cookie: it is what the user typed
        {"query": "nope", "cookie": "t" * 32},
        {"auth": "Bearer nope", "cookie": "t" * 32},
    ],
)
def test_wrong_tokens_are_refused(kw: dict[str, str]) -> None:
    assert check(**kw) is Verdict.WRONG


def test_cookie_is_named_after_the_token_so_two_servers_on_one_host_keep_theirs() -> None:
    assert TokenGate("a" * 32).cookie_name != TokenGate("b" * 32).cookie_name
    assert TokenGate("a" * 32).cookie_name == TokenGate("a" * 32).cookie_name
    assert "a" * 8 not in TokenGate("a" * 32).cookie_name


def test_new_tokens_are_valid_and_differ() -> None:
    tokens = {new_token() for _ in range(20)}
    assert len(tokens) == 20
    assert all(valid_token(t) is None and len(t) >= 32 for t in tokens)


@pytest.mark.parametrize("token", ["short", "x" * (MIN_TOKEN_LEN - 1), "a" * 20 + "&x=1", "a" * 20 + " b", "é" * 20])
def test_unusable_env_tokens(token: str) -> None:
    assert valid_token(token) is not None


@pytest.mark.parametrize(
    ("origin", "host", "ok"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("http://LOCALHOST:9000", "localhost:9000", True),
        (None, "127.0.0.1:8000", True),  # not a browser: the token alone decides
        ("http://127.0.0.1:3000", "127.0.0.1:8000", False),  # another page on localhost: cookies ignore ports
        ("http://evil.example", "127.0.0.1:8000", False),
        ("null", "127.0.0.1:8000", False),
        ("file://", "127.0.0.1:8000", False),
        ("http://127.0.0.1:8000", None, False),
    ],
)
def test_websocket_origin(origin: str | None, host: str | None, ok: bool) -> None:
    assert same_origin(origin, host) is ok


def test_session_command_quotes_every_argument_and_is_read_only_by_default() -> None:
    opts = SessionOptions(hosts="/tmp/my fleet/hosts'; rm -rf ~.toml", theme="$(id)", python="/opt/py thon/bin/python")
    cmd = session_command(opts)
    assert cmd.startswith("exec ")
    assert shlex.split(cmd)[1:] == session_argv(opts)
    assert session_argv(opts) == [
        "/opt/py thon/bin/python",
        "-m",
        "console",
        "--hosts",
        "/tmp/my fleet/hosts'; rm -rf ~.toml",
        "--theme",
        "$(id)",
        "--read-only",
    ]


def test_session_with_actions_and_demo() -> None:
    argv = session_argv(SessionOptions(read_only=False, demo=True, python="py"))
    assert argv == ["py", "-m", "console", "--demo"]
