"""Raw log bytes -> clean lines, and the small text helpers the parser uses (SGLang header, key: value).

Splitting is chunking-invariant: any split of the same bytes gives the same lines. Lines end at
`\\n`, `\\r` or `\\r\\n`; a partial line waits for its end; a line longer than `max_line` is cut
there (the rest is dropped, never buffered), so a 1 MB line costs O(n) and bounded memory.
"""

from __future__ import annotations

import calendar
import codecs
import math
import re
from typing import NamedTuple

from console.remote_text import sanitize

MAX_LINE = 16_384
"""Characters kept per line; the rest of a longer line is dropped."""

_TERM = re.compile(r"\r\n|\r|\n")


def clean_line(line: str) -> str:
    """The one remote-text sanitiser (C0 but tab, C1, 7- and 8-bit escapes), and no newline inside a line."""
    if line.isprintable():
        return line
    return sanitize(line).replace("\n", "")


class LineSplitter:
    """Incremental bytes/text -> complete cleaned lines."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []
        self._len = 0
        self._overflow = False
        self._after_cr = False
        self.truncated_lines = 0

    def feed(self, chunk: bytes | str) -> list[str]:
        text = self._decoder.decode(chunk) if isinstance(chunk, (bytes, bytearray, memoryview)) else chunk
        return self._split(text)

    def close(self) -> list[str]:
        """End of input: the partial line (if any) becomes a line."""
        out = self._split(self._decoder.decode(b"", final=True))
        if self._parts or self._overflow:
            out.append(self._take())
        return out

    def _split(self, text: str) -> list[str]:
        if not text:
            return []
        if self._after_cr and text[0] == "\n":
            text = text[1:]
        self._after_cr = False
        if not text:
            return []
        out: list[str] = []
        pos = 0
        n = len(text)
        if self._parts or self._overflow:
            m = _TERM.search(text)
            if m is None:
                self._add(text)
                return out
            self._add(text[: m.start()])
            out.append(self._take())
            pos = m.end()
            if m.group() == "\r" and pos == n:
                self._after_cr = True
        if pos < n:
            pieces = _TERM.split(text[pos:] if pos else text)
            tail = pieces.pop()
            cap = self.max_line
            for p in pieces:
                if len(p) > cap:
                    p = p[:cap]
                    self.truncated_lines += 1
                out.append(clean_line(p))
            if text[-1] == "\r":
                self._after_cr = True
            if tail:
                self._add(tail)
        return out

    def _add(self, s: str) -> None:
        if self._overflow or not s:
            return
        room = self.max_line - self._len
        if len(s) > room:
            s = s[:room]
            self._overflow = True
        self._parts.append(s)
        self._len += len(s)

    def _take(self) -> str:
        line = "".join(self._parts)
        if self._overflow:
            self.truncated_lines += 1
        self._parts = []
        self._len = 0
        self._overflow = False
        return clean_line(line)


# --- the SGLang record header: "[2025-01-01 12:00:00(.123)( DP0)( PP0)( TP3)( EP1)] message" -------------

_HDR = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?((?: [A-Z][A-Z_]*\d+)*)\] ?")
_HDR_ANY = re.compile(
    r"\[(?:(\d{4})-)?(?:(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?((?: [A-Z][A-Z_]*\d+)*)\] ?"
    r"|\[gpu_id=(\d+)\] ?"
)
"""Every header SGLang has printed: `[2025-02-17 10:13:46 TP4]`, `[02-17 10:13:46]` (no year), `[10:13:46 TP0]`
(0.2/0.3: time only), `[gpu_id=0]` (0.1: no time). A missing year counts as 2000, a missing date as 1970-01-01."""
_RANK = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
_DAY_CACHE: dict[tuple[int, int, int], int] = {}


class Header(NamedTuple):
    """The parsed `[ts ranks]` prefix of one record (a NamedTuple: built once per line, so cheap)."""

    ts: float | None
    """None for the 0.1 `[gpu_id=N]` header, which has no time."""
    ranks: str
    """The rank part as printed, e.g. "DP0 TP3" ("" for the main process or TP=1)."""
    end: int
    """Index in the line where the message starts."""
    start: int = 0
    """Index of the `[` (non-zero after a docker/kubectl prefix or a tqdm bar)."""


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int) -> int:
    key = (y, mo, d)
    day = _DAY_CACHE.get(key)
    if day is None:
        try:
            day = calendar.timegm((y, mo, d, 0, 0, 0))
        except (ValueError, OverflowError):
            day = 0
        if len(_DAY_CACHE) > 4096:
            _DAY_CACHE.clear()
        _DAY_CACHE[key] = day
    return day + h * 3600 + mi * 60 + s


_TS_CACHE: dict[str, float] = {}
_RANKS_OK = re.compile(r"(?: [A-Z][A-Z_]*\d+)*")


def parse_header(line: str) -> Header | None:
    """Find SGLang's header at the start or after a docker/kubectl/compose prefix (first 160 chars)."""
    if line[:1] == "[" and len(line) > 21 and line[5] == "-" and line[14] == ":" and line[20] in "].,: ":
        close = line.find("]", 20, 120)
        if close > 0:
            key = line[1:20]
            ts = _TS_CACHE.get(key)
            if ts is None:
                m = _HDR.match(line)
                if m is None:
                    return None
                ts = float(_epoch(*(int(g) for g in m.groups()[:6])))
                if len(_TS_CACHE) > 8192:
                    _TS_CACHE.clear()
                _TS_CACHE[key] = ts
            inner = line[20:close]
            if inner:
                if inner[0] in ".,":
                    sp = inner.find(" ")
                    frac = inner[1:sp] if sp > 0 else inner[1:]
                    if frac.isdigit():
                        ts += int(frac) / 10 ** len(frac)
                    inner = inner[sp:] if sp > 0 else ""
                if inner and not _RANKS_OK.fullmatch(inner):
                    return None
            end = close + 2 if line[close + 1 : close + 2] == " " else close + 1
            return Header(ts, inner.strip(), end, 0)
    m = _HDR_ANY.search(line, 0, 200)
    if m is None or m.start() > 160:
        return None
    y, mo, d, h, mi, s, frac, ranks, gpu = m.groups()
    if gpu is not None:
        return Header(None, f"TP{gpu}", m.end(), m.start())
    ts = float(
        _epoch(
            int(y) if y else (2000 if mo else 1970), int(mo) if mo else 1, int(d) if d else 1, int(h), int(mi), int(s)
        )
    )
    if frac:
        ts += int(frac) / 10 ** len(frac)
    return Header(ts, ranks.strip() if ranks else "", m.end(), m.start())


