"""The one secret-masking function (`mask`) every output path uses: screen, copy, save, CLI, journal, errors."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.config import Fleet

MASK = "***"
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd"})
_SECRET_ENDS = ("key", "token", "secret", "password", "passwd")
"""`GITHUBTOKEN`, `MYAPIKEY` too (no word break); `..._tokens` is a count, not a secret."""
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_FLAG = r"--[A-Za-z0-9-]*(?:api-key|token|secret|password)"
_VALUE = r"('[^'\n\"]*'|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n\"\\]*|\"[^\"\n\\]*|[^\s'\"\\]+)"
"""A value: quoted, or a quote cut off by truncation (up to the line's or the enclosing string's end), or bare.
A '...' value stops at a `"`: inside a JSON string that is where the string ends."""
# `--api-key VALUE`, `--api-key=VALUE`, with the value bare, '...' or "..." quoted
_FLAG_RE = re.compile(rf"({_SECRET_FLAG})(=|\s+){_VALUE}", re.IGNORECASE)
# `'--api-key=a b'` as shlex.quote writes a value holding spaces
_QFLAG_RE = re.compile(rf"'({_SECRET_FLAG})=[^']*'", re.IGNORECASE)
# NAME=VALUE: env words, SGLang's `server_args=ServerArgs(..., api_key='...')`, bare or in one pair of quotes
_ASSIGN_RE = re.compile(rf"(?<![\w-])('?)([A-Za-z_][A-Za-z0-9_]*)=(?!{re.escape(MASK)}){_VALUE}?")
_QASSIGN_RE = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)=[^']*'")
# "api_key": "...", 'hf_token': '...' (JSON, Python dict reprs), also JSON inside a JSON string (\"api_key\": \"...\")
_KV_RE = re.compile(
    r"(\\?[\"'])([A-Za-z0-9_-]*(?i:key|token|secret|passw(?:or)?d)[A-Za-z0-9_-]*)\1(\s*:\s*)"
    r"(\\?[\"'])((?:(?!\4)(?:\\.|[^\\]))*)\4"
)
_BEARER_RE = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_UNSET = frozenset({None, "", "None", "null", "''", '""'})
"""`api_key=None` as SGLang's server_args dump prints it: nothing to hide, shown as is."""
_TRAIL = re.compile(r"[,)\]}>]+$")
_MIN_KNOWN = 4
"""Shorter values are not remembered: masking every `1` or `true` would garble the text."""

_known: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """`HF_TOKEN`, `api_key`, `OPENAI_API_KEY`, `--admin-api-key`, `apiKey`, `GITHUBTOKEN`; not
    `max_total_num_tokens` or `TOKENIZERS_PARALLELISM`."""
    low = name.lower()
    return any(w.lower() in _SECRET_WORDS for w in _WORD.findall(name)) or low.endswith(_SECRET_ENDS)


def remember(values: Iterable[str]) -> None:
    """Note secret values so they are masked wherever they appear later, whatever surrounds them."""
    with _lock:
        _known.update(v for v in values if isinstance(v, str) and len(v) >= _MIN_KNOWN)


def remember_secrets(argv: list[str] | tuple[str, ...], env: Mapping[str, str] | None = None) -> None:
    """The values of `--api-key`-style flags in argv and of secret-named env entries."""
    vals: list[str] = []
    for i, a in enumerate(argv):
        flag, eq, val = a.partition("=")
        if re.fullmatch(_SECRET_FLAG, flag, re.IGNORECASE):
            if eq:
                vals.append(val)
            elif i + 1 < len(argv):
                vals.append(argv[i + 1])
    vals += [v for k, v in (env or {}).items() if is_secret_name(k)]
    remember(vals)


def remember_fleet(fleet: Fleet, environ: Mapping[str, str] | None = None) -> None:
    """Every secret a fleet names: presets' `--api-key` args and secret env, the `api_key_env` values."""
    environ = os.environ if environ is None else environ
    for h in fleet.hosts.values():
        remember_secrets((), h.env)
    for p in fleet.presets.values():
        remember_secrets(p.args, p.env)
        if p.api_key_env and environ.get(p.api_key_env):
            remember([environ[p.api_key_env]])


def _hidden(value: str | None) -> str:
    """MASK in place of a value, keeping the `,)` a bare value swallowed from what follows it."""
    t = _TRAIL.search(value or "")
    return MASK + (t.group() if t and not (value or "").startswith(("'", '"')) else "")


def mask(text: str) -> str:
    """Secret flag values, secret assignments and key/value pairs, bearer tokens, and remembered values."""
    if not text:
        return text
    out = _QFLAG_RE.sub(lambda m: f"'{m.group(1)}={MASK}'", text) if "'--" in text else text
    if "--" in out:
        out = _FLAG_RE.sub(lambda m: m.group(1) + m.group(2) + _hidden(m.group(3)), out)
    if "=" in out:
        out = _QASSIGN_RE.sub(lambda m: f"'{m.group(1)}={MASK}'" if is_secret_name(m.group(1)) else m.group(0), out)
        out = _ASSIGN_RE.sub(
            lambda m: (
                f"{m.group(1)}{m.group(2)}={_hidden(m.group(3))}"
                if is_secret_name(m.group(2)) and _TRAIL.sub("", m.group(3) or "") not in _UNSET
                else m.group(0)
            ),
            out,
        )
    if ":" in out and ('"' in out or "'" in out):
        out = _KV_RE.sub(
            lambda m: (
                f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{m.group(4)}{MASK}{m.group(4)}"
                if is_secret_name(m.group(2)) and m.group(5) not in _UNSET
                else m.group(0)
            ),
            out,
        )
    out = _BEARER_RE.sub(lambda m: m.group(1) + MASK, out) if "earer" in out else out
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for v in known:
        if v in out:
            out = out.replace(v, MASK)
    return out


def mask_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """argv with secret flag values replaced, for records that keep the argv shape."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = a.partition("=")
        if re.fullmatch(_SECRET_FLAG, flag, re.IGNORECASE):
            out.append(f"{flag}={MASK}" if eq else a)
            hide_next = not eq
        else:
            out.append(mask(a))
    return out


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) else mask(v)) for k, v in env.items()}
