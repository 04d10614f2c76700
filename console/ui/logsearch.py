"""Pure helpers behind the log view: which lines a filter keeps, where matches and the traceback are."""

from __future__ import annotations

from collections.abc import Sequence

_ERROR_WORDS = (
    "Traceback (most recent call last)",
    " ERROR ",
    "ERROR:",
    "Error:",
    "Exception",
    "error:",
    "CRITICAL",
    "Killed",
    "Aborted",
    "RuntimeError",
    "OSError",
    "ValueError",
    "AssertionError",
)
_WARN_WORDS = ("WARNING", "Warning:", "warn(", "UserWarning", "FutureWarning", "DeprecationWarning")


def level_of(line: str) -> str | None:
    """'error', 'warning' or None, from the words SGLang and Python put in such lines."""
    head = line[:400]
    if any(w in head for w in _ERROR_WORDS):
        return "error"
    if any(w in head for w in _WARN_WORDS):
        return "warning"
    return None


def filter_rows(lines: Sequence[str], start: int = 0) -> list[int]:
    """Indices (from `start`) of warning/error lines, plus the indented frames of a traceback."""
    rows: list[int] = []
    in_tb = False
    for i in range(start, len(lines)):
        line = lines[i]
        lvl = level_of(line)
        if "Traceback (most recent call last)" in line[:400]:
            in_tb = True
        elif in_tb and not (line.startswith((" ", "\t")) or lvl):
            in_tb = False
            if _looks_like_exception(line):
                rows.append(i)
                continue
        if lvl or in_tb:
            rows.append(i)
    return rows


def _looks_like_exception(line: str) -> bool:
    """`OSError: ...` — the last line of a traceback."""
    name, sep, _ = line.partition(":")
    return bool(sep) and name.replace(".", "").isidentifier() and name[:1].isupper()


def find_matches(lines: Sequence[str], rows: Sequence[int], query: str) -> list[int]:
    """Row numbers (positions in `rows`) whose line contains the query, case-insensitively."""
    if not query:
        return []
    q = query.lower()
    return [r for r, i in enumerate(rows) if q in lines[i].lower()]


def find_traceback(lines: Sequence[str], error_line: str | None = None) -> int | None:
    """Index of the traceback start nearest before the diagnosed error line (else the last traceback)."""
    err: int | None = None
    if error_line:
        for i in range(len(lines) - 1, -1, -1):
            if error_line in lines[i]:
                err = i
                break
    end = len(lines) if err is None else err + 1
    for i in range(end - 1, max(-1, end - 400), -1):
        if "Traceback (most recent call last)" in lines[i][:400]:
            return i
    return err
