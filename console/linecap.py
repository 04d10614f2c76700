"""Caps line length in a stream from a host, so output with no newline cannot grow memory without bound."""

from __future__ import annotations

from typing import AnyStr, Generic


class LineCap(Generic[AnyStr]):
    """Passes a stream through, keeping at most `limit` characters (or bytes) of each line.

    The rest of an overlong line is dropped up to its newline; `cut` counts the lines cut so the
    caller can say so. Works on str or bytes, chunks split anywhere."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.cut = 0
        self._run = 0
        """Length of the current line passed through so far."""
        self._dropping = False

    @property
    def cutting(self) -> bool:
        """The line in progress passed the limit (its rest is being dropped)."""
        return self._dropping

    def feed(self, data: AnyStr) -> AnyStr:
        nl_char = "\n" if isinstance(data, str) else b"\n"
        out: list[AnyStr] = []
        start = 0
        while True:
            nl = data.find(nl_char, start)
            end = len(data) if nl < 0 else nl
            if not self._dropping and end > start:
                room = self.limit - self._run
                seg = data[start : min(end, start + room)]
                out.append(seg)
                self._run += len(seg)
                if end - start > room:
                    self._dropping = True
                    self.cut += 1
            if nl < 0:
                break
            out.append(data[nl : nl + 1])
            self._run, self._dropping = 0, False
            start = nl + 1
        return data[:0].join(out)