def find_embedded_header(line: str, start: int = 1) -> int:
    """Index of a header that starts inside a line (tqdm bar then a log record, no newline), or -1."""
    i = line.find("[20", start)
    while i >= 0:
        if _HDR.match(line, i):
            return i
        i = line.find("[20", i + 1)
    return -1


_WRAPPER = re.compile(
    r"\[?\d{4}-\d\d-\d\dT[\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\]? "  # RFC 3339: docker/kubectl --timestamps, CI runners
    r"|\(\w[\w.-]* pid=\d+(?:, ip=[\d.]+)?\) "  # ray actor output
    r"|\[rank\d+\]: ?"  # torchrun per-rank prefix
    r"|[^\[\]]{0,40}\[\d+,\d+\]<std(?:out|err)>: ?"  # mpirun --tag-output
)
_PYLOG = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))? "
    r"(?:\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] [\w.]+: |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: "
    r"|- [\w.]+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - )"
)
"""A Python logging format (SGLANG_LOGGING_CONFIG_PATH, an embedding app): `2026-06-07 10:59:31,659 [INFO] name: msg`."""


_TRACING = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?:Z|[+-]\d\d:?\d\d)? +"
    r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL) +[\w.<>]+: "
)
"""A tracing-style header a runtime around SGLang re-prints records with (dynamo's workers):
`2025-12-10T13:50:14.788089Z  INFO model_runner.load_model: msg`."""


def unwrap(line: str) -> tuple[str, float | None] | None:
    """A wrapper's prefix taken off: -> (rest, ts), ts set when the prefix was a logging header (rest is a message).

    None when the line has no known wrapper. Cheap on the common bare lines (traceback frames, bars): they
    start with a space or a letter and are rejected on their first characters.
    """
    c = line[:1]
    if c == "[" or c == "(" or (c.isdigit() and line[4:5] == "-"):
        if line[10:11] == "T" and (t := _TRACING.match(line)) is not None:
            y, mo, d, h, mi, s, frac = t.groups()
            ts = float(_epoch(int(y), int(mo), int(d), int(h), int(mi), int(s)))
            return line[t.end() :], ts + (int(frac) / 10 ** len(frac) if frac else 0.0)
        m = _WRAPPER.match(line)
        if m is not None and m.end() < len(line):
            return line[m.end() :], None
        m = _PYLOG.match(line) if c.isdigit() else None
        if m is not None:
            y, mo, d, h, mi, s, frac = m.groups()
            ts = float(_epoch(int(y), int(mo), int(d), int(h), int(mi), int(s)))
            return line[m.end() :], ts + (int(frac) / 10 ** len(frac) if frac else 0.0)
    elif c.isalpha() and "]<std" in line[:64]:
        m = _WRAPPER.match(line)
        if m is not None:
            return line[m.end() :], None
    return None


_DIGITS = re.compile(r"\d+")


def learn_prefix(prefix: str) -> re.Pattern[str] | None:
    """A wrapper's prefix seen before a header (`sglang-node1 | `, `(Engine pid=7) `) as a pattern for the bare
    lines under it: its digits may change (pids, timestamps). None for a prefix too short to be a wrapper's."""
    if len(prefix.strip()) < 3 or len(prefix) > 100:
        return None
    return re.compile(r"\d+".join(re.escape(p) for p in _DIGITS.split(prefix)))


def split_ranks(ranks: str) -> dict[str, int]:
    """ "DP1 PP0 TP3" -> {"DP": 1, "PP": 0, "TP": 3}."""
    return {k: int(v) for k, v in _RANK.findall(ranks)}


# --- "key: value" pairs of batch lines ---------------------------------------------------------------


def parse_pairs(msg: str) -> dict[str, str]:
    """`Decode batch, #running-req: 1, token usage: 0.05, cuda graph: True, ...` -> {key: value}.

    Generic on purpose: hybrid SWA/Mamba pools and newer versions add keys the parser need not know.
    """
    parts = msg.split(", ")
    out: dict[str, str] = {}
    first = parts[0]
    i = first.find(": ")
    if i >= 0:  # old wording: "Prefill batch. #new-seq: 1"
        k = first[:i]
        j = k.rfind(". ")
        out[k[j + 2 :] if j >= 0 else k] = first[i + 2 :]
    for part in parts[1:]:
        i = part.rfind(": ")
        if i > 0:
            out[part[:i]] = part[i + 2 :]
    return out


def to_float(v: str | None) -> float | None:
    """A finite float, or None (nan/inf/garbage never reach the UI)."""
    if v is None:
        return None
    try:
        f = float(v)
    except ValueError:
        try:
            f = float(v.strip().rstrip(",%"))
        except ValueError:
            return None
    return f if math.isfinite(f) else None


def to_int(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        f = to_float(v)
        return int(f) if f is not None else None
