"""A generated corpus of malformed hosts.toml files (mutations of a valid one): every file gives located
`file:line:col: error: field: message` issues and exit 2, never a traceback (a few through the real CLI)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from console.config import ConfigError, ConsoleSettings, Host, Preset, load_fleet, parse_fleet
from tests.faults import results
from tests.faults.simfleet import REPO, trials

VALID = """[console]
poll_ms = 1000
bell = false

[hosts.ct129]
address = "10.0.0.2"
port = 22
user = "gpu"
transport = "ssh"
python = "/venv/bin/python3"
http = "tunnel"
env = { LD_LIBRARY_PATH = "/usr/local/cuda/lib64" }

[hosts.blackwell]
address = "10.0.0.3"
transport = "ssh"

[presets.gen]
host = "blackwell"
gpus = [0, 1, 2, 3]
tp = 1
model = "/models/Qwen3.6-27B"
port = 30000
ready_timeout = 900
args = ["--context-length", "8192"]

[presets.mtp]
host = "ct129"
gpus = [0, 1]
model = "/models/Qwen3.6-27B"
port = 31000
"""
LINES = VALID.splitlines()
KEYED = [(i, ln.split("=", 1)[0].strip()) for i, ln in enumerate(LINES) if "=" in ln and not ln.startswith("[")]
REQUIRED = [i for i, k in KEYED if k in ("host", "model", "gpus")]
# values no coercion can rescue, per key
WRONG: dict[str, list[str]] = {
    "poll_ms": ['"fast"', "5", "[1]"],
    "bell": ['"maybe"', "[true]"],
    "address": ["[1, 2]", "{ a = 1 }"],
    "port": ['"twenty"', "[0]", "0", "70000", "-1", "9223372036854775807"],
    "user": ["42", '["a"]'],
    "transport": ['"telnet"', "1"],
    "python": ["3.11", "false"],
    "http": ['"udp"', "[]"],
    "env": ['"x"', "[1]"],
    "host": ['"nosuchhost"', "7"],
    "gpus": ['"0,1"', "[-1]", "[]", "0", '["a"]'],
    "tp": ['"two"', "0", "3"],
    "model": ["5", "[]"],
    "ready_timeout": ["-1", '"soon"'],
    "args": ['"--x"', "[1, 2]"],
}
HUGE = "x" * 1_000_000
KNOWN = set(Host.model_fields) | set(Preset.model_fields) | set(ConsoleSettings.model_fields) | {"hosts", "presets"}


def _typo(key: str, data: st.DataObject) -> str:
    i = data.draw(st.integers(0, len(key) - 1))
    op = data.draw(st.sampled_from(["drop", "double", "swap", "case", "char"]))
    if op == "drop" and len(key) > 1:
        out = key[:i] + key[i + 1 :]
    elif op == "double":
        out = key[:i] + key[i] + key[i:]
    elif op == "swap" and i + 1 < len(key) and key[i] != key[i + 1]:
        out = key[:i] + key[i + 1] + key[i] + key[i + 2 :]
    elif op == "case":
        out = key[:i] + key[i].upper() + key[i + 1 :]
    else:
        out = key[:i] + data.draw(st.sampled_from("qzjx")) + key[i:]
    return out if out not in KNOWN and out != key else key + "z"


@st.composite
def malformed(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(mutation kind, file bytes, the field path the error must name or '' for file-level errors)."""
    data = draw(st.data())
    kind = draw(st.sampled_from(["delete", "duplicate", "retype", "typo", "bad_toml", "non_utf8", "huge", "combo"]))
    lines = list(LINES)
    field = ""
    if kind == "delete":
        i = draw(st.sampled_from(REQUIRED))
        del lines[i]
    elif kind == "duplicate":
        i, _ = draw(st.sampled_from(KEYED))
        lines.insert(i + 1, lines[i])
    elif kind == "retype":
        i, key = draw(st.sampled_from([(i, k) for i, k in KEYED if k in WRONG]))
        lines[i] = f"{key} = {draw(st.sampled_from(WRONG[key]))}"
        field = key
    elif kind == "typo":
        i, key = draw(st.sampled_from(KEYED))
        lines[i] = lines[i].replace(key, _typo(key, data), 1)
    elif kind == "bad_toml":
        i = draw(st.integers(0, len(lines) - 1))
        junk = draw(
            st.sampled_from(
                [
                    'x = "unterminated',
                    "[hosts.",
                    "= 1",
                    "a = [1, 2",
                    "[[presets]",
                    "k = 1 2",
                    "model = '''",
                    "\x00",
                    "[hosts.ct129]",
                ]
            )
        )
        lines.insert(i, junk)
    elif kind == "huge":
        i, key = draw(st.sampled_from([(i, k) for i, k in KEYED if k in ("transport", "http", "port", "host")]))
        lines[i] = f"{key} = " + draw(st.sampled_from([f'"{HUGE}"', "9" * 400, f"[{', '.join(['1'] * 50_000)}]"]))
        field = key
    elif kind == "combo":
        for _ in range(draw(st.integers(2, 4))):
            i, key = draw(st.sampled_from([(i, k) for i, k in KEYED if k in WRONG]))
            lines[i] = f"{key} = {draw(st.sampled_from(WRONG[key]))}"
    raw = ("\n".join(lines) + "\n").encode()
    if kind == "non_utf8":
        pos = draw(st.integers(0, len(raw)))
        raw = (
            raw[:pos] + draw(st.sampled_from([b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"])) + raw[pos:]
        )
    return kind, raw, field


def check_issues(e: ConfigError, fname: str, raw: bytes, field: str) -> list[str]:
    problems = []
    n_lines = raw.count(b"\n") + 1
    if not e.issues:
        problems.append("ConfigError with no issues")
    for iss in e.issues:
        if iss.file != fname:
            problems.append(f"issue names file {iss.file!r}")
        if not 1 <= iss.line <= n_lines or iss.column < 1:
            problems.append(f"issue at line {iss.line} col {iss.column} of a {n_lines}-line file: {iss}")
    if field and not any(field in [part.split("[")[0] for part in iss.field.split(".")] for iss in e.issues):
        problems.append(f"no issue names field {field!r}: {[str(i)[:200] for i in e.issues]}")
    return problems


def test_the_base_file_is_valid() -> None:
    fleet = parse_fleet(VALID)
    assert set(fleet.presets) == {"gen", "mtp"}


_SEEN: dict[str, int] = {}


@seed(results.SEED)  # the same 200 files every run: trial counts compare
@settings(
    max_examples=trials(200),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(malformed())
def test_every_malformed_file_gives_located_errors(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, bytes, str]
) -> None:
    kind, raw, field = case
    t0 = time.monotonic()
    p = tmp_path_factory.mktemp("cfg") / "hosts.toml"
    p.write_bytes(raw)
    problems: list[str] = []
    try:
        load_fleet(p)
        problems.append("loaded without error")
    except ConfigError as e:
        problems = check_issues(e, str(p), raw, field)
    _SEEN[kind] = _SEEN.get(kind, 0) + 1
    results.record(
        "hostile", f"config corpus: {kind}", _SEEN[kind], not problems, time.monotonic() - t0, "; ".join(problems)[:300]
    )
    assert not problems, (kind, raw[:300], problems)


ISSUE_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: (?P<field>\S+): .+")


@pytest.mark.parametrize("kind", ["delete", "retype", "typo", "bad_toml", "non_utf8"])
def test_cli_check_exits_2_with_located_errors(tmp_path: Path, kind: str) -> None:
    """A sample through the real `python -m console --hosts F check` subprocess."""
    lines = list(LINES)
    raw: bytes
    if kind == "delete":
        del lines[REQUIRED[0]]
    elif kind == "retype":
        i = next(i for i, k in KEYED if k == "port")
        lines[i] = 'port = "twenty"'
    elif kind == "typo":
        i = next(i for i, k in KEYED if k == "model")
        lines[i] = lines[i].replace("model", "modle")
    elif kind == "bad_toml":
        lines.insert(5, 'x = "unterminated')
    raw = ("\n".join(lines) + "\n").encode()
    if kind == "non_utf8":
        raw = raw[:40] + b"\xff" + raw[40:]
    p = tmp_path / "hosts.toml"
    p.write_bytes(raw)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(p), "check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    errs = [m for ln in r.stderr.splitlines() if (m := ISSUE_RE.match(ln))]
    ok = (
        r.returncode == 2
        and "Traceback" not in r.stderr + r.stdout
        and bool(errs)
        and all(m["file"] == str(p) and int(m["line"]) >= 1 for m in errs)
    )
    results.record(
        "hostile",
        "config via CLI `check`: exit 2, located, no traceback",
        len(_SEEN),
        ok,
        time.monotonic() - t0,
        f"{kind}: rc {r.returncode}: {r.stderr[-300:]}",
    )
    assert ok, (r.returncode, r.stderr[-1000:])


def test_huge_value_error_is_short() -> None:
    """Regression: the wrong value was echoed whole ('(got ...)'), a 1 MB value gave a 1 MB error line."""
    text = VALID.replace('transport = "ssh"', f'transport = "{HUGE}"', 1)
    with pytest.raises(ConfigError) as ei:
        parse_fleet(text)
    assert max(len(str(i)) for i in ei.value.issues) < 1000


def test_unterminated_at_end_of_document_points_at_the_last_line() -> None:
    """Regression: tomllib's "(at end of document)" was reported as line 1000000000."""
    with pytest.raises(ConfigError) as ei:
        parse_fleet(VALID + "model = '''\n")
    assert ei.value.issues[0].line == VALID.count("\n") + 1
