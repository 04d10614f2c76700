"""Positions of keys and array elements in TOML text, so config errors can name line and column.

tomllib gives values but no positions; this small scanner walks the (already valid) text and
records where each key path (`("presets", "gen", "gpus", 2)`) starts. `too_deep` bounds the nesting
of values before tomllib (recursive) ever sees them.
"""

from __future__ import annotations

import re
from typing import Any

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_ESCAPE_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)")


def _unescape(raw: str) -> str:
    """A basic string's escapes as tomllib decodes them, so quoted keys like "A\\u001b" are found."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if len(e) > 1:
            try:
                return chr(int(e[1:], 16))
            except ValueError:
                return m.group(0)
        return _ESCAPES.get(e, m.group(0))

    return _ESCAPE_RE.sub(one, raw)


class TomlLocator:
    """Maps key paths to 1-based (line, column); unknown paths fall back to their nearest parent."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos: dict[tuple[Any, ...], tuple[int, int]] = {}
        self.vpos: dict[tuple[Any, ...], tuple[int, int]] = {}
        self._i = 0
        self._line_starts = [0]
        for n, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(n + 1)
        try:
            self._document()
        except (IndexError, ValueError):
            pass  # best effort: positions found so far still serve

    def find(self, path: tuple[Any, ...], value: bool = False) -> tuple[int, int]:
        """Where `path`'s key starts (or its value, with value=True)."""
        p = tuple(path)
        if value and p in self.vpos:
            return self.vpos[p]
        while p:
            if p in self.pos:
                return self.pos[p]
            p = p[:-1]
        return (1, 1)

    # -- scanning -------------------------------------------------------------------------
    def _lc(self, i: int) -> tuple[int, int]:
        import bisect

        ln = bisect.bisect_right(self._line_starts, i) - 1
        return ln + 1, i - self._line_starts[ln] + 1

    def _peek(self) -> str:
        return self.text[self._i] if self._i < len(self.text) else ""

    def _skip_ws(self, newlines: bool = False) -> None:
        t = self.text
        while self._i < len(t):
            ch = t[self._i]
            if ch in " \t" or (newlines and ch in "\r\n"):
                self._i += 1
            elif ch == "#":
                while self._i < len(t) and t[self._i] != "\n":
                    self._i += 1
            else:
                break

    def _document(self) -> None:
        table: tuple[Any, ...] = ()
        arrays: dict[tuple[Any, ...], int] = {}
        while True:
            self._skip_ws(newlines=True)
            if self._i >= len(self.text):
                return
            if self._peek() == "[":
                start = self._i
                double = self.text.startswith("[[", self._i)
                self._i += 2 if double else 1
                self._skip_ws()
                key = self._key()
                self._skip_ws()
                self._i += 2 if double else 1
                if double:
                    n = arrays.get(key, -1) + 1
                    arrays[key] = n
                    table = (*key, n)
                else:
                    table = key
                self.pos.setdefault(table, self._lc(start))
                for k in range(1, len(table)):
                    self.pos.setdefault(table[:k], self._lc(start))
            else:
                start = self._i
                key = self._key()
                path = (*table, *key)
                self.pos.setdefault(path, self._lc(start))
                self._skip_ws()
                self._i += 1  # '='
                self._skip_ws()
                self._value(path)

    def _key(self) -> tuple[str, ...]:
        parts: list[str] = []
        while True:
            self._skip_ws()
            ch = self._peek()
            if ch in "\"'":
                parts.append(self._string())
            else:
                s = self._i
                while self._peek() in _BARE and self._peek():
                    self._i += 1
                if s == self._i:
                    raise ValueError("bad key")
                parts.append(self.text[s : self._i])
            self._skip_ws()
            if self._peek() == ".":
                self._i += 1
                continue
            return tuple(parts)

    def _string(self) -> str:
        t = self.text
        q = t[self._i]
        if t.startswith(q * 3, self._i):
            end = t.index(q * 3, self._i + 3)
            while t.startswith(q, end + 3):
                end += 1
            val = t[self._i + 3 : end]
            self._i = end + 3
            return val
        j = self._i + 1
        out = []
        while t[j] != q:
            if q == '"' and t[j] == "\\":
                out.append(t[j : j + 2])
                j += 2
                continue
            out.append(t[j])
            j += 1
        self._i = j + 1
        raw = "".join(out)
        return _unescape(raw) if q == '"' and "\\" in raw else raw

    def _value(self, path: tuple[Any, ...]) -> None:
        self.pos.setdefault(path, self._lc(self._i))
        self.vpos[path] = self._lc(self._i)
        ch = self._peek()
        if ch in "\"'":
            self._string()
        elif ch == "[":
            self._i += 1
            n = 0
            while True:
                self._skip_ws(newlines=True)
                if self._peek() == "]":
                    self._i += 1
                    return
                self.pos[(*path, n)] = self._lc(self._i)
                self._value((*path, n))
                n += 1
                self._skip_ws(newlines=True)
                if self._peek() == ",":
                    self._i += 1
        elif ch == "{":
            self._i += 1
            while True:
                self._skip_ws()
                if self._peek() == "}":
                    self._i += 1
                    return
                start = self._i
                key = self._key()
                sub = (*path, *key)
                self.pos.setdefault(sub, self._lc(start))
                self._skip_ws()
                self._i += 1
                self._skip_ws()
                self._value(sub)
                self._skip_ws()
                if self._peek() == ",":
                    self._i += 1
        else:
            t = self.text
            while self._i < len(t) and t[self._i] not in ",]}\n#":
                self._i += 1


# -- nesting depth (checked before tomllib, whose recursive parser dies on deep values) ----------
_ORDINARY = re.compile(r"[^\n#\"'\[\]{} \t\r]+|[ \t\r]+")
_STRINGS = (
    re.compile(r'"""(?:[^"\\]+|\\.|"(?!""))*"""', re.DOTALL),
    re.compile(r"'''.*?'''", re.DOTALL),
    re.compile(r'"(?:[^"\\\n]+|\\.)*"?'),
    re.compile(r"'[^'\n]*'?"),
)


def too_deep(text: str, limit: int) -> tuple[int, int] | None:
    """(line, column) of the first `[`/`{` nesting values deeper than `limit`, or None.

    A bounded, iterative scan: strings and comments are skipped, a `[` opening a line outside any
    value is a table header (headers do not nest). Unterminated strings end at the line's end, so
    broken text is still scanned in linear time and tomllib reports the syntax error.
    """
    i, n, depth, line, line_start = 0, len(text), 0, 1, 0
    at_line_start = True
    while i < n:
        ch = text[i]
        if ch == "\n":
            i += 1
            line, line_start, at_line_start = line + 1, i, True
            continue
        m = _ORDINARY.match(text, i)
        if m:
            at_line_start = at_line_start and not m.group().strip()
            i = m.end()
            continue
        if ch == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch in "\"'":
            for rx in _STRINGS:
                if (m := rx.match(text, i)) is not None:
                    break
            end = m.end() if m is not None else i + 1
            line += text.count("\n", i, end)
            if (j := text.rfind("\n", i, end)) >= 0:
                line_start = j + 1
            i, at_line_start = end, False
            continue
        if ch == "[" and depth == 0 and at_line_start:  # [table] or [[array.of.tables]]: no nesting
            i += 2 if text.startswith("[[", i) else 1
            at_line_start = False
            continue
        at_line_start = False
        if ch in "[{":
            depth += 1
            if depth > limit:
                return line, i - line_start + 1
        elif depth:  # `]` or `}`
            depth -= 1
        i += 1
    return None
