"""The one sanitiser for text from a host (`sanitize`): no C0/C1 control or escape sequence reaches a terminal."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from typing import TextIO

from console.masking import mask

_ST = r"(?:\x1b\\|\x9c|\x07)"
_SEQUENCES = re.compile(
    "|".join(
        (
            r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]",  # CSI, 7- and 8-bit: cursor moves, SGR, erase
            rf"(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*{_ST}",  # OSC 0/8/52... ended by BEL or ST (7/8-bit)
            rf"(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x07\x1b\x9c\n]*{_ST}",  # DCS, SOS, PM, APC strings;
            # none spans a newline (an unterminated one
            # must not eat the log lines after it)
            r"\x1b[ -/]*[0-~]",  # other ESC sequences; an unterminated
            # OSC/CSI loses its introducer here
            r"[\x00-\x08\x0b-\x1f\x7f-\x9f]",  # what is left of C0 (not tab/newline), DEL, C1
        )
    )
)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Every sequence above starts with one of these (ESC is 0x1b, the 8-bit introducers are C1)."""


def sanitize(text: str) -> str:
    """Text from a host (log lines, meta.json, errors, model output) without controls or escape sequences.

    Keeps tab and newline. An unterminated sequence loses its introducer (so its payload is plain,
    harmless text), and the rest of the line is kept.
    """
    if text.isprintable() or not _CONTROL.search(text):  # one character class: fast on the usual line
        return text
    return _SEQUENCES.sub("", text)


def for_terminal(text: str) -> str:
    """What any output path prints: sanitised first (a secret split by an escape is still found), then masked."""
    return mask(sanitize(text))


def for_json(doc: object) -> object:
    """A --json document with every string (keys too) passed through for_terminal.

    SafeStream cannot see inside JSON: an ESC from a host is written as the six characters `\\u001b`,
    which a reader such as `jq -r` turns back into a live escape. The console's documents are shallow.
    """
    if isinstance(doc, str):
        return for_terminal(doc)
    if isinstance(doc, dict):
        return {for_terminal(k) if isinstance(k, str) else k: for_json(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [for_json(v) for v in doc]
    return doc


class SafeStream(io.TextIOBase):
    """A text stream that sanitises and masks what is written, a line at a time (the CLI's stdout/stderr).

    Whole lines are masked together, so a secret written in two pieces is still found; a partial
    line waits for its newline, or for flush().
    """

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._partial = ""

    def write(self, s: str) -> int:
        text = self._partial + s
        cut = text.rfind("\n") + 1
        self._partial = text[cut:]
        if cut:
            self.inner.write(for_terminal(text[:cut]))
        return len(s)

    def flush(self) -> None:
        if self._partial:
            self.inner.write(for_terminal(self._partial))
            self._partial = ""
        self.inner.flush()

    def raw_write(self, s: str) -> None:
        """The console's own control output (`status --watch` clearing the screen), not remote text."""
        self.flush()
        self.inner.write(s)

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


@contextlib.contextmanager
def safe_output() -> Iterator[None]:
    """stdout and stderr through SafeStream for the block: every CLI command's output path, in one place."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        yield
        sys.stderr.flush()
        sys.stdout.flush()
    finally:
        wrapped = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = out, err
        for w in wrapped:
            if isinstance(w, SafeStream) and w._partial:
                with contextlib.suppress(OSError, ValueError):
                    w.flush()
