"""Every output path, one table: secrets masked (console.masking.mask) and no control character or escape
sequence from a host (console.remote_text.sanitize) on the screens, toasts, copy `y`, save `w`, the journal
and the CLI's `journal`, `diagnose`, `check` and error output. The sshd end-to-end paths (`logs`, `status`,
`launch --wait` errors) are in test_remote_output.py."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from console.fleet.events import GpuSample, HostDown, HostUp, LogData, ServerGone, ServerMeta, ServerSeen
from console.fleet.journal import Journal
from console.fleet.state import FleetState
from console.masking import mask
from console.remote_text import for_terminal, sanitize
from console.transport.base import CommandResult
from tests.faults import results

API_KEY = "sk-dfc-out9Zq2Lm4Pw"
HF_TOKEN = "hf_dfcOutToken77ab"
UNKNOWN = ("tok-unremembered-31", "sk-json-unknown-42", "pw-dict-unknown-53", "bearer-unknown-64")
"""Secrets the console was never told: only the patterns can hide them."""
SECRETS = (API_KEY, HF_TOKEN, *UNKNOWN)

SEQUENCES: dict[str, str] = {
    "OSC 52 clipboard (BEL)": "\x1b]52;c;ZXZpbCBwYXlsb2Fk\x07",
    "OSC 52 clipboard (ST)": "\x1b]52;c;ZXZpbCBwYXlsb2Fk\x1b\\",
    "OSC 8 hyperlink": "\x1b]8;;http://evil.example/\x1b\\",
    "OSC 0 window title": "\x1b]0;pwned title\x07",
    "CSI cursor moves": "\x1b[2J\x1b[H\x1b[10;5H\x1b[3A",
    "CSI SGR": "\x1b[1;31;5m",
    "8-bit CSI": "\x9b2J\x9b5A",
    "8-bit OSC 52 (8-bit ST)": "\x9d52;c;ZXZpbA==\x9c",
    "8-bit OSC 0 (BEL)": "\x9d0;title\x07",
    "DCS string": "\x1bPq#0;2;0;0;0\x1b\\",
    "C1 controls (NEL, IND, SS3)": "\x85\x84\x8f",
    "C1 controls U+0080-U+009F (all 32; the strings they open closed by ST)": "".join(map(chr, range(0x80, 0xA0)))
    + "\x9c",
    "8-bit OSC 8 hyperlink (8-bit ST)": "\x9d8;;http://evil.example/\x9c",
    "8-bit CSI cursor moves and SGR": "\x9b10;5H\x9b3A\x9b1;31m",
    "C0 controls (NUL, BEL, BS, SO, ESC alone, DEL)": "\x00\x07\x08\x0e\x1b\x7f",
    "unterminated OSC": "\x1b]52;c;dW50ZXJt",
}
SECRET_TEXT = (
    f"server_args=ServerArgs(model_path='/m', api_key='{API_KEY}', max_total_num_tokens=4096) "
    f"--api-key {API_KEY} HF_TOKEN={HF_TOKEN} bare {HF_TOKEN} MY_SERVICE_TOKEN={UNKNOWN[0]} "
    f"{{\"api_key\": \"{UNKNOWN[1]}\"}} {{'password': '{UNKNOWN[2]}'}} Authorization: Bearer {UNKNOWN[3]}"
)
BAD_CHAR = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def payload(tag: str) -> str:
    """One line: every sequence, each followed by a word that must survive, then the secrets; the tag at both
    ends, as paths keep a line's head or its tail. (CR is not in it: it ends a log line, see the unit test.)"""
    return (
        f"{tag} "
        + " ".join(f"{seq}W{i:02d}" for i, seq in enumerate(SEQUENCES.values()))
        + " "
        + SECRET_TEXT
        + f" {tag}"
    )


def pane_payload(tag: str, per_line: int = 4) -> list[str]:
    """For a path that shows narrow rows (a GPU pane's log tail, ~60 columns): every sequence of `payload`,
    `per_line` to a line with its word (numbered as in `payload`), then a line with two secrets."""
    seqs = [f"{seq}W{i:02d}" for i, seq in enumerate(SEQUENCES.values())]
    return [f"{tag} " + " ".join(seqs[i : i + per_line]) for i in range(0, len(seqs), per_line)] + [
        f"{tag} api_key='{API_KEY}' {HF_TOKEN}"
    ]


