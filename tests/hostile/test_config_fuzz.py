"""A config fuzzer through the real CLI (`check`, in-process): 500 generated hosts.toml files, deterministic
(derandomized, no example database), from well-formed fleets to nested, mistyped and broken ones. Never a
traceback; always exit 0, or exit 2 with `file:line:col: error: field: message` (or lint errors)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.config import MAX_DEPTH
from tests.faults import results
from tests.faults.simfleet import trials

ISSUE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?:error|warning): (?P<field>.+?): .+")
HOST_KEYS = [
    "address",
    "port",
    "user",
    "identity",
    "proxy_jump",
    "known_hosts",
    "python",
    "run_dir",
    "log_dir",
    "env",
    "http",
    "transport",
    "description",
]
PRESET_KEYS = [
    "host",
    "gpus",
    "tp",
    "model",
    "port",
    "bind",
    "args",
    "env",
    "log",
    "ready_timeout",
    "python",
    "api_key_env",
    "description",
]
TEXT = st.text(st.sampled_from(list("abcXYZ_09-=./ []{}\"'\\#\n\t\x00\x1b\x9bé💥")), max_size=12)
KEY = st.one_of(
    st.sampled_from(HOST_KEYS + PRESET_KEYS + ["theme", "bell", "poll_ms", "prot", "gpu"]),
    st.text(st.sampled_from(list("abXY_-=. 9\x1b\"'")), min_size=1, max_size=8),
)


def toml_str(s: str) -> str:
    return json.dumps(s)  # a TOML basic string: JSON's escapes are TOML's (\uXXXX for controls)


def toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else toml_str(k)


def _scalar() -> st.SearchStrategy[str]:
    return st.one_of(
        TEXT.map(toml_str),
        st.integers(-(2**70), 2**70).map(str),
        st.sampled_from(
            [
                "true",
                "false",
                "1.5",
                "-0.0",
                "inf",
                "nan",
                "1979-05-27T07:32:00Z",
                "0x1F",
                "1_000",
                "30000",
                "0",
                "[0, 1]",
                "[0, 0]",
                '"local"',
                '"ssh"',
                '"tunnel"',
                '"direct"',
                '"h0"',
                '["--tp", "2"]',
                '{ "X=Y" = "v" }',
                '{ HF_TOKEN = "t" }',
            ]
        ),
    )


def _array(xs: list[str]) -> str:
    return "[" + ", ".join(xs) + "]"


def _table(kv: list[tuple[str, str]]) -> str:
    return "{ " + ", ".join(f"{toml_key(k)} = {v}" for k, v in dict(kv).items()) + " }"


SCALAR = _scalar()
_VALUES = [SCALAR]
for _ in range(2):  # built once: fresh strategies per draw cost hypothesis more than the checks themselves
    _inner = _VALUES[-1]
    _VALUES.append(
        st.one_of(
            SCALAR,
            SCALAR,
            st.lists(_inner, max_size=3).map(_array),
            st.lists(st.tuples(KEY, _inner), max_size=3).map(_table),
        )
    )


def value(depth: int) -> st.SearchStrategy[str]:
    """A TOML value text; arrays and inline tables nest up to `depth` (0..2)."""
    return _VALUES[depth]


def deep(n: int, kind: str) -> str:
    return {
        "array": "[" * n + "1" + "]" * n,
        "table": "{ a = " * n + "1" + " }" * n,
        "mixed": "[{ a = " * (n // 2) + "1" + " }]" * (n // 2),
    }[kind]


@st.composite
def fleet_text(draw: st.DrawFn) -> str:
    out: list[str] = []
    hosts = draw(st.lists(st.sampled_from(["h0", "h1", "gpu-box", "x y"]), min_size=0, max_size=3, unique=True))
    if draw(st.booleans()):
        out.append(
            "[console]\n"
            + "".join(
                f"{toml_key(k)} = {draw(value(1))}\n"
                for k in draw(st.lists(st.sampled_from(["theme", "bell", "poll_ms", "x"]), max_size=3, unique=True))
            )
        )
    for h in hosts:
        body = {"transport": '"local"'} if draw(st.booleans()) else {}
        for k in draw(st.lists(KEY, max_size=4, unique=True)):
            body[k] = draw(value(2))
        out.append(f"[hosts.{toml_key(h)}]\n" + "".join(f"{toml_key(k)} = {v}\n" for k, v in body.items()))
    for i in range(draw(st.integers(0, 3))):
        body = {
            "host": toml_str(draw(st.sampled_from([*hosts, "nohost"]))) if hosts else '"nohost"',
            "gpus": draw(st.sampled_from(["[0]", "[0, 1]", "[1, 0, 1]", "[]", "[-1]", "0"])),
            "model": toml_str("/models/m"),
        }
        for k in draw(st.lists(KEY, max_size=4, unique=True)):
            body[k] = draw(value(2))
        for k in draw(st.lists(st.sampled_from(["host", "gpus", "model"]), max_size=1)):
            body.pop(k, None)
        out.append(f"[presets.p{i}]\n" + "".join(f"{toml_key(k)} = {v}\n" for k, v in body.items()))
    text = "\n".join(out)
    for _ in range(draw(st.integers(0, 2))):  # now and then something worse
        how = draw(st.sampled_from(["deep", "deep-env", "cut", "insert", "dup-table", "bad-line", "header"]))
        lines = text.splitlines() or [""]
        at = draw(st.integers(0, len(lines)))
        if how == "deep":
            n = draw(st.sampled_from([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 60, 400, 3000]))
            lines.insert(at, f"nested = {deep(n, draw(st.sampled_from(['array', 'table', 'mixed'])))}")
        elif how == "deep-env":
            lines.insert(at, f"env = {{ A = {deep(draw(st.sampled_from([20, 800])), 'array')} }}")
        elif how == "cut":
            text_len = len(text)
            text = text[: draw(st.integers(0, text_len))] if text_len else text
            continue
        elif how == "insert":
            lines.insert(
                at,
                draw(
                    st.sampled_from(
                        [
                            'x = "unterminated',
                            "= 1",
                            "a = [1, 2",
                            "[[presets]]",
                            "k = 1 2",
                            "model = '''",
                            "[hosts.",
                            '"X=Y" = "v"',
                            "a.b.c.d = 1",
                        ]
                    )
                ),
            )
        elif how == "dup-table":
            lines.insert(at, "[hosts.h0]")
        elif how == "bad-line":
            lines.insert(at, draw(TEXT))
        else:
            lines.insert(at, "[" + ".".join(["a"] * draw(st.sampled_from([2, 50, 2000]))) + "]")
        text = "\n".join(lines)
    return text + "\n"


def run_check(path: Path) -> tuple[int, str, str, str]:
    """(exit status, stdout, stderr, traceback or '') of `dflash-console --hosts PATH check`, in-process."""
    from console.cli import main

    out, err = io.StringIO(), io.StringIO()
    tb = ""
    rc = -1
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["--hosts", str(path), "check"])
    except BaseException as e:  # any escape, SystemExit included, is what this test exists to find
        import traceback

        tb = "".join(traceback.format_exception(e))
    return rc, out.getvalue(), err.getvalue(), tb


_N = {"n": 0, "ok0": 0, "ok2": 0}


@settings(
    max_examples=trials(500),
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(text=fleet_text())
def test_config_fuzz_never_tracebacks(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    t0 = time.monotonic()
    _N["n"] += 1
    p = tmp_path_factory.mktemp("fz") / "hosts.toml"
    p.write_text(text, encoding="utf-8")
    rc, out, err, tb = run_check(p)
    probs: list[str] = []
    if tb or "Traceback" in out + err:
        probs.append(f"traceback: {(tb or err)[-600:]}")
    elif rc == 2:
        located = [m for ln in err.splitlines() if (m := ISSUE.match(ln))]
        lint = re.search(r"^([1-9]\d*) errors, ", out, re.M)
        n_lines = text.count("\n") + 1
        if not located and not lint:
            probs.append(f"exit 2 without a located issue or lint error: {err[-300:]!r}")
        for m in located:
            if m["file"] != str(p) or not 1 <= int(m["line"]) <= n_lines or int(m["col"]) < 1:
                probs.append(f"badly located: {m.group()[:200]!r}")
        if any(ch in err for ch in "\x1b\x9b\x00"):
            probs.append("a raw control character in the error output")
    elif rc != 0:
        probs.append(f"exit {rc}: {err[-300:]!r}")
    _N["ok0" if rc == 0 else "ok2"] += not probs
    results.record(
        "hostile",
        "config fuzz via CLI `check`: exit 0 or 2 located, never a traceback",
        _N["n"],
        not probs,
        time.monotonic() - t0,
        "; ".join(probs)[:400],
    )
    assert not probs, (text[:800], probs)


def test_config_fuzz_reached_both_outcomes() -> None:
    """The generator must produce valid fleets and broken ones, or the fuzz above proves little."""
    if _N["n"] == 0:
        pytest.skip("run with test_config_fuzz_never_tracebacks")
    assert _N["ok0"] >= _N["n"] // 100 + 1 and _N["ok2"] >= _N["n"] // 2, _N