def check_path(where: str, text: str, tag: str, t0: float, *, escapes: bool = True, whole: bool = True) -> list[str]:
    """Why `text` (what the path put out) is unsafe, recorded as a `secrets in output` trial and (for a path
    that prints host text, `escapes`) a `terminal escapes` trial; both first need the payload to have arrived.
    `whole=False`: the path shows a cut of the line (a crash cause), so words after each sequence are not checked."""
    reached = [] if tag in text else [f"{where}: the payload never reached this path (nothing checked)"]
    secret = [f"{where}: secret {s[:6]}… shown" for s in SECRETS if s in text]
    if "max_total_num_tokens=***" in text:
        secret.append(f"{where}: a non-secret (max_total_num_tokens) was masked")
    esc = [
        f"{where}: control {m.group()!r} at {m.start()}: {text[max(0, m.start() - 30) : m.start() + 10]!r}"
        for m in list(BAD_CHAR.finditer(text))[:1]
    ]
    if whole and tag in text:
        esc += [
            f"{where}: the text after {name} was eaten"
            for i, name in enumerate(SEQUENCES)
            if name != "unterminated OSC" and f"W{i:02d}" not in text
        ]
    dt = time.monotonic() - t0
    results.record("hostile", f"secrets in output: {where}", 0, not (reached + secret), dt, "; ".join(reached + secret))
    if escapes:
        results.record("hostile", f"terminal escapes: {where}", 0, not (reached + esc), dt, "; ".join(reached + esc))
    return reached + secret + esc


# -- the two functions themselves --------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SEQUENCES))
def test_sanitize_strips_each_sequence(name: str) -> None:
    seq = SEQUENCES[name]
    out = sanitize(f"a{seq}b\tc\nd")
    assert out.startswith("a") and out.endswith("b\tc\nd") and not BAD_CHAR.search(out), repr(out)
    if name != "unterminated OSC":  # (that one loses its introducer; its payload is left as plain text)
        assert "evil" not in out and "ZXZp" not in out and "title" not in out, repr(out)


def test_sanitize_strips_carriage_returns_and_keeps_plain_text() -> None:
    assert sanitize("a\rb\r\n") == "ab\n"
    plain = "Decode batch. #running-req: 3, gen throughput (token/s): 99.5 — ü 💥 [bold]"
    assert sanitize(plain) is plain


def test_mask_patterns_and_non_secrets() -> None:
    from console.masking import remember

    remember([HF_TOKEN])
    out = mask(SECRET_TEXT)
    assert not any(s in out for s in SECRETS), out
    assert "max_total_num_tokens=4096" in out and "model_path='/m'" in out
    for plain in (
        "#token: 100, token usage: 0.42",
        "TOKENIZERS_PARALLELISM=false",
        "api_key=None,",
        "speculative_num_draft_tokens=4",
        "--max-total-tokens 4096",
    ):
        assert mask(plain) == plain


def test_masking_a_cut_off_quoted_secret_keeps_json_valid() -> None:
    """Regression: a crash summary cut inside `api_key='...` made the masker eat the JSON string's end
    (`status --json` was no longer JSON)."""
    for indent in (None, 2):
        doc = json.dumps({"summary": f"boom api_key='{API_KEY[:9]}", "hint": "use 'x' or \"y\""}, indent=indent)
        out = mask(doc)
        assert json.loads(out)["hint"] == "use 'x' or \"y\"" and API_KEY[:9] not in out, out


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("api_key", True),
        ("apiKey", True),
        ("GITHUBTOKEN", True),
        ("DB_PASSWORD", True),
        ("--admin-api-key", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("max_total_num_tokens", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("speculative_num_draft_tokens", False),
        ("tokenizer_path", False),
        ("KV_CACHE", False),
        ("LD_LIBRARY_PATH", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    """Regression: names were matched as substrings, so `max_total_num_tokens=…` showed as `***`."""
    from console.masking import is_secret_name

    assert is_secret_name(name) is secret


def test_a_secret_split_by_an_escape_is_still_masked() -> None:
    assert API_KEY not in for_terminal("--api-key sk-dfc-\x1b[0mout9Zq2Lm4Pw")  # sanitised first, then masked
    assert "sk-dfc" not in for_terminal("api_key='sk-dfc-\x9b1mout9'")


def test_cli_stream_masks_and_strips_across_split_writes() -> None:
    """`logs -f` writes chunks as they come: a secret or an OSC cut between two writes is still caught."""
    from console.remote_text import SafeStream

    buf = io.StringIO()
    out = SafeStream(buf)
    for piece in ("a --api-key sk-dfc-", "out9Zq2Lm4Pw \x1b]52;c;", "ZXZpbA==\x07 b\nta", "il \x9b2"):
        out.write(piece)
    assert buf.getvalue() == "a --api-key ***  b\n"  # the partial line waits for its end
    out.flush()
    assert buf.getvalue() == "a --api-key ***  b\ntail 2"


# -- the TUI paths -----------------------------------------------------------------------------------
async def _tui_outputs(export_dir: Path) -> dict[str, tuple[str, str]]:
    """(text, tag) per TUI path, from one app session over a FakeApi."""
    from console.ui.app import DflashApp
    from console.ui.screens.server import ServerScreen
    from tests.hostile.test_text import _strips
    from tests.ui.fakes import A6000, NOW, FakeApi, FakeBackend, demo_fleet, gpu

    def screen() -> str:
        return "\n".join("".join(t for t, _ in segs) for _, _, segs in _strips(app))

    st_ = FleetState(["ct129", "blackwell"])
    st_.apply(HostUp("ct129", NOW))
    st_.apply(HostUp("blackwell", NOW))
    st_.apply(
        GpuSample(
            "ct129",
            NOW,
            (gpu(0, A6000, 4_210, 49_140, 7, 41, 71.4, 300), gpu(1, A6000, 4_198, 49_140, 5, 40, 64.9, 300)),
        )
    )
    name = "qwen3-8b@ct129:gpu0-1"
    meta = ServerMeta(
        name,
        "ct129",
        (0, 1),
        30000,
        preset="qwen3-8b",
        log_path="/l",
        started_at=NOW - 5,
        command=f"setsid nohup env HF_TOKEN={HF_TOKEN} python -m sglang.launch_server --api-key {API_KEY}",
    )
    st_.apply(ServerSeen(meta, NOW))
    lines = [
        "[2026-12-01 14:00:01] " + payload("LOGLINE"),
        *("[2026-12-01 14:00:02] " + x for x in pane_payload("LASTLINE")),
    ]
    st_.apply(LogData(name, NOW, "/l", 0, ("\n".join(lines) + "\n").encode()))
    api = FakeApi(st_, fleet=demo_fleet())
    app = DflashApp(api, clock=lambda: NOW, backend=FakeBackend())
    out: dict[str, tuple[str, str]] = {}
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.3)
        out["screen: fleet (GPU pane's log tail)"] = (screen(), "LASTLINE")
        app.open_server(name)
        await pilot.pause(0.4)
        assert isinstance(app.screen, ServerScreen)
        app.screen.export_dir = export_dir
        out["screen: server log"] = (screen(), "LOGLINE")
        await pilot.press("y")
        await pilot.pause(0.1)
        out["copy (y)"] = (app.clipboard, "LOGLINE")
        await pilot.press("w")
        await pilot.pause(0.2)
        saved = sorted(export_dir.glob("*.log"))
        out["save (w)"] = (saved[-1].read_text() if saved else "", "LOGLINE")
        await pilot.press("escape")
        await pilot.pause(0.1)
        api.emit(HostDown("blackwell", NOW, "ssh: " + payload("HOSTDOWN")))
        tb = [
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "RuntimeError: " + payload("CRASHED"),
        ]
        api.emit(
            LogData(
                name,
                NOW,
                "/l",
                len(("\n".join(lines) + "\n").encode()),  # bytes, not chars
                ("\n".join(tb) + "\n").encode(),
            ),
            ServerGone(name, NOW, exit_status=1),
        )
        await pilot.pause(0.4)
        out["screen: host band (host error)"] = (screen(), "HOSTDOWN")
        toasts = "\n".join(str(n.message) for n in app._notifications)
        out["toasts (host down)"] = (toasts, "HOSTDOWN")
        out["toasts (crash cause)"] = (toasts, "CRASHED")
        out["screen: crashed pane (cause)"] = (screen(), "CRASHED")
    return out


_TUI: dict[str, tuple[str, str]] = {}
TUI_PATHS = [
    "screen: fleet (GPU pane's log tail)",
    "screen: server log",
    "copy (y)",
    "save (w)",
    "screen: host band (host error)",
    "toasts (host down)",
    "toasts (crash cause)",
    "screen: crashed pane (cause)",
]


@pytest.mark.parametrize("path", TUI_PATHS)
def test_tui_path(path: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    from console.masking import remember

    remember([API_KEY, HF_TOKEN])  # as load_fleet does for a preset's --api-key and HF_TOKEN
    t0 = time.monotonic()
    if not _TUI:
        _TUI.update(asyncio.run(_tui_outputs(tmp_path_factory.mktemp("exports"))))
    text, tag = _TUI[path]
    probs = check_path(path, text, tag, t0)
    assert not probs, probs


# -- the CLI paths (in-process, as tests/fleet/test_cli.py runs them) ----------------------------------
def cli(*args: str) -> tuple[int, str, str]:
    from console.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def _journal(tmp: Path) -> str:
    j = Journal()
    j.command(
        CommandResult(
            "h",
            f"env HF_TOKEN={HF_TOKEN} python -m sglang.launch_server --api-key {API_KEY}",
            1,
            "",
            "bash: " + payload("JOURNALED"),
            0.2,
        )
    )
    j.event("crash", server="s@h:gpu0", host="h", ok=False, message=payload("JOURNALED"))
    return j.path.read_text()


def _hosts(tmp: Path) -> Path:
    p = tmp / "hosts.toml"
    p.write_text(
        '[hosts.box]\ntransport = "local"\n[presets.keyed]\nhost = "box"\ngpus = [0]\nmodel = "/m"\n'
        f'args = ["--api-key", "{API_KEY}", "--served-model-name", "CHECKED"]\n'
        f'env = {{ HF_TOKEN = "{HF_TOKEN}" }}\napi_key_env = "DFC_OUT_KEY"\n'
    )
    return p


def _crash_log(tmp: Path) -> Path:
    p = tmp / "crash.log"
    p.write_text(
        "[2026-12-01 14:00:01] " + payload("DIAGNOSED") + "\n[2026-12-01 14:00:02] Traceback (most recent "
        'call last):\n  File "x.py", line 1, in <module>\nRuntimeError: ' + payload("DIAGNOSED") + "\n"
    )
    return p


def _error_path(tmp: Path) -> str:
    """An error message carrying remote text, printed by the CLI's `fail` under the CLI's output stream."""
    from console.fleet.report import fail
    from console.remote_text import safe_output

    err = io.StringIO()
    with contextlib.redirect_stderr(err), safe_output():
        fail("box: `kill` failed (exit 1): " + payload("FAILED"), 1)
    return err.getvalue()


def _journal_cli(*extra: str) -> Callable[[Path], tuple[str, str]]:
    def run(t: Path) -> tuple[str, str]:
        _journal(t)
        rc, out, err = cli("journal", "-n", "0", "--kind", "all", *extra)
        assert rc == 0, err
        return out, "JOURNALED"

    return run


CLI_PATHS: dict[str, Callable[[Path], tuple[str, str]]] = {
    "journal file": lambda t: (_journal(t), "JOURNALED"),
    "CLI journal": _journal_cli(),
    "CLI journal --json": _journal_cli("--json"),
    "CLI diagnose": lambda t: (cli("diagnose", str(_crash_log(t)))[1], "DIAGNOSED"),
    "CLI diagnose --json": lambda t: (cli("diagnose", "--json", str(_crash_log(t)))[1], "DIAGNOSED"),
    "CLI check": lambda t: ("\n".join(cli("--hosts", str(_hosts(t)), "check")[1:]), "CHECKED"),
    "CLI error message": lambda t: (_error_path(t), "FAILED"),
}


@pytest.mark.parametrize("path", list(CLI_PATHS))
def test_cli_path(path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFC_OUT_KEY", API_KEY)
    from console.masking import remember

    remember([HF_TOKEN])  # the journal's writer learns it at launch (actions.remember_secrets)
    t0 = time.monotonic()
    text, tag = CLI_PATHS[path](tmp_path)
    remote = path != "CLI check"  # check prints config, not host text
    probs = check_path(path, text, tag, t0, escapes=remote, whole=remote)
    if path == "CLI journal --json":
        probs += [f"{path}: not JSON lines after masking" for ln in text.splitlines() if not _is_json(ln)]
    if path == "CLI diagnose --json" and not _is_json(text):
        probs.append(f"{path}: not JSON after masking")
    assert not probs, (probs, text[:600])


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
